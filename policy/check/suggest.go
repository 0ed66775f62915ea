package check

import "strings"

// suggest returns the candidate closest to name by edit distance (ignoring
// case), or "" when none is close enough to be a plausible misspelling.
func suggest(name string, candidates []string) string {
	best, bestD := "", -1
	limit := len(name)/3 + 1
	if limit > 3 {
		limit = 3
	}
	lname := strings.ToLower(name)
	for _, c := range candidates {
		if c == name || c == "" {
			continue
		}
		d := editDistance(lname, strings.ToLower(c))
		if d > limit {
			continue
		}
		if bestD < 0 || d < bestD || d == bestD && c < best {
			best, bestD = c, d
		}
	}
	return best
}

// didYouMean renders a suggestion suffix, or "".
func didYouMean(name string, candidates []string) string {
	if s := suggest(name, candidates); s != "" {
		return "; did you mean " + s + "?"
	}
	return ""
}

// editDistance is the Levenshtein distance between a and b (bytes; names
// are ASCII).
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		if a == b {
			return 0
		}
		return 64
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
