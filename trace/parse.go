package trace

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// parse.go is the single-pass JSON scanner behind Decode: it builds Values
// (ordered objects, literal numbers) straight from the bytes, without
// reflection and without map[string]any. Positions are byte offsets; line
// and column are computed only when an error is rendered (position.go).

// MaxDepth is the deepest nesting of arrays and objects the decoder accepts.
const MaxDepth = 10000

// SyntaxError is a malformed-JSON error at a byte offset.
type SyntaxError struct {
	Offset    int // byte offset of the problem in the input
	Line, Col int // 1-based; Col counts bytes, as editors and go/scanner do
	Msg       string
	// Path is the JSON path of the value holding the problem ("$",
	// "$.messages[0].content"), set for invalid UTF-8 in a string; "" for
	// other errors.
	Path string
}

// Error renders "line:col: msg", plus " at <path>" when Path is set.
func (e *SyntaxError) Error() string {
	if e.Path != "" {
		return fmt.Sprintf("%d:%d: %s at %s", e.Line, e.Col, e.Msg, e.Path)
	}
	return fmt.Sprintf("%d:%d: %s", e.Line, e.Col, e.Msg)
}

// Unwrap makes errors.Is(err, ErrSyntax) true.
func (e *SyntaxError) Unwrap() error { return ErrSyntax }

// ErrSyntax is matched (errors.Is) by every malformed-JSON error.
var ErrSyntax = errors.New("invalid JSON")

type scanner struct {
	data []byte
	// src is data as one string: strings and numbers without escapes are
	// substrings of it, so a document costs one copy of its bytes instead
	// of one allocation per string.
	src   string
	buf   []byte // slowStr's scratch buffer
	pos   int
	depth int
	err   *SyntaxError
	// rpath collects, innermost first, the path of a failed value whose
	// error wants one (pathed); arrays and objects add their step as the
	// failure unwinds, so a valid document pays nothing for it.
	rpath  []pathElem
	pathed bool
	// objs and vals are the slabs newObject and newArray take from.
	objs  []objectAlloc
	vals  []Value
	strs  []byte // keep's slab
	chunk int    // the size of the next slab, doubling up to maxChunk
	// lone is set when a string kept a lone surrogate escape (as WTF-8).
	lone bool
}

// objectAlloc is an object and room for its first members.
type objectAlloc struct {
	o Object
	m [4]Member
}

// maxChunk is the most objects (or arrays) of one slab: the values of a
// document are allocated in slabs that double from 1 to maxChunk, so a
// small document costs what it did with one allocation per value and a
// large one a few allocations in all.
const maxChunk = 32

// grow returns the size of the next slab.
func (s *scanner) grow() int {
	s.chunk = min(max(2*s.chunk, 1), maxChunk)
	return s.chunk
}

// newObject returns an empty object with room for 4 members.
func (s *scanner) newObject() *objectAlloc {
	if len(s.objs) == 0 {
		s.objs = make([]objectAlloc, s.grow())
	}
	a := &s.objs[0]
	s.objs = s.objs[1:]
	return a
}

// newArray returns an empty slice with room for 4 values, whose appends
// beyond that reallocate (its capacity ends where the next one starts).
func (s *scanner) newArray() []Value {
	if len(s.vals) < 4 {
		s.vals = make([]Value, 4*s.grow())
	}
	out := s.vals[:0:4]
	s.vals = s.vals[4:]
	return out
}

// failUTF8 reports invalid UTF-8 at off, naming the JSON path.
func (s *scanner) failUTF8(off int) {
	if s.err == nil {
		s.fail(off, "invalid UTF-8 (byte 0x%02x) in string", s.data[off])
		s.pathed = true
	}
}

// step records the step of a failed element for the error's path.
func (s *scanner) step(e pathElem) {
	if s.pathed {
		s.rpath = append(s.rpath, e)
	}
}

func (s *scanner) fail(off int, format string, args ...any) {
	if s.err == nil {
		line, col := LineCol(s.data, off)
		s.err = &SyntaxError{Offset: off, Line: line, Col: col, Msg: fmt.Sprintf(format, args...)}
	}
}

// ParseValue decodes exactly one JSON value (surrounded by optional
// whitespace, after an optional UTF-8 BOM) into a Value. Invalid UTF-8 in
// a string is an error naming its JSON path (it was replaced by U+FFFD, so
// what was stored and signed differed from what was sent). A lone
// surrogate escape ("\ud800") is kept: the Go string holds it as 3-byte
// WTF-8 (ED A0 80 … ED BF BF), and AppendValue writes it back as the same
// escape, as spec/ledger.md §2.1 does. The strings of the result share one
// copy of data (data itself may be reused by the caller), which stays in
// memory while any of them does.
func ParseValue(data []byte) (Value, error) {
	return parseValue(data, string(data))
}

