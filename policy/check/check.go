package check

import (
	"fmt"
	"sort"
	"strings"

	"github.com/vigilhq/vigil/policy/syntax"
)

// Check checks a parsed policy against the standard library u and returns
// the checked Program. When there are load errors it returns the (partial)
// Program and a syntax.ErrorList holding every error, sorted by position;
// otherwise the error is nil. Warnings never fail a check: they are in
// Program.Warnings. The file may be a partial tree from a failed parse;
// its Bad nodes are skipped, so that a caller can report syntax and load
// errors together.
//
// A nil Universe knows nothing (every built-in name is unresolved); a file
// without a Source is checked against an empty one.
func Check(file *syntax.File, u Universe) (*Program, error) {
	if u == nil {
		u = &Table{}
	}
	if file.Source == nil {
		file = &syntax.File{Source: syntax.NewSource("", ""), Stmts: file.Stmts, Warnings: file.Warnings}
	}
	c := &checker{
		u:       u,
		src:     file.Source,
		globals: map[string]*global{},
		inputs:  map[string]bool{},
		prog: &Program{
			File:    file,
			Refs:    make(map[*syntax.Ident]*Ref, 64),
			Members: map[*syntax.SelectorExpr]*Ref{},
		},
		cur:      -1,
		varTypes: map[*Var]vtype{},
	}
	c.run(file)
	c.prog.Warnings = append(c.prog.Warnings, file.Warnings...)
	c.prog.Warnings = append(c.prog.Warnings, c.warns...)
	c.prog.Warnings.Sort()
	return c.prog, c.errs.Err()
}

// global is a top-level name: a constant, a predicate or an import.
type global struct {
	ident *syntax.Ident
	ref   *Ref
	node  int // index in the dependency graph (constants and predicates), or -1
	imp   *Import
}

// node is a constant or predicate in the dependency graph used to reject
// recursion (§4.3, §4.4).
type node struct {
	name  string
	pos   syntax.Pos
	pred  bool
	edges []int
	state int // 0 unchecked, 1 checking, 2 done (constants are checked on demand)
	konst *Constant
}

// scope is a level of local names: a body, a predicate's parameters, or a
// comprehension.
type scope struct {
	parent *scope
	vars   map[string]*Var
	body   *Body // body scopes only
	cur    int   // index of the line being checked (use before assignment)
}

type checker struct {
	u       Universe
	src     *syntax.Source
	errs    syntax.ErrorList
	warns   syntax.ErrorList
	prog    *Program
	globals map[string]*global
	nodes   []*node
	inputs  map[string]bool

	// The context of the expression being checked.
	sc       *scope
	cur      int     // dependency node being checked, -1 in rules
	lines    []*Line // lines being checked, innermost last
	headUses *[]*Var // collects the variables of a rule head
	inConst  bool
	cost     *Cost
	varTypes map[*Var]vtype
	symRefs  map[*Symbol]*Ref
}

func (c *checker) errorf(pos syntax.Pos, format string, args ...any) {
	c.errs.Add(c.src, pos, fmt.Sprintf(format, args...))
}

func (c *checker) warnf(pos syntax.Pos, format string, args ...any) {
	c.warns.Add(c.src, pos, fmt.Sprintf(format, args...))
}

func (c *checker) run(f *syntax.File) {
	// Pass 1: top-level names.
	for _, s := range f.Stmts {
		switch s := s.(type) {
		case *syntax.ImportStmt:
			c.importStmt(s)
		case *syntax.FromImportStmt:
			c.fromImport(s)
		case *syntax.ConstDecl:
			k := &Constant{Name: s.Name.Name, Syntax: s, Value: s.Value}
			n := c.addNode(&node{name: k.Name, pos: s.Name.Pos(), konst: k})
			c.define(s.Name, &global{ident: s.Name, ref: &Ref{Kind: RefConst, Const: k}, node: n})
			c.prog.Constants = append(c.prog.Constants, k)
		case *syntax.PredicateDecl:
			p := &Predicate{Name: s.Name.Name, Syntax: s}
			n := c.addNode(&node{name: p.Name, pos: s.Name.Pos(), pred: true})
			c.define(s.Name, &global{ident: s.Name, ref: &Ref{Kind: RefPredicate, Pred: p}, node: n})
			c.prog.Predicates = append(c.prog.Predicates, p)
		}
	}
	// Pass 2: constants, predicates, rules.
	ci, pi := 0, 0
	for _, s := range f.Stmts {
		switch s := s.(type) {
		case *syntax.ConstDecl:
			c.constant(c.prog.Constants[ci])
			ci++
		case *syntax.PredicateDecl:
			c.predicate(c.prog.Predicates[pi], s)
			pi++
		case *syntax.RuleDecl:
			c.rule(s)
		}
	}
	c.recursion()
	for name := range c.inputs {
		c.prog.Inputs = append(c.prog.Inputs, name)
	}
	sort.Strings(c.prog.Inputs)
}

