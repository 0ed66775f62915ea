package syntax

import (
	"fmt"
	"strings"
)

// maxDepth bounds the nesting of expressions so that hostile input cannot
// exhaust the stack.
const maxDepth = 200

// Parse parses a whole policy (spec §2–§5). It always returns a File, which
// is partial when there are syntax errors; the error is then an ErrorList
// with every error found (up to MaxErrors), sorted by position. Lexical
// warnings are in File.Warnings.
func Parse(src *Source) (*File, error) {
	errs := &errorSink{src: src}
	lx := newLexer(src, 0, src.Len(), false, errs)
	p := &parser{src: src, errs: errs, toks: lx.run(), base: lx.base}
	p.tok = p.toks[0]
	f := &File{Source: src}
	for p.tok.tok != EOF {
		switch p.tok.tok {
		case NEWLINE, DEDENT:
			p.next()
		case INDENT:
			p.error(p.tok.pos, "unexpected indentation")
			p.skipBlock()
		default:
			if s := p.parseStmt(); s != nil {
				f.Stmts = append(f.Stmts, s)
			}
		}
	}
	errs.warns.Sort()
	f.Warnings = errs.warns
	return f, errs.errs.Err()
}

// ParseString is Parse(NewSource(name, text)).
func ParseString(name, text string) (*File, error) { return Parse(NewSource(name, text)) }

// ParseExpr parses a single expression (line breaks are insignificant, as
// inside brackets). It is meant for tests and tools.
func ParseExpr(src *Source) (Expr, error) {
	errs := &errorSink{src: src}
	lx := newLexer(src, 0, src.Len(), true, errs)
	p := &parser{src: src, errs: errs, toks: lx.run()}
	p.tok = p.toks[0]
	x := p.parseExpr()
	if p.tok.tok != EOF {
		p.errorExpected("end of expression")
	}
	return x, errs.errs.Err()
}

type parser struct {
	src   *Source
	errs  *errorSink
	toks  []token
	p     int
	tok   token
	rules int // rules seen so far
	depth int
	base  int // whole-file dedent, applied to lines inside strings
}

func (p *parser) next() {
	if p.p < len(p.toks)-1 {
		p.p++
	}
	p.tok = p.toks[p.p]
}

func (p *parser) peek(n int) token {
	if i := p.p + n; i < len(p.toks) {
		return p.toks[i]
	}
	return p.toks[len(p.toks)-1]
}

func (p *parser) error(pos Pos, msg string) { p.errs.add(pos, msg) }

// lit returns the text of a token.
func (p *parser) lit(t token) string { return p.src.Snippet(t.pos, t.end) }

func (p *parser) describe(t token) string {
	switch t.tok {
	case IDENT:
		return "identifier " + p.lit(t)
	case INT, FLOAT:
		return "number " + p.lit(t)
	case STRING, FSTRING:
		return "string " + p.lit(t)
	case VALUEREF:
		return "value reference " + p.lit(t)
	case NEWLINE:
		return "end of line"
	case EOF:
		return "end of file"
	case INDENT:
		return "indentation"
	case DEDENT:
		return "end of block"
	case ILLEGAL:
		return "invalid token"
	}
	return "'" + t.tok.String() + "'"
}

func (p *parser) errorExpected(what string) {
	p.error(p.tok.pos, "expected "+what+", found "+p.describe(p.tok))
}

func (p *parser) expect(t Token) Pos {
	pos := p.tok.pos
	if p.tok.tok != t {
		p.errorExpected("'" + t.String() + "'")
		return pos
	}
	p.next()
	return pos
}

// skipLine skips to the end of the current logical line, consuming its
// NEWLINE.
func (p *parser) skipLine() {
	for p.tok.tok != NEWLINE && p.tok.tok != EOF {
		p.next()
	}
	if p.tok.tok == NEWLINE {
		p.next()
	}
}

// skipBlock skips an indented block starting at an INDENT.
func (p *parser) skipBlock() {
	depth := 0
	for p.tok.tok != EOF {
		switch p.tok.tok {
		case INDENT:
			depth++
		case DEDENT:
			depth--
			if depth <= 0 {
				p.next()
				return
			}
		}
		p.next()
	}
}

