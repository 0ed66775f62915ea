package check

import "github.com/vigilhq/vigil/policy/syntax"

// Program is a checked policy: everything the evaluator needs, with every
// name resolved.
type Program struct {
	File       *syntax.File
	Rules      []*Rule      // in file order; Rules[i].Index == i
	Predicates []*Predicate // in file order
	Constants  []*Constant  // in file order
	Imports    []*Import    // in file order
	// Refs resolves every identifier that the evaluator looks up (names in
	// expressions, rule heads and quantifier headers). Identifiers that are
	// declarations (variables, parameters, keyword-argument names, dict
	// keys, attribute names) are not in it.
	Refs map[*syntax.Ident]*Ref
	// Members resolves the selectors that are static: module members
	// (det.secrets) and policy parameters (input.NAME).
	Members map[*syntax.SelectorExpr]*Ref
	// Inputs are the parameter names read with input.NAME, sorted, without
	// repeats (spec §11.6).
	Inputs []string
	// Warnings are the load-time warnings (§4.7), sorted, including the
	// lexical ones of the syntax tree.
	Warnings syntax.ErrorList
}

// Import is one binding made by an import statement.
type Import struct {
	Name   *syntax.Ident // the bound name (alias, or the imported name)
	Module string        // the module imported from, or the module bound
	Symbol *Symbol       // what is bound (a SymModule for import M)
}

// RefKind says what an identifier resolves to.
type RefKind int

// Kinds of resolved names.
const (
	RefVar       RefKind = iota // a variable of a body (Var.Kind FreeVar, Derived or Assigned)
	RefParam                    // a predicate parameter (Var.Kind ParamVar)
	RefCompVar                  // a list-comprehension variable (Var.Kind CompVar)
	RefConst                    // a top-level constant
	RefPredicate                // a predicate
	RefBuiltin                  // a built-in or imported symbol (function, type, quantifier, input)
	RefModule                   // a module value (Symbol.Kind SymModule)
	RefInput                    // input.NAME (in Program.Members; Name is NAME)
)

// Ref is the resolution of a name.
type Ref struct {
	Kind   RefKind
	Var    *Var       // RefVar, RefParam, RefCompVar
	Const  *Constant  // RefConst
	Pred   *Predicate // RefPredicate
	Symbol *Symbol    // RefBuiltin, RefModule
	Name   string     // RefInput: the parameter name
}

// VarKind is the kind of a variable (§10.1).
type VarKind int

// Kinds of variables.
const (
	FreeVar     VarKind = iota // (x: T) alone or in a flow line: ranges over the trace
	DerivedVar                 // (x: T) in e: ranges over the selection of T in e
	AssignedVar                // x := e
	ParamVar                   // a predicate parameter
	CompVar                    // a comprehension variable
)

// String returns the kind's name.
func (k VarKind) String() string {
	return [...]string{"free", "derived", "assigned", "param", "comp"}[k]
}

// Var is a variable.
type Var struct {
	Name  string
	Kind  VarKind
	Type  string        // type name of free, derived and parameter variables; "" otherwise
	Decl  *syntax.Ident // the declaring identifier
	Body  *Body         // owning body; nil for parameters and comprehension variables
	Line  int           // index in Body.Lines of the declaring line; -1 if none
	Index int           // position in Body.Vars (declaration order) or in the parameter list

	ref *Ref // the Ref every use shares
}

// Body is a checked body: of a rule, a predicate or a quantifier.
type Body struct {
	Syntax *syntax.Body
	Outer  *Body   // the enclosing body of a quantifier body; nil otherwise
	Vars   []*Var  // every variable of the body, in declaration order
	Free   []*Var  // the free variables in declaration order (§10.2 step 1)
	Lines  []*Line // one per line of the body
}

// LineKind classifies a body line (§10.1, §10.2).
type LineKind int

