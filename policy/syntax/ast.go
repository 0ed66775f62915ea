package syntax

// This file declares the syntax tree. Every node carries code-point offsets
// into its Source (Pos, and End just past the node). Nodes are only ever
// added to, never renamed: the checker and the evaluator code against them.

// Node is any node of the syntax tree.
type Node interface {
	Pos() Pos // first code point of the node
	End() Pos // first code point after the node
}

// Expr is an expression node.
type Expr interface {
	Node
	exprNode()
}

// Stmt is a top-level statement: *ImportStmt, *FromImportStmt, *ConstDecl,
// *PredicateDecl, *RuleDecl or *BadStmt.
type Stmt interface {
	Node
	stmtNode()
}

// Line is one line of a body: *ExprLine, *AssignLine or *QuantLine.
type Line interface {
	Node
	lineNode()
}

// File is a parsed policy.
type File struct {
	Source   *Source
	Stmts    []Stmt
	Warnings ErrorList // lexical warnings (e.g. mixed tabs and spaces)
}

// Pos returns the start of the file.
func (f *File) Pos() Pos { return 0 }

// End returns the end of the file.
func (f *File) End() Pos {
	if f.Source == nil {
		return 0
	}
	return Pos(f.Source.Len())
}

// Rules returns the rules of f in file order; the index in the result is the
// rule index of spec §4.5.
func (f *File) Rules() []*RuleDecl {
	var rs []*RuleDecl
	for _, s := range f.Stmts {
		if r, ok := s.(*RuleDecl); ok {
			rs = append(rs, r)
		}
	}
	return rs
}

// ---- statements ----

// ImportStmt is `import M [as A]`.
type ImportStmt struct {
	Import Pos         // position of "import"
	Module *DottedName // imported module
	Alias  *Ident      // nil without "as"
}

// FromImportStmt is `from M import a, b as c` or `from M import *`.
type FromImportStmt struct {
	From   Pos            // position of "from"
	Module *DottedName    // module
	Names  []*ImportAlias // imported names; empty when Star is valid
	Star   Pos            // position of "*" in `from M import *`, or NoPos
	EndPos Pos            // end of the statement
}

// ImportAlias is one `name [as alias]` of a from-import.
type ImportAlias struct {
	Name  *Ident
	Alias *Ident // nil without "as"
}

// DottedName is a module name `a.b.c`.
type DottedName struct {
	Parts []*Ident
}

// ConstDecl is `NAME := expr`, or `NAME :=` followed by an indented block of
// one expression (Block is then true).
type ConstDecl struct {
	Name   *Ident
	Define Pos // position of ":="
	Value  Expr
	Block  bool // value written as an indented block
}

// Param is one predicate parameter `name: Type`.
type Param struct {
	Name *Ident
	Type *Ident
}

// PredicateDecl is `name(params) := expr`, `name(params) :=` + body or
// `name(params):` + body. Exactly one of Value and Body is set.
type PredicateDecl struct {
	Name   *Ident
	Lparen Pos
	Params []*Param
	Rparen Pos
	Define Pos   // position of ":=" or ":"
	Colon  bool  // header ends in ":" rather than ":="
	Value  Expr  // inline form, else nil
	Body   *Body // block form, else nil
}

// RuleDecl is `raise HEAD if:` + body.
type RuleDecl struct {
	Raise Pos   // position of "raise"
	Head  Expr  // string literal, f-string, identifier or call (checked later)
	If    Pos   // position of "if"
	Body  *Body // never nil in a parsed file, may be empty after an error
	Index int   // rule index in file order, from 0 (spec §4.5)
}

// BadStmt stands for a statement that could not be parsed (or a `def` block).
type BadStmt struct {
	From, To Pos
}

// Body is an indented block of lines.
type Body struct {
	Start  Pos // position of the first token of the first line
	Lines  []Line
	EndPos Pos // end of the last line
}

// ExprLine is a body line holding one expression (a condition, a typed
// declaration, a flow line or a derived declaration `(x: T) in e`).
type ExprLine struct {
	X Expr
}

// AssignLine is a body line `x := e`.
type AssignLine struct {
	Name   *Ident
	Define Pos
	Value  Expr
}

