package search

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/vigilhq/vigil/internal/lazyregexp"
)

// Limits bound what one query may ask of a store: a query within them
// runs in time bounded by its indexes, and exceeding one is an ordinary
// *Error.
const (
	// MaxLength is the longest query in code points.
	MaxLength = 2000
	// MaxTerms is the most free-text terms and filters in one query.
	MaxTerms = 32
	// MaxShortTerms is the most free-text terms shorter than three code
	// points (folded): the trigram index cannot answer them, so each one
	// scans the text of every trace the rest of the query leaves.
	MaxShortTerms = 4
	// MaxDepth is the deepest nesting of groups and negations.
	MaxDepth = 16
	// MaxListItems is the most ids or index ranges in one id:/index:
	// filter (and in a compat filter:/idfilter: query).
	MaxListItems = 1000
	// MaxMetaPath is the most segments in a meta: path.
	MaxMetaPath = 16
)

// Error is a query error at a code-point offset of the query.
type Error struct {
	Pos int    // code-point offset, 0-based
	Msg string // what is wrong
}

// Error renders "position N: msg".
func (e *Error) Error() string { return fmt.Sprintf("position %d: %s", e.Pos, e.Msg) }

// filterKeys are the keys that make a token a filter.
var filterKeys = map[string]bool{
	"is": true, "not": true, "meta": true, "source": true, "guardrail": true, "severity": true,
	"annotation": true, "tool": true, "session": true, "dataset": true, "after": true, "before": true,
	"updated-after": true, "updated-before": true, "id": true, "index": true,
	"filter": true, "idfilter": true,
}

type parser struct {
	src   []rune
	i     int
	depth int // open groups
	nest  int // groups plus negations, for MaxDepth
	terms int
	short int // terms shorter than 3 code points, for MaxShortTerms
}

// text makes a Text node, counting short terms against MaxShortTerms.
func (p *parser) text(at int, s string, quoted bool) (Node, error) {
	if utf8.RuneCountInString(Fold(s)) < 3 {
		p.short++
		if p.short > MaxShortTerms {
			return nil, p.errf(at, "more than %d terms shorter than 3 characters (they cannot use the index)", MaxShortTerms)
		}
	}
	return &Text{pos(at), s, quoted}, nil
}

// Parse parses q (explorer-api §7.2). It returns a *Error, with the
// code-point position of the problem, when q does not parse or exceeds a
// limit (MaxLength, MaxTerms, MaxDepth, MaxListItems, MaxMetaPath).
func Parse(q string) (*Query, error) {
	if !utf8.ValidString(q) {
		for i, r := range q {
			if r == utf8.RuneError {
				return nil, &Error{utf8.RuneCountInString(q[:i]), "invalid UTF-8"}
			}
		}
	}
	if n := utf8.RuneCountInString(q); n > MaxLength {
		return nil, &Error{MaxLength, fmt.Sprintf("query of %d characters exceeds the limit of %d", n, MaxLength)}
	}
	p := &parser{src: []rune(q)}
	p.skipWS()
	if p.eof() {
		return &Query{}, nil
	}
	if q, ok, err := p.compat(); ok || err != nil {
		return q, err
	}
	root, err := p.orExpr()
	if err != nil {
		return nil, err
	}
	p.skipWS()
	if !p.eof() {
		if p.src[p.i] == ')' {
			return nil, p.errf(p.i, "unmatched )")
		}
		return nil, p.errf(p.i, "unexpected %q", p.src[p.i])
	}
	return &Query{Root: root}, nil
}

func (p *parser) eof() bool { return p.i >= len(p.src) }

func (p *parser) errf(at int, format string, args ...any) error {
	return &Error{at, fmt.Sprintf(format, args...)}
}

func (p *parser) skipWS() int {
	n := 0
	for !p.eof() && unicode.IsSpace(p.src[p.i]) {
		p.i++
		n++
	}
	return n
}

// keyword reports whether the token at p.i is the keyword kw (followed by
// whitespace or the end).
func (p *parser) keyword(kw string) bool {
	k := []rune(kw)
	if p.i+len(k) > len(p.src) || string(p.src[p.i:p.i+len(k)]) != kw {
		return false
	}
	return p.i+len(k) == len(p.src) || unicode.IsSpace(p.src[p.i+len(k)])
}

// atEnd reports whether the current and_expr ends here: end of input, or
// a ")" closing an open group.
func (p *parser) atEnd() bool {
	return p.eof() || p.depth > 0 && p.src[p.i] == ')'
}