func (c *checker) addNode(n *node) int {
	c.nodes = append(c.nodes, n)
	return len(c.nodes) - 1
}

func (c *checker) define(id *syntax.Ident, g *global) {
	if old, ok := c.globals[id.Name]; ok {
		// Importing the same export under the same name twice is allowed.
		if old.imp != nil && g.imp != nil && old.imp.Module == g.imp.Module && old.imp.Symbol.Name == g.imp.Symbol.Name && old.imp.Symbol.Kind == g.imp.Symbol.Kind {
			return
		}
		c.errorf(id.Pos(), "%s already declared (at %s)", id.Name, c.src.Position(old.ident.Pos()))
		return
	}
	c.globals[id.Name] = g
}

// ---- imports (§4.2) ----

func (c *checker) module(d *syntax.DottedName) (string, bool) {
	path := d.String()
	if !c.u.Module(path) {
		c.errorf(d.Pos(), "module %s is not available%s", path, c.didYouMean(path, func() []string { return c.u.Modules() }))
		return path, false
	}
	return path, true
}

func (c *checker) importStmt(s *syntax.ImportStmt) {
	path, ok := c.module(s.Module)
	if !ok {
		return
	}
	name := s.Alias
	if name == nil {
		if len(s.Module.Parts) > 1 {
			c.errorf(s.Module.Pos(), "module %s is not available without an alias; write import %s as NAME", path, path)
			return
		}
		name = s.Module.Parts[0]
	}
	sym := &Symbol{Kind: SymModule, Name: s.Module.Parts[len(s.Module.Parts)-1].Name, Module: path}
	imp := &Import{Name: name, Module: path, Symbol: sym}
	c.prog.Imports = append(c.prog.Imports, imp)
	c.define(name, &global{ident: name, ref: &Ref{Kind: RefModule, Symbol: sym}, node: -1, imp: imp})
}

func (c *checker) fromImport(s *syntax.FromImportStmt) {
	path, ok := c.module(s.Module)
	if !ok {
		return
	}
	if s.Star.IsValid() {
		c.errorf(s.Star, "module %s is not available with import *; import the names you use", path)
		return
	}
	for _, a := range s.Names {
		sym, ok := c.u.Member(path, a.Name.Name)
		if !ok {
			c.errorf(a.Name.Pos(), "module %s has no member %s%s", path, a.Name.Name, c.didYouMean(a.Name.Name, func() []string { return c.u.Members(path) }))
			continue
		}
		name := a.Name
		if a.Alias != nil {
			name = a.Alias
		}
		kind := RefBuiltin
		if sym.Kind == SymModule {
			kind = RefModule
		}
		imp := &Import{Name: name, Module: path, Symbol: sym}
		c.prog.Imports = append(c.prog.Imports, imp)
		c.define(name, &global{ident: name, ref: &Ref{Kind: kind, Symbol: sym}, node: -1, imp: imp})
	}
}

// ---- constants, predicates, rules ----

// constant checks a constant (once; constants are also checked on demand
// when another declaration uses one before its own position).
func (c *checker) constant(k *Constant) vtype {
	g := c.globals[k.Name]
	var n *node
	if g != nil && g.ref.Const == k {
		n = c.nodes[g.node]
	} else {
		// A duplicate declaration: check it in place.
		n = &node{}
	}
	switch n.state {
	case 1:
		return unknown // a cycle; reported by recursion()
	case 2:
		if k.Folded {
			return known(k.Const)
		}
		return unknown
	}
	n.state = 1
	// Save the context: constants see only global names.
	sc, cur, lines, head, inConst, cost := c.sc, c.cur, c.lines, c.headUses, c.inConst, c.cost
	c.sc, c.lines, c.headUses, c.inConst, c.cost = nil, nil, nil, true, &Cost{}
	if g != nil {
		c.cur = g.node
	}
	t := c.expr(k.Value)
	c.sc, c.cur, c.lines, c.headUses, c.inConst, c.cost = sc, cur, lines, head, inConst, cost
	n.state = 2
	if t.known {
		k.Folded, k.Const = true, t.val
	}
	return t
}

