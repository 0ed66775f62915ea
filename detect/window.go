package detect

import (
	"regexp"
	"regexp/syntax"
	"sort"
	"strings"
	"unicode/utf8"
)

// The secrets scanner runs a rule's regex only in windows around the
// occurrences of its keywords, so dense keywords (a "key" on every other
// line of code) do not make slow regexes run over the whole text. When
// every match of a regex contains one of its keywords (mustContain; 6 of
// gitleaks' rules do not, and run on the whole text as in gitleaks), a
// match lies around some occurrence; how far around follows from the
// regex (spanOf):
//
//   - a regex whose matches are at most L bytes long: L bytes each side;
//   - else, if a match can contain at most N newlines: N lines each side;
//   - else the whole text.
//
// When a match found in a window touches a window edge that is not an
// edge of the text, the edge may have faked a `^`, `$` or `\b`, so that
// side is widened and the window searched again. The result is that of a
// whole-text search (TestSecretsWindowsMatchWholeText).

const windowReach = 256

// anchoredReach bounds the text the anchored test of an assignment rule
// reads: the keyword, up to 20+3 characters, the operator, 5 fillers and
// the first 12 characters of the secret fit many times over.
const anchoredReach = 1024

// regexSpan bounds a regex's matches: maxLen bytes (-1: unbounded) and
// maxNL newlines (-1: unbounded); pre bounds the bytes a match can have
// before the keyword occurrence it contains (-1: unknown).
type regexSpan struct {
	maxLen, maxNL, pre int
	// wordStart: the regex starts with \b, so (with pre == 0) a keyword
	// that starts with a word character must start a word.
	wordStart bool
	// anywhere: some match need not contain a keyword (gitleaks runs
	// such a rule on the whole text once a keyword occurs anywhere), so
	// windows do not apply.
	anywhere bool
}

// spanOf computes the span of pattern for a rule with keywords; on a
// parse error it reports unbounded (the whole text is searched).
func spanOf(pattern string, keywords []string) regexSpan {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return regexSpan{maxLen: -1, maxNL: -1, pre: -1}
	}
	sp := spanNode(re)
	sp.pre = preKeyword(re, keywords)
	first := re
	for first.Op == syntax.OpCapture || first.Op == syntax.OpConcat && len(first.Sub) > 0 {
		first = first.Sub[0]
	}
	sp.wordStart = first.Op == syntax.OpWordBoundary && sp.pre == 0
	sp.anywhere = !mustContain(re, keywords)
	return sp
}

// mustContain reports whether every match of re contains one of the
// keywords. Parts of the regex that match a small finite set of strings
// are expanded (the parser factors `ghp|gho` into `gh[op]`), so a keyword
// spread over several nodes is still seen.
func mustContain(re *syntax.Regexp, keywords []string) bool {
	allHave := func(set []string) bool {
		for _, x := range set {
			found := false
			for _, k := range keywords {
				if strings.Contains(x, k) {
					found = true
					break
				}
			}
			if !found {
				return false
			}
		}
		return len(set) > 0
	}
	if set, ok := finiteStrings(re); ok && allHave(set) {
		return true
	}
	switch re.Op {
	case syntax.OpCapture, syntax.OpPlus:
		return mustContain(re.Sub[0], keywords)
	case syntax.OpRepeat:
		return re.Min >= 1 && mustContain(re.Sub[0], keywords)
	case syntax.OpConcat:
		// Expand runs of consecutive finite parts.
		var acc []string
		for _, sub := range re.Sub {
			if mustContain(sub, keywords) {
				return true
			}
			set, ok := finiteStrings(sub)
			if !ok {
				// A match of sub starts with one of its first strings.
				if first, ok := firstStrings(sub); ok && acc != nil {
					if x, ok := crossStrings(acc, first); ok && allHave(x) {
						return true
					}
				}
				acc = nil
				continue
			}
			if acc == nil {
				acc = set
			} else if acc, ok = crossStrings(acc, set); !ok {
				acc = nil
				continue
			}
			if allHave(acc) {
				return true
			}
		}
		return false
	case syntax.OpAlternate:
		for _, sub := range re.Sub {
			if !mustContain(sub, keywords) {
				return false
			}
		}
		return len(re.Sub) > 0
	}
	return false
}

const maxFiniteStrings = 512

