package syntax

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// token is one lexical token with its code-point extent.
// Its text is Source.Snippet(pos, end); strings are decoded by the parser.
type token struct {
	tok    Token
	raw    bool // string with an r prefix
	triple bool // triple-quoted string
	pos    Pos
	end    Pos
	body   Pos // STRING, FSTRING: start of the text between the quotes
	bodyE  Pos // STRING, FSTRING: end of that text
}

// lexer turns a Source (or a range of it) into a slice of tokens. It works
// line by line: at the start of each logical line outside brackets it
// measures the indentation and emits INDENT/DEDENT; a line break outside
// brackets ends the logical line with NEWLINE (spec §3).
type lexer struct {
	src      *Source
	r        []rune
	i, end   int
	exprMode bool // lexing an f-string expression: no lines, no indentation
	errs     *errorSink
	toks     []token
	brackets []token // open brackets
	indents  []int
	base     int // whole-file dedent (spec §2.1)
	sawTab   bool
	sawSpace bool
	warnedMx bool
}

// errorSink collects errors, keeping one per source line for syntax errors
// (later ones on the same line are usually consequences of the first).
type errorSink struct {
	src   *Source
	errs  ErrorList
	warns ErrorList
	lines map[int]bool // lines with an error
}

func (s *errorSink) add(pos Pos, msg string) {
	line := s.src.Position(pos).Line
	if s.lines[line] {
		return
	}
	if s.lines == nil {
		s.lines = map[int]bool{}
	}
	s.lines[line] = true
	s.errs.Add(s.src, pos, msg)
}

func (s *errorSink) warn(pos Pos, msg string) { s.warns.Add(s.src, pos, msg) }

func newLexer(src *Source, start, end int, exprMode bool, errs *errorSink) *lexer {
	l := &lexer{src: src, r: src.Runes(), i: start, end: end, exprMode: exprMode, errs: errs}
	l.indents = make([]int, 1, 8)
	l.toks = make([]token, 0, (end-start)/4+8)
	if !exprMode {
		l.base = commonIndent(l.r[start:end])
	}
	return l
}

// commonIndent returns the length of the whitespace prefix common to all
// lines that hold something other than spaces and tabs.
func commonIndent(r []rune) int {
	var prefix []rune
	first := true
	for i := 0; i < len(r); {
		j := i
		for j < len(r) && (r[j] == ' ' || r[j] == '\t') {
			j++
		}
		blank := j >= len(r) || r[j] == '\n' || r[j] == '\r'
		if !blank {
			ws := r[i:j]
			if first {
				prefix = ws
				first = false
			} else {
				n := 0
				for n < len(prefix) && n < len(ws) && prefix[n] == ws[n] {
					n++
				}
				prefix = prefix[:n]
			}
		}
		for j < len(r) && r[j] != '\n' && r[j] != '\r' {
			j++
		}
		if j < len(r) && r[j] == '\r' && j+1 < len(r) && r[j+1] == '\n' {
			j++
		}
		i = j + 1
	}
	return len(prefix)
}

func (l *lexer) emit(t Token, pos, end int) *token {
	l.toks = append(l.toks, token{tok: t, pos: Pos(pos), end: Pos(end)})
	return &l.toks[len(l.toks)-1]
}

func (l *lexer) lastTok() Token {
	if len(l.toks) == 0 {
		return NEWLINE
	}
	return l.toks[len(l.toks)-1].tok
}