func (c *checker) typeName(id *syntax.Ident) string {
	if !isTypeName(id.Name) {
		c.errorf(id.Pos(), "unknown type %s%s", id.Name, c.didYouMean(id.Name, func() []string { return TypeNames }))
		return ""
	}
	return id.Name
}

func (c *checker) predicate(p *Predicate, s *syntax.PredicateDecl) {
	g := c.globals[p.Name]
	c.cur = -1
	if g != nil && g.ref.Pred == p {
		c.cur = g.node
	}
	ps := &scope{vars: map[string]*Var{}}
	for i, prm := range s.Params {
		v := &Var{Name: prm.Name.Name, Kind: ParamVar, Type: c.typeName(prm.Type), Decl: prm.Name, Line: -1, Index: i}
		if _, dup := ps.vars[v.Name]; dup {
			c.errorf(prm.Name.Pos(), "%s already declared", v.Name)
		}
		ps.vars[v.Name] = v
		p.Params = append(p.Params, v)
	}
	c.sc = ps
	c.cost = &Cost{}
	body := s.Body
	if body == nil {
		x := s.Value
		if x == nil {
			x = &syntax.BadExpr{From: s.Define, To: s.Define}
		}
		body = &syntax.Body{Start: x.Pos(), Lines: []syntax.Line{&syntax.ExprLine{X: x}}, EndPos: x.End()}
	}
	p.Body = c.body(body, nil)
	p.Cost = c.finishCost(p.Body)
	c.sc, c.cur = nil, -1
}

func (c *checker) rule(s *syntax.RuleDecl) {
	r := &Rule{Index: len(c.prog.Rules), Syntax: s, Head: s.Head}
	c.prog.Rules = append(c.prog.Rules, r)
	c.cur = -1
	c.cost = &Cost{}
	body := s.Body
	if body == nil {
		body = &syntax.Body{Start: s.If, EndPos: s.If}
	}
	r.Body = c.body(body, nil, func(sc *scope) {
		// The head sees every variable of the body (§4.6).
		sc.cur = len(body.Lines)
		c.headUses = &r.HeadUses
		c.head(s.Head)
		c.headUses = nil
	})
	r.Cost = c.finishCost(r.Body)
}

func (c *checker) head(h syntax.Expr) {
	switch h := h.(type) {
	case nil, *syntax.BadExpr:
	case *syntax.BasicLit:
		if h.Kind != syntax.LitString {
			c.errorf(h.Pos(), "raise needs a string, a name or a call such as PolicyViolation(...)")
		}
	case *syntax.FString, *syntax.Ident, *syntax.CallExpr:
		c.expr(h)
	default:
		c.errorf(h.Pos(), "raise needs a string, a name or a call such as PolicyViolation(...)")
	}
}

func (c *checker) finishCost(b *Body) Cost {
	cost := *c.cost
	cost.FreeVars = len(b.Free)
	c.cost = nil
	return cost
}

// recursion reports cycles among constants and predicates.
func (c *checker) recursion() {
	color := make([]int, len(c.nodes))
	var stack []int
	reported := map[int]bool{}
	var visit func(i int)
	visit = func(i int) {
		color[i] = 1
		stack = append(stack, i)
		for _, j := range c.nodes[i].edges {
			switch color[j] {
			case 0:
				visit(j)
			case 1:
				// A cycle: stack from j to the top.
				k := len(stack) - 1
				for stack[k] != j {
					k--
				}
				cycle := stack[k:]
				first := cycle[0]
				for _, m := range cycle {
					if m < first {
						first = m
					}
				}
				if reported[first] {
					continue
				}
				for _, m := range cycle {
					reported[m] = true
				}
				var names []string
				start := 0
				for x, m := range cycle {
					if m == first {
						start = x
					}
				}
				for x := 0; x <= len(cycle); x++ {
					names = append(names, c.nodes[cycle[(start+x)%len(cycle)]].name)
				}
				n := c.nodes[first]
				what := "constant"
				if n.pred {
					what = "predicate"
				}
				c.errorf(n.pos, "%s %s is recursive (%s)", what, n.name, strings.Join(names, " -> "))
			}
		}
		stack = stack[:len(stack)-1]
		color[i] = 2
	}
	for i := range c.nodes {
		if color[i] == 0 {
			visit(i)
		}
	}
}

// ---- bodies (§4.6, §10.1) ----

