package detect

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// This file reads the subset of TOML that gitleaks' rule configuration
// uses: comments, `key = value` pairs, `[table]` and `[[array.of.tables]]`
// headers (dotted headers attach to the last element of the parent
// array), and values that are strings (basic "..." with escapes, literal
// '...', multi-line literal '''...''' and basic """..."""), integers,
// floats, booleans and (multi-line) arrays of those. Inline tables,
// dates and dotted keys are not supported and are reported as errors.

// tomlTable is a decoded table: values are string, int64, float64, bool,
// []any, tomlTable or []tomlTable.
type tomlTable map[string]any

// tomlError is a syntax error at a line and column (1-based, columns in
// code points) of a named source.
type tomlError struct {
	Name      string
	Line, Col int
	Msg       string
}

func (e *tomlError) Error() string {
	return fmt.Sprintf("%s:%d:%d: %s", e.Name, e.Line, e.Col, e.Msg)
}

type tomlParser struct {
	name string
	src  string
	pos  int
}

// parseTOML decodes src (named name in errors) into its root table.
func parseTOML(name, src string) (tomlTable, error) {
	p := &tomlParser{name: name, src: src}
	root := tomlTable{}
	cur := root
	for {
		p.skipSpaceNewlinesComments()
		if p.pos >= len(p.src) {
			return root, nil
		}
		switch {
		case strings.HasPrefix(p.src[p.pos:], "[["):
			start := p.pos
			p.pos += 2
			path, err := p.headerPath("]]")
			if err != nil {
				return nil, err
			}
			t, err := p.arrayTable(root, path, start)
			if err != nil {
				return nil, err
			}
			cur = t
		case p.src[p.pos] == '[':
			start := p.pos
			p.pos++
			path, err := p.headerPath("]")
			if err != nil {
				return nil, err
			}
			t, err := p.table(root, path, start)
			if err != nil {
				return nil, err
			}
			cur = t
		default:
			keyPos := p.pos
			key, err := p.key()
			if err != nil {
				return nil, err
			}
			p.skipBlank()
			if p.pos >= len(p.src) || p.src[p.pos] != '=' {
				return nil, p.errf(p.pos, "expected '=' after key %q", key)
			}
			p.pos++
			p.skipBlank()
			v, err := p.value()
			if err != nil {
				return nil, err
			}
			if _, dup := cur[key]; dup {
				return nil, p.errf(keyPos, "duplicate key %q", key)
			}
			cur[key] = v
			if err := p.endOfLine(); err != nil {
				return nil, err
			}
		}
	}
}

func (p *tomlParser) errf(at int, format string, args ...any) error {
	if at > len(p.src) {
		at = len(p.src)
	}
	line := 1 + strings.Count(p.src[:at], "\n")
	ls := strings.LastIndexByte(p.src[:at], '\n') + 1
	col := 1 + utf8.RuneCountInString(p.src[ls:at])
	return &tomlError{Name: p.name, Line: line, Col: col, Msg: fmt.Sprintf(format, args...)}
}

func (p *tomlParser) skipBlank() {
	for p.pos < len(p.src) && (p.src[p.pos] == ' ' || p.src[p.pos] == '\t') {
		p.pos++
	}
}

func (p *tomlParser) skipComment() {
	if p.pos < len(p.src) && p.src[p.pos] == '#' {
		for p.pos < len(p.src) && p.src[p.pos] != '\n' {
			p.pos++
		}
	}
}

func (p *tomlParser) skipSpaceNewlinesComments() {
	for p.pos < len(p.src) {
		switch p.src[p.pos] {
		case ' ', '\t', '\r', '\n':
			p.pos++
		case '#':
			p.skipComment()
		default:
			return
		}
	}
}

func (p *tomlParser) endOfLine() error {
	p.skipBlank()
	p.skipComment()
	if p.pos < len(p.src) && p.src[p.pos] == '\r' {
		p.pos++
	}
	if p.pos < len(p.src) && p.src[p.pos] != '\n' {
		return p.errf(p.pos, "unexpected %q after value", p.src[p.pos])
	}
	return nil
}

