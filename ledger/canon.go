package ledger

// canon.go: the JS-compatible canonical JSON of spec/ledger.md §2 — the
// value model, the strict decoder (§2.1) and the writer (§2.2–§2.5).
// canon_number.go holds the number formatting of §2.3.

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxDepth is the deepest nesting of arrays and objects Parse accepts (§2.1).
const MaxDepth = 10000

// ErrSyntax is wrapped by every error Parse returns for input that is not
// valid JSON under §2.1 (grammar, UTF-8, depth).
var ErrSyntax = errors.New("invalid JSON")

// ErrUnsupported is wrapped by the errors Marshal returns for Go values
// outside the value model (and for strings that are not valid WTF-8).
var ErrUnsupported = errors.New("value not representable as canonical JSON")

// SyntaxError reports where Parse found invalid input. It wraps ErrSyntax.
type SyntaxError struct {
	Offset int // byte offset of the problem in the input
	Line   int // 1-based line
	Col    int // 1-based column, in bytes
	Msg    string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("invalid JSON at line %d:%d (byte %d): %s", e.Line, e.Col, e.Offset, e.Msg)
}

// Unwrap returns ErrSyntax.
func (e *SyntaxError) Unwrap() error { return ErrSyntax }

// Parse decodes data into the §2.1 value model, which is what JavaScript's
// JSON.parse sees:
//
//   - null → nil, true/false → bool
//   - numbers → float64 (nearest double; overflow ±Inf, underflow ±0)
//   - strings → string holding WTF-8 (lone surrogates as 3-byte sequences)
//   - arrays → []any
//   - objects → map[string]any (the last of duplicate keys wins)
//
// One leading BOM is skipped. Any other input error is a *SyntaxError.
func Parse(data []byte) (any, error) {
	d := decoder{data: data}
	if len(data) >= 3 && data[0] == 0xEF && data[1] == 0xBB && data[2] == 0xBF {
		d.pos = 3
	}
	d.skipWS()
	v, err := d.value(0)
	if err != nil {
		return nil, err
	}
	d.skipWS()
	if d.pos != len(d.data) {
		return nil, d.errf("unexpected %s after top-level value", d.describe())
	}
	return v, nil
}

// Canonicalize parses data (§2.1) and returns its canonical form (§2.2).
func Canonicalize(data []byte) ([]byte, error) {
	v, err := Parse(data)
	if err != nil {
		return nil, err
	}
	return Marshal(v)
}

// Hash returns the lowercase hex SHA-256 of the canonical form of v.
func Hash(v any) (string, error) {
	b, err := Marshal(v)
	if err != nil {
		return "", err
	}
	return HashBytes(b), nil
}

// HashBytes returns the lowercase hex SHA-256 of b.
func HashBytes(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Marshal returns the canonical JSON of v (§2.2). v is a value of the model
// Parse returns; for convenience Marshal also accepts Go integers (converted
// to float64, as JS would), float32, json.RawMessage (parsed with Parse),
// []string and map[string]string. Strings must be valid WTF-8.
func Marshal(v any) ([]byte, error) {
	return AppendCanonical(nil, v)
}

// AppendCanonical appends the canonical JSON of v to dst (see Marshal).
func AppendCanonical(dst []byte, v any) ([]byte, error) {
	return appendValue(dst, v, 0)
}

func appendValue(dst []byte, v any, depth int) ([]byte, error) {
	if depth > MaxDepth {
		return dst, fmt.Errorf("%w: nesting deeper than %d", ErrUnsupported, MaxDepth)
	}
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case bool:
		if x {
			return append(dst, "true"...), nil
		}
		return append(dst, "false"...), nil
	case float64:
		return AppendNumber(dst, x), nil
	case string:
		return appendString(dst, x)
	case []any:
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = appendValue(dst, e, depth+1); err != nil {
				return dst, err
			}
		}
		return append(dst, ']'), nil
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sortKeys(keys)
		dst = append(dst, '{')
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = appendString(dst, k); err != nil {
				return dst, err
			}
			dst = append(dst, ':')
			if dst, err = appendValue(dst, x[k], depth+1); err != nil {
				return dst, err
			}
		}
		return append(dst, '}'), nil
	case int:
		return AppendNumber(dst, float64(x)), nil
	case int64:
		return AppendNumber(dst, float64(x)), nil
	case int32:
		return AppendNumber(dst, float64(x)), nil
	case uint64:
		return AppendNumber(dst, float64(x)), nil
	case uint32:
		return AppendNumber(dst, float64(x)), nil
	case float32:
		return AppendNumber(dst, float64(x)), nil
	case json.RawMessage:
		p, err := Parse(x)
		if err != nil {
			return dst, err
		}
		return appendValue(dst, p, depth)
	case []string:
		dst = append(dst, '[')
		for i, s := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = appendString(dst, s); err != nil {
				return dst, err
			}
		}
		return append(dst, ']'), nil
	case map[string]string:
		m := make(map[string]any, len(x))
		for k, s := range x {
			m[k] = s
		}
		return appendValue(dst, m, depth)
	default:
		return dst, fmt.Errorf("%w: Go type %T", ErrUnsupported, v)
	}
}

