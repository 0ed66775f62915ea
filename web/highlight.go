package web

import (
	"sort"
	"strings"
)

// mark is one highlight: an annotation, finding, search hit or violation
// range on one string, in code points of that string.
type mark struct {
	Start, End int
	Address    string // as stored (the data-address)
	Source     string // the data-source
	Class      string // colour class: sev-critical, src-user, src-search, …
	Title      string // tooltip: the rule or the comment
}

// seg is a piece of rendered text: plain (Mark nil) or a highlight
// holding nested pieces.
type seg struct {
	Text string
	Mark *mark
	Kids []*seg
}

// segment cuts runes (the code points [base, base+len(runes)) of a
// string) into nested highlight pieces. Marks are clipped to the piece;
// ranges that overlap without nesting are split so that the elements nest
// correctly, each part carrying the same address.
func segment(runes []rune, base int, marks []*mark) []*seg {
	end := base + len(runes)
	var in []*mark
	cuts := []int{base, end}
	for _, m := range marks {
		s, e := max(m.Start, base), min(m.End, end)
		if s >= e {
			continue
		}
		in = append(in, m)
		cuts = append(cuts, s, e)
	}
	if len(in) == 0 {
		return []*seg{{Text: string(runes)}}
	}
	sort.SliceStable(in, func(i, j int) bool {
		if in[i].Start != in[j].Start {
			return in[i].Start < in[j].Start
		}
		return in[i].End > in[j].End
	})
	sort.Ints(cuts)
	root := &seg{}
	stack := []*seg{root}
	var open []*mark // marks of stack[1:]
	for i := 0; i+1 < len(cuts); i++ {
		a, b := cuts[i], cuts[i+1]
		if a == b {
			continue
		}
		var cover []*mark
		for _, m := range in {
			if m.Start <= a && m.End >= b {
				cover = append(cover, m)
			}
		}
		k := 0
		for k < len(open) && k < len(cover) && open[k] == cover[k] {
			k++
		}
		open, stack = open[:k], stack[:k+1]
		for _, m := range cover[k:] {
			n := &seg{Mark: m}
			top := stack[len(stack)-1]
			top.Kids = append(top.Kids, n)
			stack = append(stack, n)
			open = append(open, m)
		}
		top := stack[len(stack)-1]
		top.Kids = append(top.Kids, &seg{Text: string(runes[a-base : b-base])})
	}
	return root.Kids
}

// lineRange is the code-point range of line n (0-based, split on "\n")
// of runes, or ok false when there is no such line.
func lineRange(runes []rune, n int) (start, end int, ok bool) {
	line := 0
	start = 0
	for i, r := range runes {
		if r == '\n' {
			if line == n {
				return start, i, true
			}
			line++
			start = i + 1
		}
	}
	if line == n {
		return start, len(runes), true
	}
	return 0, 0, false
}

// markClass is the colour class of a highlight by its source and
// severity (web-ui.md §2).
func markClass(source, severity string) string {
	switch source {
	case "guardrails-error", "mcp-pin", "violation":
		if severity == "" {
			severity = "warn"
		}
		return "sev-" + severity
	case "", "user":
		return "src-user"
	case "search":
		return "src-search"
	case "otel-guardrail":
		return "src-otel"
	}
	if strings.HasPrefix(source, "test-") {
		return "src-test"
	}
	return "src-other"
}