// QuantLine is a quantifier line: `[not] HEADER:` + body, where HEADER is an
// identifier (`forall`) or a call (`count(min=1)`).
type QuantLine struct {
	Not    Pos  // position of "not", or NoPos
	Header Expr // *Ident or *CallExpr
	Colon  Pos
	Body   *Body
}

// ---- expressions ----

// Ident is a name.
type Ident struct {
	NamePos Pos
	Name    string
}

// LitKind is the kind of a BasicLit.
type LitKind int

// Kinds of basic literals.
const (
	LitInt    LitKind = iota // decimal integer, Raw holds the digits
	LitFloat                 // float, Raw as written
	LitString                // string, Value holds the decoded text
	LitTrue                  // True
	LitFalse                 // False
	LitNone                  // None
)

// BasicLit is a number, string, True, False or None literal.
type BasicLit struct {
	Kind     LitKind
	ValuePos Pos
	EndPos   Pos
	Raw      string // the literal as written
	Value    string // decoded string value (LitString); the digits for numbers
	RawStr   bool   // string written with an r prefix
	Triple   bool   // string written with triple quotes
}

// FStringPart is one part of an f-string: literal text or an expression.
type FStringPart struct {
	Lit string // literal text (braces unescaped), when X is nil
	X   Expr   // interpolated expression, or nil
}

// FString is an f-string literal, split into parts.
type FString struct {
	ValuePos Pos
	EndPos   Pos
	Raw      string // the literal as written
	RawStr   bool   // rf / fr prefix
	Triple   bool
	Parts    []FStringPart
}

// UnaryExpr is `-x`, `+x` or `not x`.
type UnaryExpr struct {
	OpPos Pos
	Op    Token // MINUS, PLUS or NOT
	X     Expr
}

// BinaryExpr is `x op y` for the arithmetic operators and `and`/`or`.
type BinaryExpr struct {
	X     Expr
	OpPos Pos
	Op    Token // PLUS MINUS STAR SLASH PERCENT POW AND OR
	Y     Expr
}

// CompareOp is one operator of a comparison chain.
type CompareOp struct {
	OpPos Pos
	Op    Token // EQ NE LT GT LE GE IN NOTIN IS ISNOT CONTAINS_ONLY ARROW SQUIG
}

// CompareExpr is a comparison chain `X op1 Ys[0] op2 Ys[1] ...` (spec §8.2);
// a single comparison has one operator.
type CompareExpr struct {
	X   Expr
	Ops []CompareOp
	Ys  []Expr // len(Ys) == len(Ops)
}

// CondExpr is the ternary `X if Cond else Y`.
type CondExpr struct {
	X    Expr
	If   Pos
	Cond Expr
	Else Pos
	Y    Expr
}

// KeywordArg is `name=value` in a call.
type KeywordArg struct {
	Name  *Ident
	Value Expr
}

// CallExpr is `Fun(Args..., Kwargs...)`.
type CallExpr struct {
	Fun    Expr
	Lparen Pos
	Args   []Expr
	Kwargs []*KeywordArg
	Rparen Pos
}

// SelectorExpr is `X.Sel`.
type SelectorExpr struct {
	X   Expr
	Sel *Ident
}

// IndexExpr is `X[Index]`.
type IndexExpr struct {
	X      Expr
	Lbrack Pos
	Index  Expr
	Rbrack Pos
}

// TupleLit is `()`, `(a,)` or `(a, b)`.
type TupleLit struct {
	Lparen Pos
	Elts   []Expr
	Rparen Pos
}

// ListLit is `[a, b]`.
type ListLit struct {
	Lbrack Pos
	Elts   []Expr
	Rbrack Pos
}

// DictEntry is `key: value` in a dict literal. Key is an *Ident (a bare
// key, meaning its name as a string) or a string *BasicLit; a parse error
// may leave another expression there.
type DictEntry struct {
	Key   Expr
	Colon Pos
	Value Expr
}

// DictLit is `{k: v, ...}`.
type DictLit struct {
	Lbrace  Pos
	Entries []*DictEntry
	Rbrace  Pos
}

// SetLit is `{a, b}`. The parser accepts it; the checker rejects it
// (spec §5.1: set literals do not exist).
type SetLit struct {
	Lbrace Pos
	Elts   []Expr
	Rbrace Pos
}

