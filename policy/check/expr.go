package check

import (
	"strings"

	"github.com/vigilhq/vigil/policy/syntax"
)

// lookup finds a local name (comprehension variable, body variable or
// predicate parameter), innermost first (§4.6).
func (c *checker) lookup(name string) (*Var, *scope) {
	for sc := c.sc; sc != nil; sc = sc.parent {
		if v, ok := sc.vars[name]; ok {
			return v, sc
		}
	}
	return nil, nil
}

// localNames lists the names visible in local scopes, for suggestions.
func (c *checker) candidates() []string {
	var names []string
	for sc := c.sc; sc != nil; sc = sc.parent {
		for n := range sc.vars {
			names = append(names, n)
		}
	}
	for n := range c.globals {
		names = append(names, n)
	}
	return append(names, c.u.Names()...)
}

// ident resolves a name used as a value and records it in Program.Refs.
// It returns nil (after reporting) when the name does not resolve.
func (c *checker) ident(id *syntax.Ident) *Ref {
	if ref, ok := c.prog.Refs[id]; ok {
		return ref
	}
	ref := c.resolve(id)
	if ref != nil {
		c.prog.Refs[id] = ref
	}
	return ref
}

func (c *checker) resolve(id *syntax.Ident) *Ref {
	if v, sc := c.lookup(id.Name); v != nil {
		if v.ref == nil {
			kind := RefVar
			switch v.Kind {
			case CompVar:
				kind = RefCompVar
			case ParamVar:
				kind = RefParam
			}
			v.ref = &Ref{Kind: kind, Var: v}
		}
		if v.Kind == CompVar || v.Kind == ParamVar {
			return v.ref
		}
		if (v.Kind == AssignedVar || v.Kind == DerivedVar) && sc.body != nil && v.Line >= sc.cur {
			c.errorf(id.Pos(), "%s used before assignment (it is assigned at %s)", id.Name, c.src.Position(v.Decl.Pos()))
		}
		c.useVar(v)
		return v.ref
	}
	if g, ok := c.globals[id.Name]; ok {
		if g.node >= 0 && c.cur >= 0 {
			c.nodes[c.cur].edges = append(c.nodes[c.cur].edges, g.node)
		}
		return g.ref
	}
	if sym, ok := c.u.Builtin(id.Name); ok {
		return c.symbolRef(sym)
	}
	c.errorf(id.Pos(), "failed to resolve identifier %s%s", id.Name, c.didYouMean(id.Name, func() []string { return c.candidates() }))
	return nil
}

// symbolRef returns the Ref shared by every use of a built-in symbol.
func (c *checker) symbolRef(sym *Symbol) *Ref {
	if ref, ok := c.symRefs[sym]; ok {
		return ref
	}
	kind := RefBuiltin
	if sym.Kind == SymModule {
		kind = RefModule
	}
	ref := &Ref{Kind: kind, Symbol: sym}
	if c.symRefs == nil {
		c.symRefs = map[*Symbol]*Ref{}
	}
	c.symRefs[sym] = ref
	return ref
}

func isInput(ref *Ref) bool {
	return ref != nil && ref.Kind == RefBuiltin && ref.Symbol.Kind == SymValue && ref.Symbol.Name == "input"
}

// refType returns the static type of a resolved name.
func (c *checker) refType(ref *Ref) vtype {
	switch ref.Kind {
	case RefVar, RefParam:
		if t, ok := c.varTypes[ref.Var]; ok {
			return t
		}
		return typeOfName(ref.Var.Type)
	case RefConst:
		return c.constant(ref.Const)
	case RefPredicate:
		return vtype{kind: tFunc}
	case RefModule:
		return vtype{kind: tModule, sym: ref.Symbol}
	case RefBuiltin:
		switch ref.Symbol.Kind {
		case SymFunc:
			return vtype{kind: tFunc, sym: ref.Symbol}
		case SymType:
			return vtype{kind: tType, sym: ref.Symbol}
		case SymQuantifier:
			return vtype{kind: tQuant, sym: ref.Symbol}
		case SymModule:
			return vtype{kind: tModule, sym: ref.Symbol}
		}
	}
	return unknown
}