func (p *parser) orExpr() (Node, error) {
	start := p.i
	x, err := p.andExpr()
	if err != nil {
		return nil, err
	}
	xs := []Node{x}
	for {
		save := p.i
		if p.skipWS() == 0 || !p.keyword("OR") {
			p.i = save
			break
		}
		orAt := p.i
		p.i += 2
		if p.skipWS() == 0 || p.atEnd() {
			return nil, p.errf(orAt, "OR needs a term after it")
		}
		y, err := p.andExpr()
		if err != nil {
			return nil, err
		}
		if o, ok := y.(*Or); ok {
			xs = append(xs, o.X...)
		} else {
			xs = append(xs, y)
		}
	}
	if len(xs) == 1 {
		return x, nil
	}
	return &Or{pos(start), xs}, nil
}

func (p *parser) andExpr() (Node, error) {
	start := p.i
	if p.keyword("OR") || p.keyword("AND") {
		return nil, p.errf(p.i, "%s needs a term before it", string(p.src[p.i:p.i+len(p.peekWord())]))
	}
	x, err := p.unary()
	if err != nil {
		return nil, err
	}
	xs := []Node{x}
	for {
		save := p.i
		if p.skipWS() == 0 || p.atEnd() || p.keyword("OR") {
			p.i = save
			break
		}
		if p.keyword("AND") {
			andAt := p.i
			p.i += 3
			if p.skipWS() == 0 || p.atEnd() || p.keyword("OR") || p.keyword("AND") {
				return nil, p.errf(andAt, "AND needs a term after it")
			}
		}
		y, err := p.unary()
		if err != nil {
			return nil, err
		}
		xs = append(xs, y)
	}
	if len(xs) == 1 {
		return x, nil
	}
	return &And{pos(start), xs}, nil
}

// peekWord is the token at p.i up to whitespace.
func (p *parser) peekWord() string {
	j := p.i
	for j < len(p.src) && !unicode.IsSpace(p.src[j]) {
		j++
	}
	return string(p.src[p.i:j])
}

func (p *parser) enter(at int) error {
	p.nest++
	if p.nest > MaxDepth {
		return p.errf(at, "nesting deeper than %d", MaxDepth)
	}
	return nil
}

func (p *parser) unary() (Node, error) {
	if p.src[p.i] == '-' {
		at := p.i
		p.i++
		if p.eof() || unicode.IsSpace(p.src[p.i]) || p.src[p.i] == '-' || p.src[p.i] == ')' && p.depth > 0 {
			return nil, p.errf(at, "- needs a term right after it")
		}
		if err := p.enter(at); err != nil {
			return nil, err
		}
		x, err := p.primary()
		p.nest--
		if err != nil {
			return nil, err
		}
		return &Not{pos(at), x}, nil
	}
	return p.primary()
}

func (p *parser) primary() (Node, error) {
	at := p.i
	switch p.src[p.i] {
	case '(':
		if err := p.enter(at); err != nil {
			return nil, err
		}
		p.i++
		p.depth++
		p.skipWS()
		if p.eof() || p.src[p.i] == ')' {
			return nil, p.errf(at, "empty group")
		}
		x, err := p.orExpr()
		if err != nil {
			return nil, err
		}
		p.skipWS()
		if p.eof() || p.src[p.i] != ')' {
			if p.eof() {
				return nil, p.errf(at, "( is never closed")
			}
			return nil, p.errf(p.i, "unexpected %q in group", p.src[p.i])
		}
		p.i++
		p.depth--
		p.nest--
		return x, nil
	case '"':
		s, err := p.quoted()
		if err != nil {
			return nil, err
		}
		if err := p.count(at); err != nil {
			return nil, err
		}
		if err := p.tokenEnd(); err != nil {
			return nil, err
		}
		if s == "" {
			return nil, p.errf(at, "empty phrase")
		}
		return p.text(at, s, true)
	}
	if err := p.count(at); err != nil {
		return nil, err
	}
	// A filter: KEY ":" with KEY from the table.
	j := p.i
	for j < len(p.src) && (p.src[j] >= 'a' && p.src[j] <= 'z' || p.src[j] == '-') {
		j++
	}
	if j < len(p.src) && p.src[j] == ':' && filterKeys[string(p.src[p.i:j])] {
		key := string(p.src[p.i:j])
		p.i = j + 1
		return p.filter(at, key)
	}
	return p.text(at, p.bare(), false)
}

func (p *parser) count(at int) error {
	p.terms++
	if p.terms > MaxTerms {
		return p.errf(at, "more than %d terms and filters", MaxTerms)
	}
	return nil
}

