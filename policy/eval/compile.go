package eval

import (
	"fmt"
	"math/big"
	"sort"
	"strconv"
	"strings"

	"github.com/vigilhq/vigil/policy/builtin"
	"github.com/vigilhq/vigil/policy/syntax"
)

// This file compiles a parsed policy into closures. It resolves names
// (spec §4.6) itself, so the evaluator is self-contained; the loader
// (package check) reports load errors with suggestions before this runs, and
// anything this compiler rejects is reported as a load error too.

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
	decl   *syntax.ConstDecl
	fn     evalFn
	layout *frameLayout
	state  int // 0 unresolved, 1 compiling, 2 compiled
}

// predicate is a top-level predicate (spec §4.4).
type predicate struct {
	name   string
	decl   *syntax.PredicateDecl
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
	src        *syntax.Source
	errs       syntax.ErrorList
	globals    map[string]any // *constant, *predicate, *builtin.Builtin, *builtin.Module, *builtin.Quantifier, typeName
	consts     []*constant
	preds      map[string]*predicate
	params     map[string]bool
	scope      *scope
	layout     *frameLayout
	refs       map[*variable]bool
	curBody    *body
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

type typeName string

type scope struct {
	parent *scope
	names  map[string]*variable
}

func (c *compiler) errorf(pos syntax.Pos, format string, args ...any) {
	c.errs.Add(c.src, pos, fmt.Sprintf(format, args...))
}

func (c *compiler) lookupVar(name string) *variable {
	for s := c.scope; s != nil; s = s.parent {
		if v, ok := s.names[name]; ok {
			return v
		}
	}
	return nil
}

func (c *compiler) push() { c.scope = &scope{parent: c.scope, names: map[string]*variable{}} }
func (c *compiler) pop()  { c.scope = c.scope.parent }

// Compile compiles a parsed policy with the registered built-ins. Errors
// are load errors (*syntax.Error in a syntax.ErrorList).
func Compile(file *syntax.File) (*Program, error) { return CompileWith(file, nil) }

// CompileWith compiles a parsed policy; builtins, when not nil, replace the
// registered built-ins of the same names for this program only (a caller's
// own detector providers, or test doubles of model-backed detectors).
func CompileWith(file *syntax.File, builtins map[string]*builtin.Builtin) (*Program, error) {
	c := &compiler{src: file.Source, globals: map[string]any{}, preds: map[string]*predicate{}, params: map[string]bool{}, builtins: builtins}
	p := &Program{src: file.Source, builtins: builtins}
	// imports and top-level names first: they apply to the whole file
	for _, st := range file.Stmts {
		switch s := st.(type) {
		case *syntax.ImportStmt:
			c.importStmt(s)
		case *syntax.FromImportStmt:
			c.fromImport(s)
		case *syntax.ConstDecl:
			k := &constant{name: s.Name.Name, index: len(c.consts), decl: s}
			c.consts = append(c.consts, k)
			c.define(s.Name, k)
		case *syntax.PredicateDecl:
			pr := &predicate{name: s.Name.Name, decl: s}
			c.preds[pr.name] = pr
			c.define(s.Name, pr)
		case *syntax.BadStmt:
			c.errorf(s.Pos(), "invalid statement")
		}
	}
	for _, k := range c.consts {
		c.compileConst(k)
	}
	for _, pr := range c.preds {
		c.compilePred(pr)
	}
	for _, r := range file.Rules() {
		p.rules = append(p.rules, c.compileRule(r, len(p.rules)))
	}
	if len(c.errs) > 0 {
		c.errs.Sort()
		return nil, c.errs.Err()
	}
	p.consts = c.consts
	for n := range c.params {
		p.params = append(p.params, n)
	}
	sort.Strings(p.params)
	return p, nil
}

func (c *compiler) define(id *syntax.Ident, v any) {
	if old, ok := c.globals[id.Name]; ok && old != v {
		c.errorf(id.Pos(), "%s already declared", id.Name)
		return
	}
	c.globals[id.Name] = v
}

func (c *compiler) moduleMember(module, name string) (any, bool) {
	if _, ok := builtin.Exports(module, name); !ok {
		return nil, false
	}
	{
		n := name
		switch n {
		case "forall", "count":
			return &builtin.Quantifier{Name: n}, true
		}
		for _, t := range builtin.TypeNames {
			if t == n {
				return typeName(n), true
			}
		}
		if b, ok := c.lookup(n); ok {
			return b, true
		}
	}
	return nil, false
}

func (c *compiler) importStmt(s *syntax.ImportStmt) {
	name := s.Module.String()
	if _, ok := builtin.Modules[name]; !ok {
		c.errorf(s.Module.Pos(), "module %s is not available", name)
		return
	}
	switch {
	case s.Alias != nil:
		c.define(s.Alias, &builtin.Module{Name: name})
	case len(s.Module.Parts) == 1:
		c.define(s.Module.Parts[0], &builtin.Module{Name: name})
	default:
		c.errorf(s.Module.Pos(), "module %s is not available without an alias (import %s as NAME)", name, name)
	}
}

func (c *compiler) fromImport(s *syntax.FromImportStmt) {
	name := s.Module.String()
	if _, ok := builtin.Modules[name]; !ok {
		c.errorf(s.Module.Pos(), "module %s is not available", name)
		return
	}
	if s.Star != syntax.NoPos {
		c.errorf(s.Star, "from %s import * is not supported", name)
		return
	}
	for _, a := range s.Names {
		v, ok := c.moduleMember(name, a.Name.Name)
		if !ok {
			c.errorf(a.Name.Pos(), "module %s has no export %s", name, a.Name.Name)
			continue
		}
		id := a.Name
		if a.Alias != nil {
			id = a.Alias
		}
		if old, ok := c.globals[id.Name]; ok && fmt.Sprint(old) == fmt.Sprint(v) {
			continue
		}
		c.define(id, v)
	}
}

func (c *compiler) withLayout(l *frameLayout, fn func()) {
	saved, savedScope, savedBody, savedRefs := c.layout, c.scope, c.curBody, c.refs
	c.layout, c.scope, c.curBody, c.refs = l, nil, nil, nil
	fn()
	c.layout, c.scope, c.curBody, c.refs = saved, savedScope, savedBody, savedRefs
}

func (c *compiler) compileConst(k *constant) {
	switch k.state {
	case 2:
		return
	case 1:
		c.errorf(k.decl.Pos(), "constant %s refers to itself", k.name)
		k.fn = func(*frame) builtin.Value { return nil }
		return
	}
	k.state = 1
	k.layout = &frameLayout{}
	c.withLayout(k.layout, func() { k.fn = c.expr(k.decl.Value) })
	k.state = 2
}

func (c *compiler) compilePred(pr *predicate) {
	switch pr.state {
	case 2:
		return
	case 1:
		c.errorf(pr.decl.Pos(), "predicate %s is recursive", pr.name)
		return
	}
	pr.state = 1
	pr.layout = &frameLayout{}
	c.withLayout(pr.layout, func() {
		c.push()
		for _, p := range pr.decl.Params {
			if !isTypeName(p.Type.Name) {
				c.errorf(p.Type.Pos(), "unknown type %s", p.Type.Name)
			}
			v := c.layout.newVar(&variable{name: p.Name.Name, kind: varParam, typ: p.Type.Name, pos: p.Name.Pos()})
			if _, dup := c.scope.names[v.name]; dup {
				c.errorf(p.Name.Pos(), "%s already declared", v.name)
			}
			c.scope.names[v.name] = v
			pr.params = append(pr.params, v)
		}
		savedDep := c.traceDep
		c.traceDep = false
		if pr.decl.Body != nil {
			pr.body = c.body(pr.decl.Body, nil)
			pr.traceDep = c.traceDep || len(pr.body.free) > 0
		} else if pr.decl.Value != nil {
			pr.value = c.expr(pr.decl.Value)
			pr.traceDep = c.traceDep
		}
		c.traceDep = savedDep
		c.pop()
	})
	pr.state = 2
}

func isTypeName(s string) bool {
	for _, t := range builtin.TypeNames {
		if t == s {
			return true
		}
	}
	return false
}

var eventTypes = map[string]bool{"Message": true, "ToolCall": true, "ToolOutput": true, "Tool": true}

func (c *compiler) compileRule(r *syntax.RuleDecl, index int) *rule {
	ru := &rule{index: index, pos: r.Pos(), layout: &frameLayout{}}
	c.withLayout(ru.layout, func() {
		c.push()
		c.deferFlows = true
		ru.body = c.body(r.Body, nil, func(b *body) {
			c.deferFlows = false
			ru.head = c.head(r.Head)
		})
		c.pop()
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

// body compiles the lines of a body and plans its execution.
func (c *compiler) body(sb *syntax.Body, outer *body, then ...func(*body)) *body {
	b := &body{outer: outer}
	savedBody := c.curBody
	c.curBody = b
	c.push()
	defer func() {
		for _, fn := range then {
			savedRefs := c.refs
			c.refs = map[*variable]bool{}
			fn(b)
			c.refs = savedRefs
		}
		c.pop()
		c.curBody = savedBody
	}()
	if sb == nil || len(sb.Lines) == 0 {
		if sb != nil {
			c.errorf(sb.Pos(), "empty body")
		}
		return b
	}
	// pass 1: free declarations are visible on every line of the body
	declare := func(td *syntax.TypedDecl) *variable {
		if !isTypeName(td.Type.Name) {
			c.errorf(td.Type.Pos(), "unknown type %s", td.Type.Name)
		}
		if _, dup := c.scope.names[td.Name.Name]; dup {
			c.errorf(td.Name.Pos(), "%s already declared", td.Name.Name)
			return c.scope.names[td.Name.Name]
		}
		v := c.layout.newVar(&variable{name: td.Name.Name, kind: varFree, typ: td.Type.Name, body: b, order: len(b.free), pos: td.Pos()})
		c.scope.names[v.name] = v
		b.free = append(b.free, v)
		b.vars = append(b.vars, v)
		return v
	}
	kinds := make([]lineKind, len(sb.Lines))
	lineDecls := make([][]*variable, len(sb.Lines))
	for i, l := range sb.Lines {
		el, ok := l.(*syntax.ExprLine)
		if !ok {
			continue
		}
		switch x := el.X.(type) {
		case *syntax.TypedDecl:
			kinds[i] = lineDecl
			lineDecls[i] = append(lineDecls[i], declare(x))
		case *syntax.CompareExpr:
			if isFlowChain(x) {
				kinds[i] = lineFlow
				ops := append([]syntax.Expr{x.X}, x.Ys...)
				for _, o := range ops {
					if td, ok := o.(*syntax.TypedDecl); ok {
						lineDecls[i] = append(lineDecls[i], declare(td))
					}
				}
			} else if _, ok := x.X.(*syntax.TypedDecl); ok && len(x.Ops) == 1 && x.Ops[0].Op == syntax.IN {
				kinds[i] = lineDerive
			} else {
				kinds[i] = lineCond
			}
		default:
			kinds[i] = lineCond
		}
	}
	for i, l := range sb.Lines {
		ln := &line{index: i, pos: l.Pos(), decls: lineDecls[i]}
		savedRefs := c.refs
		c.refs = map[*variable]bool{}
		savedDep := c.traceDep
		c.traceDep = false
		switch s := l.(type) {
		case *syntax.AssignLine:
			ln.kind = lineAssign
			ln.fn = c.expr(s.Value)
			if _, dup := c.scope.names[s.Name.Name]; dup {
				c.errorf(s.Name.Pos(), "%s already declared", s.Name.Name)
			}
			ln.v = c.layout.newVar(&variable{name: s.Name.Name, kind: varAssigned, body: b, pos: s.Name.Pos(), line: i})
			c.scope.names[ln.v.name] = ln.v
			b.vars = append(b.vars, ln.v)
		case *syntax.QuantLine:
			ln.kind = lineQuant
			ln.fn = c.quantifier(s, b)
		case *syntax.ExprLine:
			ln.kind = kinds[i]
			switch ln.kind {
			case lineDecl:
				for _, v := range ln.decls {
					c.refs[v] = true
				}
			case lineFlow:
				ce := s.X.(*syntax.CompareExpr)
				ops := append([]syntax.Expr{ce.X}, ce.Ys...)
				vars := make([]*variable, len(ops))
				for j, o := range ops {
					vars[j] = c.flowOperand(o)
				}
				for j, op := range ce.Ops {
					if vars[j] != nil && vars[j+1] != nil {
						ln.flows = append(ln.flows, &flowConstraint{a: vars[j], b: vars[j+1], immediate: op.Op == syntax.SQUIG})
					}
				}
				ln.fn = c.flowLine(ce, vars)
			case lineDerive:
				ce := s.X.(*syntax.CompareExpr)
				td := ce.X.(*syntax.TypedDecl)
				ln.fn = c.expr(ce.Ys[0])
				if !isTypeName(td.Type.Name) {
					c.errorf(td.Type.Pos(), "unknown type %s", td.Type.Name)
				}
				if _, dup := c.scope.names[td.Name.Name]; dup {
					c.errorf(td.Name.Pos(), "%s already declared", td.Name.Name)
				}
				ln.v = c.layout.newVar(&variable{name: td.Name.Name, kind: varDerived, typ: td.Type.Name, body: b, pos: td.Pos(), line: i})
				c.scope.names[ln.v.name] = ln.v
				b.vars = append(b.vars, ln.v)
			default:
				ln.fn = c.expr(s.X)
				ln.tool, ln.toolV = c.toolHint(s.X)
			}
		}
		ln.refs = c.refs
		c.refs = savedRefs
		ln.traceDep = c.traceDep || ln.kind == lineQuant
		c.traceDep = savedDep || ln.traceDep
		if c.refs != nil {
			for v := range ln.refs {
				c.refs[v] = true
			}
		}
		b.lines = append(b.lines, ln)
	}
	sort.SliceStable(b.vars, func(i, j int) bool { return b.vars[i].name < b.vars[j].name })
	b.plan = c.plan(b)
	return b
}

func isFlowChain(x *syntax.CompareExpr) bool {
	for _, op := range x.Ops {
		if op.Op != syntax.ARROW && op.Op != syntax.SQUIG {
			return false
		}
	}
	return true
}

func (c *compiler) flowOperand(o syntax.Expr) *variable {
	var name *syntax.Ident
	switch x := o.(type) {
	case *syntax.TypedDecl:
		name = x.Name
	case *syntax.Ident:
		name = x
	default:
		c.errorf(o.Pos(), "-> needs variables on both sides")
		return nil
	}
	v := c.lookupVar(name.Name)
	if v == nil {
		c.errorf(name.Pos(), "failed to resolve identifier %s", name.Name)
		return nil
	}
	if c.refs != nil {
		c.refs[v] = true
	}
	return v
}

// toolHint recognises `v is tool:NAME...` on a free variable of the
// current body, for the per-tool-name index.
func (c *compiler) toolHint(x syntax.Expr) (string, *variable) {
	ce, ok := x.(*syntax.CompareExpr)
	if !ok || len(ce.Ops) != 1 || ce.Ops[0].Op != syntax.IS {
		return "", nil
	}
	id, ok := ce.X.(*syntax.Ident)
	tr, ok2 := ce.Ys[0].(*syntax.ToolRef)
	if !ok || !ok2 {
		return "", nil
	}
	v := c.lookupVar(id.Name)
	if v == nil || v.kind != varFree || v.body != c.curBody || (v.typ != "ToolCall" && v.typ != "ToolOutput") {
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
			return out
		}
	case *syntax.ListLit:
		elts := c.exprs(x.Elts)
		return func(f *frame) builtin.Value {
			out := make([]builtin.Value, len(elts))
			for i, e := range elts {
				out[i] = e(f)
			}
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
			if p.fn != nil {
				b.WriteString(builtin.Display(p.fn(f)))
			} else {
				b.WriteString(p.lit)
			}
		}
		return b.String()
	}
}

func (c *compiler) ident(x *syntax.Ident) evalFn {
	if v := c.lookupVar(x.Name); v != nil {
		if c.refs != nil {
			c.refs[v] = true
		}
		if (v.kind == varAssigned || v.kind == varDerived) && v.body == c.curBody && c.curLine() <= v.line {
			c.errorf(x.Pos(), "%s used before assignment", x.Name)
		}
		slot := v.slot
		return func(f *frame) builtin.Value { return f.slots[slot] }
	}
	g, ok := c.globals[x.Name]
	if !ok {
		if x.Name == "input" {
			c.errorf(x.Pos(), "input must be followed by .NAME")
			return func(*frame) builtin.Value { return nil }
		}
		if b, ok := c.lookup(x.Name); ok && b.Core {
			g = b
		} else if isTypeName(x.Name) {
			g = typeName(x.Name)
		} else {
			c.errorf(x.Pos(), "failed to resolve identifier %s", x.Name)
			return func(*frame) builtin.Value { return nil }
		}
	}
	return c.global(x, g)
}

// curLine returns the index of the line being compiled in the current
// body (number of lines compiled so far).
func (c *compiler) curLine() int {
	if c.curBody == nil {
		return 1 << 30
	}
	return len(c.curBody.lines)
}

func (c *compiler) global(x *syntax.Ident, g any) evalFn {
	switch v := g.(type) {
	case *constant:
		c.compileConst(v)
		k := v
		pos := x.Pos()
		return func(f *frame) builtin.Value { return f.an.constant(k, pos) }
	case *predicate:
		c.compilePred(v)
		if v.traceDep {
			c.traceDep = true
		}
		val := &predValue{v}
		return func(*frame) builtin.Value { return val }
	case *builtin.Builtin:
		if err := v.Usable(); err != nil {
			c.errorf(x.Pos(), "%v", err)
		}
		return func(*frame) builtin.Value { return v }
	case typeName:
		val := &typeValue{string(v)}
		return func(*frame) builtin.Value { return val }
	default:
		return func(*frame) builtin.Value { return g }
	}
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
	if id, ok := x.X.(*syntax.Ident); ok && c.lookupVar(id.Name) == nil {
		g, isGlobal := c.globals[id.Name]
		if !isGlobal && id.Name == "input" {
			name := x.Sel.Name
			if name == "data" {
				c.errorf(x.Sel.Pos(), "input.data is reserved")
			}
			c.params[name] = true
			return func(f *frame) builtin.Value { return f.an.params.M[name] }
		}
		if m, ok := g.(*builtin.Module); ok {
			v, ok := c.moduleMember(m.Name, x.Sel.Name)
			if !ok {
				c.errorf(x.Sel.Pos(), "module %s has no export %s", m.Name, x.Sel.Name)
				return func(*frame) builtin.Value { return nil }
			}
			return c.global(x.Sel, v)
		}
	}
	xf := c.expr(x.X)
	name := x.Sel.Name
	pos := x.Sel.Pos()
	return func(f *frame) builtin.Value { return member(f, pos, xf(f), name) }
}

func (c *compiler) listComp(x *syntax.ListComp) evalFn {
	iter := c.expr(x.Iter)
	c.push()
	v := c.layout.newVar(&variable{name: x.Var.Name, kind: varComp, pos: x.Var.Pos()})
	c.scope.names[v.name] = v
	elt := c.expr(x.Elt)
	var cond evalFn
	if x.Cond != nil {
		cond = c.expr(x.Cond)
	}
	c.pop()
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
	// static checks for predicates and builtins
	if id, ok := x.Fun.(*syntax.Ident); ok && c.lookupVar(id.Name) == nil {
		switch g := c.globals[id.Name].(type) {
		case *predicate:
			if len(x.Args)+len(x.Kwargs) != len(g.decl.Params) {
				c.errorf(x.Pos(), "%s() takes %d arguments (%d given)", g.name, len(g.decl.Params), len(x.Args)+len(x.Kwargs))
			}
		case typeName:
			c.errorf(x.Pos(), "%s is not callable", id.Name)
		}
	}
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

func (c *compiler) quantifier(q *syntax.QuantLine, outer *body) evalFn {
	var name string
	var minF, maxF evalFn
	switch h := q.Header.(type) {
	case *syntax.Ident:
		name = c.quantName(h)
	case *syntax.CallExpr:
		if id, ok := h.Fun.(*syntax.Ident); ok {
			name = c.quantName(id)
		} else {
			c.errorf(h.Pos(), "not a quantifier")
		}
		if name == "forall" {
			c.errorf(h.Pos(), "forall takes no arguments")
		}
		if len(h.Args) > 0 {
			c.errorf(h.Pos(), "count takes keyword arguments min and max")
		}
		for _, k := range h.Kwargs {
			switch k.Name.Name {
			case "min":
				minF = c.expr(k.Value)
			case "max":
				maxF = c.expr(k.Value)
			default:
				c.errorf(k.Pos(), "count() got an unexpected keyword argument '%s'", k.Name.Name)
			}
		}
	default:
		c.errorf(q.Header.Pos(), "not a quantifier")
	}
	if name == "count" {
		if _, ok := q.Header.(*syntax.Ident); ok {
			c.errorf(q.Header.Pos(), "count needs arguments: count(min=N, max=M)")
		}
	}
	savedDefer := c.deferFlows
	c.deferFlows = name == "count"
	b := c.body(q.Body, outer)
	c.deferFlows = savedDefer
	negate := q.Not != syntax.NoPos
	pos := q.Header.Pos()
	return func(f *frame) builtin.Value {
		var r bool
		if name == "forall" {
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

func (c *compiler) quantName(id *syntax.Ident) string {
	if c.lookupVar(id.Name) == nil {
		if q, ok := c.globals[id.Name].(*builtin.Quantifier); ok {
			return q.Name
		}
	}
	if _, ok := c.globals[id.Name]; !ok && c.lookupVar(id.Name) == nil {
		c.errorf(id.Pos(), "failed to resolve identifier %s (import it: from invariant import %s)", id.Name, id.Name)
		return ""
	}
	c.errorf(id.Pos(), "%s is not a quantifier", id.Name)
	return ""
}
