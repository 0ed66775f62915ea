package eval

import (
	"fmt"
	"math/big"
	"sort"
	"strconv"
	"strings"

	"github.com/vigilhq/vigil/policy/builtin"
	"github.com/vigilhq/vigil/policy/check"
	"github.com/vigilhq/vigil/policy/syntax"
)

// This file compiles a checked policy (package check) into closures. Names,
// variables, line kinds and the variables each line mentions come from the
// loader; this compiler only builds the closures and the execution plans,
// and anything it rejects is reported as a load error too.

// evalFn evaluates an expression in a frame. Runtime errors panic with
// *rtError; the rule executor recovers them at one place.
type evalFn func(f *frame) builtin.Value

type varKind int

const (
	varFree varKind = iota
	varDerived
	varAssigned
	varParam
	varComp
)

// variable is a slot of a frame: a body variable, a predicate parameter or
// a comprehension variable.
type variable struct {
	name  string
	slot  int
	kind  varKind
	typ   string // declared type (free, derived)
	body  *body  // body declaring it (nil for params and comprehension variables)
	order int    // declaration order among the free variables of its body
	pos   syntax.Pos
	line  int // index of the declaring line (derived, assigned)
}

// frameLayout counts the slots of a rule or predicate.
type frameLayout struct {
	nslots int
}

func (l *frameLayout) newVar(v *variable) *variable {
	v.slot = l.nslots
	l.nslots++
	return v
}

// constant is a top-level constant (spec §4.3).
type constant struct {
	name   string
	index  int
	decl   *check.Constant
	fn     evalFn
	layout *frameLayout
	state  int // 0 unresolved, 1 compiling, 2 compiled
}

// predicate is a top-level predicate (spec §4.4).
type predicate struct {
	name   string
	decl   *check.Predicate
	params []*variable
	body   *body
	value  evalFn // inline form
	layout *frameLayout
	state  int
	// traceDep: the body has free variables or quantifiers
	traceDep bool
}

// flowConstraint is a deferred flow line between two variables (spec §8.6).
type flowConstraint struct {
	a, b      *variable
	immediate bool // ~>
}

type stepKind int

const (
	stepBind stepKind = iota
	stepCond
	stepAssign
	stepDerive
)

// step is one step of a body's execution plan.
type step struct {
	kind stepKind
	v    *variable
	line *line
	// bind: tool-name index hint from the line that triggers the binding
	toolName string
	flows    []*flowConstraint
	// cond: the line depends on the event variable v only (memoised)
	memo bool
}

type lineKind int

const (
	lineDecl lineKind = iota
	lineFlow
	lineCond
	lineAssign
	lineDerive
	lineQuant
)

// line is a compiled body line.
type line struct {
	kind  lineKind
	index int
	pos   syntax.Pos
	fn    evalFn
	v     *variable          // assign, derive
	refs  map[*variable]bool // variables referenced (transitively through nested bodies)
	flows []*flowConstraint  // flow line operands
	decls []*variable        // free declarations on this line
	tool  string             // `v is tool:NAME...` form: NAME
	toolV *variable
	// traceDep: the value depends on the whole trace, not only on the
	// variables the line mentions (a quantifier, or a predicate with free
	// variables), so a memo must not outlive the analysis
	traceDep bool
}

// body is a compiled body (rule, predicate or quantifier block).
type body struct {
	lines []*line
	free  []*variable // free variables in declaration order
	vars  []*variable // free, derived, assigned, for keys (sorted by name)
	plan  []step
	outer *body
}

// rule is a compiled rule.
type rule struct {
	index  int
	pos    syntax.Pos
	head   evalFn
	body   *body
	layout *frameLayout
	// pendingSafe reports that only free variables can hold events, so
	// pending mode may restrict the last bound free variable (Monitor).
	pendingSafe bool
}

// compiler holds the state of one compilation.
type compiler struct {
	prog       *check.Program
	src        *syntax.Source
	errs       syntax.ErrorList
	consts     map[*check.Constant]*constant
	preds      map[*check.Predicate]*predicate
	vars       map[*syntax.Ident]*variable // by declaring identifier
	layout     *frameLayout
	deferFlows bool
	traceDep   bool
	builtins   map[string]*builtin.Builtin
}

