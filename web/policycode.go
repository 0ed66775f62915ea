package web

import (
	"strings"

	"github.com/vigilhq/vigil/policy/syntax"
)

// codeLine is one line of a rule shown with colouring from the policy
// language's own lexer.
type codeLine struct {
	Spans []codeSpan
	Bad   bool
	Errs  []string // load errors on this line: "col N: message"
}

type codeSpan struct {
	Text  string
	Class string // kw, str, num, op, ident, cmt, bad-tok or ""
}

// colourRule splits src into lines of classed spans.
func colourRule(src string) []codeLine {
	s := syntax.NewSource("rule", src)
	runes := s.Runes()
	class := make([]string, len(runes))
	for _, t := range syntax.Tokens(s) {
		c := tokenClass(t.Tok)
		for i := int(t.Pos); i < int(t.End) && i < len(runes); i++ {
			class[i] = c
		}
	}
	// Comments are not tokens: a "#" outside any token starts one.
	for i := 0; i < len(runes); i++ {
		if runes[i] == '#' && class[i] == "" {
			for ; i < len(runes) && runes[i] != '\n'; i++ {
				class[i] = "cmt"
			}
		}
	}
	var lines []codeLine
	cur := codeLine{}
	start := 0
	flush := func(end int) {
		if end > start {
			cur.Spans = append(cur.Spans, codeSpan{Text: string(runes[start:end]), Class: class[start]})
		}
		start = end
	}
	for i, r := range runes {
		if r == '\n' {
			flush(i)
			lines = append(lines, cur)
			cur, start = codeLine{}, i+1
			continue
		}
		if i > start && class[i] != class[start] {
			flush(i)
		}
	}
	flush(len(runes))
	lines = append(lines, cur)
	return lines
}

func tokenClass(t syntax.Token) string {
	switch {
	case t == syntax.ILLEGAL:
		return "bad-tok"
	case t == syntax.IDENT:
		return "ident"
	case t == syntax.INT || t == syntax.FLOAT:
		return "num"
	case t == syntax.STRING || t == syntax.FSTRING || t == syntax.VALUEREF:
		return "str"
	case t >= syntax.AND && t <= syntax.TRUE:
		return "kw"
	case t >= syntax.PLUS && t <= syntax.DOT:
		return "op"
	}
	return ""
}

// diffLine is one line of a line diff.
type diffLine struct {
	Op   string // "add", "del" or ""
	Text string
}

// lineDiff is the longest-common-subsequence line diff of a and b.
func lineDiff(a, b string) []diffLine {
	x, y := strings.Split(a, "\n"), strings.Split(b, "\n")
	if len(x)*len(y) > 4_000_000 { // too big to align: show both whole
		var out []diffLine
		for _, l := range x {
			out = append(out, diffLine{"del", l})
		}
		for _, l := range y {
			out = append(out, diffLine{"add", l})
		}
		return out
	}
	n, m := len(x), len(y)
	lcs := make([][]int, n+1)
	for i := range lcs {
		lcs[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if x[i] == y[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out []diffLine
	i, j := 0, 0
	for i < n && j < m {
		switch {
		case x[i] == y[j]:
			out = append(out, diffLine{"", x[i]})
			i, j = i+1, j+1
		case lcs[i+1][j] >= lcs[i][j+1]:
			out = append(out, diffLine{"del", x[i]})
			i++
		default:
			out = append(out, diffLine{"add", y[j]})
			j++
		}
	}
	for ; i < n; i++ {
		out = append(out, diffLine{"del", x[i]})
	}
	for ; j < m; j++ {
		out = append(out, diffLine{"add", y[j]})
	}
	return out
}