// hexDigits is lowercase, as §2.4 requires.
const hexDigits = "0123456789abcdef"

// safeASCII[b] is true for the ASCII bytes written as themselves.
var safeASCII = func() (t [utf8.RuneSelf]bool) {
	for b := 0x20; b < utf8.RuneSelf; b++ {
		t[b] = b != '"' && b != '\\'
	}
	return t
}()

// appendString writes s (WTF-8) as a JSON string per §2.4.
func appendString(dst []byte, s string) ([]byte, error) {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if safeASCII[b] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '"':
				dst = append(dst, '\\', '"')
			case '\\':
				dst = append(dst, '\\', '\\')
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := decodeWTF8(s[i:])
		if r < 0 {
			return dst, fmt.Errorf("%w: invalid UTF-8 in string at byte %d", ErrUnsupported, i)
		}
		if r >= 0xD800 && r <= 0xDFFF { // lone surrogate
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', hexDigits[r>>12], hexDigits[(r>>8)&0xF], hexDigits[(r>>4)&0xF], hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"'), nil
}

// decodeWTF8 decodes the first code point of s, accepting 3-byte encoded
// surrogates (ED A0 80 … ED BF BF). It returns -1 for invalid input.
func decodeWTF8(s string) (rune, int) {
	if len(s) >= 3 && s[0] == 0xED && s[1] >= 0xA0 && s[1] <= 0xBF && s[2] >= 0x80 && s[2] <= 0xBF {
		return rune(s[0]&0x0F)<<12 | rune(s[1]&0x3F)<<6 | rune(s[2]&0x3F), 3
	}
	r, size := utf8.DecodeRuneInString(s)
	if r == utf8.RuneError && size <= 1 {
		return -1, 1
	}
	return r, size
}

// sortKeys sorts keys by UTF-16 code units (§2.5).
func sortKeys(keys []string) {
	if len(keys) < 2 {
		return
	}
	slices.SortFunc(keys, compareUTF16) // no reflection, unlike sort.Slice
}

// compareUTF16 compares two WTF-8 strings by their UTF-16 code units, as
// JavaScript's default sort does. It is byte order except where a code point
// at or above U+10000 meets one in U+D800–U+FFFF.
func compareUTF16(a, b string) int {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	if i == n {
		return len(a) - len(b) // one is a prefix of the other (or equal)
	}
	if a[i] < 0x80 && b[i] < 0x80 {
		return int(a[i]) - int(b[i]) // two ASCII code points: their own units
	}
	// Back up to the start of the code point that differs; the prefix is
	// shared, so both strings have a code point boundary there.
	for i > 0 && a[i]&0xC0 == 0x80 {
		i--
	}
	ra, _ := decodeWTF8(a[i:])
	rb, _ := decodeWTF8(b[i:])
	ua, ub := firstUnit(ra), firstUnit(rb)
	if ua != ub {
		return int(ua) - int(ub)
	}
	// Same first unit but different code points: only possible when one
	// is a lone high surrogate and the other an astral character starting
	// with it (or invalid bytes). Compare the rest unit by unit.
	return compareUnits(utf16Units(a[i:]), utf16Units(b[i:]))
}

// firstUnit returns the first UTF-16 code unit of r (invalid bytes, -1, sort
// as U+FFFD, which is what they would become).
func firstUnit(r rune) uint16 {
	switch {
	case r < 0:
		return 0xFFFD
	case r >= 0x10000:
		h, _ := utf16.EncodeRune(r)
		return uint16(h)
	default:
		return uint16(r)
	}
}

func utf16Units(s string) []uint16 {
	var u []uint16
	for i := 0; i < len(s); {
		r, size := decodeWTF8(s[i:])
		i += size
		switch {
		case r < 0:
			u = append(u, utf8.RuneError)
		case r >= 0xD800 && r <= 0xDFFF: // lone surrogate: one unit
			u = append(u, uint16(r))
		default:
			u = utf16.AppendRune(u, r)
		}
	}
	return u
}

func compareUnits(a, b []uint16) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return int(a[i]) - int(b[i])
		}
	}
	return len(a) - len(b)
}

// decoder is the strict §2.1 JSON decoder.
type decoder struct {
	data []byte
	pos  int
	buf  []byte // scratch for strings with escapes
}