// expr checks an expression and returns what is known of its value.
func (c *checker) expr(x syntax.Expr) vtype {
	if c.cost != nil {
		c.cost.Nodes++
	}
	switch x := x.(type) {
	case nil, *syntax.BadExpr:
		return unknown
	case *syntax.Ident:
		ref := c.ident(x)
		if ref == nil {
			return unknown
		}
		if isInput(ref) {
			c.errorf(x.Pos(), "input may only be used as input.NAME")
			return unknown
		}
		return c.refType(ref)
	case *syntax.BasicLit:
		return literal(x)
	case *syntax.FString:
		for _, p := range x.Parts {
			if p.X != nil {
				c.expr(p.X)
			}
		}
		return tyStr
	case *syntax.UnaryExpr:
		t := c.expr(x.X)
		if t.known {
			if v, ok := foldUnary(x.Op, t.val); ok {
				return known(v)
			}
		}
		if x.Op == syntax.NOT {
			return tyBool
		}
		if t.kind == tInt || t.kind == tFloat {
			return vtype{kind: t.kind}
		}
		return unknown
	case *syntax.BinaryExpr:
		a, b := c.expr(x.X), c.expr(x.Y)
		if a.known && b.known {
			if v, ok := foldBinary(x.Op, a.val, b.val); ok {
				return known(v)
			}
		}
		return arithType(x.Op, a, b)
	case *syntax.CompareExpr:
		c.compare(x)
		return tyBool
	case *syntax.CondExpr:
		cond := c.expr(x.Cond)
		a, b := c.expr(x.X), c.expr(x.Y)
		if cond.known {
			if truthy(cond.val) {
				return a
			}
			return b
		}
		if a.kind == b.kind && a.kind != tEvent {
			return vtype{kind: a.kind}
		}
		return unknown
	case *syntax.CallExpr:
		return c.call(x)
	case *syntax.SelectorExpr:
		return c.selector(x)
	case *syntax.IndexExpr:
		c.expr(x.X)
		c.expr(x.Index)
		return unknown
	case *syntax.TupleLit:
		vals, ok := c.exprs(x.Elts)
		if ok {
			return known(Tuple(vals))
		}
		return vtype{kind: tTuple}
	case *syntax.ListLit:
		vals, ok := c.exprs(x.Elts)
		if ok {
			return known(List(vals))
		}
		return tyList
	case *syntax.SetLit:
		c.errorf(x.Pos(), "set literals are not supported; use a list")
		c.exprs(x.Elts)
		return unknown
	case *syntax.DictLit:
		d := &Dict{}
		all := true
		index := map[string]int{}
		for _, e := range x.Entries {
			key := dictKey(e.Key)
			if key == nil {
				c.errorf(e.Key.Pos(), "dict keys must be names or strings")
				all = false
			}
			t := c.expr(e.Value)
			if !t.known || key == nil || !all {
				all = false
				continue
			}
			if i, ok := index[*key]; ok {
				d.Values[i] = t.val
			} else {
				index[*key] = len(d.Keys)
				d.Keys = append(d.Keys, *key)
				d.Values = append(d.Values, t.val)
			}
		}
		if all {
			return known(d)
		}
		return tyDict
	case *syntax.ListComp:
		c.expr(x.Iter)
		v := &Var{Name: x.Var.Name, Kind: CompVar, Decl: x.Var, Line: -1}
		c.sc = &scope{parent: c.sc, vars: map[string]*Var{v.Name: v}}
		c.expr(x.Elt)
		if x.Cond != nil {
			c.expr(x.Cond)
		}
		c.sc = c.sc.parent
		return tyList
	case *syntax.TypedDecl:
		if c.inConst {
			c.errorf(x.Pos(), "a constant cannot declare variables")
		} else {
			c.errorf(x.Pos(), "typed declarations must stand on their own line, be an operand of -> or ~>, or be the left side of a line (x: T) in e")
		}
		return unknown
	case *syntax.ToolRef:
		c.toolPattern(x)
		return vtype{kind: tPattern}
	case *syntax.ValueRef:
		c.errorf(x.Pos(), "value references are only allowed in tool patterns")
		return unknown
	case *syntax.Wildcard:
		c.errorf(x.Pos(), "wildcards are only allowed in tool patterns")
		return unknown
	}
	return unknown
}

func (c *checker) exprs(xs []syntax.Expr) ([]any, bool) {
	vals := make([]any, 0, len(xs))
	all := true
	for _, e := range xs {
		t := c.expr(e)
		if !t.known {
			all = false
			continue
		}
		vals = append(vals, t.val)
	}
	if !all || len(vals) > maxFoldLen {
		return nil, false
	}
	return vals, true
}

func indexOf(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return -1
}

