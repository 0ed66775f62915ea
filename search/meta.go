package search

import (
	"bytes"
	"encoding/json"
	"math/big"
	"strconv"
	"strings"
	"sync"
	"unicode"

	"github.com/vigilhq/vigil/internal/lazyregexp"
)

// Kind is how a meta: value compares.
type Kind int

// Value kinds (explorer-api §7.2 value typing). A quoted value is always a
// string.
const (
	KindString Kind = iota
	KindNumber
	KindBool
	KindNull
)

// Meta is meta:<path> (Op "": the path exists and is not null) or
// meta:<path><op><value>.
type Meta struct {
	pos
	// Path is the segments; Quoted says which were quoted.
	Path   []string
	Quoted []bool
	Op     string // "", "=", "!=", "<", "<=", ">", ">=", "%" ("==" is read as "=")
	Value  string
	Kind   Kind
	Num    *big.Float // the value when Kind is KindNumber
}

// NumberRx is what a numeric value or numeric string looks like: bounded
// digits and exponent, so every backend compares it without overflow.
var NumberRx = lazyregexp.New(`^-?[0-9]{1,30}(\.[0-9]{1,30})?([eE][-+]?[0-9]{1,2})?$`)

// Paths returns the key paths m tries: the nested path, plus the literal
// top-level key when the path has several segments and none is quoted.
func (m *Meta) Paths() [][]string {
	out := [][]string{m.Path}
	if len(m.Path) > 1 && !slicesAny(m.Quoted) {
		out = append(out, []string{strings.Join(m.Path, ".")})
	}
	return out
}

func slicesAny(b []bool) bool {
	for _, x := range b {
		if x {
			return true
		}
	}
	return false
}

// String is meta: in canonical form.
func (m *Meta) String() string {
	var b strings.Builder
	b.WriteString("meta:")
	for i, s := range m.Path {
		if i > 0 {
			b.WriteByte('.')
		}
		if m.Quoted[i] || s == "" || strings.ContainsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || strings.ContainsRune(`.<>=!%:"()`, r) }) {
			b.WriteString(quote(s, true))
		} else {
			b.WriteString(s)
		}
	}
	if m.Op != "" {
		b.WriteString(m.Op)
		if m.Kind == KindString {
			b.WriteString(quote(m.Value, NumberRx.MatchString(m.Value) || m.Value == "true" || m.Value == "false" || m.Value == "null"))
		} else {
			b.WriteString(m.Value) // a typed value is bare (quoting makes it a string)
		}
	}
	return b.String()
}

// metaStop are the characters that end a bare path segment.
const metaStop = `.<>=!%:"`

func (p *parser) meta(at int) (Node, error) {
	m := &Meta{pos: pos(at)}
	for {
		segAt := p.i
		if !p.eof() && p.src[p.i] == '"' {
			s, err := p.quoted()
			if err != nil {
				return nil, err
			}
			m.Path, m.Quoted = append(m.Path, s), append(m.Quoted, true)
		} else {
			j := p.i
			for j < len(p.src) && !unicode.IsSpace(p.src[j]) && !strings.ContainsRune(metaStop, p.src[j]) {
				j++
			}
			end := j
			if j == len(p.src) || unicode.IsSpace(p.src[j]) { // last token character: trailing ")" may close groups
				for k := 0; k < p.depth && end > p.i+1 && p.src[end-1] == ')'; k++ {
					end--
				}
			}
			if end == p.i {
				return nil, p.errf(segAt, "meta: needs a key")
			}
			m.Path, m.Quoted = append(m.Path, string(p.src[p.i:end])), append(m.Quoted, false)
			p.i = end
		}
		if len(m.Path) > MaxMetaPath {
			return nil, p.errf(segAt, "meta: path longer than %d segments", MaxMetaPath)
		}
		if p.eof() || p.src[p.i] != '.' {
			break
		}
		p.i++
	}
	opAt := p.i
	for _, op := range []string{"==", "!=", "<=", ">=", "=", "<", ">", "%"} {
		if strings.HasPrefix(string(p.src[p.i:min(p.i+2, len(p.src))]), op) {
			m.Op = op
			p.i += len(op)
			break
		}
	}
	if m.Op == "" {
		if !p.eof() && p.src[p.i] == '!' {
			return nil, p.errf(opAt, "meta: unknown operator (want = == != < <= > >= %%)")
		}
		if err := p.tokenEnd(); err != nil {
			return nil, err
		}
		return m, nil
	}
	if m.Op == "==" {
		m.Op = "="
	}
	v, quoted, err := p.value("meta", opAt)
	if err != nil {
		return nil, err
	}
	m.Value = v
	switch {
	case quoted:
	case NumberRx.MatchString(v):
		m.Kind = KindNumber
		m.Num = parseNum(v)
	case v == "true" || v == "false":
		m.Kind = KindBool
	case v == "null":
		m.Kind = KindNull
	}
	return m, nil
}