// lineEnd expects the end of a logical line.
func (p *parser) lineEnd() {
	if p.tok.tok != NEWLINE && p.tok.tok != EOF {
		p.error(p.tok.pos, "unexpected "+p.describe(p.tok)+" at end of line")
	}
	p.skipLine()
}

// ---- statements ----

func (p *parser) parseStmt() Stmt {
	switch p.tok.tok {
	case IMPORT:
		return p.parseImport()
	case FROM:
		return p.parseFromImport()
	case RAISE:
		return p.parseRule()
	case DEF:
		from := p.tok.pos
		p.error(from, "def is not supported; use a predicate")
		p.skipLine()
		if p.tok.tok == INDENT {
			p.skipBlock()
		}
		return &BadStmt{From: from, To: p.tok.pos}
	case IDENT:
		switch p.peek(1).tok {
		case DEFINE:
			return p.parseConst()
		case LPAREN:
			return p.parsePredicate()
		}
	}
	from := p.tok.pos
	p.errorExpected("import, constant, predicate or rule")
	p.skipLine()
	if p.tok.tok == INDENT {
		p.skipBlock()
	}
	return &BadStmt{From: from, To: p.tok.pos}
}

func (p *parser) parseIdent() *Ident {
	if p.tok.tok != IDENT {
		p.errorExpected("name")
		return &Ident{NamePos: p.tok.pos, Name: "_"}
	}
	id := &Ident{NamePos: p.tok.pos, Name: p.lit(p.tok)}
	p.next()
	return id
}

func (p *parser) parseDotted() *DottedName {
	d := &DottedName{Parts: []*Ident{p.parseIdent()}}
	for p.tok.tok == DOT {
		p.next()
		d.Parts = append(d.Parts, p.parseIdent())
	}
	return d
}

func (p *parser) parseImport() Stmt {
	s := &ImportStmt{Import: p.tok.pos}
	p.next()
	s.Module = p.parseDotted()
	if p.tok.tok == AS {
		p.next()
		s.Alias = p.parseIdent()
	}
	p.lineEnd()
	return s
}

func (p *parser) parseFromImport() Stmt {
	s := &FromImportStmt{From: p.tok.pos, Star: NoPos}
	p.next()
	s.Module = p.parseDotted()
	p.expect(IMPORT)
	if p.tok.tok == STAR {
		s.Star = p.tok.pos
		s.EndPos = p.tok.end
		p.next()
		p.lineEnd()
		return s
	}
	for {
		a := &ImportAlias{Name: p.parseIdent()}
		if p.tok.tok == AS {
			p.next()
			a.Alias = p.parseIdent()
		}
		s.Names = append(s.Names, a)
		if p.tok.tok != COMMA {
			break
		}
		p.next()
	}
	s.EndPos = s.Names[len(s.Names)-1].End()
	p.lineEnd()
	return s
}

func (p *parser) parseConst() Stmt {
	s := &ConstDecl{Name: p.parseIdent(), Define: p.tok.pos}
	p.next() // :=
	if p.tok.tok != NEWLINE {
		s.Value = p.parseExpr()
		p.lineEnd()
		return s
	}
	p.next()
	s.Block = true
	if p.tok.tok != INDENT {
		p.error(p.tok.pos, "expected an indented block after ':='")
		s.Value = &BadExpr{From: p.tok.pos, To: p.tok.pos}
		return s
	}
	p.next()
	s.Value = p.parseExpr()
	p.lineEnd()
	if p.tok.tok != DEDENT && p.tok.tok != EOF {
		p.error(p.tok.pos, "a constant block must hold exactly one expression line")
		for p.tok.tok != DEDENT && p.tok.tok != EOF {
			if p.tok.tok == INDENT {
				p.skipBlock()
				continue
			}
			p.next()
		}
	}
	if p.tok.tok == DEDENT {
		p.next()
	}
	return s
}

