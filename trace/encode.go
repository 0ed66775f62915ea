package trace

import (
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"
)

// AppendValue appends the compact JSON encoding of v to buf: members in
// order, numbers as their literal, no HTML escaping (the JSONL format of
// explorer-api §8.1). A lone surrogate held as WTF-8 (ParseValue) is
// written as its \uXXXX escape; other invalid UTF-8 in a string as U+FFFD.
// A Go value of any other type is written as its fmt %v text in a string.
func AppendValue(buf []byte, v Value) []byte {
	switch v := v.(type) {
	case nil:
		return append(buf, "null"...)
	case bool:
		if v {
			return append(buf, "true"...)
		}
		return append(buf, "false"...)
	case Number:
		if v == "" {
			return append(buf, '0')
		}
		return append(buf, v...)
	case string:
		return appendString(buf, v)
	case []Value:
		buf = append(buf, '[')
		for i, e := range v {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = AppendValue(buf, e)
		}
		return append(buf, ']')
	case *Object:
		if v == nil {
			return append(buf, "null"...)
		}
		buf = append(buf, '{')
		for i, m := range v.Members {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = appendString(buf, m.Key)
			buf = append(buf, ':')
			buf = AppendValue(buf, m.Value)
		}
		return append(buf, '}')
	case int:
		return fmt.Appendf(buf, "%d", v)
	case int64:
		return fmt.Appendf(buf, "%d", v)
	}
	return appendString(buf, fmt.Sprint(v))
}

// Marshal returns the compact JSON encoding of v (see AppendValue).
func Marshal(v Value) []byte { return AppendValue(nil, v) }

const hexDigits = "0123456789abcdef"

func appendString(buf []byte, s string) []byte {
	buf = append(buf, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			buf = append(buf, s[start:i]...)
			switch c {
			case '"', '\\':
				buf = append(buf, '\\', c)
			case '\n':
				buf = append(buf, '\\', 'n')
			case '\r':
				buf = append(buf, '\\', 'r')
			case '\t':
				buf = append(buf, '\\', 't')
			case '\b':
				buf = append(buf, '\\', 'b')
			case '\f':
				buf = append(buf, '\\', 'f')
			default:
				buf = append(buf, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			buf = append(buf, s[start:i]...)
			if u, ok := wtf8Surrogate(s[i:]); ok {
				// A lone surrogate the parser kept: its escape again.
				buf = append(buf, '\\', 'u', hexDigits[u>>12], hexDigits[u>>8&0xF], hexDigits[u>>4&0xF], hexDigits[u&0xF])
				i += 3
			} else {
				buf = append(buf, "\uFFFD"...)
				i++
			}
			start = i
			continue
		}
		i += size
	}
	buf = append(buf, s[start:]...)
	return append(buf, '"')
}

// AppendFloat appends finite f as encoding/json writes a float64: the
// shortest decimal, with an exponent below 1e-6 and from 1e21 on, written
// e-7 rather than e-07.
func AppendFloat(b []byte, f float64) []byte {
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}
