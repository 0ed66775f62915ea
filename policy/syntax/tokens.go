package syntax

// Span is one token of a source with its code-point extent [Pos, End),
// as Tokens returns it for syntax colouring (the web UI's rule editor).
type Span struct {
	Tok Token
	Pos Pos
	End Pos
}

// Tokens lexes src with the language's own lexer and returns its tokens in
// order, without the layout tokens (NEWLINE, INDENT, DEDENT, EOF). Text
// between tokens (white space, comments) is not covered by any span. Lexing
// never fails: an unlexable character is an ILLEGAL span.
func Tokens(src *Source) []Span {
	n := len(src.Runes())
	l := newLexer(src, 0, n, false, &errorSink{src: src})
	toks := l.run()
	out := make([]Span, 0, len(toks))
	for _, t := range toks {
		switch t.tok {
		case NEWLINE, INDENT, DEDENT, EOF:
			continue
		}
		if t.end <= t.pos {
			continue
		}
		out = append(out, Span{Tok: t.tok, Pos: t.pos, End: t.end})
	}
	return out
}