func (p *parser) parsePredicate() Stmt {
	s := &PredicateDecl{Name: p.parseIdent(), Lparen: p.tok.pos}
	p.next() // (
	for p.tok.tok != RPAREN && p.tok.tok != NEWLINE && p.tok.tok != EOF {
		name := p.parseIdent()
		if p.tok.tok != COLON {
			p.error(p.tok.pos, fmt.Sprintf("parameter %s needs a type: (%s: Type)", name.Name, name.Name))
			break
		}
		p.next()
		s.Params = append(s.Params, &Param{Name: name, Type: p.parseIdent()})
		if p.tok.tok != COMMA {
			break
		}
		p.next()
	}
	s.Rparen = p.expect(RPAREN)
	s.Define = p.tok.pos
	switch p.tok.tok {
	case DEFINE:
		p.next()
		if p.tok.tok != NEWLINE {
			s.Value = p.parseExpr()
			p.lineEnd()
			return s
		}
	case COLON:
		s.Colon = true
		p.next()
	default:
		p.errorExpected("':=' or ':' after the parameters of predicate " + s.Name.Name)
		s.Body = p.recoverBody()
		return s
	}
	s.Body = p.parseBlock()
	return s
}

func (p *parser) parseRule() Stmt {
	s := &RuleDecl{Raise: p.tok.pos, Index: p.rules}
	p.rules++
	p.next()
	s.Head = p.parseOr()
	switch s.Head.(type) {
	case *BasicLit, *FString, *Ident, *CallExpr, *BadExpr:
		if b, ok := s.Head.(*BasicLit); ok && b.Kind != LitString {
			p.error(b.Pos(), "raise needs a string, a name or a call such as PolicyViolation(...)")
		}
	default:
		p.error(s.Head.Pos(), "raise needs a string, a name or a call such as PolicyViolation(...)")
	}
	s.If = p.tok.pos
	if p.tok.tok != IF {
		p.errorExpected("'if'")
		s.Body = p.recoverBody()
		return s
	}
	p.next()
	if p.tok.tok != COLON {
		p.errorExpected("':' after 'if'")
		s.Body = p.recoverBody()
		return s
	}
	p.next()
	s.Body = p.parseBlock()
	return s
}

// parseBlock parses the end of a block-opening line and the indented block
// after it.
func (p *parser) parseBlock() *Body {
	header := p.src.Position(p.tok.pos).Line
	bodyOnHeader := false
	if p.tok.tok != NEWLINE && p.tok.tok != EOF {
		p.error(p.tok.pos, "the body must start on a new, indented line")
		bodyOnHeader = true
		p.skipLine()
	} else if p.tok.tok == NEWLINE {
		p.next()
	}
	if p.tok.tok != INDENT {
		if !bodyOnHeader {
			p.error(p.tok.pos, fmt.Sprintf("expected an indented block after line %d", header))
		}
		return &Body{Start: p.tok.pos, EndPos: p.tok.pos}
	}
	return p.parseBodyLines()
}

// parseBodyLines parses the lines of a block starting at its INDENT.
func (p *parser) parseBodyLines() *Body {
	p.next() // INDENT
	b := &Body{Start: p.tok.pos}
	for p.tok.tok != DEDENT && p.tok.tok != EOF {
		if p.tok.tok == INDENT {
			p.error(p.tok.pos, "unexpected indentation")
			p.skipBlock()
			continue
		}
		if p.tok.tok == NEWLINE {
			p.next()
			continue
		}
		if ln := p.parseLine(); ln != nil {
			b.Lines = append(b.Lines, ln)
		}
	}
	if len(b.Lines) > 0 {
		b.EndPos = b.Lines[len(b.Lines)-1].End()
	} else {
		b.EndPos = b.Start
	}
	if p.tok.tok == DEDENT {
		p.next()
	}
	return b
}

// lineEndsWithColon reports whether the current logical line ends in ':'.
func (p *parser) lineEndsWithColon() bool {
	i := p.p
	for i < len(p.toks) && p.toks[i].tok != NEWLINE && p.toks[i].tok != EOF {
		i++
	}
	return i > p.p && p.toks[i-1].tok == COLON
}