// lookup returns the built-in called name, overrides first.
func (c *compiler) lookup(name string) (*builtin.Builtin, bool) {
	if b, ok := c.builtins[name]; ok {
		return b, true
	}
	return builtin.Lookup(name)
}

func (c *compiler) errorf(pos syntax.Pos, format string, args ...any) {
	c.errs.Add(c.src, pos, fmt.Sprintf(format, args...))
}

// Compile compiles a checked policy with the registered built-ins. Errors
// are load errors (*syntax.Error in a syntax.ErrorList).
func Compile(prog *check.Program) (*Program, error) { return CompileWith(prog, nil) }

// CompileWith compiles a checked policy; builtins, when not nil, replace the
// registered built-ins of the same names for this program only (a caller's
// own detector providers, or test doubles of model-backed detectors).
func CompileWith(prog *check.Program, builtins map[string]*builtin.Builtin) (*Program, error) {
	src := prog.File.Source
	c := &compiler{prog: prog, src: src, consts: map[*check.Constant]*constant{}, preds: map[*check.Predicate]*predicate{},
		vars: map[*syntax.Ident]*variable{}, builtins: builtins}
	p := &Program{src: src, builtins: builtins, params: prog.Inputs}
	for i, k := range prog.Constants {
		ck := &constant{name: k.Name, index: i, decl: k}
		c.consts[k] = ck
		p.consts = append(p.consts, ck)
	}
	for _, pr := range prog.Predicates {
		c.preds[pr] = &predicate{name: pr.Name, decl: pr}
	}
	for _, k := range p.consts {
		c.compileConst(k)
	}
	for _, pr := range prog.Predicates {
		c.compilePred(c.preds[pr])
	}
	for _, r := range prog.Rules {
		p.rules = append(p.rules, c.compileRule(r))
	}
	if len(c.errs) > 0 {
		c.errs.Sort()
		return nil, c.errs.Err()
	}
	return p, nil
}

func (c *compiler) withLayout(l *frameLayout, fn func()) {
	saved := c.layout
	c.layout = l
	fn()
	c.layout = saved
}

// variable returns the variable of v, allocating its slot in the current
// layout on first use.
func (c *compiler) variable(v *check.Var) *variable {
	if ev, ok := c.vars[v.Decl]; ok {
		return ev
	}
	ev := &variable{name: v.Name, typ: v.Type, pos: v.Decl.Pos(), line: v.Line}
	switch v.Kind {
	case check.FreeVar:
		ev.kind = varFree
		ev.order = -1
	case check.DerivedVar:
		ev.kind = varDerived
	case check.AssignedVar:
		ev.kind = varAssigned
	case check.ParamVar:
		ev.kind = varParam
	case check.CompVar:
		ev.kind = varComp
	}
	c.vars[v.Decl] = c.layout.newVar(ev)
	return ev
}

func (c *compiler) compileConst(k *constant) {
	if k.state != 0 {
		return // compiling: check rejects cycles
	}
	k.state = 1
	k.layout = &frameLayout{}
	if k.decl.Folded {
		v := foldedValue(k.decl.Const)
		k.fn = func(*frame) builtin.Value { return v }
	} else {
		c.withLayout(k.layout, func() { k.fn = c.expr(k.decl.Value) })
	}
	k.state = 2
}

// foldedValue converts a constant folded by the loader to an engine value.
func foldedValue(v any) builtin.Value {
	switch x := v.(type) {
	case *big.Int:
		if x.IsInt64() {
			return x.Int64()
		}
		return x
	case check.List:
		out := make([]builtin.Value, len(x))
		for i, e := range x {
			out[i] = foldedValue(e)
		}
		return out
	case check.Tuple:
		out := make(builtin.Tuple, len(x))
		for i, e := range x {
			out[i] = foldedValue(e)
		}
		return out
	case *check.Dict:
		d := builtin.NewDict(len(x.Keys))
		for i, k := range x.Keys {
			d.Set(k, foldedValue(x.Values[i]))
		}
		return d
	}
	return v // nil, bool, float64, string
}