// Kinds of lines.
const (
	LineDecl    LineKind = iota // a standalone free declaration (x: T): always True
	LineFlow                    // a flow test a -> b / a ~> b (may declare free variables)
	LineDerived                 // (x: T) in e
	LineAssign                  // x := e
	LineCond                    // any other expression: must be exactly True
	LineQuant                   // a quantifier block
)

// String returns the kind's name.
func (k LineKind) String() string {
	return [...]string{"decl", "flow", "derived", "assign", "cond", "quant"}[k]
}

// Line is a checked body line.
type Line struct {
	Kind   LineKind
	Syntax syntax.Line
	Body   *Body
	Index  int // index in Body.Lines
	// Declares are the variables this line declares (free variables of a
	// declaration or flow line; the derived or assigned variable).
	Declares []*Var
	// Uses are the body variables (of this body or an enclosing one) that
	// the line mentions, in first-mention order, including mentions inside
	// a quantifier block. A line can be evaluated once these are bound.
	Uses []*Var
	// Value is the expression: the condition, the assigned value, the
	// iterable of a derived declaration (the right side of in); nil for
	// declaration, flow and quantifier lines.
	Value syntax.Expr
	// Flow gives the operands and operators of a flow line:
	// FlowVars[i] FlowOps[i] FlowVars[i+1].
	FlowVars []*Var
	FlowOps  []syntax.Token
	// Quant is set for a quantifier line.
	Quant *Quantifier
	// Cost is a static estimate of the work of one evaluation of the line
	// (expression nodes, with detector and regex calls weighted).
	Cost int
}

// QuantKind is forall or count.
type QuantKind int

// Quantifier kinds.
const (
	Forall QuantKind = iota
	Count
)

// Quantifier is a checked quantifier line (§10.7).
type Quantifier struct {
	Kind QuantKind
	Not  bool
	Min  syntax.Expr // count(min=...); nil when absent
	Max  syntax.Expr // count(max=...); nil when absent
	Body *Body
}

// Rule is a checked rule.
type Rule struct {
	Index  int
	Syntax *syntax.RuleDecl
	Head   syntax.Expr
	// HeadUses are the variables the head mentions.
	HeadUses []*Var
	Body     *Body
	Cost     Cost
}

// Predicate is a checked predicate (§4.4, §10.5).
type Predicate struct {
	Name   string
	Syntax *syntax.PredicateDecl
	Params []*Var
	// Body is the body of the block forms; for the inline form
	// name(params) := expr it is a body of one condition line.
	Body *Body
	Cost Cost
}

// Constant is a checked top-level constant (§4.3, §10.6).
type Constant struct {
	Name   string
	Syntax *syntax.ConstDecl
	Value  syntax.Expr
	// Folded reports whether the value was computed at load time; Const is
	// then the value: nil (None), bool, *big.Int, float64, string, List,
	// Tuple or *Dict. Folding never turns a runtime error into a load
	// error: an expression that would fail is left to the evaluator.
	Folded bool
	Const  any
}

// List is a folded list value.
type List []any

// Tuple is a folded tuple value.
type Tuple []any

// Dict is a folded dict value with string keys in insertion order.
type Dict struct {
	Keys   []string
	Values []any
}

// Cost is a static estimate of the work of a rule or predicate.
type Cost struct {
	// FreeVars is the number of free variables of the body (the exponent
	// of the binding enumeration, §10.2); quantifier blocks count apart.
	FreeVars int
	// Lines counts body lines, nested blocks included.
	Lines int
	// Nodes counts expression nodes, with detector and regex calls weighted.
	Nodes int
	// Detectors counts detector and model calls.
	Detectors int
}

// Estimate returns the estimated number of node evaluations on a trace of
// n events: Nodes × n^FreeVars (saturating).
func (c Cost) Estimate(n int) float64 {
	e := float64(c.Nodes)
	for i := 0; i < c.FreeVars; i++ {
		e *= float64(n)
	}
	return e
}
