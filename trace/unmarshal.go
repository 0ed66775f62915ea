package trace

import (
	"encoding/json"
	"strconv"
	"unsafe"
)

// unmarshal.go decodes JSON into the Go values encoding/json gives an
// `any` (map[string]any, []any, float64, string, bool, nil), with the
// single-pass scanner of parse.go instead of reflection. It exists for
// callers whose values must stay what encoding/json decodes (the
// gateway's provider requests and responses) but that decode on a hot
// path.

// maxAnyDepth is the nesting UnmarshalAnyOwned decodes itself; deeper
// documents (never a real request) take encoding/json, so that its own
// depth limit applies.
const maxAnyDepth = 512

// UnmarshalAnyOwned returns what json.Unmarshal(data, &v) stores in a v
// of type any, and the same error: objects are map[string]any (the last
// of duplicate keys wins), arrays []any (never nil), numbers float64,
// invalid UTF-8 and lone surrogate escapes become U+FFFD. A document the
// fast scanner does not take exactly as encoding/json would (malformed
// JSON, invalid UTF-8, lone surrogates, a number out of range, a leading
// byte-order mark, very deep nesting) is decoded by encoding/json, so
// results and errors never differ. As with ParseValueOwned, the strings
// of the result may point into data: the caller must never modify data
// afterwards.
func UnmarshalAnyOwned(data []byte) (any, error) {
	if len(data) > 0 {
		s := anyScanner{scanner: scanner{data: data, src: unsafe.String(&data[0], len(data))}}
		s.skipSpace()
		v := s.value()
		if s.err == nil && !s.bail {
			s.skipSpace()
			if s.pos == len(data) {
				return v, nil
			}
		}
	}
	var v any
	err := json.Unmarshal(data, &v)
	return v, err
}

// anyScanner is the scanner building encoding/json's values; bail is set
// where its result could differ from encoding/json's.
type anyScanner struct {
	scanner
	bail bool
}

func (s *anyScanner) value() any {
	if s.pos >= len(s.data) {
		s.bail = true
		return nil
	}
	switch c := s.data[s.pos]; c {
	case '{':
		return s.object()
	case '[':
		return s.array()
	case '"':
		str, ok := s.string()
		if !ok {
			return nil
		}
		return box(str, false)
	case 't':
		return s.literal("true", true)
	case 'f':
		return s.literal("false", false)
	case 'n':
		return s.literal("null", nil)
	default:
		if c == '-' || (c >= '0' && c <= '9') {
			n, ok := s.number().(Number)
			if !ok {
				s.bail = true
				return nil
			}
			f, err := strconv.ParseFloat(string(n), 64)
			if err != nil {
				s.bail = true // out of range: encoding/json's error
				return nil
			}
			return f
		}
		s.bail = true
		return nil
	}
}

// string scans a string; false (and bail) after a syntax error or for a
// string encoding/json would decode differently (a lone surrogate).
func (s *anyScanner) string() (string, bool) {
	s.lone = false
	str, ok := s.str()
	if !ok || s.lone {
		s.bail = true
		return "", false
	}
	return str, true
}

func (s *anyScanner) enter() bool {
	s.depth++
	if s.depth > maxAnyDepth {
		s.bail = true
		return false
	}
	return true
}

func (s *anyScanner) array() any {
	if !s.enter() {
		return nil
	}
	s.pos++ // [
	s.skipSpace()
	if s.pos < len(s.data) && s.data[s.pos] == ']' {
		s.pos++
		s.depth--
		return []any{}
	}
	out := s.newArray()
	for {
		s.skipSpace()
		v := s.value()
		if s.err != nil || s.bail {
			s.bail = true
			return nil
		}
		out = append(out, v)
		s.skipSpace()
		if s.pos >= len(s.data) {
			s.bail = true
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
			s.bail = true
			return nil
		}
	}
}

func (s *anyScanner) object() any {
	if !s.enter() {
		return nil
	}
	s.pos++ // {
	s.skipSpace()
	m := make(map[string]any)
	if s.pos < len(s.data) && s.data[s.pos] == '}' {
		s.pos++
		s.depth--
		return m
	}
	for {
		s.skipSpace()
		if s.pos >= len(s.data) || s.data[s.pos] != '"' {
			s.bail = true
			return nil
		}
		k, ok := s.string()
		if !ok {
			return nil
		}
		s.skipSpace()
		if s.pos >= len(s.data) || s.data[s.pos] != ':' {
			s.bail = true
			return nil
		}
		s.pos++
		s.skipSpace()
		v := s.value()
		if s.err != nil || s.bail {
			s.bail = true
			return nil
		}
		m[k] = v
		s.skipSpace()
		if s.pos >= len(s.data) {
			s.bail = true
			return nil
		}
		switch s.data[s.pos] {
		case ',':
			s.pos++
		case '}':
			s.pos++
			s.depth--
			return m
		default:
			s.bail = true
			return nil
		}
	}
}