func (c *compiler) compilePred(pr *predicate) {
	if pr.state != 0 {
		return // compiling: check rejects recursion
	}
	pr.state = 1
	pr.layout = &frameLayout{}
	c.withLayout(pr.layout, func() {
		for _, p := range pr.decl.Params {
			pr.params = append(pr.params, c.variable(p))
		}
		savedDep := c.traceDep
		c.traceDep = false
		if pr.decl.Syntax.Body != nil {
			pr.body = c.body(pr.decl.Body, nil)
			pr.traceDep = c.traceDep || len(pr.body.free) > 0
		} else if pr.decl.Syntax.Value != nil {
			pr.value = c.expr(pr.decl.Syntax.Value)
			pr.traceDep = c.traceDep
		}
		c.traceDep = savedDep
	})
	pr.state = 2
}

var eventTypes = map[string]bool{"Message": true, "ToolCall": true, "ToolOutput": true, "Tool": true}

func (c *compiler) compileRule(r *check.Rule) *rule {
	ru := &rule{index: r.Index, pos: r.Syntax.Pos(), layout: &frameLayout{}}
	c.withLayout(ru.layout, func() {
		c.deferFlows = true
		ru.body = c.body(r.Body, nil)
		c.deferFlows = false
		ru.head = c.head(r.Head)
	})
	ru.pendingSafe = pendingSafe(ru.body)
	return ru
}

func (c *compiler) head(h syntax.Expr) evalFn {
	switch h.(type) {
	case *syntax.BasicLit, *syntax.FString, *syntax.Ident, *syntax.CallExpr:
	default:
		if h != nil {
			c.errorf(h.Pos(), "unsupported rule head: use a string or Violation(...)")
		}
		return func(*frame) builtin.Value { return "" }
	}
	return c.expr(h)
}

var lineKinds = [...]lineKind{check.LineDecl: lineDecl, check.LineFlow: lineFlow, check.LineDerived: lineDerive,
	check.LineAssign: lineAssign, check.LineCond: lineCond, check.LineQuant: lineQuant}

// body compiles the lines of a checked body and plans its execution.
func (c *compiler) body(cb *check.Body, outer *body) *body {
	b := &body{outer: outer}
	if cb == nil || cb.Syntax == nil || len(cb.Syntax.Lines) == 0 {
		if cb != nil && cb.Syntax != nil {
			c.errorf(cb.Syntax.Pos(), "empty body")
		}
		return b
	}
	for _, v := range cb.Vars {
		ev := c.variable(v)
		ev.body = b
		b.vars = append(b.vars, ev)
	}
	for i, v := range cb.Free {
		ev := c.vars[v.Decl]
		ev.order = i
		b.free = append(b.free, ev)
	}
	sort.SliceStable(b.vars, func(i, j int) bool { return b.vars[i].name < b.vars[j].name })
	for i, cl := range cb.Lines {
		ln := &line{index: i, pos: cl.Syntax.Pos(), kind: lineKinds[cl.Kind], refs: map[*variable]bool{}}
		for _, v := range cl.Declares {
			if ln.kind == lineDecl || ln.kind == lineFlow {
				ln.decls = append(ln.decls, c.vars[v.Decl])
			}
		}
		for _, v := range mentions(cl) {
			ln.refs[c.variable(v)] = true
		}
		savedDep := c.traceDep
		c.traceDep = false
		switch ln.kind {
		case lineAssign, lineDerive:
			ln.fn = c.expr(cl.Value)
			ln.v = c.vars[cl.Declares[0].Decl]
		case lineQuant:
			ln.fn = c.quantifier(cl, b)
		case lineFlow:
			vars := make([]*variable, len(cl.FlowVars))
			for j, v := range cl.FlowVars {
				if v != nil {
					vars[j] = c.variable(v)
				}
			}
			for j, op := range cl.FlowOps {
				if vars[j] != nil && vars[j+1] != nil {
					ln.flows = append(ln.flows, &flowConstraint{a: vars[j], b: vars[j+1], immediate: op == syntax.SQUIG})
				}
			}
			ln.fn = c.flowLine(cl.Syntax.(*syntax.ExprLine).X.(*syntax.CompareExpr), vars)
		case lineCond:
			ln.fn = c.expr(cl.Value)
			ln.tool, ln.toolV = c.toolHint(cl.Value, b)
		}
		ln.traceDep = c.traceDep || ln.kind == lineQuant
		c.traceDep = savedDep || ln.traceDep
		b.lines = append(b.lines, ln)
	}
	b.plan = c.plan(b)
	return b
}

