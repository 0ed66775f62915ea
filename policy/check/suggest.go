package check

import (
	"strings"

	"github.com/vigilhq/vigil/policy/syntax"
)

// suggest returns the candidate closest to name by edit distance (ignoring
// ASCII case), or "" when none is close enough to be a plausible
// misspelling.
func suggest(name string, candidates []string) string {
	best, bestD := "", -1
	limit := len(name)/3 + 1
	if limit > 3 {
		limit = 3
	}
	for _, c := range candidates {
		if c == name || c == "" || len(c) > len(name)+limit || len(name) > len(c)+limit {
			continue
		}
		d := editDistance(name, c)
		if d > limit {
			continue
		}
		if bestD < 0 || d < bestD || d == bestD && c < best {
			best, bestD = c, d
		}
	}
	return best
}

// didYouMean renders a suggestion suffix, or "". Once the error list is
// full no suggestion is computed, so that a policy with many misspellings
// cannot make the loader spend quadratic time.
func (c *checker) didYouMean(name string, candidates func() []string) string {
	if len(c.errs) >= syntax.MaxErrors {
		return ""
	}
	if s := suggest(name, candidates()); s != "" {
		return "; did you mean " + s + "?"
	}
	return ""
}

// editDistance is the Levenshtein distance between a and b, ignoring ASCII
// case (names are ASCII). Names longer than 64 bytes are only compared for
// equality.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		if strings.EqualFold(a, b) {
			return 0
		}
		return 64
	}
	var rows [2][65]int
	prev, cur := rows[0][:len(b)+1], rows[1][:len(b)+1]
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if lower(a[i-1]) == lower(b[j-1]) {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}