// finiteStrings returns the lower-cased strings re can match when they
// are few (at most maxFiniteStrings), zero-width assertions ignored.
func finiteStrings(re *syntax.Regexp) ([]string, bool) {
	switch re.Op {
	case syntax.OpEmptyMatch, syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText, syntax.OpEndText,
		syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return []string{""}, true
	case syntax.OpLiteral:
		return []string{strings.ToLower(string(re.Rune))}, true
	case syntax.OpCharClass:
		seen := map[string]bool{}
		var out []string
		for i := 0; i+1 < len(re.Rune); i += 2 {
			if re.Rune[i+1]-re.Rune[i] > 64 {
				return nil, false
			}
			for r := re.Rune[i]; r <= re.Rune[i+1]; r++ {
				x := strings.ToLower(string(r))
				if !seen[x] {
					seen[x] = true
					out = append(out, x)
				}
			}
			if len(out) > 64 {
				return nil, false
			}
		}
		return out, true
	case syntax.OpCapture:
		return finiteStrings(re.Sub[0])
	case syntax.OpQuest:
		set, ok := finiteStrings(re.Sub[0])
		return append(set, ""), ok
	case syntax.OpConcat:
		acc := []string{""}
		for _, sub := range re.Sub {
			set, ok := finiteStrings(sub)
			if !ok {
				return nil, false
			}
			if acc, ok = crossStrings(acc, set); !ok {
				return nil, false
			}
		}
		return acc, true
	case syntax.OpAlternate:
		var out []string
		for _, sub := range re.Sub {
			set, ok := finiteStrings(sub)
			if !ok || len(out)+len(set) > maxFiniteStrings {
				return nil, false
			}
			out = append(out, set...)
		}
		return out, true
	}
	return nil, false
}

// firstStrings returns a small set of strings one of which starts every
// match of re (lower-cased).
func firstStrings(re *syntax.Regexp) ([]string, bool) {
	if set, ok := finiteStrings(re); ok {
		return set, true
	}
	switch re.Op {
	case syntax.OpCapture, syntax.OpPlus:
		return firstStrings(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return firstStrings(re.Sub[0])
		}
	case syntax.OpConcat:
		acc := []string{""}
		for _, sub := range re.Sub {
			if set, ok := finiteStrings(sub); ok {
				if acc, ok = crossStrings(acc, set); !ok {
					return nil, false
				}
				continue
			}
			first, ok := firstStrings(sub)
			if !ok {
				return acc, true
			}
			if x, ok := crossStrings(acc, first); ok {
				return x, true
			}
			return acc, true
		}
		return acc, true
	case syntax.OpAlternate:
		var out []string
		for _, sub := range re.Sub {
			set, ok := firstStrings(sub)
			if !ok || len(out)+len(set) > maxFiniteStrings {
				return nil, false
			}
			out = append(out, set...)
		}
		return out, true
	}
	return nil, false
}

func crossStrings(a, b []string) ([]string, bool) {
	if len(a)*len(b) > maxFiniteStrings {
		return nil, false
	}
	out := make([]string, 0, len(a)*len(b))
	for _, x := range a {
		for _, y := range b {
			out = append(out, x+y)
		}
	}
	return out, true
}

// preKeyword bounds the bytes a match of re can have before the start of
// the first keyword it contains, or -1 when that cannot be told. Windows
// are opened at every keyword occurrence, so the earliest occurrence in
// a match is the one whose window must cover it.
func preKeyword(re *syntax.Regexp, keywords []string) int {
	switch re.Op {
	case syntax.OpLiteral:
		lit := strings.ToLower(string(re.Rune))
		best := -1
		for _, k := range keywords {
			i := strings.Index(lit, k)
			if i < 0 && strings.HasPrefix(k, lit) {
				i = 0 // the keyword starts here and continues after
			}
			if i >= 0 && (best < 0 || i < best) {
				best = i // the earliest keyword of the literal
			}
		}
		if best >= 0 && re.Flags&syntax.FoldCase != 0 {
			best *= 4
		}
		return best
	case syntax.OpCapture:
		return preKeyword(re.Sub[0], keywords)
	case syntax.OpConcat:
		pre := 0
		for _, sub := range re.Sub {
			if p := preKeyword(sub, keywords); p >= 0 {
				return pre + p
			}
			n := spanNode(sub).maxLen
			if n < 0 {
				return -1
			}
			pre += n
		}
		return -1
	case syntax.OpAlternate:
		best := -1
		for _, sub := range re.Sub {
			p := preKeyword(sub, keywords)
			if p < 0 {
				return -1
			}
			best = max(best, p)
		}
		return best
	}
	return -1
}

func addSpan(a, b int) int {
	if a < 0 || b < 0 {
		return -1
	}
	return a + b
}