// mentions returns the variables a line mentions: the variables of its
// body and the enclosing ones that the loader lists in Uses (without the
// variable a derived or assigned line declares), the variables a
// declaration line declares, and, for a quantifier line, the variables of
// its block that the block mentions.
func mentions(cl *check.Line) []*check.Var {
	vs := cl.Uses
	switch cl.Kind {
	case check.LineDecl:
		vs = append(vs[:len(vs):len(vs)], cl.Declares...)
	case check.LineDerived, check.LineAssign:
		vs = nil
		for _, v := range cl.Uses {
			if !containsVar(cl.Declares, v) {
				vs = append(vs, v)
			}
		}
	}
	if cl.Quant != nil {
		for _, inner := range cl.Quant.Body.Lines {
			for _, v := range mentions(inner) {
				if v.Body != cl.Body && !containsVar(vs, v) && encloses(cl.Quant.Body, v.Body) {
					vs = append(vs[:len(vs):len(vs)], v)
				}
			}
		}
	}
	return vs
}

func containsVar(vs []*check.Var, v *check.Var) bool {
	for _, x := range vs {
		if x == v {
			return true
		}
	}
	return false
}

// encloses reports whether outer is b or encloses it.
func encloses(outer, b *check.Body) bool {
	for ; b != nil; b = b.Outer {
		if b == outer {
			return true
		}
	}
	return false
}

// toolHint recognises `v is tool:NAME...` on a free variable of the
// body b, for the per-tool-name index.
func (c *compiler) toolHint(x syntax.Expr, b *body) (string, *variable) {
	ce, ok := x.(*syntax.CompareExpr)
	if !ok || len(ce.Ops) != 1 || ce.Ops[0].Op != syntax.IS {
		return "", nil
	}
	id, ok := ce.X.(*syntax.Ident)
	tr, ok2 := ce.Ys[0].(*syntax.ToolRef)
	if !ok || !ok2 {
		return "", nil
	}
	ref := c.prog.Refs[id]
	if ref == nil || ref.Var == nil {
		return "", nil
	}
	v := c.vars[ref.Var.Decl]
	if v == nil || v.kind != varFree || v.body != b || (v.typ != "ToolCall" && v.typ != "ToolOutput") {
		return "", nil
	}
	return tr.Name.Name, v
}

