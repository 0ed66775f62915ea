package detect

import (
	"errors"
	"sort"
	"unicode/utf8"
)

// Match is one finding of a detector in one string. Start and End are
// code-point offsets into that string (End exclusive), the unit of the
// policy language's marks (policy-language §11.3). Type is what the
// detector reports for it: a secret type (GITHUB_TOKEN), a PII entity
// (EMAIL_ADDRESS), a Unicode category (Cf), a moderation category.
type Match struct {
	Type  string // what was found
	Start int    // first code point
	End   int    // code point after the last
	// Score is the detector's confidence in [0, 1]; 1 for rule-based
	// findings that passed validation.
	Score float64
}

// Sentinel errors callers branch on. (A capability without provider is
// the engine's builtin.ErrNoProvider at load time and the runtime error
// detector_unavailable.)
var (
	// ErrProvider wraps a failure or timeout of a model provider
	// (the policy language's detector_error).
	ErrProvider = errors.New("detector provider error")
	// ErrBadArgument marks an argument out of its domain (the policy
	// language's value_error), e.g. a fuzzy_contains threshold outside [0, 1].
	ErrBadArgument = errors.New("bad detector argument")
)

// runeOffsets converts sorted-or-not byte offsets of s to code-point
// offsets in place. Offsets that are not on a rune boundary count the
// partial rune as not yet started. It walks s once per call after sorting
// a copy of the offsets, so converting many offsets stays linear.
func runeOffsets(s string, offs []int) {
	if len(offs) == 0 {
		return
	}
	idx := make([]int, len(offs))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return offs[idx[a]] < offs[idx[b]] })
	bytePos, runePos := 0, 0
	res := make([]int, len(offs))
	for _, i := range idx {
		target := offs[i]
		if target > len(s) {
			target = len(s)
		}
		for bytePos < target {
			c := s[bytePos]
			if c < utf8.RuneSelf {
				bytePos++
			} else {
				_, n := utf8.DecodeRuneInString(s[bytePos:])
				if bytePos+n > target {
					break
				}
				bytePos += n
			}
			runePos++
		}
		res[i] = runePos
	}
	copy(offs, res)
}

// isASCII reports whether s has only ASCII bytes (byte offsets are then
// code-point offsets).
func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// byteMatchesToRunes converts matches carrying byte offsets into
// code-point offsets of s.
func byteMatchesToRunes(s string, ms []Match) {
	if len(ms) == 0 || isASCII(s) {
		return
	}
	offs := make([]int, 0, 2*len(ms))
	for _, m := range ms {
		offs = append(offs, m.Start, m.End)
	}
	runeOffsets(s, offs)
	for i := range ms {
		ms[i].Start, ms[i].End = offs[2*i], offs[2*i+1]
	}
}

// Types returns the Type of each match, in order, with repeats: the list
// value most detectors return to a policy.
func Types(ms []Match) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Type
	}
	return out
}

// uniqueTypes returns the distinct types of ms in first-occurrence order.
func uniqueTypes(ms []Match) []string {
	var out []string
	seen := map[string]bool{}
	for _, m := range ms {
		if !seen[m.Type] {
			seen[m.Type] = true
			out = append(out, m.Type)
		}
	}
	return out
}