func (p *parser) parseLine() Line {
	if p.tok.tok == IDENT && p.peek(1).tok == DEFINE {
		ln := &AssignLine{Name: p.parseIdent(), Define: p.tok.pos}
		p.next()
		if p.tok.tok == NEWLINE {
			p.error(p.tok.pos, "expected an expression after ':='")
			ln.Value = &BadExpr{From: p.tok.pos, To: p.tok.pos}
		} else {
			ln.Value = p.parseExpr()
		}
		p.lineEnd()
		return ln
	}
	if p.lineEndsWithColon() {
		q := &QuantLine{Not: NoPos}
		if p.tok.tok == NOT {
			q.Not = p.tok.pos
			p.next()
		}
		q.Header = p.parsePostfix()
		switch q.Header.(type) {
		case *Ident, *CallExpr, *BadExpr:
		default:
			p.error(q.Header.Pos(), "a quantifier line must be 'forall:' or 'count(...):'")
		}
		q.Colon = p.tok.pos
		if p.tok.tok != COLON {
			p.errorExpected("':'")
			q.Body = p.recoverBody()
			return q
		}
		p.next()
		q.Body = p.parseBlock()
		return q
	}
	x := p.parseExpr()
	if p.tok.tok == DEFINE {
		p.error(p.tok.pos, "cannot assign to an expression; write name := value")
	}
	p.lineEnd()
	return &ExprLine{X: x}
}

// ---- expressions ----

func (p *parser) enter() bool {
	p.depth++
	if p.depth > maxDepth {
		p.error(p.tok.pos, "expression nested too deeply")
		return false
	}
	return true
}

func (p *parser) leave() { p.depth-- }

func (p *parser) bad() Expr {
	pos := p.tok.pos
	// Skip to the end of the line so that the caller stops quickly.
	for p.tok.tok != NEWLINE && p.tok.tok != EOF {
		p.next()
	}
	return &BadExpr{From: pos, To: p.tok.pos}
}

func (p *parser) parseExpr() Expr {
	defer p.leave()
	if !p.enter() {
		return p.bad()
	}
	x := p.parseOr()
	if p.tok.tok != IF {
		return x
	}
	c := &CondExpr{X: x, If: p.tok.pos}
	p.next()
	c.Cond = p.parseOr()
	c.Else = p.tok.pos
	if p.tok.tok != ELSE {
		p.errorExpected("'else' in conditional expression")
		c.Y = &BadExpr{From: p.tok.pos, To: p.tok.pos}
		return c
	}
	p.next()
	c.Y = p.parseExpr()
	return c
}

func (p *parser) parseOr() Expr {
	x := p.parseAnd()
	for p.tok.tok == OR {
		pos := p.tok.pos
		p.next()
		x = &BinaryExpr{X: x, OpPos: pos, Op: OR, Y: p.parseAnd()}
	}
	return x
}

func (p *parser) parseAnd() Expr {
	x := p.parseNot()
	for p.tok.tok == AND {
		pos := p.tok.pos
		p.next()
		x = &BinaryExpr{X: x, OpPos: pos, Op: AND, Y: p.parseNot()}
	}
	return x
}

func (p *parser) parseNot() Expr {
	if p.tok.tok != NOT {
		return p.parseComparison()
	}
	defer p.leave()
	if !p.enter() {
		return p.bad()
	}
	pos := p.tok.pos
	p.next()
	return &UnaryExpr{OpPos: pos, Op: NOT, X: p.parseNot()}
}

// compOp returns the comparison operator at the current token (consuming
// nothing), its width in tokens, or ok=false.
func (p *parser) compOp() (Token, int, bool) {
	switch t := p.tok.tok; t {
	case EQ, NE, LT, GT, LE, GE, IN, CONTAINS_ONLY, ARROW, SQUIG:
		return t, 1, true
	case IS:
		if p.peek(1).tok == NOT {
			return ISNOT, 2, true
		}
		return IS, 1, true
	case NOT:
		if p.peek(1).tok == IN {
			return NOTIN, 2, true
		}
	}
	return 0, 0, false
}

func (p *parser) parseComparison() Expr {
	x := p.parseSum()
	var c *CompareExpr
	for {
		op, n, ok := p.compOp()
		if !ok {
			break
		}
		if c == nil {
			c = &CompareExpr{X: x}
		}
		c.Ops = append(c.Ops, CompareOp{OpPos: p.tok.pos, Op: op})
		for ; n > 0; n-- {
			p.next()
		}
		c.Ys = append(c.Ys, p.parseSum())
	}
	if c == nil {
		return x
	}
	return c
}