func isLetter(c rune) bool { return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
func isDigit(c rune) bool  { return '0' <= c && c <= '9' }

func (l *lexer) run() []token {
	lineStart := !l.exprMode
	for {
		if lineStart && len(l.brackets) == 0 {
			lineStart = false
			if !l.lineIndent() {
				break
			}
		}
		for l.i < l.end && (l.r[l.i] == ' ' || l.r[l.i] == '\t' || l.r[l.i] == '\f') {
			l.i++
		}
		if l.i >= l.end {
			break
		}
		c := l.r[l.i]
		switch {
		case c == '#':
			for l.i < l.end && l.r[l.i] != '\n' && l.r[l.i] != '\r' {
				l.i++
			}
		case c == '\n' || c == '\r':
			pos := l.i
			l.i++
			if c == '\r' && l.i < l.end && l.r[l.i] == '\n' {
				l.i++
			}
			if len(l.brackets) == 0 && !l.exprMode {
				l.emit(NEWLINE, pos, pos+1)
				lineStart = true
			}
		case isLetter(c):
			l.lexIdent()
		case isDigit(c) || c == '.' && l.i+1 < l.end && isDigit(l.r[l.i+1]):
			l.lexNumber()
		case c == '"' || c == '\'':
			l.lexString(l.i, "")
		default:
			l.lexOperator()
		}
	}
	// End of input.
	if len(l.brackets) > 0 {
		b := l.brackets[0]
		l.errs.add(b.pos, fmt.Sprintf("'%s' was never closed", b.tok))
		// What the parser finds missing at the end is the same error.
		l.errs.lines[l.src.Position(Pos(l.end)).Line] = true
	}
	if !l.exprMode {
		if t := l.lastTok(); t != NEWLINE && t != DEDENT && t != INDENT {
			l.emit(NEWLINE, l.end, l.end)
		}
		for len(l.indents) > 1 {
			l.indents = l.indents[:len(l.indents)-1]
			l.emit(DEDENT, l.end, l.end)
		}
	}
	l.emit(EOF, l.end, l.end)
	return l.toks
}

// lineIndent handles the start of a logical line: it skips blank and
// comment-only lines and emits INDENT/DEDENT for the first non-blank one.
// It returns false at the end of input.
func (l *lexer) lineIndent() bool {
	for {
		start := l.i
		tabs, spaces := false, false
		for l.i < l.end && (l.r[l.i] == ' ' || l.r[l.i] == '\t' || l.r[l.i] == '\f') {
			if l.r[l.i] == '\t' {
				tabs = true
			} else if l.r[l.i] == ' ' {
				spaces = true
			}
			l.i++
		}
		if l.i >= l.end {
			return false
		}
		c := l.r[l.i]
		if c == '#' {
			for l.i < l.end && l.r[l.i] != '\n' && l.r[l.i] != '\r' {
				l.i++
			}
			if l.i >= l.end {
				return false
			}
			c = l.r[l.i]
		}
		if c == '\n' || c == '\r' {
			l.i++
			if c == '\r' && l.i < l.end && l.r[l.i] == '\n' {
				l.i++
			}
			continue
		}
		indent := l.i - start - l.base
		if indent < 0 {
			indent = 0
		}
		if indent > 0 {
			l.sawTab = l.sawTab || tabs
			l.sawSpace = l.sawSpace || spaces
			if l.sawTab && l.sawSpace && !l.warnedMx {
				l.warnedMx = true
				l.errs.warn(Pos(start), "indentation mixes tabs and spaces")
			}
		}
		top := l.indents[len(l.indents)-1]
		switch {
		case indent > top:
			l.indents = append(l.indents, indent)
			l.emit(INDENT, l.i, l.i)
		case indent < top:
			for len(l.indents) > 1 && indent < l.indents[len(l.indents)-1] {
				l.indents = l.indents[:len(l.indents)-1]
				l.emit(DEDENT, l.i, l.i)
			}
			if indent != l.indents[len(l.indents)-1] {
				l.errs.add(Pos(l.i), "unindent does not match any outer indentation level")
			}
		}
		return true
	}
}

func (l *lexer) lexIdent() {
	start := l.i
	for l.i < l.end && (isLetter(l.r[l.i]) || isDigit(l.r[l.i])) {
		l.i++
	}
	name := l.src.Snippet(Pos(start), Pos(l.i))
	if l.i < l.end && (l.r[l.i] == '"' || l.r[l.i] == '\'') && len(name) <= 2 {
		l.lexString(start, name)
		return
	}
	l.emit(Lookup(name), start, l.i)
}

func (l *lexer) lexNumber() {
	start := l.i
	float := false
	for l.i < l.end && isDigit(l.r[l.i]) {
		l.i++
	}
	if l.i < l.end && l.r[l.i] == '.' {
		float = true
		l.i++
		for l.i < l.end && isDigit(l.r[l.i]) {
			l.i++
		}
	}
	if l.i < l.end && (l.r[l.i] == 'e' || l.r[l.i] == 'E') {
		j := l.i + 1
		if j < l.end && (l.r[j] == '+' || l.r[j] == '-') {
			j++
		}
		if j < l.end && isDigit(l.r[j]) {
			float = true
			for j < l.end && isDigit(l.r[j]) {
				j++
			}
			l.i = j
		}
	}
	tok := INT
	if float {
		tok = FLOAT
	}
	l.emit(tok, start, l.i)
	if l.i < l.end && (isLetter(l.r[l.i]) || isDigit(l.r[l.i])) {
		bad := l.i
		for l.i < l.end && (isLetter(l.r[l.i]) || isDigit(l.r[l.i])) {
			l.i++
		}
		l.errs.add(Pos(bad), fmt.Sprintf("invalid number literal %q", l.src.Snippet(Pos(start), Pos(l.i))))
	}
}

// lexString lexes a string literal starting at start (its prefix, if any)
// whose opening quote is at l.i.
func (l *lexer) lexString(start int, prefix string) {
	raw, f := false, false
	switch strings.ToLower(prefix) {
	case "":
	case "r":
		raw = true
	case "f":
		f = true
	case "rf", "fr":
		raw, f = true, true
	default:
		l.errs.add(Pos(start), fmt.Sprintf("invalid string prefix %q", prefix))
	}
	q := l.r[l.i]
	triple := l.i+2 < l.end && l.r[l.i+1] == q && l.r[l.i+2] == q
	open := 1
	if triple {
		open = 3
	}
	l.i += open
	body := l.i
	bodyEnd := -1
	for l.i < l.end {
		c := l.r[l.i]
		if c == '\\' {
			l.i++
			if l.i < l.end && l.r[l.i] == '\r' && l.i+1 < l.end && l.r[l.i+1] == '\n' {
				l.i++
			}
			if l.i < l.end {
				l.i++
			}
			continue
		}
		if !triple && (c == '\n' || c == '\r') {
			break
		}
		if c == q {
			if !triple {
				bodyEnd = l.i
				l.i++
				break
			}
			if l.i+2 < l.end && l.r[l.i+1] == q && l.r[l.i+2] == q {
				bodyEnd = l.i
				l.i += 3
				break
			}
		}
		l.i++
	}
	if bodyEnd < 0 {
		if triple {
			l.errs.add(Pos(start), "unterminated triple-quoted string")
		} else {
			l.errs.add(Pos(start), "unterminated string")
		}
		bodyEnd = l.i
	}
	tok := STRING
	if f {
		tok = FSTRING
	}
	t := l.emit(tok, start, l.i)
	t.raw, t.triple = raw, triple
	t.body, t.bodyE = Pos(body), Pos(bodyEnd)
}

// decodeString returns the value of a STRING token (spec §2.5), reporting
// malformed escapes.
func decodeString(src *Source, t token, base int, errs *errorSink) string {
	r := src.Runes()
	body, end := int(t.body), int(t.bodyE)
	if !t.triple && simpleBody(r[body:end]) {
		return src.Snippet(t.body, t.bodyE)
	}
	drop := stringMask(r[body:end], base, t.triple)
	var b strings.Builder
	for j := body; j < end; {
		if drop != nil && drop[j-body] {
			j++
			continue
		}
		j = decodeRune(&b, r, j, end, t.raw, errs)
	}
	return b.String()
}

// simpleBody reports whether a string body needs no decoding.
func simpleBody(r []rune) bool {
	for _, c := range r {
		if c == '\\' || c == '\r' || c == utf8.RuneError {
			return false
		}
	}
	return true
}

// decodeRune decodes the character or escape sequence at r[j] into b and
// returns the index after it. Errors are reported at their position.
func decodeRune(b *strings.Builder, r []rune, j, end int, raw bool, errs *errorSink) int {
	c := r[j]
	if c == '\r' {
		b.WriteByte('\n')
		if j+1 < end && r[j+1] == '\n' {
			return j + 2
		}
		return j + 1
	}
	if c != '\\' || j+1 >= end {
		b.WriteRune(c)
		return j + 1
	}
	if raw {
		b.WriteRune('\\')
		return decodeRune(b, r, j+1, end, true, errs) // keeps the next character (normalising a line break)
	}
	e := r[j+1]
	switch e {
	case '\n':
		return j + 2
	case '\r':
		if j+2 < end && r[j+2] == '\n' {
			return j + 3
		}
		return j + 2
	case '\\', '\'', '"':
		b.WriteRune(e)
	case 'a':
		b.WriteByte('\a')
	case 'b':
		b.WriteByte('\b')
	case 'f':
		b.WriteByte('\f')
	case 'n':
		b.WriteByte('\n')
	case 'r':
		b.WriteByte('\r')
	case 't':
		b.WriteByte('\t')
	case 'v':
		b.WriteByte('\v')
	case '0', '1', '2', '3', '4', '5', '6', '7':
		v, k := 0, j+1
		for k < end && k < j+4 && '0' <= r[k] && r[k] <= '7' {
			v = v*8 + int(r[k]-'0')
			k++
		}
		b.WriteRune(rune(v))
		return k
	case 'x', 'u', 'U':
		n := 2
		if e == 'u' {
			n = 4
		} else if e == 'U' {
			n = 8
		}
		v, k := 0, j+2
		for k < end && k < j+2+n {
			d := hexVal(r[k])
			if d < 0 {
				break
			}
			v = v*16 + d
			k++
		}
		if k != j+2+n {
			errs.add(Pos(j), fmt.Sprintf("malformed \\%c escape: want %d hex digits", e, n))
			return k
		}
		switch {
		case v > 0x10FFFF:
			errs.add(Pos(j), fmt.Sprintf("escape \\%c%s is above U+10FFFF", e, string(r[j+2:k])))
		case 0xD800 <= v && v <= 0xDFFF:
			errs.add(Pos(j), fmt.Sprintf("escape \\%c%s denotes a surrogate", e, string(r[j+2:k])))
		default:
			b.WriteRune(rune(v))
		}
		return k
	case 'N':
		errs.add(Pos(j), `\N{...} escapes are not supported`)
	default:
		b.WriteRune('\\')
		return decodeRune(b, r, j+1, end, true, errs)
	}
	return j + 2
}

func hexVal(c rune) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// stringMask returns the code points of a string body to drop before
// decoding (nil for none): on each line after the first, the whole-file
// dedent of spec §2.1 (up to base spaces and tabs), then for a
// triple-quoted string the textwrap.dedent of D13 over what remains.
func stringMask(r []rune, base int, triple bool) []bool {
	var drop []bool
	if base > 0 {
		for i := 0; i < len(r); i++ {
			if r[i] != '\n' && r[i] != '\r' {
				continue
			}
			if r[i] == '\r' && i+1 < len(r) && r[i+1] == '\n' {
				i++
			}
			for k := i + 1; k < len(r) && k <= i+base && (r[k] == ' ' || r[k] == '\t'); k++ {
				if drop == nil {
					drop = make([]bool, len(r))
				}
				drop[k] = true
			}
		}
	}
	if !triple {
		return drop
	}
	if drop == nil {
		return dedentMask(r)
	}
	// Dedent what the file dedent left, then map back.
	kept := make([]rune, 0, len(r))
	index := make([]int, 0, len(r))
	for i, c := range r {
		if !drop[i] {
			kept = append(kept, c)
			index = append(index, i)
		}
	}
	for j, d := range dedentMask(kept) {
		if d {
			drop[index[j]] = true
		}
	}
	return drop
}

// dedentMask implements textwrap.dedent over the raw text of a
// triple-quoted string (spec §2.5, D13): it marks the code points to drop,
// namely the margin common to all lines that are not whitespace-only, and all
// spaces and tabs of whitespace-only lines.
func dedentMask(r []rune) []bool {
	type line struct{ start, ws, end int }
	var lines []line
	for i := 0; i <= len(r); {
		j := i
		for j < len(r) && (r[j] == ' ' || r[j] == '\t') {
			j++
		}
		k := j
		for k < len(r) && r[k] != '\n' && r[k] != '\r' {
			k++
		}
		lines = append(lines, line{i, j, k})
		if k >= len(r) {
			break
		}
		if r[k] == '\r' && k+1 < len(r) && r[k+1] == '\n' {
			k++
		}
		i = k + 1
	}
	var margin []rune
	first := true
	for _, ln := range lines {
		if ln.ws == ln.end {
			continue
		}
		ws := r[ln.start:ln.ws]
		if first {
			margin, first = ws, false
			continue
		}
		n := 0
		for n < len(margin) && n < len(ws) && margin[n] == ws[n] {
			n++
		}
		margin = margin[:n]
	}
	drop := make([]bool, len(r))
	any := false
	for _, ln := range lines {
		if ln.ws == ln.end {
			for k := ln.start; k < ln.end; k++ {
				drop[k], any = true, true
			}
			continue
		}
		for k := ln.start; k < ln.start+len(margin); k++ {
			drop[k], any = true, true
		}
	}
	if !any {
		return nil
	}
	return drop
}

// operandEnd reports whether t can end an operand, so that a following '<'
// is a comparison rather than the start of a value reference.
func operandEnd(t Token) bool {
	switch t {
	case IDENT, INT, FLOAT, STRING, FSTRING, VALUEREF, RPAREN, RBRACK, RBRACE, TRUE, FALSE, NONE:
		return true
	}
	return false
}

var closers = map[rune]Token{')': RPAREN, ']': RBRACK, '}': RBRACE}
var openerOf = map[Token]Token{RPAREN: LPAREN, RBRACK: LBRACK, RBRACE: LBRACE}

func (l *lexer) lexOperator() {
	start := l.i
	c := l.r[l.i]
	next := rune(0)
	if l.i+1 < l.end {
		next = l.r[l.i+1]
	}
	two := func(t Token) { l.i += 2; l.emit(t, start, l.i) }
	one := func(t Token) { l.i++; l.emit(t, start, l.i) }
	switch c {
	case '+':
		one(PLUS)
	case '-':
		if next == '>' {
			two(ARROW)
		} else {
			one(MINUS)
		}
	case '*':
		if next == '*' {
			two(POW)
		} else {
			one(STAR)
		}
	case '/':
		if next == '/' {
			l.errs.add(Pos(start), "unsupported operator //")
			two(ILLEGAL)
		} else {
			one(SLASH)
		}
	case '%':
		one(PERCENT)
	case '=':
		if next == '=' {
			two(EQ)
		} else {
			one(ASSIGN)
		}
	case '!':
		if next == '=' {
			two(NE)
		} else {
			l.errs.add(Pos(start), "invalid character '!'")
			one(ILLEGAL)
		}
	case '<':
		if next == '=' {
			two(LE)
			return
		}
		if !operandEnd(l.lastTok()) {
			j := l.i + 1
			for j < l.end && (isLetter(l.r[j]) || l.r[j] == ':') {
				j++
			}
			if j > l.i+1 && j < l.end && l.r[j] == '>' {
				l.emit(VALUEREF, start, j+1)
				l.i = j + 1
				return
			}
		}
		one(LT)
	case '>':
		if next == '=' {
			two(GE)
		} else {
			one(GT)
		}
	case '~':
		if next == '>' {
			two(SQUIG)
		} else {
			l.errs.add(Pos(start), "unsupported operator ~")
			one(ILLEGAL)
		}
	case ':':
		if next == '=' {
			two(DEFINE)
		} else {
			one(COLON)
		}
	case ',':
		one(COMMA)
	case '.':
		one(DOT)
	case '(':
		one(LPAREN)
		l.brackets = append(l.brackets, l.toks[len(l.toks)-1])
	case '[':
		one(LBRACK)
		l.brackets = append(l.brackets, l.toks[len(l.toks)-1])
	case '{':
		one(LBRACE)
		l.brackets = append(l.brackets, l.toks[len(l.toks)-1])
	case ')', ']', '}':
		t := closers[c]
		one(t)
		if len(l.brackets) == 0 {
			l.errs.add(Pos(start), fmt.Sprintf("unmatched '%c'", c))
			return
		}
		open := l.brackets[len(l.brackets)-1]
		if open.tok == openerOf[t] {
			l.brackets = l.brackets[:len(l.brackets)-1]
			return
		}
		l.errs.add(Pos(start), fmt.Sprintf("closing '%c' does not match '%s'", c, open.tok))
		// Recover: close up to a matching opener if there is one, else
		// just the innermost bracket.
		n := len(l.brackets) - 1
		for k := n; k >= 0; k-- {
			if l.brackets[k].tok == openerOf[t] {
				n = k
				break
			}
		}
		l.brackets = l.brackets[:n]
	case '&', '|', '^', '@':
		l.errs.add(Pos(start), fmt.Sprintf("unsupported operator %c", c))
		one(ILLEGAL)
	case ';':
		l.errs.add(Pos(start), "';' is not allowed; put each statement on its own line")
		one(ILLEGAL)
	case '\\':
		l.errs.add(Pos(start), "backslash outside a string; use brackets to continue a line")
		one(ILLEGAL)
	default:
		l.errs.add(Pos(start), fmt.Sprintf("invalid character %q", c))
		one(ILLEGAL)
	}
}