func maxSpan(a, b int) int {
	if a < 0 || b < 0 {
		return -1
	}
	return max(a, b)
}

func spanNode(re *syntax.Regexp) regexSpan {
	switch re.Op {
	case syntax.OpLiteral:
		n := 0
		nl := 0
		for _, r := range re.Rune {
			n += utf8.RuneLen(r)
			if r == '\n' {
				nl++
			}
		}
		if re.Flags&syntax.FoldCase != 0 {
			n = 4 * len(re.Rune) // folded forms may be longer
		}
		return regexSpan{maxLen: n, maxNL: nl}
	case syntax.OpCharClass:
		nl := 0
		for i := 0; i+1 < len(re.Rune); i += 2 {
			if re.Rune[i] <= '\n' && '\n' <= re.Rune[i+1] {
				nl = 1
			}
		}
		maxr := rune(0)
		if len(re.Rune) > 0 {
			maxr = re.Rune[len(re.Rune)-1]
		}
		return regexSpan{maxLen: max(1, utf8.RuneLen(min(maxr, utf8.MaxRune))), maxNL: nl}
	case syntax.OpAnyCharNotNL:
		return regexSpan{maxLen: 4}
	case syntax.OpAnyChar:
		return regexSpan{maxLen: 4, maxNL: 1}
	case syntax.OpCapture:
		return spanNode(re.Sub[0])
	case syntax.OpStar, syntax.OpPlus, syntax.OpRepeat:
		sub := spanNode(re.Sub[0])
		hi := -1
		if re.Op == syntax.OpRepeat {
			hi = re.Max
		}
		if hi < 0 {
			out := regexSpan{maxLen: -1, maxNL: -1}
			if sub.maxNL == 0 {
				out.maxNL = 0
			}
			if sub.maxLen == 0 {
				out.maxLen = 0
			}
			return out
		}
		mul := func(a int) int {
			if a < 0 {
				return -1
			}
			return a * hi
		}
		return regexSpan{maxLen: mul(sub.maxLen), maxNL: mul(sub.maxNL)}
	case syntax.OpQuest:
		return spanNode(re.Sub[0])
	case syntax.OpConcat:
		out := regexSpan{}
		for _, s := range re.Sub {
			x := spanNode(s)
			out.maxLen = addSpan(out.maxLen, x.maxLen)
			out.maxNL = addSpan(out.maxNL, x.maxNL)
		}
		return out
	case syntax.OpAlternate:
		out := regexSpan{}
		for _, s := range re.Sub {
			x := spanNode(s)
			out.maxLen = maxSpan(out.maxLen, x.maxLen)
			out.maxNL = maxSpan(out.maxNL, x.maxNL)
		}
		return out
	default: // empty, anchors, word boundaries
		return regexSpan{}
	}
}

// windowAround returns the window of a keyword occupying [ks, ke).
func windowAround(text string, ks, ke int, sp regexSpan) window {
	switch {
	case sp.maxLen >= 0 && sp.pre >= 0:
		// The match starts within pre bytes before the keyword.
		return window{runeStart(text, max(0, ks-sp.pre)), runeEnd(text, min(len(text), ks+sp.maxLen))}
	case sp.maxLen >= 0:
		return window{runeStart(text, max(0, ks-sp.maxLen)), runeEnd(text, min(len(text), ke+sp.maxLen))}
	case sp.maxNL >= 0:
		ws := ks
		for n := 0; n <= sp.maxNL && ws > 0; n++ {
			ws = strings.LastIndexByte(text[:ws], '\n')
			if ws < 0 {
				ws = 0
				break
			}
			if n < sp.maxNL {
				continue
			}
			ws++
		}
		we := ke
		for n := 0; n <= sp.maxNL && we < len(text); n++ {
			i := strings.IndexByte(text[we:], '\n')
			if i < 0 {
				we = len(text)
				break
			}
			we += i
			if n < sp.maxNL {
				we++
			}
		}
		if sp.pre >= 0 {
			ws = max(ws, runeStart(text, max(0, ks-sp.pre)))
		}
		return window{ws, we}
	default:
		return window{0, len(text)}
	}
}

type window struct{ start, end int }