func (p *parser) parseSum() Expr {
	x := p.parseTerm()
	for p.tok.tok == PLUS || p.tok.tok == MINUS {
		op, pos := p.tok.tok, p.tok.pos
		p.next()
		x = &BinaryExpr{X: x, OpPos: pos, Op: op, Y: p.parseTerm()}
	}
	return x
}

func (p *parser) parseTerm() Expr {
	x := p.parseUnary()
	for p.tok.tok == STAR || p.tok.tok == SLASH || p.tok.tok == PERCENT {
		op, pos := p.tok.tok, p.tok.pos
		p.next()
		x = &BinaryExpr{X: x, OpPos: pos, Op: op, Y: p.parseUnary()}
	}
	return x
}

func (p *parser) parseUnary() Expr {
	if p.tok.tok != MINUS && p.tok.tok != PLUS {
		return p.parsePower()
	}
	defer p.leave()
	if !p.enter() {
		return p.bad()
	}
	op, pos := p.tok.tok, p.tok.pos
	p.next()
	return &UnaryExpr{OpPos: pos, Op: op, X: p.parseUnary()}
}

func (p *parser) parsePower() Expr {
	x := p.parsePostfix()
	if p.tok.tok != POW {
		return x
	}
	pos := p.tok.pos
	p.next()
	return &BinaryExpr{X: x, OpPos: pos, Op: POW, Y: p.parseUnary()}
}

func (p *parser) parsePostfix() Expr {
	x := p.parseAtom()
	for {
		switch p.tok.tok {
		case LPAREN:
			x = p.parseCall(x)
		case DOT:
			p.next()
			if p.tok.tok != IDENT {
				p.errorExpected("attribute name after '.'")
				return x
			}
			x = &SelectorExpr{X: x, Sel: p.parseIdent()}
		case LBRACK:
			ix := &IndexExpr{X: x, Lbrack: p.tok.pos}
			p.next()
			if p.tok.tok == COLON {
				p.error(p.tok.pos, "slices are not supported")
				ix.Index = &BadExpr{From: p.tok.pos, To: p.tok.pos}
			} else {
				ix.Index = p.parseExpr()
				if p.tok.tok == COLON {
					p.error(p.tok.pos, "slices are not supported")
				}
			}
			ix.Rbrack = p.closeBracket(RBRACK)
			x = ix
		default:
			return x
		}
	}
}

// closeBracket expects the closing bracket t; on error it skips to it (on
// the same logical line) so that parsing can go on after it.
func (p *parser) closeBracket(t Token) Pos {
	if p.tok.tok == t {
		pos := p.tok.pos
		p.next()
		return pos
	}
	p.errorExpected("'" + t.String() + "'")
	pos := p.tok.pos
	depth := 0
	for p.tok.tok != NEWLINE && p.tok.tok != EOF {
		switch p.tok.tok {
		case LPAREN, LBRACK, LBRACE:
			depth++
		case RPAREN, RBRACK, RBRACE:
			if depth == 0 {
				if p.tok.tok == t {
					pos = p.tok.pos
					p.next()
				}
				return pos
			}
			depth--
		}
		p.next()
	}
	return pos
}

// parseArgs parses a call's argument list after "(" up to and including ")".
func (p *parser) parseArgs() (args []Expr, kwargs []*KeywordArg, rparen Pos) {
	var seen map[string]bool
	for p.tok.tok != RPAREN && p.tok.tok != EOF && p.tok.tok != NEWLINE {
		if p.tok.tok == IDENT && p.peek(1).tok == ASSIGN {
			k := &KeywordArg{Name: p.parseIdent()}
			p.next()
			k.Value = p.parseExpr()
			if seen == nil {
				seen = map[string]bool{}
			}
			if seen[k.Name.Name] {
				p.error(k.Name.Pos(), fmt.Sprintf("keyword argument %s repeated", k.Name.Name))
			}
			seen[k.Name.Name] = true
			kwargs = append(kwargs, k)
		} else {
			pos := p.tok.pos
			x := p.parseExpr()
			if len(kwargs) > 0 {
				p.error(pos, "positional argument follows keyword argument")
			}
			if p.tok.tok == FOR {
				p.error(p.tok.pos, "generator expressions are not supported; use a list comprehension [... for ...]")
			}
			args = append(args, x)
		}
		if p.tok.tok != COMMA {
			break
		}
		p.next()
	}
	rparen = p.closeBracket(RPAREN)
	return
}

