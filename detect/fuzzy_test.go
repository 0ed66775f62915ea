package detect

import (
	"errors"
	"strings"
	"testing"
)

func TestFuzzyContains(t *testing.T) {
	tests := []struct {
		name, text, query string
		threshold         float64
		found             bool
		start, end, dist  int
	}{
		{"exact", "the quick brown fox", "brown", 0.8, true, 10, 15, 0},
		{"one typo", "the quick brwn fox", "brown fox", 0.8, true, 10, 18, 1},
		{"too many typos", "the quick brxwx fox", "brown fox", 0.9, false, 0, 0, 0},
		{"leftmost start wins", "abcd xbcd", "abcd", 0.75, true, 0, 4, 0},
		{"regex chars literal, leftmost start", "cost (in $) is 5", "(in $)", 0.8, true, 4, 11, 1},
		{"code points", "ééé naïve", "naive", 0.6, true, 3, 9, 2},
		{"threshold 1 is exact", "hello world", "wrld", 1, false, 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, err := FuzzyDistance(tt.query, tt.threshold)
			if err != nil {
				t.Fatal(err)
			}
			r := FuzzyContains(tt.text, tt.query, k)
			if r.Found != tt.found || tt.found && (r.Start != tt.start || r.End != tt.end || r.Distance != tt.dist) {
				t.Errorf("FuzzyContains(%q, %q, %d) = %+v, want found=%v %d-%d dist %d", tt.text, tt.query, k, r, tt.found, tt.start, tt.end, tt.dist)
			}
		})
	}
}

func TestFuzzyDistance(t *testing.T) {
	if k, _ := FuzzyDistance(strings.Repeat("a", 100), 0.5); k != 10 {
		t.Errorf("k = %d, want the cap 10", k)
	}
	// As in Python, 5 * (1 - 0.8) is 0.9999999999999998, so k is 0.
	if k, _ := FuzzyDistance("abcde", 0.8); k != 0 {
		t.Errorf("k = %d, want 0", k)
	}
	if k, _ := FuzzyDistance("abcde", 0.6); k != 2 {
		t.Errorf("k = %d, want 2", k)
	}
	for _, th := range []float64{-0.1, 1.5} {
		if _, err := FuzzyDistance("x", th); !errors.Is(err, ErrBadArgument) {
			t.Errorf("threshold %v: err %v, want ErrBadArgument", th, err)
		}
	}
}

// The DP agrees with brute force on small inputs.
func FuzzFuzzyContains(f *testing.F) {
	f.Add("the quick brown fox", "brwn", 1)
	f.Add("aaaa", "ab", 1)
	f.Fuzz(func(t *testing.T, text, query string, k int) {
		if len(text) > 40 || len(query) > 8 || k < 0 || k > 3 {
			return
		}
		r := FuzzyContains(text, query, k)
		tr, qr := []rune(text), []rune(query)
		// Brute force: leftmost start, then smallest distance, then
		// shortest substring.
		want := FuzzyResult{}
		for i := 0; i <= len(tr) && !want.Found; i++ {
			best, bestEnd := -1, 0
			for j := i; j <= len(tr); j++ {
				if d := levenshtein(tr[i:j], qr); d <= k && (best < 0 || d < best) {
					best, bestEnd = d, j
				}
			}
			if best >= 0 {
				want = FuzzyResult{Found: true, Start: i, End: bestEnd, Distance: best}
			}
		}
		if r != want {
			t.Fatalf("FuzzyContains(%q, %q, %d) = %+v, brute force %+v", text, query, k, r, want)
		}
	})
}

func levenshtein(a, b []rune) int {
	row := make([]int, len(b)+1)
	for j := range row {
		row[j] = j
	}
	for i := 1; i <= len(a); i++ {
		diag := row[0]
		row[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			up := row[j]
			row[j] = min(diag+cost, row[j]+1, row[j-1]+1)
			diag = up
		}
	}
	return row[len(b)]
}