// plan orders the body's steps: free variables are bound just before the
// first line that needs them (spec §10.8: equal to the sequential semantics
// of §10.2 because a line only depends on the variables it mentions), flow
// lines between two free event variables become constraints on the
// binding of the later one (joins by position), and variables no line
// mentions are bound last.
func (c *compiler) plan(b *body) []step {
	var steps []step
	bound := map[*variable]bool{}
	var pending []*flowConstraint
	bind := func(v *variable, ln *line) {
		if bound[v] || v.kind != varFree || v.body != b {
			return
		}
		st := step{kind: stepBind, v: v}
		if ln != nil && ln.toolV == v && c.deferFlows {
			st.toolName = ln.tool
		}
		for _, fc := range pending {
			if fc.a == v || fc.b == v {
				st.flows = append(st.flows, fc)
			}
		}
		bound[v] = true
		steps = append(steps, st)
	}
	bindRefs := func(ln *line) {
		// bind in declaration order
		for _, v := range b.free {
			if ln.refs[v] {
				bind(v, ln)
			}
		}
	}
	for _, ln := range b.lines {
		switch ln.kind {
		case lineDecl:
			continue
		case lineFlow:
			// a flow test is deferred to the binding of its later variable
			// when it cannot raise (both operands are event variables) and
			// one operand is a free variable of this body not yet bound
			deferrable := c.deferFlows
			for _, fc := range ln.flows {
				unbound := func(v *variable) bool { return v.kind == varFree && v.body == b && !bound[v] }
				if !eventTypes[fc.a.typ] || !eventTypes[fc.b.typ] || !(unbound(fc.a) || unbound(fc.b)) {
					deferrable = false
				}
				for _, v := range []*variable{fc.a, fc.b} {
					if v.kind != varFree {
						deferrable = false
					}
				}
			}
			if deferrable && len(ln.flows) > 0 {
				pending = append(pending, ln.flows...)
				continue
			}
			bindRefs(ln)
			steps = append(steps, step{kind: stepCond, line: ln})
		case lineAssign:
			bindRefs(ln)
			steps = append(steps, step{kind: stepAssign, line: ln, v: ln.v})
		case lineDerive:
			bindRefs(ln)
			steps = append(steps, step{kind: stepDerive, line: ln, v: ln.v})
		default:
			bindRefs(ln)
			st := step{kind: stepCond, line: ln}
			if c.deferFlows {
				var only *variable
				n := 0
				for v := range ln.refs {
					if v.kind != varComp && v.kind != varParam {
						only = v
						n++
					}
				}
				if n == 1 && only.kind == varFree && only.body == b && eventTypes[only.typ] {
					st.memo, st.v = true, only
				}
			}
			steps = append(steps, st)
		}
	}
	for _, v := range b.free {
		bind(v, nil)
	}
	return steps
}

// pendingSafe reports whether only free variables of event types can hold
// events in a binding (derived variables of non-event type, assigned
// variables whose expression cannot yield an event).
func pendingSafe(b *body) bool {
	for _, ln := range b.lines {
		switch ln.kind {
		case lineDerive:
			if eventTypes[ln.v.typ] {
				return false
			}
		case lineAssign:
			return false
		}
	}
	for _, v := range b.free {
		if !eventTypes[v.typ] {
			return false
		}
	}
	return len(b.free) > 0
}

// ---- expressions ----

func (c *compiler) expr(e syntax.Expr) evalFn {
	switch x := e.(type) {
	case *syntax.BasicLit:
		v := c.literal(x)
		return func(*frame) builtin.Value { return v }
	case *syntax.FString:
		return c.fstring(x)
	case *syntax.Ident:
		return c.ident(x)
	case *syntax.UnaryExpr:
		return c.unary(x)
	case *syntax.BinaryExpr:
		return c.binary(x)
	case *syntax.CompareExpr:
		return c.compare(x)
	case *syntax.CondExpr:
		cond, a, b := c.expr(x.Cond), c.expr(x.X), c.expr(x.Y)
		return func(f *frame) builtin.Value {
			if builtin.Truthy(cond(f)) {
				return a(f)
			}
			return b(f)
		}
	case *syntax.CallExpr:
		return c.call(x)
	case *syntax.SelectorExpr:
		return c.selector(x)
	case *syntax.IndexExpr:
		xf, kf := c.expr(x.X), c.expr(x.Index)
		pos := x.Lbrack
		return func(f *frame) builtin.Value { return index(f, pos, xf(f), kf(f)) }
	case *syntax.TupleLit:
		elts := c.exprs(x.Elts)
		return func(f *frame) builtin.Value {
			out := make(builtin.Tuple, len(elts))
			for i, e := range elts {
				out[i] = e(f)
			}
			f.chargeDeep(out)
			return out
		}
	case *syntax.ListLit:
		elts := c.exprs(x.Elts)
		return func(f *frame) builtin.Value {
			out := make([]builtin.Value, len(elts))
			for i, e := range elts {
				out[i] = e(f)
			}
			f.chargeDeep(out)
			return out
		}
	case *syntax.DictLit:
		keys := make([]string, len(x.Entries))
		vals := make([]evalFn, len(x.Entries))
		for i, en := range x.Entries {
			switch k := en.Key.(type) {
			case *syntax.Ident:
				keys[i] = k.Name
			case *syntax.BasicLit:
				if k.Kind != syntax.LitString {
					c.errorf(k.Pos(), "dict keys must be strings")
				}
				keys[i] = k.Value
			default:
				c.errorf(en.Key.Pos(), "dict keys must be strings")
			}
			vals[i] = c.expr(en.Value)
		}
		return func(f *frame) builtin.Value {
			d := builtin.NewDict(len(keys))
			for i, k := range keys {
				d.Set(k, vals[i](f))
			}
			f.chargeDeep(d)
			return d
		}
	case *syntax.ListComp:
		return c.listComp(x)
	case *syntax.ToolRef:
		p := c.pattern(x)
		return func(*frame) builtin.Value { return p }
	case *syntax.TypedDecl:
		c.errorf(x.Pos(), "typed declarations must stand on their own line")
	case *syntax.ValueRef:
		c.errorf(x.Pos(), "wildcards are only allowed in tool patterns")
	case *syntax.Wildcard:
		c.errorf(x.Pos(), "wildcards are only allowed in tool patterns")
	case *syntax.SetLit:
		c.errorf(x.Pos(), "set literals are not supported")
	case nil:
	default:
		c.errorf(e.Pos(), "invalid expression")
	}
	return func(*frame) builtin.Value { return nil }
}