func (p *parser) parseCall(fun Expr) Expr {
	c := &CallExpr{Fun: fun, Lparen: p.tok.pos}
	p.next()
	c.Args, c.Kwargs, c.Rparen = p.parseArgs()
	return c
}

func (p *parser) parseAtom() Expr {
	t := p.tok
	switch t.tok {
	case INT:
		p.next()
		lit := p.lit(t)
		v := strings.TrimLeft(lit, "0")
		if v == "" {
			v = "0"
		}
		return &BasicLit{Kind: LitInt, ValuePos: t.pos, EndPos: t.end, Raw: lit, Value: v}
	case FLOAT:
		p.next()
		lit := p.lit(t)
		return &BasicLit{Kind: LitFloat, ValuePos: t.pos, EndPos: t.end, Raw: lit, Value: lit}
	case STRING:
		p.next()
		p.noAdjacent()
		return &BasicLit{Kind: LitString, ValuePos: t.pos, EndPos: t.end, Raw: p.lit(t), Value: decodeString(p.src, t, p.base, p.errs), RawStr: t.raw, Triple: t.triple}
	case FSTRING:
		p.next()
		f := p.parseFString(t)
		p.noAdjacent()
		return f
	case TRUE, FALSE, NONE:
		p.next()
		k := LitNone
		if t.tok == TRUE {
			k = LitTrue
		} else if t.tok == FALSE {
			k = LitFalse
		}
		lit := p.lit(t)
		return &BasicLit{Kind: k, ValuePos: t.pos, EndPos: t.end, Raw: lit, Value: lit}
	case VALUEREF:
		p.next()
		return &ValueRef{ValuePos: t.pos, Name: p.src.Snippet(t.pos+1, t.end-1), EndPos: t.end}
	case STAR:
		p.next()
		return &Wildcard{Star: t.pos}
	case IDENT:
		if p.lit(t) == "tool" && p.peek(1).tok == COLON && p.peek(2).tok == IDENT {
			return p.parseToolRef()
		}
		return p.parseIdent()
	case LPAREN:
		return p.parseParen()
	case LBRACK:
		return p.parseList()
	case LBRACE:
		return p.parseBrace()
	case ILLEGAL:
		// The lexer has reported it.
		return p.bad()
	}
	p.errorExpected("expression")
	if t.tok == NEWLINE || t.tok == EOF || t.tok == RPAREN || t.tok == RBRACK || t.tok == RBRACE || t.tok == COMMA || t.tok == COLON {
		return &BadExpr{From: t.pos, To: t.pos}
	}
	return p.bad()
}

func (p *parser) noAdjacent() {
	if p.tok.tok == STRING || p.tok.tok == FSTRING {
		p.error(p.tok.pos, "adjacent string literals are not concatenated; use +")
	}
}

func (p *parser) parseToolRef() Expr {
	r := &ToolRef{Tool: p.tok.pos, Lparen: NoPos, Rparen: NoPos}
	p.next() // tool
	p.next() // :
	r.Name = p.parseIdent()
	if p.tok.tok == LPAREN {
		r.Lparen = p.tok.pos
		p.next()
		args, kwargs, rp := p.parseArgs()
		if len(kwargs) > 0 {
			p.error(kwargs[0].Pos(), "unsupported tool pattern: keyword arguments are not allowed")
		}
		r.Args, r.Rparen = args, rp
	}
	return r
}