// ParseValueOwned is ParseValue for a caller that hands data over: the
// strings of the result point into data instead of a copy of it, which
// saves copying the whole document. The caller must never modify data
// afterwards (a request body read into a fresh buffer, for instance).
func ParseValueOwned(data []byte) (Value, error) {
	if len(data) == 0 {
		return ParseValue(data)
	}
	return parseValue(data, unsafe.String(&data[0], len(data)))
}

// parseString is ParseValue of a string, without copying it.
func parseString(src string) (Value, error) {
	return parseValue(unsafe.Slice(unsafe.StringData(src), len(src)), src)
}

// parseValue is ParseValue; src must hold the same bytes as data. The
// scanner only reads data.
func parseValue(data []byte, src string) (Value, error) {
	s := scanner{data: data, src: src}
	if len(data) >= 3 && data[0] == 0xEF && data[1] == 0xBB && data[2] == 0xBF {
		s.pos = 3
	}
	s.skipSpace()
	v := s.value()
	if s.err == nil {
		s.skipSpace()
		if s.pos < len(s.data) {
			s.fail(s.pos, "unexpected %s after the top-level value", s.describe())
		}
	}
	if s.err != nil {
		if s.pathed {
			p := make([]pathElem, 0, len(s.rpath)+1)
			p = append(p, pathElem{key: "$"})
			for i := len(s.rpath) - 1; i >= 0; i-- {
				p = append(p, s.rpath[i])
			}
			s.err.Path = renderPath(p)
		}
		return nil, s.err
	}
	return v, nil
}

func (s *scanner) skipSpace() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

func (s *scanner) describe() string {
	if s.pos >= len(s.data) {
		return "end of input"
	}
	c := s.data[s.pos]
	if c >= 0x20 && c < 0x7f {
		return strconv.QuoteRune(rune(c))
	}
	return fmt.Sprintf("byte 0x%02x", c)
}

func (s *scanner) value() Value {
	if s.pos >= len(s.data) {
		s.fail(s.pos, "unexpected end of input, want a value")
		return nil
	}
	switch c := s.data[s.pos]; c {
	case '{':
		return s.object()
	case '[':
		return s.array()
	case '"':
		if str, ok := s.str(); ok {
			return box(str, false)
		}
		return nil
	case 't':
		return s.literal("true", true)
	case 'f':
		return s.literal("false", false)
	case 'n':
		return s.literal("null", nil)
	default:
		if c == '-' || (c >= '0' && c <= '9') {
			return s.number()
		}
		s.fail(s.pos, "unexpected %s, want a value", s.describe())
		return nil
	}
}

func (s *scanner) literal(word string, v Value) Value {
	if len(s.data)-s.pos >= len(word) && string(s.data[s.pos:s.pos+len(word)]) == word {
		s.pos += len(word)
		return v
	}
	s.fail(s.pos, "invalid literal, want %s", word)
	return nil
}

func (s *scanner) number() Value {
	start := s.pos
	d := s.data
	i := s.pos
	if d[i] == '-' {
		i++
	}
	if i >= len(d) || d[i] < '0' || d[i] > '9' {
		s.fail(i, "invalid number: want a digit")
		return nil
	}
	if d[i] == '0' {
		i++
		if i < len(d) && d[i] >= '0' && d[i] <= '9' {
			s.fail(i, "invalid number: leading zero")
			return nil
		}
	} else {
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
	}
	if i < len(d) && d[i] == '.' {
		i++
		if i >= len(d) || d[i] < '0' || d[i] > '9' {
			s.fail(i, "invalid number: want a digit after '.'")
			return nil
		}
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if i >= len(d) || d[i] < '0' || d[i] > '9' {
			s.fail(i, "invalid number: want a digit in the exponent")
			return nil
		}
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
	}
	s.pos = i
	return box(s.src[start:i], true)
}

func (s *scanner) enter() bool {
	s.depth++
	if s.depth > MaxDepth {
		s.fail(s.pos, "nesting deeper than %d", MaxDepth)
		return false
	}
	return true
}