// ListComp is `[Elt for Var in Iter if Cond]`.
type ListComp struct {
	Lbrack Pos
	Elt    Expr
	For    Pos
	Var    *Ident
	Iter   Expr
	Cond   Expr // nil without "if"
	Rbrack Pos
}

// TypedDecl is a typed variable declaration `(Name: Type)`.
type TypedDecl struct {
	Lparen Pos
	Name   *Ident
	Type   *Ident
	Rparen Pos
}

// ToolRef is a tool reference `tool:NAME` or pattern `tool:NAME(args)`
// (spec §2.6, §9). Lparen is NoPos without an argument list.
type ToolRef struct {
	Tool   Pos // position of "tool"
	Name   *Ident
	Lparen Pos
	Args   []Expr
	Rparen Pos
}

// ValueRef is a value reference `<NAME>` (spec §2.6).
type ValueRef struct {
	ValuePos Pos
	Name     string // without the angle brackets
	EndPos   Pos
}

// Wildcard is `*` in operand position.
type Wildcard struct {
	Star Pos
}

// BadExpr stands for an expression that could not be parsed.
type BadExpr struct {
	From, To Pos
}

// ---- positions ----

func (n *ImportStmt) Pos() Pos { return n.Import }
func (n *ImportStmt) End() Pos {
	if n.Alias != nil {
		return n.Alias.End()
	}
	return n.Module.End()
}
func (n *FromImportStmt) Pos() Pos { return n.From }
func (n *FromImportStmt) End() Pos { return n.EndPos }
func (n *ImportAlias) Pos() Pos    { return n.Name.Pos() }
func (n *ImportAlias) End() Pos {
	if n.Alias != nil {
		return n.Alias.End()
	}
	return n.Name.End()
}
func (n *DottedName) Pos() Pos { return n.Parts[0].Pos() }
func (n *DottedName) End() Pos { return n.Parts[len(n.Parts)-1].End() }

// String returns the dotted module name.
func (n *DottedName) String() string {
	s := ""
	for i, p := range n.Parts {
		if i > 0 {
			s += "."
		}
		s += p.Name
	}
	return s
}

func (n *ConstDecl) Pos() Pos { return n.Name.Pos() }
func (n *ConstDecl) End() Pos { return endOf(n.Value, n.Define+2) }
func (n *Param) Pos() Pos     { return n.Name.Pos() }
func (n *Param) End() Pos     { return n.Type.End() }
func (n *PredicateDecl) Pos() Pos {
	return n.Name.Pos()
}
func (n *PredicateDecl) End() Pos {
	if n.Body != nil {
		return n.Body.End()
	}
	return endOf(n.Value, n.Define+1)
}
func (n *RuleDecl) Pos() Pos { return n.Raise }
func (n *RuleDecl) End() Pos {
	if n.Body != nil && len(n.Body.Lines) > 0 {
		return n.Body.End()
	}
	return n.If + 2
}
func (n *BadStmt) Pos() Pos    { return n.From }
func (n *BadStmt) End() Pos    { return n.To }
func (n *Body) Pos() Pos       { return n.Start }
func (n *Body) End() Pos       { return n.EndPos }
func (n *ExprLine) Pos() Pos   { return n.X.Pos() }
func (n *ExprLine) End() Pos   { return n.X.End() }
func (n *AssignLine) Pos() Pos { return n.Name.Pos() }
func (n *AssignLine) End() Pos { return endOf(n.Value, n.Define+2) }
func (n *QuantLine) Pos() Pos {
	if n.Not != NoPos {
		return n.Not
	}
	return n.Header.Pos()
}
func (n *QuantLine) End() Pos {
	if n.Body != nil && len(n.Body.Lines) > 0 {
		return n.Body.End()
	}
	return n.Colon + 1
}