// body checks a body. then, when given, runs in the body's scope after its
// lines (the rule head).
func (c *checker) body(sb *syntax.Body, outer *Body, then ...func(*scope)) *Body {
	b := &Body{Syntax: sb, Outer: outer}
	sc := &scope{parent: c.sc, vars: map[string]*Var{}, body: b}
	declare := func(id *syntax.Ident, kind VarKind, typ string, line int) *Var {
		v := &Var{Name: id.Name, Kind: kind, Type: typ, Decl: id, Body: b, Line: line, Index: len(b.Vars)}
		if old, dup := sc.vars[id.Name]; dup {
			c.errorf(id.Pos(), "%s already declared (at %s)", id.Name, c.src.Position(old.Decl.Pos()))
			return v
		}
		sc.vars[id.Name] = v
		b.Vars = append(b.Vars, v)
		if kind == FreeVar {
			b.Free = append(b.Free, v)
		}
		return v
	}
	// Pass 1: classify the lines and declare the variables.
	for i, sl := range sb.Lines {
		ln := &Line{Syntax: sl, Body: b, Index: i, Kind: LineCond}
		b.Lines = append(b.Lines, ln)
		switch sl := sl.(type) {
		case *syntax.AssignLine:
			ln.Kind = LineAssign
			ln.Value = sl.Value
			ln.Declares = []*Var{declare(sl.Name, AssignedVar, "", i)}
		case *syntax.QuantLine:
			ln.Kind = LineQuant
		case *syntax.ExprLine:
			ln.Value = sl.X
			switch x := sl.X.(type) {
			case *syntax.TypedDecl:
				ln.Kind, ln.Value = LineDecl, nil
				ln.Declares = []*Var{declare(x.Name, FreeVar, c.typeName(x.Type), i)}
			case *syntax.CompareExpr:
				if isFlow(x) {
					ln.Kind, ln.Value = LineFlow, nil
					for _, o := range append([]syntax.Expr{x.X}, x.Ys...) {
						if d, ok := o.(*syntax.TypedDecl); ok {
							ln.Declares = append(ln.Declares, declare(d.Name, FreeVar, c.typeName(d.Type), i))
						}
					}
				} else if d, ok := x.X.(*syntax.TypedDecl); ok && len(x.Ops) == 1 && x.Ops[0].Op == syntax.IN {
					ln.Kind, ln.Value = LineDerived, x.Ys[0]
					ln.Declares = []*Var{declare(d.Name, DerivedVar, c.typeName(d.Type), i)}
				}
			}
		}
	}
	// Pass 2: check the lines in order.
	c.sc = sc
	for i, ln := range b.Lines {
		sc.cur = i
		c.lines = append(c.lines, ln)
		before := c.cost.Nodes
		c.line(ln)
		ln.Cost = c.cost.Nodes - before
		c.cost.Lines++
		c.lines = c.lines[:len(c.lines)-1]
	}
	for _, f := range then {
		f(sc)
	}
	c.sc = sc.parent
	return b
}

func isFlow(x *syntax.CompareExpr) bool {
	for _, op := range x.Ops {
		if op.Op != syntax.ARROW && op.Op != syntax.SQUIG {
			return false
		}
	}
	return true
}

func (c *checker) line(ln *Line) {
	switch sl := ln.Syntax.(type) {
	case *syntax.AssignLine:
		t := c.expr(sl.Value)
		c.varTypes[ln.Declares[0]] = t
	case *syntax.QuantLine:
		c.quantifier(ln, sl)
	case *syntax.ExprLine:
		switch ln.Kind {
		case LineDecl:
			c.useVar(ln.Declares[0])
		case LineFlow:
			x := sl.X.(*syntax.CompareExpr)
			for i, o := range append([]syntax.Expr{x.X}, x.Ys...) {
				if i > 0 {
					ln.FlowOps = append(ln.FlowOps, x.Ops[i-1].Op)
				}
				ln.FlowVars = append(ln.FlowVars, c.flowOperand(o, x.Ops[max(i-1, 0)].Op))
			}
			c.cost.Nodes++
		case LineDerived:
			c.useVar(ln.Declares[0])
			c.expr(ln.Value)
		default:
			t := c.expr(sl.X)
			if notBool(sl.X, t) {
				c.warnf(sl.X.Pos(), "this line has type %s, not bool: it never counts as True", t.name())
			}
		}
	}
}

// notBool reports whether a line's value is statically known not to be a
// boolean (§4.7 warnings).
func notBool(x syntax.Expr, t vtype) bool {
	switch t.kind {
	case tInt, tFloat, tStr, tList, tTuple, tDict, tNone, tPattern, tModule, tType:
		if b, ok := x.(*syntax.BinaryExpr); ok && (b.Op == syntax.AND || b.Op == syntax.OR) && !t.known {
			return false
		}
		return true
	}
	return false
}