func (s *scanner) array() Value {
	if !s.enter() {
		return nil
	}
	s.pos++ // [
	s.skipSpace()
	if s.pos < len(s.data) && s.data[s.pos] == ']' {
		s.pos++
		s.depth--
		return []Value{}
	}
	out := s.newArray()
	for {
		s.skipSpace()
		if s.pos < len(s.data) && s.data[s.pos] == ']' {
			s.fail(s.pos, "unexpected ']' after ',' (trailing comma), want a value")
			return nil
		}
		v := s.value()
		if s.err != nil {
			s.step(pathElem{index: len(out)})
			return nil
		}
		out = append(out, v)
		s.skipSpace()
		if s.pos >= len(s.data) {
			s.fail(s.pos, "unexpected end of input in array, want ',' or ']'")
			return nil
		}
		switch s.data[s.pos] {
		case ',':
			s.pos++
		case ']':
			s.pos++
			s.depth--
			return out
		default:
			s.fail(s.pos, "unexpected %s in array, want ',' or ']'", s.describe())
			return nil
		}
	}
}

func (s *scanner) object() Value {
	if !s.enter() {
		return nil
	}
	s.pos++ // {
	s.skipSpace()
	if s.pos < len(s.data) && s.data[s.pos] == '}' {
		s.pos++
		s.depth--
		return &Object{}
	}
	// The object and room for its first members in one allocation.
	a := s.newObject()
	o := &a.o
	o.Members = a.m[:0]
	for {
		s.skipSpace()
		if s.pos >= len(s.data) || s.data[s.pos] != '"' {
			if len(o.Members) > 0 && s.pos < len(s.data) && s.data[s.pos] == '}' {
				s.fail(s.pos, "unexpected '}' after ',' (trailing comma), want a string key")
				return nil
			}
			s.fail(s.pos, "unexpected %s in object, want a string key", s.describe())
			return nil
		}
		k, ok := s.str()
		if !ok {
			return nil
		}
		s.skipSpace()
		if s.pos >= len(s.data) || s.data[s.pos] != ':' {
			s.fail(s.pos, "unexpected %s after object key, want ':'", s.describe())
			return nil
		}
		s.pos++
		s.skipSpace()
		v := s.value()
		if s.err != nil {
			s.step(pathElem{key: k})
			return nil
		}
		o.Members = append(o.Members, Member{Key: k, Value: v})
		s.skipSpace()
		if s.pos >= len(s.data) {
			s.fail(s.pos, "unexpected end of input in object, want ',' or '}'")
			return nil
		}
		switch s.data[s.pos] {
		case ',':
			s.pos++
		case '}':
			s.pos++
			s.depth--
			return o
		default:
			s.fail(s.pos, "unexpected %s in object, want ',' or '}'", s.describe())
			return nil
		}
	}
}

// str scans a string starting at the opening quote; ok is false after a
// syntax error. The fast path (no escapes, valid UTF-8) allocates nothing:
// the string is a substring of src.
func (s *scanner) str() (string, bool) {
	d := s.data
	start := s.pos + 1
	i := start
	ascii := true
	for i < len(d) {
		// skip 8 plain bytes at a time, then to the first byte that is not
		for i+8 <= len(d) {
			if m := special8(binary.LittleEndian.Uint64(d[i:])); m != 0 {
				i += bits.TrailingZeros64(m) >> 3
				break
			}
			i += 8
		}
		if i >= len(d) {
			break
		}
		c := d[i]
		if c == '"' {
			s.pos = i + 1
			if ascii || utf8.Valid(d[start:i]) {
				return s.src[start:i], true
			}
			return s.slowStr(start)
		}
		if c == '\\' {
			return s.slowStr(start)
		}
		if c < 0x20 {
			s.fail(i, "invalid control character 0x%02x in string", c)
			return "", false
		}
		if c >= 0x80 {
			ascii = false
		}
		i++
	}
	s.fail(s.pos, "unterminated string")
	return "", false
}

// keep returns b as a string in the scanner's string slab: the decoded
// strings of a document share a few allocations, which double from 64
// bytes up to 32 KiB. The slab's bytes are never written again.
func (s *scanner) keep(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if cap(s.strs)-len(s.strs) < len(b) {
		s.strs = make([]byte, 0, max(len(b), min(2*cap(s.strs), 32<<10), 64))
	}
	start := len(s.strs)
	s.strs = append(s.strs, b...)
	return unsafe.String(&s.strs[start], len(b))
}

// plain8 reports whether none of the 8 bytes of x is a quote, a
// backslash, a control character or a non-ASCII byte: bytes str can skip.
func plain8(x uint64) bool { return special8(x) == 0 }