func (n *Ident) Pos() Pos        { return n.NamePos }
func (n *Ident) End() Pos        { return n.NamePos + Pos(len(n.Name)) }
func (n *BasicLit) Pos() Pos     { return n.ValuePos }
func (n *BasicLit) End() Pos     { return n.EndPos }
func (n *FString) Pos() Pos      { return n.ValuePos }
func (n *FString) End() Pos      { return n.EndPos }
func (n *UnaryExpr) Pos() Pos    { return n.OpPos }
func (n *UnaryExpr) End() Pos    { return n.X.End() }
func (n *BinaryExpr) Pos() Pos   { return n.X.Pos() }
func (n *BinaryExpr) End() Pos   { return n.Y.End() }
func (n *CompareExpr) Pos() Pos  { return n.X.Pos() }
func (n *CompareExpr) End() Pos  { return n.Ys[len(n.Ys)-1].End() }
func (n *CondExpr) Pos() Pos     { return n.X.Pos() }
func (n *CondExpr) End() Pos     { return n.Y.End() }
func (n *KeywordArg) Pos() Pos   { return n.Name.Pos() }
func (n *KeywordArg) End() Pos   { return n.Value.End() }
func (n *CallExpr) Pos() Pos     { return n.Fun.Pos() }
func (n *CallExpr) End() Pos     { return n.Rparen + 1 }
func (n *SelectorExpr) Pos() Pos { return n.X.Pos() }
func (n *SelectorExpr) End() Pos { return n.Sel.End() }
func (n *IndexExpr) Pos() Pos    { return n.X.Pos() }
func (n *IndexExpr) End() Pos    { return n.Rbrack + 1 }
func (n *TupleLit) Pos() Pos     { return n.Lparen }
func (n *TupleLit) End() Pos     { return n.Rparen + 1 }
func (n *ListLit) Pos() Pos      { return n.Lbrack }
func (n *ListLit) End() Pos      { return n.Rbrack + 1 }
func (n *DictEntry) Pos() Pos    { return n.Key.Pos() }
func (n *DictEntry) End() Pos    { return n.Value.End() }
func (n *DictLit) Pos() Pos      { return n.Lbrace }
func (n *DictLit) End() Pos      { return n.Rbrace + 1 }
func (n *SetLit) Pos() Pos       { return n.Lbrace }
func (n *SetLit) End() Pos       { return n.Rbrace + 1 }
func (n *ListComp) Pos() Pos     { return n.Lbrack }
func (n *ListComp) End() Pos     { return n.Rbrack + 1 }
func (n *TypedDecl) Pos() Pos    { return n.Lparen }
func (n *TypedDecl) End() Pos    { return n.Rparen + 1 }
func (n *ToolRef) Pos() Pos      { return n.Tool }
func (n *ToolRef) End() Pos {
	if n.Lparen != NoPos {
		return n.Rparen + 1
	}
	return n.Name.End()
}
func (n *ValueRef) Pos() Pos { return n.ValuePos }
func (n *ValueRef) End() Pos { return n.EndPos }
func (n *Wildcard) Pos() Pos { return n.Star }
func (n *Wildcard) End() Pos { return n.Star + 1 }
func (n *BadExpr) Pos() Pos  { return n.From }
func (n *BadExpr) End() Pos  { return n.To }

func endOf(x Expr, def Pos) Pos {
	if x == nil {
		return def
	}
	return x.End()
}

func (*ImportStmt) stmtNode()     {}
func (*FromImportStmt) stmtNode() {}
func (*ConstDecl) stmtNode()      {}
func (*PredicateDecl) stmtNode()  {}
func (*RuleDecl) stmtNode()       {}
func (*BadStmt) stmtNode()        {}

func (*ExprLine) lineNode()   {}
func (*AssignLine) lineNode() {}
func (*QuantLine) lineNode()  {}

func (*Ident) exprNode()        {}
func (*BasicLit) exprNode()     {}
func (*FString) exprNode()      {}
func (*UnaryExpr) exprNode()    {}
func (*BinaryExpr) exprNode()   {}
func (*CompareExpr) exprNode()  {}
func (*CondExpr) exprNode()     {}
func (*CallExpr) exprNode()     {}
func (*SelectorExpr) exprNode() {}
func (*IndexExpr) exprNode()    {}
func (*TupleLit) exprNode()     {}
func (*ListLit) exprNode()      {}
func (*DictLit) exprNode()      {}
func (*SetLit) exprNode()       {}
func (*ListComp) exprNode()     {}
func (*TypedDecl) exprNode()    {}
func (*ToolRef) exprNode()      {}
func (*ValueRef) exprNode()     {}
func (*Wildcard) exprNode()     {}
func (*BadExpr) exprNode()      {}