func (p *parser) parseParen() Expr {
	lp := p.tok.pos
	p.next()
	if p.tok.tok == RPAREN {
		rp := p.tok.pos
		p.next()
		return &TupleLit{Lparen: lp, Rparen: rp}
	}
	if p.tok.tok == IDENT && p.peek(1).tok == COLON {
		if p.peek(2).tok == IDENT && p.peek(3).tok == RPAREN {
			d := &TypedDecl{Lparen: lp, Name: p.parseIdent()}
			p.next()
			d.Type = p.parseIdent()
			d.Rparen = p.tok.pos
			p.next()
			return d
		}
		if p.lit(p.tok) != "tool" || p.peek(2).tok != IDENT {
			p.error(p.peek(1).pos, "invalid typed declaration: want (name: Type)")
			p.closeBracketQuiet()
			return &BadExpr{From: lp, To: p.tok.pos}
		}
	}
	x := p.parseExpr()
	if p.tok.tok == FOR {
		p.error(p.tok.pos, "generator expressions are not supported; use a list comprehension [... for ...]")
	}
	if p.tok.tok != COMMA {
		p.closeBracket(RPAREN)
		return x
	}
	tup := &TupleLit{Lparen: lp, Elts: []Expr{x}}
	for p.tok.tok == COMMA {
		p.next()
		if p.tok.tok == RPAREN {
			break
		}
		tup.Elts = append(tup.Elts, p.parseExpr())
	}
	tup.Rparen = p.closeBracket(RPAREN)
	return tup
}

// closeBracketQuiet skips to and past the bracket closing the current one.
func (p *parser) closeBracketQuiet() {
	depth := 0
	for p.tok.tok != NEWLINE && p.tok.tok != EOF {
		switch p.tok.tok {
		case LPAREN, LBRACK, LBRACE:
			depth++
		case RPAREN, RBRACK, RBRACE:
			if depth == 0 {
				p.next()
				return
			}
			depth--
		}
		p.next()
	}
}

func (p *parser) parseList() Expr {
	lb := p.tok.pos
	p.next()
	if p.tok.tok == RBRACK {
		rb := p.tok.pos
		p.next()
		return &ListLit{Lbrack: lb, Rbrack: rb}
	}
	first := p.parseExpr()
	if p.tok.tok == FOR {
		c := &ListComp{Lbrack: lb, Elt: first, For: p.tok.pos}
		p.next()
		c.Var = p.parseIdent()
		if p.tok.tok == COMMA {
			p.error(p.tok.pos, "a comprehension has exactly one variable")
		}
		p.expect(IN)
		c.Iter = p.parseOr()
		if p.tok.tok == IF {
			p.next()
			c.Cond = p.parseOr()
		}
		switch p.tok.tok {
		case FOR:
			p.error(p.tok.pos, "a comprehension has exactly one 'for'")
		case IF:
			p.error(p.tok.pos, "a comprehension has at most one 'if'")
		}
		c.Rbrack = p.closeBracket(RBRACK)
		return c
	}
	l := &ListLit{Lbrack: lb, Elts: []Expr{first}}
	for p.tok.tok == COMMA {
		p.next()
		if p.tok.tok == RBRACK {
			break
		}
		l.Elts = append(l.Elts, p.parseExpr())
	}
	l.Rbrack = p.closeBracket(RBRACK)
	return l
}

// parseDictKey parses a dict key: a bare name or a string literal.
func (p *parser) parseDictKey() Expr {
	if (p.tok.tok == IDENT || p.tok.tok == STRING) && p.peek(1).tok == COLON {
		if p.tok.tok == IDENT {
			return p.parseIdent()
		}
		return p.parseAtom()
	}
	x := p.parseExpr()
	if p.tok.tok == COLON {
		p.error(x.Pos(), "dict keys must be names or strings")
	}
	return x
}

func (p *parser) parseBrace() Expr {
	lb := p.tok.pos
	p.next()
	if p.tok.tok == RBRACE {
		rb := p.tok.pos
		p.next()
		return &DictLit{Lbrace: lb, Rbrace: rb}
	}
	first := p.parseDictKey()
	if p.tok.tok != COLON {
		// A set literal.
		if p.tok.tok == FOR {
			p.error(p.tok.pos, "set comprehensions are not supported")
		}
		s := &SetLit{Lbrace: lb, Elts: []Expr{first}}
		for p.tok.tok == COMMA {
			p.next()
			if p.tok.tok == RBRACE {
				break
			}
			s.Elts = append(s.Elts, p.parseExpr())
		}
		s.Rbrace = p.closeBracket(RBRACE)
		return s
	}
	d := &DictLit{Lbrace: lb}
	key := first
	for {
		e := &DictEntry{Key: key, Colon: p.expect(COLON)}
		e.Value = p.parseExpr()
		d.Entries = append(d.Entries, e)
		if p.tok.tok == FOR {
			p.error(p.tok.pos, "dict comprehensions are not supported")
		}
		if p.tok.tok != COMMA {
			break
		}
		p.next()
		if p.tok.tok == RBRACE {
			break
		}
		key = p.parseDictKey()
		if p.tok.tok != COLON {
			p.errorExpected("':' after dict key")
			break
		}
	}
	d.Rbrace = p.closeBracket(RBRACE)
	return d
}

