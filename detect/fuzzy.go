package detect

import (
	"fmt"
	"math"
	"strings"
	"unicode/utf8"
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
// which substring (see FuzzyResult). With Ukkonen's cut-off and a banded
// second pass it runs in O(len(text) × k) on typical text, and never more
// than O(len(text) × len(query)).
// The semantic fallback of the policy function is not part of it.
func FuzzyContains(text, query string, k int) FuzzyResult {
	k = max(k, 0)
	if query == "" || k == 0 && utf8.ValidString(text) && utf8.ValidString(query) {
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
	// Reverse Sellers DP with Ukkonen's cut-off: scanning the text right
	// to left, col[j] is the smallest distance between the last j code
	// points of the query and a substring starting at i. Rows above lact
	// exceed k and are not computed, so a pass costs O(len(text) × k)
	// on typical text instead of O(len(text) × len(query)).
	inf := k + 1
	prev := make([]int, m+1)
	cur := make([]int, m+1)
	for j := 0; j <= m; j++ {
		prev[j] = j
	}
	lact := min(k, m) // last row of prev with a value <= k
	start := -1
	for i := len(t) - 1; i >= 0; i-- {
		cur[0] = 0
		top := min(lact+1, m)
		for j := 1; j <= top; j++ {
			up := inf
			if j <= lact {
				up = prev[j]
			}
			cost := 1
			if t[i] == q[m-j] {
				cost = 0
			}
			cur[j] = min(prev[j-1]+cost, up+1, cur[j-1]+1)
		}
		lact = top
		for lact > 0 && cur[lact] > k {
			lact--
		}
		if lact == m {
			start = i
		}
		prev, cur = cur, prev
	}
	if start < 0 {
		if m > k {
			return FuzzyResult{}
		}
		start = len(t) // empty text: the empty substring is within k
	}
	// Forward DP anchored at start, restricted to the band |L - j| <= k
	// (cells outside it exceed k): distance of the query prefix q[:j] to
	// t[start:start+L].
	row := make([]int, m+1)
	next := make([]int, m+1)
	for j := 0; j <= m; j++ {
		row[j] = inf
		if j <= k {
			row[j] = j
		}
	}
	best, bestL := inf, 0
	if m <= k {
		best = m
	}
	for L := 1; L <= m+k && start+L <= len(t); L++ {
		lo, hi := max(0, L-k), min(m, L+k)
		prevLo, prevHi := max(0, L-1-k), min(m, L-1+k)
		get := func(j int) int {
			if j < prevLo || j > prevHi {
				return inf
			}
			return row[j]
		}
		for j := lo; j <= hi; j++ {
			if j == 0 {
				next[0] = L
				if L > k {
					next[0] = inf
				}
				continue
			}
			cost := 1
			if t[start+L-1] == q[j-1] {
				cost = 0
			}
			v := min(get(j-1)+cost, get(j)+1)
			if j-1 >= lo {
				v = min(v, next[j-1]+1)
			}
			next[j] = min(v, inf)
		}
		row, next = next, row
		if hi == m && row[m] < best {
			best, bestL = row[m], L
		}
	}
	return FuzzyResult{Found: true, Start: start, End: start + bestL, Distance: best}
}