// flowOperand checks an operand of a flow operator: a variable (§8.6).
func (c *checker) flowOperand(o syntax.Expr, op syntax.Token) *Var {
	switch o := o.(type) {
	case *syntax.TypedDecl:
		if c.inConst || c.sc == nil || c.sc.body == nil {
			c.errorf(o.Pos(), "typed declarations must stand on their own line")
			return nil
		}
		if v := c.sc.vars[o.Name.Name]; v != nil {
			c.useVar(v)
			return v
		}
		return nil
	case *syntax.Ident:
		ref := c.ident(o)
		if ref != nil && (ref.Kind == RefVar || ref.Kind == RefParam) {
			return ref.Var
		}
		if ref != nil {
			c.errorf(o.Pos(), "%s needs variables on both sides; %s is not a variable", op, o.Name)
		}
		return nil
	case *syntax.BadExpr, nil:
		return nil
	}
	c.errorf(o.Pos(), "%s needs variables on both sides", op)
	c.expr(o)
	return nil
}

// useVar records that the lines being checked (and the head) mention v.
func (c *checker) useVar(v *Var) {
	if v == nil {
		return
	}
	if v.Body != nil {
		for _, ln := range c.lines {
			if !encloses(v.Body, ln.Body) {
				continue
			}
			if !containsVar(ln.Uses, v) {
				ln.Uses = append(ln.Uses, v)
			}
		}
	}
	if c.headUses != nil && len(c.lines) == 0 && !containsVar(*c.headUses, v) {
		*c.headUses = append(*c.headUses, v)
	}
}

// encloses reports whether outer is b or encloses it.
func encloses(outer, b *Body) bool {
	for ; b != nil; b = b.Outer {
		if b == outer {
			return true
		}
	}
	return false
}

func containsVar(vs []*Var, v *Var) bool {
	for _, x := range vs {
		if x == v {
			return true
		}
	}
	return false
}

// quantifier checks a quantifier line (§10.7).
func (c *checker) quantifier(ln *Line, q *syntax.QuantLine) {
	ln.Quant = &Quantifier{Not: q.Not.IsValid()}
	var fun *syntax.Ident
	var call *syntax.CallExpr
	switch h := q.Header.(type) {
	case *syntax.Ident:
		fun = h
	case *syntax.CallExpr:
		call = h
		fun, _ = h.Fun.(*syntax.Ident)
		if fun == nil {
			c.errorf(h.Pos(), "%s is not a quantifier", c.src.Snippet(h.Fun.Pos(), h.Fun.End()))
		}
	}
	if fun != nil {
		ref := c.ident(fun)
		switch {
		case ref == nil:
		case ref.Kind != RefBuiltin || ref.Symbol.Kind != SymQuantifier:
			c.errorf(fun.Pos(), "%s is not a quantifier", fun.Name)
		case ref.Symbol.Name == "forall" && call != nil:
			c.errorf(call.Lparen, "forall takes no arguments; write forall:")
		case ref.Symbol.Name == "count" && call == nil:
			c.errorf(fun.Pos(), "count needs its bounds; write count(min=N, max=M):")
		case ref.Symbol.Name == "count":
			ln.Quant.Kind = Count
			c.countBounds(ln.Quant, call)
		}
	}
	if q.Body != nil {
		ln.Quant.Body = c.body(q.Body, ln.Body)
	}
}

func (c *checker) countBounds(qt *Quantifier, call *syntax.CallExpr) {
	if len(call.Args) > 2 {
		c.errorf(call.Args[2].Pos(), "count takes at most 2 arguments (min, max), got %d", len(call.Args))
	}
	for i, a := range call.Args {
		if i == 0 {
			qt.Min = a
		} else if i == 1 {
			qt.Max = a
		}
	}
	for _, k := range call.Kwargs {
		switch k.Name.Name {
		case "min":
			if qt.Min != nil {
				c.errorf(k.Name.Pos(), "count got multiple values for min")
			}
			qt.Min = k.Value
		case "max":
			if qt.Max != nil {
				c.errorf(k.Name.Pos(), "count got multiple values for max")
			}
			qt.Max = k.Value
		default:
			c.errorf(k.Name.Pos(), "count has no parameter %s%s", k.Name.Name, c.didYouMean(k.Name.Name, func() []string { return []string{"min", "max"} }))
		}
	}
	for _, b := range []syntax.Expr{qt.Min, qt.Max} {
		if b == nil {
			continue
		}
		t := c.expr(b)
		if t.kind != tUnknown && t.kind != tInt {
			c.errorf(b.Pos(), "count bounds must be integers, not %s", t.name())
		}
	}
}