// special8 returns the high bits of the bytes of x (little-endian) that
// may be a quote, a backslash, a control character or a non-ASCII byte.
// The lowest one set is exact: it marks the first such byte (a borrow only
// flags bytes above a special one), so str can jump to it.
func special8(x uint64) uint64 {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	q := x ^ (lo * '"')
	b := x ^ (lo * '\\')
	return ((q-lo)&^q | (b-lo)&^b | (x - lo*0x20) | x) & hi
}

func (s *scanner) slowStr(start int) (string, bool) {
	d := s.data
	// decode into the scanner's scratch buffer, reused across strings;
	// the plain prefix is copied in one go
	i := start
	for i < len(d) && d[i] != '\\' && d[i] != '"' && d[i] >= 0x20 && d[i] < 0x80 {
		i++
	}
	buf := append(s.buf[:0], d[start:i]...)
	for i < len(d) {
		c := d[i]
		switch {
		case c == '"':
			s.pos = i + 1
			s.buf = buf[:0]
			return s.keep(buf), true
		case c == '\\':
			if i+1 >= len(d) {
				s.fail(i, "unterminated string")
				return "", false
			}
			switch e := d[i+1]; e {
			case '"', '\\', '/':
				buf = append(buf, e)
				i += 2
			case 'b':
				buf = append(buf, '\b')
				i += 2
			case 'f':
				buf = append(buf, '\f')
				i += 2
			case 'n':
				buf = append(buf, '\n')
				i += 2
			case 'r':
				buf = append(buf, '\r')
				i += 2
			case 't':
				buf = append(buf, '\t')
				i += 2
			case 'u':
				r, ok := hex4(d, i+2)
				if !ok {
					s.fail(i, "invalid \\u escape")
					return "", false
				}
				i += 6
				if utf16.IsSurrogate(r) {
					if r < 0xDC00 && i+6 <= len(d) && d[i] == '\\' && d[i+1] == 'u' {
						if r2, ok := hex4(d, i+2); ok && r2 >= 0xDC00 && r2 <= 0xDFFF {
							buf = utf8.AppendRune(buf, utf16.DecodeRune(r, r2))
							i += 6
							continue
						}
					}
					buf = appendWTF8(buf, r) // a lone surrogate, kept
					s.lone = true
					continue
				}
				buf = utf8.AppendRune(buf, r)
			default:
				s.fail(i, "invalid escape %q in string", "\\"+string(rune(e)))
				return "", false
			}
		case c < 0x20:
			s.fail(i, "invalid control character 0x%02x in string", c)
			return "", false
		case c < 0x80:
			buf = append(buf, c)
			i++
		default:
			r, size := utf8.DecodeRune(d[i:])
			if r == utf8.RuneError && size == 1 {
				s.failUTF8(i)
				return "", false
			}
			buf = append(buf, d[i:i+size]...)
			i += size
		}
	}
	s.fail(start-1, "unterminated string")
	return "", false
}

// appendWTF8 appends surrogate code unit r as the 3 bytes UTF-8 would
// use for it (WTF-8): ED A0 80 for U+D800 … ED BF BF for U+DFFF.
func appendWTF8(buf []byte, r rune) []byte {
	return append(buf, 0xE0|byte(r>>12), 0x80|byte(r>>6)&0x3F, 0x80|byte(r)&0x3F)
}

// wtf8Surrogate reports whether s starts with the WTF-8 form of a
// surrogate code unit, and returns it.
func wtf8Surrogate(s string) (rune, bool) {
	if len(s) < 3 || s[0] != 0xED || s[1] < 0xA0 || s[1] > 0xBF || s[2] < 0x80 || s[2] > 0xBF {
		return 0, false
	}
	return 0xD000 | rune(s[1]&0x3F)<<6 | rune(s[2]&0x3F), true
}

func hex4(d []byte, i int) (rune, bool) {
	if i+4 > len(d) {
		return 0, false
	}
	var r rune
	for _, c := range d[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// LineCol returns the 1-based line and column (in bytes) of byte offset off
// in data. It is linear in off and meant for error reporting only.
func LineCol(data []byte, off int) (line, col int) {
	if off > len(data) {
		off = len(data)
	}
	line, lineStart := 1, 0
	for i := 0; i < off; i++ {
		if data[i] == '\n' {
			line++
			lineStart = i + 1
		}
	}
	return line, off - lineStart + 1
}