func parseNum(s string) *big.Float {
	f, _, err := big.ParseFloat(s, 10, 256, big.ToNearestEven)
	if err != nil {
		return nil
	}
	return f
}

// Match reports whether the metadata object (JSON) satisfies m. It is the
// reference the stores' SQL reproduces: walk each of Paths (an object step
// takes the key; an array step takes an integer segment as an index,
// negative counting from the end, as PostgreSQL's #> does); then compare
// by Kind. A type mismatch or a missing path is false.
func (m *Meta) Match(metadata []byte) bool {
	root, err := DecodeMetadata(metadata)
	return err == nil && m.MatchValue(root)
}

// DecodeMetadata decodes metadata JSON as MatchValue reads it (numbers
// as json.Number). The result is only read, so it may be shared.
func DecodeMetadata(metadata []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(metadata))
	d.UseNumber()
	var root any
	if err := d.Decode(&root); err != nil {
		return nil, err
	}
	return root, nil
}

// MatchValue is Match on metadata already decoded by DecodeMetadata.
func (m *Meta) MatchValue(root any) bool {
	for _, path := range m.Paths() {
		v, ok := walk(root, path)
		if ok && m.compare(v) {
			return true
		}
	}
	return false
}

func walk(v any, path []string) (any, bool) {
	for _, seg := range path {
		switch x := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = x[seg]; !ok {
				return nil, false
			}
		case []any:
			i, err := strconv.Atoi(seg)
			if err != nil {
				return nil, false
			}
			if i < 0 {
				i += len(x)
			}
			if i < 0 || i >= len(x) {
				return nil, false
			}
			v = x[i]
		default:
			return nil, false
		}
	}
	return v, true
}

func (m *Meta) compare(v any) bool {
	if m.Op == "" {
		return v != nil
	}
	if m.Op == "%" {
		s, ok := v.(string)
		return ok && strings.Contains(LowerASCII(s), LowerASCII(m.Value))
	}
	switch m.Kind {
	case KindNull:
		return v == nil && m.Op == "="
	case KindBool:
		b, ok := v.(bool)
		if !ok {
			return false
		}
		want := m.Value == "true"
		switch m.Op {
		case "=":
			return b == want
		case "!=":
			return b != want
		}
		return false
	case KindNumber:
		var s string
		switch x := v.(type) {
		case json.Number:
			s = string(x)
		case string:
			if !NumberRx.MatchString(x) {
				return false
			}
			s = x
		default:
			return false
		}
		f := parseNum(s)
		if f == nil || m.Num == nil {
			return false
		}
		return cmpOp(f.Cmp(m.Num), m.Op)
	default:
		s, ok := v.(string)
		return ok && cmpOp(strings.Compare(s, m.Value), m.Op)
	}
}

func cmpOp(c int, op string) bool {
	switch op {
	case "=":
		return c == 0
	case "!=":
		return c != 0
	case "<":
		return c < 0
	case "<=":
		return c <= 0
	case ">":
		return c > 0
	case ">=":
		return c >= 0
	}
	return false
}

// LowerASCII lower-cases ASCII letters only: the case-insensitivity of
// annotation: and meta:…% on both backends (SQLite's and PostgreSQL's
// lower() under the "C" collation agree on exactly this).
func LowerASCII(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'A' && r <= 'Z' {
			return r + 32
		}
		return r
	}, s)
}

// metaCache holds parsed meta: filters by canonical text; it is emptied
// when it reaches 1,024 entries, so hostile queries cannot grow it.
var metaCache struct {
	sync.Mutex
	m map[string]*Meta
}

// ParseMeta parses the canonical form of a meta: filter (Meta.String),
// caching the result: what a store's SQL function receives.
func ParseMeta(s string) (*Meta, error) {
	metaCache.Lock()
	m, ok := metaCache.m[s]
	metaCache.Unlock()
	if ok {
		return m, nil
	}
	q, err := Parse(s)
	if err != nil {
		return nil, err
	}
	m, ok = q.Root.(*Meta)
	if !ok {
		return nil, &Error{0, "not a meta: filter"}
	}
	metaCache.Lock()
	if metaCache.m == nil || len(metaCache.m) >= 1024 {
		metaCache.m = map[string]*Meta{}
	}
	metaCache.m[s] = m
	metaCache.Unlock()
	return m, nil
}