func (d *decoder) errf(format string, args ...any) error {
	line, col := 1, 1
	for i := 0; i < d.pos && i < len(d.data); i++ {
		if d.data[i] == '\n' {
			line++
			col = 1
		} else {
			col++
		}
	}
	return &SyntaxError{Offset: d.pos, Line: line, Col: col, Msg: fmt.Sprintf(format, args...)}
}

func (d *decoder) describe() string {
	if d.pos >= len(d.data) {
		return "end of input"
	}
	c := d.data[d.pos]
	if c >= 0x20 && c < 0x7F {
		return strconv.Quote(string(c))
	}
	return fmt.Sprintf("byte 0x%02x", c)
}

func (d *decoder) skipWS() {
	for d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

func (d *decoder) value(depth int) (any, error) {
	if d.pos >= len(d.data) {
		return nil, d.errf("unexpected end of input, want a value")
	}
	switch c := d.data[d.pos]; {
	case c == '{':
		return d.object(depth + 1)
	case c == '[':
		return d.array(depth + 1)
	case c == '"':
		return d.str()
	case c == '-' || (c >= '0' && c <= '9'):
		return d.number()
	case c == 't':
		return true, d.literal("true")
	case c == 'f':
		return false, d.literal("false")
	case c == 'n':
		return nil, d.literal("null")
	default:
		return nil, d.errf("unexpected %s, want a value", d.describe())
	}
}

func (d *decoder) literal(word string) error {
	if len(d.data)-d.pos >= len(word) && string(d.data[d.pos:d.pos+len(word)]) == word {
		d.pos += len(word)
		return nil
	}
	return d.errf("invalid literal, want %q", word)
}

func (d *decoder) object(depth int) (any, error) {
	if depth > MaxDepth {
		return nil, d.errf("nesting deeper than %d", MaxDepth)
	}
	d.pos++ // '{'
	m := map[string]any{}
	d.skipWS()
	if d.pos < len(d.data) && d.data[d.pos] == '}' {
		d.pos++
		return m, nil
	}
	for {
		d.skipWS()
		if d.pos >= len(d.data) || d.data[d.pos] != '"' {
			return nil, d.errf("unexpected %s, want a string key", d.describe())
		}
		k, err := d.str()
		if err != nil {
			return nil, err
		}
		d.skipWS()
		if d.pos >= len(d.data) || d.data[d.pos] != ':' {
			return nil, d.errf("unexpected %s, want ':'", d.describe())
		}
		d.pos++
		d.skipWS()
		v, err := d.value(depth)
		if err != nil {
			return nil, err
		}
		m[k] = v
		d.skipWS()
		if d.pos >= len(d.data) {
			return nil, d.errf("unexpected end of input in object")
		}
		switch d.data[d.pos] {
		case ',':
			d.pos++
		case '}':
			d.pos++
			return m, nil
		default:
			return nil, d.errf("unexpected %s, want ',' or '}'", d.describe())
		}
	}
}

func (d *decoder) array(depth int) (any, error) {
	if depth > MaxDepth {
		return nil, d.errf("nesting deeper than %d", MaxDepth)
	}
	d.pos++ // '['
	a := []any{}
	d.skipWS()
	if d.pos < len(d.data) && d.data[d.pos] == ']' {
		d.pos++
		return a, nil
	}
	for {
		d.skipWS()
		v, err := d.value(depth)
		if err != nil {
			return nil, err
		}
		a = append(a, v)
		d.skipWS()
		if d.pos >= len(d.data) {
			return nil, d.errf("unexpected end of input in array")
		}
		switch d.data[d.pos] {
		case ',':
			d.pos++
		case ']':
			d.pos++
			return a, nil
		default:
			return nil, d.errf("unexpected %s, want ',' or ']'", d.describe())
		}
	}
}

func (d *decoder) number() (any, error) {
	start := d.pos
	p := d.pos
	data := d.data
	if p < len(data) && data[p] == '-' {
		p++
	}
	switch {
	case p < len(data) && data[p] == '0':
		p++
	case p < len(data) && data[p] >= '1' && data[p] <= '9':
		for p < len(data) && data[p] >= '0' && data[p] <= '9' {
			p++
		}
	default:
		d.pos = p
		return nil, d.errf("invalid number: want a digit")
	}
	if p < len(data) && data[p] == '.' {
		p++
		if p >= len(data) || data[p] < '0' || data[p] > '9' {
			d.pos = p
			return nil, d.errf("invalid number: want a digit after '.'")
		}
		for p < len(data) && data[p] >= '0' && data[p] <= '9' {
			p++
		}
	}
	if p < len(data) && (data[p] == 'e' || data[p] == 'E') {
		p++
		if p < len(data) && (data[p] == '+' || data[p] == '-') {
			p++
		}
		if p >= len(data) || data[p] < '0' || data[p] > '9' {
			d.pos = p
			return nil, d.errf("invalid number: want a digit in exponent")
		}
		for p < len(data) && data[p] >= '0' && data[p] <= '9' {
			p++
		}
	}
	d.pos = p
	lit := string(data[start:p])
	// Fast path for small integers, the common case (timestamps, indexes).
	if p-start <= 15 {
		if n, err := strconv.ParseInt(lit, 10, 64); err == nil {
			if n == 0 && data[start] == '-' {
				return math.Copysign(0, -1), nil
			}
			return float64(n), nil
		}
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil {
		var ne *strconv.NumError
		if errors.As(err, &ne) && errors.Is(ne.Err, strconv.ErrRange) {
			return f, nil // ±Inf on overflow, ±0 on underflow, as JS
		}
		d.pos = start
		return nil, d.errf("invalid number %q", lit)
	}
	return f, nil
}

// str decodes a JSON string at d.pos (which is '"') into WTF-8.
func (d *decoder) str() (string, error) {
	d.pos++ // opening quote
	start := d.pos
	data := d.data
	// Fast path: no escapes, ASCII or valid UTF-8.
	for p := start; p < len(data); {
		c := data[p]
		switch {
		case c == '"':
			d.pos = p + 1
			return string(data[start:p]), nil
		case c == '\\':
			return d.strSlow(start)
		case c < 0x20:
			d.pos = p
			return "", d.errf("raw control character 0x%02x in string", c)
		case c < utf8.RuneSelf:
			p++
		default:
			r, size := utf8.DecodeRune(data[p:])
			if r == utf8.RuneError && size <= 1 {
				d.pos = p
				return "", d.errf("invalid UTF-8 in string")
			}
			p += size
		}
	}
	d.pos = len(data)
	return "", d.errf("unterminated string")
}

func (d *decoder) strSlow(start int) (string, error) {
	buf := d.buf[:0]
	data := d.data
	p := start
	for p < len(data) {
		c := data[p]
		switch {
		case c == '"':
			d.pos = p + 1
			d.buf = buf
			return string(buf), nil
		case c == '\\':
			if p+1 >= len(data) {
				d.pos = p
				return "", d.errf("unterminated escape")
			}
			e := data[p+1]
			p += 2
			switch e {
			case '"', '\\', '/':
				buf = append(buf, e)
			case 'b':
				buf = append(buf, '\b')
			case 'f':
				buf = append(buf, '\f')
			case 'n':
				buf = append(buf, '\n')
			case 'r':
				buf = append(buf, '\r')
			case 't':
				buf = append(buf, '\t')
			case 'u':
				u, ok := hex4(data, p)
				if !ok {
					d.pos = p - 2
					return "", d.errf(`invalid \u escape`)
				}
				p += 4
				if u >= 0xD800 && u <= 0xDBFF && p+6 <= len(data) && data[p] == '\\' && data[p+1] == 'u' {
					if lo, ok := hex4(data, p+2); ok && lo >= 0xDC00 && lo <= 0xDFFF {
						buf = utf8.AppendRune(buf, utf16.DecodeRune(rune(u), rune(lo)))
						p += 6
						continue
					}
				}
				buf = appendWTF8(buf, rune(u))
			default:
				d.pos = p - 2
				return "", d.errf("invalid escape %q", "\\"+string(rune(e)))
			}
		case c < 0x20:
			d.pos = p
			return "", d.errf("raw control character 0x%02x in string", c)
		case c < utf8.RuneSelf:
			buf = append(buf, c)
			p++
		default:
			r, size := utf8.DecodeRune(data[p:])
			if r == utf8.RuneError && size <= 1 {
				d.pos = p
				return "", d.errf("invalid UTF-8 in string")
			}
			buf = append(buf, data[p:p+size]...)
			p += size
		}
	}
	d.pos = len(data)
	return "", d.errf("unterminated string")
}

// appendWTF8 appends r, writing surrogates as 3-byte sequences.
func appendWTF8(buf []byte, r rune) []byte {
	if r >= 0xD800 && r <= 0xDFFF {
		return append(buf, 0xED, byte(0x80|(r>>6)&0x3F), byte(0x80|r&0x3F))
	}
	return utf8.AppendRune(buf, r)
}

func hex4(data []byte, p int) (uint16, bool) {
	if p+4 > len(data) {
		return 0, false
	}
	var u uint16
	for _, c := range data[p : p+4] {
		switch {
		case c >= '0' && c <= '9':
			u = u<<4 | uint16(c-'0')
		case c >= 'a' && c <= 'f':
			u = u<<4 | uint16(c-'a'+10)
		case c >= 'A' && c <= 'F':
			u = u<<4 | uint16(c-'A'+10)
		default:
			return 0, false
		}
	}
	return u, true
}
