package trace

import (
	"math"
	"strconv"
	"strings"
)

// Display returns the display string of a JSON value as the policy
// language prints it (Python str(), policy-language §6.4): a string as
// itself, null as None, booleans as True and False, integers as written,
// other numbers as Python's float repr (1.50 → 1.5, 1e5 → 100000.0,
// 1e16 → 1e+16), lists and objects as Python reprs (['a', 1],
// {'k': None}). It is used for a Tool description that is not a string.
// Characters Python escapes as non-printable are written as they are.
func Display(v Value) string {
	if s, ok := v.(string); ok {
		return s
	}
	var b strings.Builder
	writeRepr(&b, v)
	return b.String()
}

func writeRepr(b *strings.Builder, v Value) {
	switch v := v.(type) {
	case nil:
		b.WriteString("None")
	case bool:
		if v {
			b.WriteString("True")
		} else {
			b.WriteString("False")
		}
	case Number:
		if v.IsInt() {
			if v == "-0" { // Python reads -0 as the integer 0
				v = "0"
			}
			b.WriteString(string(v))
			return
		}
		b.WriteString(pyFloat(v.Float64()))
	case string:
		writePyString(b, v)
	case []Value:
		b.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				b.WriteString(", ")
			}
			writeRepr(b, e)
		}
		b.WriteByte(']')
	case *Object:
		b.WriteByte('{')
		// Python dicts keep one entry per key: the last value, at the
		// position of the first occurrence.
		// One pass for the last positions (Get per member was quadratic).
		last := make(map[string]int, len(v.Members))
		for i, m := range v.Members {
			last[m.Key] = i
		}
		first := true
		for _, m := range v.Members {
			j, ok := last[m.Key]
			if !ok {
				continue // written at its first position
			}
			delete(last, m.Key)
			if !first {
				b.WriteString(", ")
			}
			first = false
			writePyString(b, m.Key)
			b.WriteString(": ")
			writeRepr(b, v.Members[j].Value)
		}
		b.WriteByte('}')
	default:
		b.Write(Marshal(v))
	}
}

// pyFloat formats f as Python's repr(float).
func pyFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	case math.IsNaN(f):
		return "nan"
	}
	s := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde±XX
	mant, expS, _ := strings.Cut(s, "e")
	exp, _ := strconv.Atoi(expS)
	if exp < -4 || exp >= 16 {
		sign := "+"
		if exp < 0 {
			sign, exp = "-", -exp
		}
		e := strconv.Itoa(exp)
		if len(e) < 2 {
			e = "0" + e
		}
		return mant + "e" + sign + e
	}
	out := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.ContainsAny(out, ".") {
		out += ".0"
	}
	return out
}

func writePyString(b *strings.Builder, s string) {
	q := byte('\'')
	if strings.IndexByte(s, '\'') >= 0 && strings.IndexByte(s, '"') < 0 {
		q = '"'
	}
	b.WriteByte(q)
	for _, r := range s {
		switch {
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == rune(q):
			b.WriteByte('\\')
			b.WriteByte(q)
		case r < 0x20 || r == 0x7f:
			b.WriteString(`\x`)
			b.WriteByte(hexDigits[r>>4])
			b.WriteByte(hexDigits[r&0xF])
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte(q)
}
