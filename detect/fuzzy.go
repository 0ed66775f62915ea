package detect

import (
	"fmt"
	"math"
	"strings"
)

// FuzzyResult is the outcome of FuzzyContains.
type FuzzyResult struct {
	// Found is true when some substring is within the edit distance.
	Found bool
	// Start, End are the code-point range of the chosen substring: the
	// leftmost start, then the smallest distance, then the shortest.
	Start, End int
	// Distance is its Levenshtein distance to the query.
	Distance int
}

// FuzzyDistance returns the edit budget of fuzzy_contains:
// min(10, floor(len(query) * (1 - threshold))) in code points. A
// threshold outside [0, 1] is an ErrBadArgument.
func FuzzyDistance(query string, threshold float64) (int, error) {
	if math.IsNaN(threshold) || threshold < 0 || threshold > 1 {
		return 0, fmt.Errorf("%w: query_similarity_threshold %v is outside [0, 1]", ErrBadArgument, threshold)
	}
	k := int(math.Floor(float64(len([]rune(query))) * (1 - threshold)))
	return min(10, k), nil
}

// FuzzyContains reports whether some substring of text is within
// Levenshtein distance k of query (taken literally, code points), and
// which substring (see FuzzyResult). It runs in O(len(text) × len(query)).
// The semantic fallback of the policy function is not part of it.
func FuzzyContains(text, query string, k int) FuzzyResult {
	if k <= 0 || query == "" {
		i := strings.Index(text, query)
		if i < 0 {
			return FuzzyResult{}
		}
		offs := []int{i, i + len(query)}
		runeOffsets(text, offs)
		return FuzzyResult{Found: true, Start: offs[0], End: offs[1]}
	}
	t, q := []rune(text), []rune(query)
	m := len(q)
	if k >= m {
		// The empty substring at 0 is within distance m <= k.
		return FuzzyResult{Found: true, Start: 0, End: 0, Distance: m}
	}
	// Reverse Sellers DP: best[i] is the smallest distance of a substring
	// starting at i. Scan right to left over reversed strings.
	prev := make([]int, m+1)
	cur := make([]int, m+1)
	for j := 0; j <= m; j++ {
		prev[j] = j
	}
	start := -1
	for i := len(t) - 1; i >= 0; i-- {
		cur[0] = 0
		for j := 1; j <= m; j++ {
			cost := 1
			if t[i] == q[m-j] {
				cost = 0
			}
			cur[j] = min(prev[j-1]+cost, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
		if prev[m] <= k {
			start = i
		}
	}
	if start < 0 {
		if m <= k {
			return FuzzyResult{Found: true, Distance: m}
		}
		return FuzzyResult{}
	}
	// Forward DP anchored at start: distance of query to t[start:start+L].
	row := make([]int, m+1)
	for j := 0; j <= m; j++ {
		row[j] = j
	}
	best, bestL := row[m], 0
	for L := 1; L <= m+k && start+L <= len(t); L++ {
		diag := row[0]
		row[0] = L
		for j := 1; j <= m; j++ {
			cost := 1
			if t[start+L-1] == q[j-1] {
				cost = 0
			}
			up := row[j]
			row[j] = min(diag+cost, row[j]+1, row[j-1]+1)
			diag = up
		}
		if row[m] < best {
			best, bestL = row[m], L
		}
	}
	return FuzzyResult{Found: true, Start: start, End: start + bestL, Distance: best}
}