func (c *compiler) exprs(es []syntax.Expr) []evalFn {
	out := make([]evalFn, len(es))
	for i, e := range es {
		out[i] = c.expr(e)
	}
	return out
}

func (c *compiler) literal(x *syntax.BasicLit) builtin.Value {
	switch x.Kind {
	case syntax.LitInt:
		digits := strings.TrimLeft(x.Value, "0")
		if digits == "" {
			return int64(0)
		}
		if i, err := strconv.ParseInt(digits, 10, 64); err == nil {
			return i
		}
		b, ok := new(big.Int).SetString(digits, 10)
		if !ok {
			c.errorf(x.Pos(), "invalid integer literal %s", x.Raw)
			return int64(0)
		}
		return b
	case syntax.LitFloat:
		v := x.Value
		if v == "" {
			v = x.Raw
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			c.errorf(x.Pos(), "invalid float literal %s", x.Raw)
		}
		return f
	case syntax.LitString:
		return x.Value
	case syntax.LitTrue:
		return true
	case syntax.LitFalse:
		return false
	}
	return nil
}

func (c *compiler) fstring(x *syntax.FString) evalFn {
	type part struct {
		lit string
		fn  evalFn
	}
	parts := make([]part, len(x.Parts))
	for i, p := range x.Parts {
		parts[i].lit = p.Lit
		if p.X != nil {
			parts[i].fn = c.expr(p.X)
		}
	}
	return func(f *frame) builtin.Value {
		var b strings.Builder
		for _, p := range parts {
			s := p.lit
			if p.fn != nil {
				s = f.display(p.fn(f))
			}
			f.fits(int64(b.Len()) + int64(len(s)))
			b.WriteString(s)
		}
		f.charge(int64(b.Len()))
		return b.String()
	}
}

func (c *compiler) ident(x *syntax.Ident) evalFn {
	ref := c.prog.Refs[x]
	if ref == nil {
		c.errorf(x.Pos(), "failed to resolve identifier %s", x.Name)
		return func(*frame) builtin.Value { return nil }
	}
	return c.ref(x, ref)
}