// dictKey returns the string a dict key denotes, or nil.
func dictKey(k syntax.Expr) *string {
	switch k := k.(type) {
	case *syntax.Ident:
		return &k.Name
	case *syntax.BasicLit:
		if k.Kind == syntax.LitString {
			return &k.Value
		}
	}
	return nil
}

func arithType(op syntax.Token, a, b vtype) vtype {
	switch op {
	case syntax.AND, syntax.OR:
		if a.kind == b.kind && a.kind != tEvent && a.kind != tUnknown {
			return vtype{kind: a.kind}
		}
		return unknown
	case syntax.SLASH:
		if isNum(a) && isNum(b) {
			return vtype{kind: tFloat}
		}
	case syntax.PLUS, syntax.MINUS, syntax.STAR, syntax.PERCENT, syntax.POW:
		if isNum(a) && isNum(b) {
			if a.kind == tFloat || b.kind == tFloat {
				return vtype{kind: tFloat}
			}
			if op == syntax.POW {
				return unknown // int ** negative int is a float
			}
			return vtype{kind: tInt}
		}
		if op == syntax.PLUS && a.kind == b.kind && (a.kind == tStr || a.kind == tList || a.kind == tTuple) {
			return vtype{kind: a.kind}
		}
		if op == syntax.STAR && (a.kind == tStr || b.kind == tStr) {
			return tyStr
		}
	}
	return unknown
}

func isNum(t vtype) bool { return t.kind == tInt || t.kind == tFloat || t.kind == tBool }

// compare checks a comparison chain; flow operators need variables (§8.6).
func (c *checker) compare(x *syntax.CompareExpr) {
	ops := append([]syntax.Expr{x.X}, x.Ys...)
	for i, o := range ops {
		flowOp := syntax.Token(0)
		if i > 0 && (x.Ops[i-1].Op == syntax.ARROW || x.Ops[i-1].Op == syntax.SQUIG) {
			flowOp = x.Ops[i-1].Op
		} else if i < len(x.Ops) && (x.Ops[i].Op == syntax.ARROW || x.Ops[i].Op == syntax.SQUIG) {
			flowOp = x.Ops[i].Op
		}
		if flowOp != 0 {
			if _, ok := o.(*syntax.TypedDecl); ok {
				c.expr(o) // reports the misplaced declaration
				continue
			}
			c.flowOperand(o, flowOp)
			continue
		}
		c.expr(o)
	}
}

// selector checks x.name: module members and input.NAME are resolved
// statically; attributes of values with a known type are checked (§6.5).
func (c *checker) selector(x *syntax.SelectorExpr) vtype {
	name := x.Sel.Name
	if id, ok := x.X.(*syntax.Ident); ok {
		ref := c.ident(id)
		if ref == nil {
			return unknown
		}
		if isInput(ref) {
			if name == "data" {
				c.errorf(x.Sel.Pos(), "input.data is reserved")
				return unknown
			}
			c.inputs[name] = true
			c.prog.Members[x] = &Ref{Kind: RefInput, Name: name}
			return unknown
		}
		if ref.Kind == RefModule {
			return c.member(x, ref.Symbol)
		}
	}
	t := c.expr(x.X)
	switch t.kind {
	case tModule:
		if t.sym != nil {
			return c.member(x, t.sym)
		}
	case tEvent:
		attrs := eventAttrs[t.event]
		for _, a := range attrs {
			if a.name == name {
				return a.typ
			}
		}
		c.warnf(x.Sel.Pos(), "%s has no attribute %s%s (available: %s)", t.event, name, c.didYouMean(name, func() []string { return attrNames(attrs) }), strings.Join(attrNames(attrs), ", "))
	case tStr:
		if t.known {
			s := t.val.(string)
			if isObj, has := jsonObjectHasKey(s, name); has {
				return unknown
			} else if isObj && !contains(strMethods, name) {
				c.warnf(x.Sel.Pos(), "missing key %s in JSON object", name)
				return unknown
			}
		}
		if contains(strMethods, name) {
			return vtype{kind: tFunc}
		}
		if t.known {
			c.warnf(x.Sel.Pos(), "unavailable attribute %s for str values%s (methods: %s)", name, c.didYouMean(name, func() []string { return strMethods }), strings.Join(strMethods, ", "))
		}
	case tDict:
		if t.known {
			d := t.val.(*Dict)
			if i := indexOf(d.Keys, name); i >= 0 {
				return known(d.Values[i])
			}
		}
		if contains(dictMethods, name) {
			return vtype{kind: tFunc}
		}
		if t.known {
			d := t.val.(*Dict)
			c.warnf(x.Sel.Pos(), "missing key %s%s", name, c.didYouMean(name, func() []string { return append(append([]string{}, d.Keys...), dictMethods...) }))
		}
	case tNone, tInt, tFloat, tBool, tList, tTuple, tFunc, tPattern, tType, tQuant:
		c.warnf(x.Sel.Pos(), "%s values have no attribute %s", t.name(), name)
	}
	return unknown
}