// findNear returns the match indexes of r in text near hits, in text
// order, without overlaps.
func (s *SecretScanner) findNear(r *secretRule, text string, hits []keywordHit) [][]int {
	if r.span.anywhere {
		return r.re.FindAllStringIndex(text, -1)
	}
	var anchored *regexp.Regexp
	if len(hits) >= anchoredMinHits {
		anchored = r.anchoredRegexp()
	}
	var wins []window
	for _, h := range hits {
		kwStart := h.End - len(s.kw.words[h.Word])
		if r.assign && !assignmentFollows(text, h.End) {
			continue
		}
		// The keyword must start what follows the rule's lazy prefix. The
		// text is cut at anchoredReach bytes: a cut inside the secret can
		// only make the test pass (the regex ends in `|$`), never fail.
		if anchored != nil && !anchored.MatchString(text[kwStart:min(len(text), kwStart+anchoredReach)]) {
			continue
		}
		// A rule starting with \b cannot match at a keyword inside a word
		// ("s." in "towns.", "ey" in "they").
		if r.span.wordStart && kwStart > 0 && isWordByte(text[kwStart]) && isWordByte(text[kwStart-1]) {
			continue
		}
		wins = append(wins, windowAround(text, kwStart, h.End, r.span))
	}
	if len(wins) == 0 {
		return nil
	}
	sort.Slice(wins, func(i, j int) bool { return wins[i].start < wins[j].start })
	merged := wins[:1]
	for _, w := range wins[1:] {
		last := &merged[len(merged)-1]
		if w.start < last.end {
			last.end = max(last.end, w.end)
		} else {
			merged = append(merged, w)
		}
	}
	var out [][]int
	lastEnd := 0
	for _, w := range merged {
		if w.end <= lastEnd {
			continue
		}
		w.start = max(w.start, lastEnd)
		for grow := windowReach; ; grow *= 2 {
			locs := r.re.FindAllStringIndex(text[w.start:w.end], -1)
			left, right := false, false
			for _, loc := range locs {
				if loc[0] == 0 && w.start > lastEnd && w.start > 0 {
					left = true
				}
				if loc[1] == w.end-w.start && w.end < len(text) {
					right = true
				}
			}
			if left {
				w.start = runeStart(text, max(lastEnd, w.start-grow))
			}
			if right {
				w.end = runeEnd(text, min(len(text), w.end+grow))
			}
			if left || right {
				continue
			}
			for _, loc := range locs {
				if loc[1] == loc[0] {
					continue
				}
				loc[0] += w.start
				loc[1] += w.start
				out = append(out, loc)
				lastEnd = loc[1]
			}
			break
		}
	}
	return out
}

// assignmentFollows reports whether, after a keyword ending at i, the text
// continues as gitleaks' template requires: up to 20 of [ \t\w.-], up to 3
// of [\s'"], an operator, up to 5 quotes or spaces, then a run of at least
// 10 secret characters. It is a necessary condition only; the regex
// decides.
func assignmentFollows(text string, i int) bool {
	n := 0
	for ; i < len(text) && n < 20; i++ {
		c := text[i]
		if !(c == ' ' || c == '\t' || c == '.' || c == '-' || isWordByte(c)) {
			break
		}
		n++
	}
	for n = 0; i < len(text) && n < 3; i++ {
		c := text[i]
		if !(c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\'' || c == '"') {
			break
		}
		n++
	}
	if i >= len(text) || strings.IndexByte("=>:|?,", text[i]) < 0 {
		return false
	}
	for n = 0; i < len(text) && n < 4 && strings.IndexByte("=>:|?,", text[i]) >= 0; i++ {
		n++
	}
	for n = 0; i < len(text) && n < 5; i++ {
		c := text[i]
		if !(c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\'' || c == '"' || c == '`') {
			break
		}
		n++
	}
	// The secret: 10 of [\w.=-], or an alphanumeric then 11 of
	// [a-z0-9+/] (after '=' fillers).
	n1 := 0
	for j := i; j < len(text) && n1 < 10 && (isWordByte(text[j]) || text[j] == '.' || text[j] == '=' || text[j] == '-'); j++ {
		n1++
	}
	if n1 >= 10 {
		return true
	}
	for i < len(text) && text[i] == '=' {
		i++
	}
	if i >= len(text) || !(isDigit(text[i]) || isASCIILetter(text[i])) {
		return false
	}
	n2 := 0
	for j := i + 1; j < len(text) && n2 < 11 && (isDigit(text[j]) || isASCIILetter(text[j]) || text[j] == '+' || text[j] == '/'); j++ {
		n2++
	}
	return n2 >= 11
}

func isWordByte(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// runeStart moves a byte offset back to the start of its rune.
func runeStart(s string, i int) int {
	for i > 0 && i < len(s) && !utf8.RuneStart(s[i]) {
		i--
	}
	return i
}

// runeEnd moves a byte offset forward to the start of the next rune.
func runeEnd(s string, i int) int {
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return i
}