// ref compiles a use of a name the loader resolved.
func (c *compiler) ref(x *syntax.Ident, ref *check.Ref) evalFn {
	switch ref.Kind {
	case check.RefVar, check.RefParam, check.RefCompVar:
		slot := c.variable(ref.Var).slot
		return func(f *frame) builtin.Value { return f.slots[slot] }
	case check.RefConst:
		k := c.consts[ref.Const]
		c.compileConst(k)
		if ref.Const.Folded {
			v := foldedValue(ref.Const.Const)
			return func(*frame) builtin.Value { return v }
		}
		pos := x.Pos()
		return func(f *frame) builtin.Value { return f.an.constant(k, pos) }
	case check.RefPredicate:
		pr := c.preds[ref.Pred]
		c.compilePred(pr)
		if pr.traceDep {
			c.traceDep = true
		}
		val := &predValue{pr}
		return func(*frame) builtin.Value { return val }
	case check.RefModule:
		val := &builtin.Module{Name: ref.Symbol.Module}
		return func(*frame) builtin.Value { return val }
	case check.RefBuiltin:
		switch ref.Symbol.Kind {
		case check.SymType:
			val := &typeValue{ref.Symbol.Name}
			return func(*frame) builtin.Value { return val }
		case check.SymQuantifier:
			val := &builtin.Quantifier{Name: ref.Symbol.Name}
			return func(*frame) builtin.Value { return val }
		case check.SymFunc:
			b, ok := c.lookup(ref.Symbol.Name)
			if !ok {
				break
			}
			if err := b.Usable(); err != nil {
				c.errorf(x.Pos(), "%v", err)
			}
			return func(*frame) builtin.Value { return b }
		}
	}
	c.errorf(x.Pos(), "%s is not a value", x.Name)
	return func(*frame) builtin.Value { return nil }
}

func (c *compiler) unary(x *syntax.UnaryExpr) evalFn {
	xf := c.expr(x.X)
	pos := x.OpPos
	switch x.Op {
	case syntax.NOT:
		return func(f *frame) builtin.Value { return !builtin.Truthy(xf(f)) }
	case syntax.MINUS:
		return func(f *frame) builtin.Value { return neg(f, pos, xf(f)) }
	default:
		return func(f *frame) builtin.Value {
			v := xf(f)
			if _, isBig := builtin.Strip(v).(*big.Int); isBig {
				return builtin.Strip(v)
			}
			if _, _, _, ok := builtin.Number(v); !ok {
				throw(pos, builtin.TypeError, "bad operand type for unary +: '%s'", builtin.TypeName(v))
			}
			if b, ok := builtin.Strip(v).(bool); ok {
				if b {
					return int64(1)
				}
				return int64(0)
			}
			return builtin.Strip(v)
		}
	}
}

func (c *compiler) binary(x *syntax.BinaryExpr) evalFn {
	a, b := c.expr(x.X), c.expr(x.Y)
	pos := x.OpPos
	switch x.Op {
	case syntax.AND:
		return func(f *frame) builtin.Value {
			v := a(f)
			if !builtin.Truthy(v) {
				return v
			}
			return b(f)
		}
	case syntax.OR:
		return func(f *frame) builtin.Value {
			v := a(f)
			if builtin.Truthy(v) {
				return v
			}
			return b(f)
		}
	}
	op := x.Op
	return func(f *frame) builtin.Value { return arith(f, pos, op, a(f), b(f)) }
}

func (c *compiler) compare(x *syntax.CompareExpr) evalFn {
	xf := c.expr(x.X)
	ys := c.exprs(x.Ys)
	ops := x.Ops
	for _, op := range ops {
		if op.Op == syntax.ARROW || op.Op == syntax.SQUIG {
			c.errorf(op.OpPos, "-> needs variables on both sides")
		}
	}
	if len(ops) == 1 {
		op, y := ops[0], ys[0]
		return func(f *frame) builtin.Value { return compareOp(f, op, xf(f), y(f)) }
	}
	return func(f *frame) builtin.Value {
		left := xf(f)
		for i, op := range ops {
			right := ys[i](f)
			r := compareOp(f, op, left, right)
			if !builtin.Truthy(r) || i == len(ops)-1 {
				return r
			}
			left = right
		}
		return true
	}
}

// flowLine compiles a flow line evaluated as a test (not deferred).
func (c *compiler) flowLine(ce *syntax.CompareExpr, vars []*variable) evalFn {
	for _, v := range vars {
		if v == nil {
			return func(*frame) builtin.Value { return false }
		}
	}
	ops := ce.Ops
	return func(f *frame) builtin.Value {
		for i, op := range ops {
			a, b := f.slots[vars[i].slot], f.slots[vars[i+1].slot]
			if !flowTest(f, op.OpPos, a, b, op.Op == syntax.SQUIG) {
				return false
			}
		}
		return true
	}
}