// parseFString splits an f-string token into literal parts and expressions
// (spec §2.5).
func (p *parser) parseFString(t token) Expr {
	f := &FString{ValuePos: t.pos, EndPos: t.end, Raw: p.lit(t), RawStr: t.raw, Triple: t.triple}
	r := p.src.Runes()
	body, end := int(t.body), int(t.bodyE)
	drop := stringMask(r[body:end], p.base, t.triple)
	q := r[t.body-1]
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			f.Parts = append(f.Parts, FStringPart{Lit: lit.String()})
			lit.Reset()
		}
	}
	for j := body; j < end; {
		if drop != nil && drop[j-body] {
			j++
			continue
		}
		c := r[j]
		switch {
		case c == '{' && j+1 < end && r[j+1] == '{':
			lit.WriteByte('{')
			j += 2
		case c == '}' && j+1 < end && r[j+1] == '}':
			lit.WriteByte('}')
			j += 2
		case c == '}':
			p.error(Pos(j), "f-string: single '}' is not allowed")
			j++
		case c == '{':
			k, ok := p.fstringExprEnd(r, j+1, end, q)
			if !ok {
				return f
			}
			flush()
			if strings.TrimSpace(string(r[j+1:k])) == "" {
				p.error(Pos(j), "f-string: empty expression not allowed")
			} else {
				f.Parts = append(f.Parts, FStringPart{X: p.parseSubExpr(j+1, k)})
			}
			j = k + 1
		default:
			j = decodeRune(&lit, r, j, end, t.raw, p.errs)
		}
	}
	flush()
	return f
}

// fstringExprEnd finds the '}' that closes the replacement field whose
// expression starts at r[j], reporting what the language does not allow
// inside it.
func (p *parser) fstringExprEnd(r []rune, j, end int, q rune) (int, bool) {
	depth := 0
	var inStr rune
	for k := j; k < end; k++ {
		c := r[k]
		if c == '\\' {
			p.error(Pos(k), "f-string: backslashes are not allowed inside braces")
			return 0, false
		}
		if c == q {
			p.error(Pos(k), "f-string: the quote of the literal is not allowed inside braces")
			return 0, false
		}
		if inStr != 0 {
			if c == inStr {
				inStr = 0
			}
			continue
		}
		switch c {
		case '\'', '"':
			inStr = c
		case '(', '[', '{':
			depth++
		case ')', ']':
			depth--
		case '}':
			if depth == 0 {
				return k, true
			}
			depth--
		case '!':
			if depth == 0 && (k+1 >= end || r[k+1] != '=') {
				p.error(Pos(k), "f-string: conversions such as !r are not supported")
				return 0, false
			}
		case ':':
			if depth == 0 {
				p.error(Pos(k), "f-string: format specifications are not supported")
				return 0, false
			}
		}
	}
	p.error(Pos(j-1), "f-string: expecting '}'")
	return 0, false
}

// parseSubExpr parses the expression in r[start:end] of the same source.
func (p *parser) parseSubExpr(start, end int) Expr {
	lx := newLexer(p.src, start, end, true, p.errs)
	sp := &parser{src: p.src, errs: p.errs, toks: lx.run(), depth: p.depth, base: p.base}
	sp.tok = sp.toks[0]
	x := sp.parseExpr()
	if sp.tok.tok != EOF {
		sp.error(sp.tok.pos, "f-string: unexpected "+sp.describe(sp.tok))
	}
	return x
}

// recoverBody resynchronises after an error in a block header: it skips the
// rest of the header line and parses the indented lines that follow, if
// any, so that errors in the body are still reported. Without a block it
// returns an empty body at the current position.
func (p *parser) recoverBody() *Body {
	p.skipLine()
	if p.tok.tok == INDENT {
		return p.parseBodyLines()
	}
	return &Body{Start: p.tok.pos, EndPos: p.tok.pos}
}
