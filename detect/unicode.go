package detect

import (
	"unicode"
)

// unicodeCategoryNames are the two-letter general categories that Go's
// unicode tables define; a code point in none of them is unassigned (Cn).
// Cs cannot occur: Go strings decode invalid UTF-8 to U+FFFD (So), and
// the policy language has no lone surrogates (§6.1).
var unicodeCategoryNames = []string{
	"Ll", "Lu", "Lo", "Lm", "Lt",
	"Mn", "Mc", "Me",
	"Nd", "Nl", "No",
	"Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po",
	"Sm", "Sc", "Sk", "So",
	"Zs", "Zl", "Zp",
	"Cc", "Cf", "Co",
}

// asciiCategory is the category of each ASCII code point, as a constant
// table (static data: nothing to compute when the process starts);
// TestASCIICategories checks it against the unicode tables.
var asciiCategory = [128]string{
	"Cc", "Cc", "Cc", "Cc", "Cc", "Cc", "Cc", "Cc", "Cc", "Cc", "Cc", "Cc", "Cc", "Cc", "Cc", "Cc",
	"Cc", "Cc", "Cc", "Cc", "Cc", "Cc", "Cc", "Cc", "Cc", "Cc", "Cc", "Cc", "Cc", "Cc", "Cc", "Cc",
	"Zs", "Po", "Po", "Po", "Sc", "Po", "Po", "Po", "Ps", "Pe", "Po", "Sm", "Po", "Pd", "Po", "Po",
	"Nd", "Nd", "Nd", "Nd", "Nd", "Nd", "Nd", "Nd", "Nd", "Nd", "Po", "Po", "Sm", "Sm", "Sm", "Po",
	"Po", "Lu", "Lu", "Lu", "Lu", "Lu", "Lu", "Lu", "Lu", "Lu", "Lu", "Lu", "Lu", "Lu", "Lu", "Lu",
	"Lu", "Lu", "Lu", "Lu", "Lu", "Lu", "Lu", "Lu", "Lu", "Lu", "Lu", "Ps", "Po", "Pe", "Sk", "Pc",
	"Sk", "Ll", "Ll", "Ll", "Ll", "Ll", "Ll", "Ll", "Ll", "Ll", "Ll", "Ll", "Ll", "Ll", "Ll", "Ll",
	"Ll", "Ll", "Ll", "Ll", "Ll", "Ll", "Ll", "Ll", "Ll", "Ll", "Ll", "Ps", "Sm", "Pe", "Sm", "Cc",
}

func categoryOf(r rune) string {
	if r < 128 && asciiCategory[r] != "" {
		return asciiCategory[r]
	}
	for _, name := range unicodeCategoryNames {
		if unicode.Is(unicode.Categories[name], r) {
			return name
		}
	}
	return "Cn"
}

// Category returns the two-letter Unicode general category of r, "Cn" for
// unassigned code points (Go's tables, Unicode 15).
func Category(r rune) string { return categoryOf(r) }

// Unicode returns one match per code point of text whose general category
// is in categories (every category when categories is nil), typed with
// the category, in text order. The policy function unicode(data,
// categories) is Distinct of these matches, and marks each of them.
func Unicode(text string, categories []string) []Match {
	var keep map[string]bool
	if categories != nil {
		keep = make(map[string]bool, len(categories))
		for _, c := range categories {
			keep[c] = true
		}
	}
	var keepASCII [128]bool
	for c := range keepASCII {
		keepASCII[c] = keep == nil || keep[asciiCategory[c]]
	}
	var out []Match
	i := 0
	for _, r := range text {
		if r < 128 {
			if keepASCII[r] {
				out = append(out, Match{Type: asciiCategory[r], Start: i, End: i + 1, Score: 1})
			}
			i++
			continue
		}
		c := categoryOf(r)
		if keep == nil || keep[c] {
			out = append(out, Match{Type: c, Start: i, End: i + 1, Score: 1})
		}
		i++
	}
	return out
}

// Distinct returns the distinct types of ms in order of first occurrence.
func Distinct(ms []Match) []string { return uniqueTypes(ms) }