func (c *compiler) selector(x *syntax.SelectorExpr) evalFn {
	if ref := c.prog.Members[x]; ref != nil {
		if ref.Kind == check.RefInput {
			name := ref.Name
			return func(f *frame) builtin.Value { return f.an.params.M[name] }
		}
		return c.ref(x.Sel, ref)
	}
	xf := c.expr(x.X)
	name := x.Sel.Name
	pos := x.Sel.Pos()
	return func(f *frame) builtin.Value { return member(f, pos, xf(f), name) }
}

func (c *compiler) listComp(x *syntax.ListComp) evalFn {
	iter := c.expr(x.Iter)
	v, ok := c.vars[x.Var]
	if !ok {
		v = c.layout.newVar(&variable{name: x.Var.Name, kind: varComp, pos: x.Var.Pos()})
		c.vars[x.Var] = v
	}
	elt := c.expr(x.Elt)
	var cond evalFn
	if x.Cond != nil {
		cond = c.expr(x.Cond)
	}
	pos := x.Iter.Pos()
	slot := v.slot
	return func(f *frame) builtin.Value {
		it := iter(f)
		els, ok := builtin.Elements(it)
		if !ok {
			throw(pos, builtin.TypeError, "'%s' object is not iterable", builtin.TypeName(it))
		}
		out := []builtin.Value{}
		saved := f.slots[slot]
		for _, e := range els {
			if f.an != nil {
				f.an.poll()
			}
			f.slots[slot] = e
			if cond != nil && !builtin.Truthy(cond(f)) {
				continue
			}
			out = append(out, elt(f))
		}
		f.slots[slot] = saved
		f.chargeDeep(out)
		return out
	}
}

func (c *compiler) call(x *syntax.CallExpr) evalFn {
	fun := c.expr(x.Fun)
	args := c.exprs(x.Args)
	kwnames := make([]string, len(x.Kwargs))
	kwvals := make([]evalFn, len(x.Kwargs))
	for i, k := range x.Kwargs {
		kwnames[i] = k.Name.Name
		kwvals[i] = c.expr(k.Value)
	}
	pos := x.Pos()
	return func(f *frame) builtin.Value {
		fn := fun(f)
		av := make([]builtin.Value, len(args))
		for i, a := range args {
			av[i] = a(f)
		}
		var kw *builtin.Dict
		if len(kwnames) > 0 {
			kw = builtin.NewDict(len(kwnames))
			for i, k := range kwnames {
				kw.Set(k, kwvals[i](f))
			}
		}
		return callValue(f, pos, fn, av, kw, kwnames)
	}
}

func (c *compiler) quantifier(cl *check.Line, outer *body) evalFn {
	q := cl.Quant
	var minF, maxF evalFn
	if q.Min != nil {
		minF = c.expr(q.Min)
	}
	if q.Max != nil {
		maxF = c.expr(q.Max)
	}
	header := cl.Syntax.(*syntax.QuantLine).Header
	if q.Kind == check.Count {
		if _, ok := header.(*syntax.Ident); ok {
			c.errorf(header.Pos(), "count needs arguments: count(min=N, max=M)")
		}
	}
	savedDefer := c.deferFlows
	c.deferFlows = q.Kind == check.Count
	b := c.body(q.Body, outer)
	c.deferFlows = savedDefer
	forall := q.Kind == check.Forall
	negate := q.Not
	pos := header.Pos()
	return func(f *frame) builtin.Value {
		var r bool
		if forall {
			r = f.an.forall(f, b)
		} else {
			lo, hi := int64(-1), int64(-1)
			if minF != nil {
				lo = intArg(f, pos, minF(f), "min")
			}
			if maxF != nil {
				hi = intArg(f, pos, maxF(f), "max")
			}
			r = f.an.count(f, b, lo, hi)
		}
		return r != negate
	}
}

func intArg(f *frame, pos syntax.Pos, v builtin.Value, name string) int64 {
	i, ok := builtin.Strip(v).(int64)
	if !ok {
		throw(pos, builtin.TypeError, "count(): %s must be an int", name)
	}
	return i
}