// tokenEnd checks that a token is followed by whitespace, the end, or a
// ")" closing an open group.
func (p *parser) tokenEnd() error {
	if p.eof() || unicode.IsSpace(p.src[p.i]) || p.depth > 0 && p.src[p.i] == ')' {
		return nil
	}
	return p.errf(p.i, "expected a space before %q", p.src[p.i])
}

// bare reads a bareword: everything up to whitespace or '"', less the
// trailing ")" that close open groups.
func (p *parser) bare() string {
	j := p.i
	for j < len(p.src) && !unicode.IsSpace(p.src[j]) && p.src[j] != '"' {
		j++
	}
	end := j
	for k := 0; k < p.depth && end > p.i+1 && p.src[end-1] == ')'; k++ {
		end--
	}
	w := string(p.src[p.i:end])
	p.i = end
	return w
}

// quoted reads a '"'-quoted string with \" and \\ escapes.
func (p *parser) quoted() (string, error) {
	at := p.i
	p.i++
	var b strings.Builder
	for !p.eof() {
		r := p.src[p.i]
		switch r {
		case '"':
			p.i++
			return b.String(), nil
		case '\\':
			if p.i+1 < len(p.src) && (p.src[p.i+1] == '"' || p.src[p.i+1] == '\\') {
				b.WriteRune(p.src[p.i+1])
				p.i += 2
				continue
			}
		}
		b.WriteRune(r)
		p.i++
	}
	return "", p.errf(at, "unterminated quoted string")
}

// value reads a filter value: quoted, or bare up to whitespace. It is
// never empty.
func (p *parser) value(key string, at int) (string, bool, error) {
	if !p.eof() && p.src[p.i] == '"' {
		vAt := p.i
		s, err := p.quoted()
		if err != nil {
			return "", false, err
		}
		if err := p.tokenEnd(); err != nil {
			return "", false, err
		}
		if s == "" {
			return "", false, p.errf(vAt, "%s: needs a value", key)
		}
		return s, true, nil
	}
	s := p.bare()
	if s == "" {
		return "", false, p.errf(at, "%s: needs a value", key)
	}
	if err := p.tokenEnd(); err != nil {
		return "", false, err
	}
	return s, false, nil
}

func (p *parser) filter(at int, key string) (Node, error) {
	vAt := p.i
	switch key {
	case "filter", "idfilter":
		return nil, p.errf(at, "%s: is accepted only as the whole query", key)
	case "meta":
		return p.meta(at)
	}
	v, quoted, err := p.value(key, at)
	if err != nil {
		return nil, err
	}
	switch key {
	case "is", "not":
		for _, n := range IsNames {
			if v == n {
				return &Is{pos(at), n, key == "not"}, nil
			}
		}
		return nil, p.errf(vAt, "unknown %s: value %q (want one of %s)", key, v, strings.Join(IsNames, ", "))
	case "source":
		return &Source{pos(at), v}, nil
	case "guardrail":
		if !quoted && strings.HasSuffix(v, "*") {
			return &Guardrail{pos(at), strings.TrimSuffix(v, "*"), true}, nil
		}
		return &Guardrail{pos(at), v, false}, nil
	case "severity":
		op := ""
		for _, o := range []string{">=", "<=", ">", "<", "="} {
			if strings.HasPrefix(v, o) {
				op = o
				break
			}
		}
		lv := strings.ToLower(v[len(op):])
		for i, s := range Severities {
			if lv == s {
				if op == "" {
					op = "="
				}
				return &Severity{pos(at), op, i}, nil
			}
		}
		return nil, p.errf(vAt+utf8.RuneCountInString(op), "unknown severity %q (want info, warn or critical)", v[len(op):])
	case "annotation":
		return &Annotation{pos(at), v}, nil
	case "tool":
		return &Tool{pos(at), v}, nil
	case "session":
		return &Session{pos(at), v}, nil
	case "dataset":
		return &Dataset{pos(at), v}, nil
	case "after", "before", "updated-after", "updated-before":
		t, err := parseTime(v)
		if err != nil {
			return nil, p.errf(vAt, "%s: %v", key, err)
		}
		t.pos, t.Key = pos(at), key
		return t, nil
	case "id":
		ids, err := parseIDs(v, vAt)
		if err != nil {
			return nil, err
		}
		return &IDs{pos(at), ids}, nil
	case "index":
		rs, err := parseIndices(v, vAt)
		if err != nil {
			return nil, err
		}
		return &Indices{pos(at), rs}, nil
	}
	return nil, p.errf(at, "unknown filter %s:", key)
}

