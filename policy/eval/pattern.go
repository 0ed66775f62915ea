package eval

import (
	"math/big"
	"strings"

	"github.com/vigilhq/vigil/policy/builtin"
	"github.com/vigilhq/vigil/policy/syntax"
)

// pattern is a tool pattern value `tool:NAME` / `tool:NAME(ARG)` (spec §9).
type pattern struct {
	name string
	arg  *patNode // nil: any arguments
	src  string
}

// Display implements builtin.Displayer.
func (p *pattern) Display() string { return p.src }

type patKind int

const (
	patAny patKind = iota
	patDict
	patList
	patString
	patInt
	patFloat
	patRef
	patBig
)

type patNode struct {
	kind  patKind
	keys  []string
	elems []patNode
	s     string
	i     int64
	f     float64
	big   *big.Int
	pos   syntax.Pos
}

func (c *compiler) pattern(x *syntax.ToolRef) *pattern {
	p := &pattern{name: x.Name.Name, src: c.src.Snippet(x.Pos(), x.End())}
	if x.Lparen == syntax.NoPos {
		return p
	}
	if len(x.Args) != 1 {
		c.errorf(x.Pos(), "unsupported tool pattern: exactly one argument is allowed")
		return p
	}
	n := c.patArg(x.Args[0])
	p.arg = &n
	return p
}

func (c *compiler) patArg(e syntax.Expr) patNode {
	switch x := e.(type) {
	case *syntax.Wildcard:
		return patNode{kind: patAny}
	case *syntax.DictLit:
		n := patNode{kind: patDict}
		for _, en := range x.Entries {
			switch k := en.Key.(type) {
			case *syntax.Ident:
				n.keys = append(n.keys, k.Name)
			case *syntax.BasicLit:
				n.keys = append(n.keys, k.Value)
			default:
				c.errorf(en.Key.Pos(), "unsupported tool pattern")
			}
			n.elems = append(n.elems, c.patArg(en.Value))
		}
		return n
	case *syntax.ListLit:
		n := patNode{kind: patList}
		for _, el := range x.Elts {
			n.elems = append(n.elems, c.patArg(el))
		}
		return n
	case *syntax.BasicLit:
		switch x.Kind {
		case syntax.LitString:
			// an invalid expression is a runtime regex_error when first
			// needed (spec §9); the loader warns about it
			return patNode{kind: patString, s: x.Value, pos: x.Pos()}
		case syntax.LitInt, syntax.LitFloat:
			switch v := c.literal(x).(type) {
			case int64:
				return patNode{kind: patInt, i: v}
			case float64:
				return patNode{kind: patFloat, f: v}
			case *big.Int:
				return patNode{kind: patBig, big: v}
			}
		}
	case *syntax.UnaryExpr:
		if x.Op == syntax.MINUS {
			if lit, ok := x.X.(*syntax.BasicLit); ok && (lit.Kind == syntax.LitInt || lit.Kind == syntax.LitFloat) {
				n := c.patArg(lit)
				n.i, n.f = -n.i, -n.f
				if n.big != nil {
					n.big = new(big.Int).Neg(n.big)
					if n.big.IsInt64() { // -9223372036854775808
						n = patNode{kind: patInt, i: n.big.Int64()}
					}
				}
				return n
			}
		}
	case *syntax.ValueRef:
		switch x.Name {
		case "EMAIL_ADDRESS", "PHONE_NUMBER", "LOCATION", "PERSON", "MODERATED", "DUMMY":
		default:
			c.errorf(x.Pos(), "unsupported value type %s", x.Name)
		}
		if x.Name != "DUMMY" {
			det := "pii"
			if x.Name == "MODERATED" {
				det = "moderated"
			}
			if b, ok := c.lookup(det); !ok {
				c.errorf(x.Pos(), "detector %s is not available", det)
			} else if err := b.Usable(); err != nil {
				c.errorf(x.Pos(), "%v", err)
			}
		}
		return patNode{kind: patRef, s: x.Name, pos: x.Pos()}
	}
	c.errorf(e.Pos(), "unsupported tool pattern")
	return patNode{kind: patAny}
}

// matchValue applies the pattern to v (`v is tool:...`).
func (p *pattern) matchValue(f *frame, pos syntax.Pos, v builtin.Value) bool {
	if o, ok := v.(*builtin.ToolOutput); ok && o.Call != nil {
		v = o.Call
	}
	tc, ok := v.(*builtin.ToolCall)
	if !ok || tc.Function.Name != p.name {
		return false
	}
	if p.arg == nil {
		return true
	}
	return p.arg.match(f, pos, tc.Function.Args())
}

func (n *patNode) match(f *frame, pos syntax.Pos, v builtin.Value) bool {
	v = builtin.Strip(v)
	switch n.kind {
	case patAny:
		return true
	case patDict:
		d, ok := v.(*builtin.Dict)
		if !ok {
			return false
		}
		for i, k := range n.keys {
			x, ok := d.M[k]
			if !ok || !n.elems[i].match(f, pos, x) {
				return false
			}
		}
		return true
	case patList:
		l, ok := v.([]builtin.Value)
		if !ok || len(l) != len(n.elems) {
			return false
		}
		for i := range l {
			if !n.elems[i].match(f, pos, l[i]) {
				return false
			}
		}
		return true
	case patString:
		s, ok := v.(string)
		if !ok {
			return false
		}
		if s == n.s {
			return true
		}
		m, err := f.an.env.FullMatch(n.s, s)
		if err != nil {
			throwErr(n.pos, err)
		}
		return m
	case patInt:
		switch x := v.(type) {
		case int64:
			return x == n.i
		case bool:
			return (x && n.i == 1) || (!x && n.i == 0)
		}
		return false
	case patFloat:
		x, ok := v.(float64)
		return ok && x == n.f
	case patBig:
		x, ok := v.(*big.Int)
		return ok && x.Cmp(n.big) == 0
	case patRef:
		if n.s == "DUMMY" {
			return v == "__DUMMY__"
		}
		if n.s == "MODERATED" {
			r := f.callBuiltinName(n.pos, "moderated", []builtin.Value{v}, nil)
			return builtin.Truthy(r)
		}
		kw := builtin.NewDict(1)
		kw.Set("entities", []builtin.Value{n.s})
		r := f.callBuiltinName(n.pos, "pii", []builtin.Value{v}, kw)
		els, _ := builtin.Elements(r)
		for _, e := range els {
			if builtin.Str(e) == n.s {
				return true
			}
		}
		return false
	}
	return false
}

// predValue is a predicate as a value.
type predValue struct{ p *predicate }

// Display implements builtin.Displayer.
func (p *predValue) Display() string { return "<predicate " + p.p.name + ">" }

// typeValue is a type name used as a value.
type typeValue struct{ name string }

// Display implements builtin.Displayer.
func (t *typeValue) Display() string { return "<type " + t.name + ">" }

var _ = strings.TrimSpace