func isBareKeyByte(c byte) bool {
	return c == '_' || c == '-' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func (p *tomlParser) key() (string, error) {
	if p.pos < len(p.src) && (p.src[p.pos] == '"' || p.src[p.pos] == '\'') {
		v, err := p.value()
		if err != nil {
			return "", err
		}
		s, _ := v.(string)
		return s, nil
	}
	start := p.pos
	for p.pos < len(p.src) && isBareKeyByte(p.src[p.pos]) {
		p.pos++
	}
	if p.pos == start {
		return "", p.errf(start, "expected a key")
	}
	if p.pos < len(p.src) && p.src[p.pos] == '.' {
		return "", p.errf(p.pos, "dotted keys are not supported")
	}
	return p.src[start:p.pos], nil
}

func (p *tomlParser) headerPath(close string) ([]string, error) {
	var path []string
	for {
		p.skipBlank()
		k, err := p.key()
		if err != nil && !strings.Contains(err.Error(), "dotted keys") {
			return nil, err
		}
		if err != nil {
			// key() stopped at the dot; take the bare part.
			start := p.pos
			for start > 0 && isBareKeyByte(p.src[start-1]) {
				start--
			}
			k = p.src[start:p.pos]
		}
		path = append(path, k)
		p.skipBlank()
		if strings.HasPrefix(p.src[p.pos:], close) {
			p.pos += len(close)
			return path, p.endOfLine()
		}
		if p.pos < len(p.src) && p.src[p.pos] == '.' {
			p.pos++
			continue
		}
		return nil, p.errf(p.pos, "expected %q or '.' in table header", close)
	}
}

// parent walks path[:len-1] from root, descending into the last element of
// arrays of tables.
func (p *tomlParser) parent(root tomlTable, path []string, at int) (tomlTable, error) {
	t := root
	for _, k := range path[:len(path)-1] {
		switch v := t[k].(type) {
		case nil:
			n := tomlTable{}
			t[k] = n
			t = n
		case tomlTable:
			t = v
		case []tomlTable:
			t = v[len(v)-1]
		default:
			return nil, p.errf(at, "key %q is not a table", k)
		}
	}
	return t, nil
}

func (p *tomlParser) arrayTable(root tomlTable, path []string, at int) (tomlTable, error) {
	t, err := p.parent(root, path, at)
	if err != nil {
		return nil, err
	}
	last := path[len(path)-1]
	n := tomlTable{}
	switch v := t[last].(type) {
	case nil:
		t[last] = []tomlTable{n}
	case []tomlTable:
		t[last] = append(v, n)
	default:
		return nil, p.errf(at, "key %q is not an array of tables", last)
	}
	return n, nil
}

func (p *tomlParser) table(root tomlTable, path []string, at int) (tomlTable, error) {
	t, err := p.parent(root, path, at)
	if err != nil {
		return nil, err
	}
	last := path[len(path)-1]
	switch v := t[last].(type) {
	case nil:
		n := tomlTable{}
		t[last] = n
		return n, nil
	case tomlTable:
		return v, nil
	default:
		return nil, p.errf(at, "key %q is already defined", last)
	}
}

func (p *tomlParser) value() (any, error) {
	if p.pos >= len(p.src) {
		return nil, p.errf(p.pos, "expected a value, found end of file")
	}
	rest := p.src[p.pos:]
	switch {
	case strings.HasPrefix(rest, "'''"):
		return p.multiString("'''", false)
	case strings.HasPrefix(rest, `"""`):
		return p.multiString(`"""`, true)
	case rest[0] == '\'':
		end := strings.IndexAny(rest[1:], "'\n")
		if end < 0 || rest[1+end] != '\'' {
			return nil, p.errf(p.pos, "unterminated literal string")
		}
		p.pos += end + 2
		return rest[1 : 1+end], nil
	case rest[0] == '"':
		return p.basicString()
	case rest[0] == '[':
		return p.array()
	case strings.HasPrefix(rest, "true"):
		p.pos += 4
		return true, nil
	case strings.HasPrefix(rest, "false"):
		p.pos += 5
		return false, nil
	case rest[0] == '{':
		return nil, p.errf(p.pos, "inline tables are not supported")
	}
	start := p.pos
	for p.pos < len(p.src) && strings.IndexByte("+-0123456789._eE", p.src[p.pos]) >= 0 {
		p.pos++
	}
	lit := strings.ReplaceAll(p.src[start:p.pos], "_", "")
	if lit == "" {
		return nil, p.errf(start, "expected a value")
	}
	if i, err := strconv.ParseInt(lit, 10, 64); err == nil {
		return i, nil
	}
	if f, err := strconv.ParseFloat(lit, 64); err == nil {
		return f, nil
	}
	return nil, p.errf(start, "invalid number %q", lit)
}

func (p *tomlParser) multiString(delim string, escapes bool) (any, error) {
	start := p.pos
	p.pos += 3
	// A newline right after the opening delimiter is trimmed.
	if strings.HasPrefix(p.src[p.pos:], "\r\n") {
		p.pos += 2
	} else if p.pos < len(p.src) && p.src[p.pos] == '\n' {
		p.pos++
	}
	end := strings.Index(p.src[p.pos:], delim)
	if end < 0 {
		return nil, p.errf(start, "unterminated multi-line string")
	}
	// Up to two quote characters directly before the closing delimiter
	// belong to the string.
	for extra := 0; extra < 2 && p.pos+end+3 < len(p.src) && p.src[p.pos+end+3] == delim[0]; extra++ {
		end++
	}
	s := p.src[p.pos : p.pos+end]
	p.pos += end + 3
	if escapes {
		return unescapeTOML(s, func(off int, msg string) error { return p.errf(start, "%s", msg) })
	}
	return s, nil
}

func (p *tomlParser) basicString() (any, error) {
	start := p.pos
	i := p.pos + 1
	for i < len(p.src) && p.src[i] != '"' && p.src[i] != '\n' {
		if p.src[i] == '\\' {
			i++
		}
		i++
	}
	if i >= len(p.src) || p.src[i] != '"' {
		return nil, p.errf(start, "unterminated string")
	}
	raw := p.src[p.pos+1 : i]
	p.pos = i + 1
	return unescapeTOML(raw, func(off int, msg string) error { return p.errf(start+1+off, "%s", msg) })
}

func unescapeTOML(s string, errf func(int, string) error) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		if i+1 >= len(s) {
			return "", errf(i, "dangling backslash")
		}
		i++
		switch s[i] {
		case 'b':
			b.WriteByte('\b')
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'f':
			b.WriteByte('\f')
		case 'r':
			b.WriteByte('\r')
		case '"':
			b.WriteByte('"')
		case '\\':
			b.WriteByte('\\')
		case 'u', 'U':
			n := 4
			if s[i] == 'U' {
				n = 8
			}
			if i+1+n > len(s) {
				return "", errf(i, "short unicode escape")
			}
			v, err := strconv.ParseUint(s[i+1:i+1+n], 16, 32)
			if err != nil || !utf8.ValidRune(rune(v)) {
				return "", errf(i, "invalid unicode escape")
			}
			b.WriteRune(rune(v))
			i += n
		default:
			return "", errf(i, fmt.Sprintf("invalid escape \\%c", s[i]))
		}
	}
	return b.String(), nil
}

func (p *tomlParser) array() (any, error) {
	start := p.pos
	p.pos++
	out := []any{}
	for {
		p.skipSpaceNewlinesComments()
		if p.pos >= len(p.src) {
			return nil, p.errf(start, "unterminated array")
		}
		if p.src[p.pos] == ']' {
			p.pos++
			return out, nil
		}
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		out = append(out, v)
		p.skipSpaceNewlinesComments()
		if p.pos >= len(p.src) {
			return nil, p.errf(start, "unterminated array")
		}
		if p.src[p.pos] == ',' {
			p.pos++
			continue
		}
		if p.pos < len(p.src) && p.src[p.pos] == ']' {
			continue
		}
		return nil, p.errf(p.pos, "expected ',' or ']' in array")
	}
}
