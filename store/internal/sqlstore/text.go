package sqlstore

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Free text a user writes (annotation content) is kept exactly, even when
// it holds what a PostgreSQL text column refuses: a NUL character, or a lone
// surrogate the JSON decoder kept as WTF-8 (spec/ledger.md §2.1). Such a
// text is stored escaped, with its row's *_escaped flag set; every other
// text is stored as is, so search and SQL see it unchanged.
//
// The escape: '\' is "\\", NUL is "\u0000", a WTF-8 surrogate is its
// "\udxxx" escape and any other invalid byte "\xhh"; valid UTF-8 stays.

// storableText reports whether s can be stored as is on every backend.
func storableText(s string) bool {
	return strings.IndexByte(s, 0) < 0 && utf8.ValidString(s)
}

// escapeText returns s escaped (see above).
func escapeText(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\\':
			b.WriteString(`\\`)
			i++
			continue
		case c == 0:
			b.WriteString(`\u0000`)
			i++
			continue
		case c < utf8.RuneSelf:
			b.WriteByte(c)
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r != utf8.RuneError || size > 1 {
			b.WriteString(s[i : i+size])
			i += size
			continue
		}
		if i+2 < len(s) && c == 0xED && s[i+1] >= 0xA0 && s[i+1] <= 0xBF && s[i+2] >= 0x80 && s[i+2] <= 0xBF {
			u := 0xD000 | rune(s[i+1]&0x3F)<<6 | rune(s[i+2]&0x3F)
			fmt.Fprintf(&b, `\u%04x`, u)
			i += 3
			continue
		}
		fmt.Fprintf(&b, `\x%02x`, c)
		i++
	}
	return b.String()
}

// unescapeText reverses escapeText.
func unescapeText(s string) (string, error) {
	var b []byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			b = append(b, c)
			continue
		}
		if i+1 >= len(s) {
			return "", fmt.Errorf("escaped text ends with a lone '\\'")
		}
		switch s[i+1] {
		case '\\':
			b = append(b, '\\')
			i++
		case 'u':
			if i+6 > len(s) {
				return "", fmt.Errorf("escaped text: short \\u escape at byte %d", i)
			}
			u, err := strconv.ParseUint(s[i+2:i+6], 16, 16)
			if err != nil {
				return "", fmt.Errorf("escaped text: bad \\u escape at byte %d", i)
			}
			if u == 0 {
				b = append(b, 0)
			} else {
				b = append(b, 0xE0|byte(u>>12), 0x80|byte(u>>6)&0x3F, 0x80|byte(u)&0x3F)
			}
			i += 5
		case 'x':
			if i+4 > len(s) {
				return "", fmt.Errorf("escaped text: short \\x escape at byte %d", i)
			}
			v, err := strconv.ParseUint(s[i+2:i+4], 16, 8)
			if err != nil {
				return "", fmt.Errorf("escaped text: bad \\x escape at byte %d", i)
			}
			b = append(b, byte(v))
			i += 3
		default:
			return "", fmt.Errorf("escaped text: unknown escape \\%c at byte %d", s[i+1], i)
		}
	}
	return string(b), nil
}

// storeText returns the stored form of s and whether it is escaped.
func storeText(s string) (string, bool) {
	if storableText(s) {
		return s, false
	}
	return escapeText(s), true
}

// loadText returns the text of a stored form.
func loadText(stored string, escaped bool) (string, error) {
	if !escaped {
		return stored, nil
	}
	return unescapeText(stored)
}