var relTime = lazyregexp.New(`^-([0-9]{1,9})([smhdw])$`)

// parseTime reads an RFC 3339 time, a YYYY-MM-DD date (UTC midnight) or a
// relative -<n>(s|m|h|d|w).
func parseTime(v string) (*Time, error) {
	if m := relTime.FindStringSubmatch(v); m != nil {
		n, _ := strconv.ParseInt(m[1], 10, 64)
		unit := map[string]time.Duration{"s": time.Second, "m": time.Minute, "h": time.Hour, "d": 24 * time.Hour, "w": 7 * 24 * time.Hour}[m[2]]
		if n > int64((1<<63-1)/unit) {
			return nil, fmt.Errorf("%q is too far back", v)
		}
		return &Time{Ago: time.Duration(n) * unit, Raw: v}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return &Time{Abs: t.UTC(), Raw: v}, nil
	}
	if t, err := time.Parse("2006-01-02", v); err == nil {
		return &Time{Abs: t.UTC(), Raw: v}, nil
	}
	return nil, fmt.Errorf("%q is not an RFC 3339 time, a YYYY-MM-DD date or -<n>(s|m|h|d|w)", v)
}

var uuidRx = lazyregexp.New(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// parseIDs reads a comma list of UUIDs starting at code point at.
func parseIDs(v string, at int) ([]string, error) {
	var out []string
	off := at
	for _, s := range strings.Split(v, ",") {
		if !uuidRx.MatchString(s) {
			return nil, &Error{off, fmt.Sprintf("%q is not a UUID", s)}
		}
		out = append(out, strings.ToLower(s))
		if len(out) > MaxListItems {
			return nil, &Error{off, fmt.Sprintf("more than %d ids", MaxListItems)}
		}
		off += utf8.RuneCountInString(s) + 1
	}
	return out, nil
}

// parseIndices reads a comma list of indices and inclusive a..b ranges.
func parseIndices(v string, at int) ([][2]int64, error) {
	var out [][2]int64
	off := at
	for _, s := range strings.Split(v, ",") {
		lo, hi, isRange := strings.Cut(s, "..")
		a, err1 := strconv.ParseInt(lo, 10, 64)
		b, err2 := a, error(nil)
		if isRange {
			b, err2 = strconv.ParseInt(hi, 10, 64)
		}
		switch {
		case err1 != nil || err2 != nil || a < 0 || b < 0 || lo == "" || lo[0] == '+' || isRange && (hi == "" || hi[0] == '+'):
			return nil, &Error{off, fmt.Sprintf("%q is not an index or a range a..b", s)}
		case b < a:
			return nil, &Error{off, fmt.Sprintf("range %q ends before it starts", s)}
		}
		out = append(out, [2]int64{a, b})
		if len(out) > MaxListItems {
			return nil, &Error{off, fmt.Sprintf("more than %d indices or ranges", MaxListItems)}
		}
		off += utf8.RuneCountInString(s) + 1
	}
	return out, nil
}

// compat parses the whole-query forms filter:<title>:<i>,… and
// idfilter:<title>:<uuid>,…; ok is false when q is neither.
func (p *parser) compat() (*Query, bool, error) {
	rest := string(p.src[p.i:])
	var kind string
	switch {
	case strings.HasPrefix(rest, "filter:"):
		kind = "filter"
	case strings.HasPrefix(rest, "idfilter:"):
		kind = "idfilter"
	default:
		return nil, false, nil
	}
	at := p.i
	body := strings.TrimRightFunc(rest[len(kind)+1:], unicode.IsSpace)
	k := strings.LastIndexByte(body, ':')
	if k < 0 {
		return nil, true, p.errf(at, "%s: wants %s:<title>:<list>", kind, kind)
	}
	title, list := body[:k], body[k+1:]
	listAt := at + utf8.RuneCountInString(kind) + 1 + utf8.RuneCountInString(title) + 1
	q := &Query{Compat: kind, Title: title}
	if list == "" {
		return nil, true, p.errf(listAt, "%s: needs a list", kind)
	}
	if kind == "filter" {
		rs, err := parseIndices(list, listAt)
		if err != nil {
			return nil, true, err
		}
		q.Root = &Indices{pos(at), rs}
	} else {
		ids, err := parseIDs(list, listAt)
		if err != nil {
			return nil, true, err
		}
		q.Root = &IDs{pos(at), ids}
	}
	return q, true, nil
}