// member resolves an export of a module value.
func (c *checker) member(x *syntax.SelectorExpr, mod *Symbol) vtype {
	sym, ok := c.u.Member(mod.Module, x.Sel.Name)
	if !ok {
		c.errorf(x.Sel.Pos(), "module %s has no member %s%s", mod.Module, x.Sel.Name, c.didYouMean(x.Sel.Name, func() []string { return c.u.Members(mod.Module) }))
		return unknown
	}
	ref := c.symbolRef(sym)
	c.prog.Members[x] = ref
	return c.refType(ref)
}

// call checks a call: predicates and built-ins have their arguments
// checked against their signature; names statically known not to be
// callable are errors.
func (c *checker) call(x *syntax.CallExpr) vtype {
	if id, ok := x.Fun.(*syntax.Ident); ok && isInput(c.ident(id)) {
		c.errorf(x.Fun.Pos(), "input is not callable")
		for _, a := range x.Args {
			c.expr(a)
		}
		for _, k := range x.Kwargs {
			c.expr(k.Value)
		}
		return unknown
	}
	f := c.expr(x.Fun)
	var pred *Predicate
	if id, ok := x.Fun.(*syntax.Ident); ok {
		if ref := c.prog.Refs[id]; ref != nil && ref.Kind == RefPredicate {
			pred = ref.Pred
		}
	}
	args := make([]vtype, len(x.Args))
	for i, a := range x.Args {
		args[i] = c.expr(a)
	}
	kwargs := make([]vtype, len(x.Kwargs))
	for i, k := range x.Kwargs {
		kwargs[i] = c.expr(k.Value)
	}
	name := c.src.Snippet(x.Fun.Pos(), x.Fun.End())
	switch {
	case pred != nil:
		c.predicateCall(x, pred, args)
		return tyBool
	case f.kind == tFunc && f.sym != nil:
		return c.builtinCall(x, f.sym, args, kwargs)
	case f.kind == tType, f.kind == tModule, f.kind == tPattern,
		f.kind == tNone, f.kind == tBool, f.kind == tInt, f.kind == tFloat, f.kind == tStr,
		f.kind == tList, f.kind == tTuple, f.kind == tDict, f.kind == tEvent:
		c.errorf(x.Fun.Pos(), "%s is not callable", name)
	case f.kind == tQuant:
		c.errorf(x.Fun.Pos(), "%s is not callable; a quantifier is a line of its own (%s:)", name, name)
	}
	return unknown
}

// predicateCall checks the arguments of a predicate call (§4.4).
func (c *checker) predicateCall(x *syntax.CallExpr, p *Predicate, args []vtype) {
	params := p.Syntax.Params
	if len(x.Args) > len(params) {
		c.errorf(x.Args[len(params)].Pos(), "predicate %s takes %d argument%s, got %d", p.Name, len(params), plural(len(params)), len(x.Args)+len(x.Kwargs))
		return
	}
	given := make([]bool, len(params))
	for i := range x.Args {
		given[i] = true
		c.argType(p, i, args[i], x.Args[i].Pos())
	}
	names := make([]string, len(params))
	for i, prm := range params {
		names[i] = prm.Name.Name
	}
	for _, k := range x.Kwargs {
		i := indexOf(names, k.Name.Name)
		switch {
		case i < 0:
			c.errorf(k.Name.Pos(), "predicate %s has no parameter %s%s", p.Name, k.Name.Name, c.didYouMean(k.Name.Name, func() []string { return names }))
			return
		case given[i]:
			c.errorf(k.Name.Pos(), "predicate %s got multiple values for %s", p.Name, k.Name.Name)
			return
		default:
			given[i] = true
		}
	}
	for i, ok := range given {
		if !ok {
			c.errorf(x.Rparen, "predicate %s takes %d argument%s: missing %s", p.Name, len(params), plural(len(params)), names[i])
			return
		}
	}
}

