package sqlstore

import (
	"testing"
	"unicode/utf8"
)

func TestStoredText(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		escaped  bool
	}{
		{"plain", "héllo 😀", false},
		{"backslash_plain", `a\u0000b`, false},
		{"nul", "a\x00b", true},
		{"lone_high", "\xed\xa0\x80x", true},
		{"lone_low_and_backslash", `\` + "\xed\xbf\xbf" + `\u0000`, true},
		{"invalid_byte", "a\xffb\x00", true},
		{"truncated_wtf8", "\xed\xa0", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stored, esc := storeText(tc.in)
			if esc != tc.escaped {
				t.Fatalf("escaped = %v, want %v", esc, tc.escaped)
			}
			if !storableText(stored) {
				t.Fatalf("stored form %q is not storable", stored)
			}
			back, err := loadText(stored, esc)
			if err != nil || back != tc.in {
				t.Fatalf("round trip: %q, %v; want %q", back, err, tc.in)
			}
		})
	}
}

func FuzzStoredText(f *testing.F) {
	for _, s := range []string{"", "a\x00", "\xed\xa0\x80", `\\u0000`, "\xff\xfe"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		stored, esc := storeText(s)
		if !utf8.ValidString(stored) || !storableText(stored) {
			t.Fatalf("stored form %q of %q is not storable", stored, s)
		}
		back, err := loadText(stored, esc)
		if err != nil || back != s {
			t.Fatalf("round trip of %q: %q, %v", s, back, err)
		}
	})
}