// argType warns when an argument's static event type cannot match the
// parameter type.
func (c *checker) argType(p *Predicate, i int, t vtype, pos syntax.Pos) {
	if i >= len(p.Syntax.Params) {
		return
	}
	want := p.Syntax.Params[i].Type.Name
	got := ""
	switch {
	case t.kind == tEvent:
		got = t.event
	case t.kind == tStr || t.kind == tInt || t.kind == tFloat || t.kind == tBool || t.kind == tList || t.kind == tDict:
		got = t.name()
	}
	if got != "" && isTypeName(want) && got != want && !(want == "float" && got == "int") {
		c.warnf(pos, "argument of type %s cannot match parameter %s: %s of predicate %s", got, p.Syntax.Params[i].Name.Name, want, p.Name)
	}
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

var piiEntities = map[string]string{"PERSON": CapPIIPerson, "LOCATION": CapPIILocation}

// builtinCall checks a call of a built-in function against its signature
// and its provider (§6.7, §13.4).
func (c *checker) builtinCall(x *syntax.CallExpr, sym *Symbol, args, kwargs []vtype) vtype {
	name := sym.Name
	if c.cost != nil {
		if sym.Detector {
			c.cost.Detectors++
			c.cost.Nodes += 100
		} else if sym.Regex {
			c.cost.Nodes += 10
		}
	}
	if sym.Missing != "" {
		c.errorf(x.Fun.Pos(), "detector %s has no provider (configure %s)", name, sym.Missing)
	}
	if !sym.Variadic && len(x.Args) > len(sym.Params) {
		c.errorf(x.Args[len(sym.Params)].Pos(), "%s takes at most %d argument%s, got %d", name, len(sym.Params), plural(len(sym.Params)), len(x.Args))
	}
	given := make([]bool, len(sym.Params))
	for i := range x.Args {
		if i < len(given) {
			given[i] = true
		}
	}
	names := make([]string, len(sym.Params))
	for i, p := range sym.Params {
		names[i] = p.Name
	}
	for i, k := range x.Kwargs {
		j := indexOf(names, k.Name.Name)
		switch {
		case j < 0 && !sym.AnyKwargs:
			c.errorf(k.Name.Pos(), "%s has no parameter %s%s", name, k.Name.Name, c.didYouMean(k.Name.Name, func() []string { return names }))
		case j >= 0 && given[j]:
			c.errorf(k.Name.Pos(), "%s got multiple values for %s", name, k.Name.Name)
		case j >= 0:
			given[j] = true
		}
		// Conditional providers (§13.4).
		switch {
		case name == "pii" && k.Name.Name == "entities" && kwargs[i].known:
			c.piiEntities(k.Value.Pos(), kwargs[i].val)
		case name == "prompt_injection" && k.Name.Name == "model":
			if !(kwargs[i].known && kwargs[i].val == nil) {
				c.capability(k.Name.Pos(), CapInjectionModel, "prompt_injection")
			}
		}
	}
	if name == "pii" && len(x.Args) > 1 && args[1].known {
		c.piiEntities(x.Args[1].Pos(), args[1].val)
	}
	if name == "prompt_injection" && len(x.Args) > 1 && !(args[1].known && args[1].val == nil) {
		c.capability(x.Args[1].Pos(), CapInjectionModel, "prompt_injection")
	}
	for i, p := range sym.Params {
		if !p.Optional && !given[i] {
			c.errorf(x.Rparen, "%s missing argument %s", name, p.Name)
			break
		}
	}
	if sym.Regex && len(x.Args) > 0 {
		c.regexLiteral(x.Args[0])
		if s, ok := args[0].val.(string); ok && args[0].known {
			c.checkRegex(x.Args[0].Pos(), s)
		}
	}
	switch sym.Result {
	case "bool":
		return tyBool
	case "int":
		return vtype{kind: tInt}
	case "float":
		return vtype{kind: tFloat}
	case "str":
		return tyStr
	case "list":
		return tyList
	case "dict":
		return tyDict
	}
	return unknown
}

func (c *checker) piiEntities(pos syntax.Pos, v any) {
	var items []any
	switch l := v.(type) {
	case List:
		items = l
	case Tuple:
		items = l
	}
	for _, it := range items {
		if s, ok := it.(string); ok {
			if capName, ok := piiEntities[s]; ok {
				c.capability(pos, capName, "pii")
			} else if _, ok := c.u.Capability("pii:" + s); !ok {
				// No silent gaps (§13.4): a type nothing reports.
				if cfg, ok := c.u.Capability(CapPIIModel); !ok {
					c.warnf(pos, "pii: no recogniser reports entity %s, so it is never found (configure %s for a model that does)", s, cfg)
				}
			}
		}
	}
}

func (c *checker) capability(pos syntax.Pos, capName, detector string) {
	if cfg, ok := c.u.Capability(capName); !ok {
		c.errorf(pos, "detector %s has no provider (configure %s)", detector, cfg)
	}
}

// regexLiteral warns about a non-raw string literal used as a regular
// expression that holds an escape meaning something else in a regex (§2.5).
func (c *checker) regexLiteral(x syntax.Expr) {
	b, ok := x.(*syntax.BasicLit)
	if !ok || b.Kind != syntax.LitString || b.RawStr {
		return
	}
	r := b.Raw
	for i := 0; i+1 < len(r); i++ {
		if r[i] != '\\' {
			continue
		}
		e := r[i+1]
		switch {
		case e == 'b', e == '\\', '1' <= e && e <= '9':
			c.warnf(b.Pos(), `the escape \%c in a non-raw string means something else in a regular expression; write r"..."`, e)
			return
		}
		i++
	}
}

// checkRegex warns about an invalid regular expression known at load time.
func (c *checker) checkRegex(pos syntax.Pos, pattern string) {
	rc, ok := c.u.(RegexChecker)
	if !ok {
		return
	}
	if err := rc.CheckRegex(pattern); err != nil {
		c.warnf(pos, "invalid regular expression: %v", err)
	}
}

// Value references of semantic patterns (§9) and the capability each needs.
var valueRefs = map[string]string{
	"EMAIL_ADDRESS": "",
	"PHONE_NUMBER":  "",
	"LOCATION":      CapPIILocation,
	"PERSON":        CapPIIPerson,
	"MODERATED":     CapModerated,
	"DUMMY":         "",
}

var valueRefNames = []string{"DUMMY", "EMAIL_ADDRESS", "LOCATION", "MODERATED", "PERSON", "PHONE_NUMBER"}

// toolPattern checks tool:NAME(ARG) (§9, D9).
func (c *checker) toolPattern(x *syntax.ToolRef) {
	if len(x.Args) > 1 {
		c.errorf(x.Args[1].Pos(), "unsupported tool pattern: tool:%s takes at most one argument", x.Name.Name)
	}
	for _, a := range x.Args {
		c.patternArg(a)
	}
}

func (c *checker) patternArg(x syntax.Expr) {
	if c.cost != nil {
		c.cost.Nodes++
	}
	switch x := x.(type) {
	case *syntax.BadExpr:
	case *syntax.DictLit:
		for _, e := range x.Entries {
			if dictKey(e.Key) == nil {
				c.errorf(e.Key.Pos(), "dict keys must be names or strings")
			}
			c.patternArg(e.Value)
		}
	case *syntax.ListLit:
		for _, e := range x.Elts {
			c.patternArg(e)
		}
	case *syntax.BasicLit:
		switch x.Kind {
		case syntax.LitString:
			c.regexLiteral(x)
			c.checkRegex(x.Pos(), x.Value)
		case syntax.LitInt, syntax.LitFloat:
		default:
			c.errorf(x.Pos(), "unsupported tool pattern: %s is not a pattern", x.Raw)
		}
	case *syntax.UnaryExpr:
		if b, ok := x.X.(*syntax.BasicLit); !ok || x.Op != syntax.MINUS || (b.Kind != syntax.LitInt && b.Kind != syntax.LitFloat) {
			c.errorf(x.Pos(), "unsupported tool pattern: only a number may be negated")
		}
	case *syntax.Wildcard:
	case *syntax.ValueRef:
		capName, ok := valueRefs[x.Name]
		if !ok {
			c.errorf(x.Pos(), "unsupported value type %s%s", x.Name, c.didYouMean(x.Name, func() []string { return valueRefNames }))
		} else if capName != "" {
			det := "pii"
			if capName == CapModerated {
				det = "moderated"
			}
			c.capability(x.Pos(), capName, det)
		}
	default:
		c.errorf(x.Pos(), "unsupported tool pattern: a pattern argument is a dict, a list, a string, a number, * or <VALUE>, not %s", c.src.Snippet(x.Pos(), x.End()))
	}
}
