package syntax

import (
	"fmt"
	"strconv"
	"strings"
)

// Dump returns a deterministic, position-free rendering of a syntax tree,
// one statement or body line per line and expressions as S-expressions.
// Parser tests compare it with a golden string. n may be a *File, a Stmt,
// a Line, a *Body or an Expr.
func Dump(n Node) string {
	var d dumper
	d.node(n, 0)
	return d.b.String()
}

type dumper struct{ b strings.Builder }

func (d *dumper) line(depth int, format string, args ...any) {
	d.b.WriteString(strings.Repeat("  ", depth))
	fmt.Fprintf(&d.b, format, args...)
	d.b.WriteByte('\n')
}

func (d *dumper) node(n Node, depth int) {
	switch n := n.(type) {
	case *File:
		for _, s := range n.Stmts {
			d.node(s, depth)
		}
	case *ImportStmt:
		if n.Alias != nil {
			d.line(depth, "import %s as %s", n.Module, n.Alias.Name)
		} else {
			d.line(depth, "import %s", n.Module)
		}
	case *FromImportStmt:
		if n.Star.IsValid() {
			d.line(depth, "from %s import *", n.Module)
			return
		}
		var names []string
		for _, a := range n.Names {
			if a.Alias != nil {
				names = append(names, a.Name.Name+" as "+a.Alias.Name)
			} else {
				names = append(names, a.Name.Name)
			}
		}
		d.line(depth, "from %s import %s", n.Module, strings.Join(names, ", "))
	case *ConstDecl:
		block := ""
		if n.Block {
			block = " (block)"
		}
		d.line(depth, "const %s%s %s", n.Name.Name, block, ExprString(n.Value))
	case *PredicateDecl:
		var ps []string
		for _, p := range n.Params {
			ps = append(ps, p.Name.Name+": "+p.Type.Name)
		}
		sep := ":="
		if n.Colon {
			sep = ":"
		}
		if n.Body == nil {
			d.line(depth, "pred %s(%s) := %s", n.Name.Name, strings.Join(ps, ", "), ExprString(n.Value))
			return
		}
		d.line(depth, "pred %s(%s) %s", n.Name.Name, strings.Join(ps, ", "), sep)
		d.node(n.Body, depth+1)
	case *RuleDecl:
		d.line(depth, "rule %d %s", n.Index, ExprString(n.Head))
		if n.Body != nil {
			d.node(n.Body, depth+1)
		}
	case *BadStmt:
		d.line(depth, "(bad statement)")
	case *Body:
		for _, l := range n.Lines {
			d.node(l, depth)
		}
	case *ExprLine:
		d.line(depth, "%s", ExprString(n.X))
	case *AssignLine:
		d.line(depth, "%s := %s", n.Name.Name, ExprString(n.Value))
	case *QuantLine:
		not := ""
		if n.Not.IsValid() {
			not = "not "
		}
		d.line(depth, "quant %s%s", not, ExprString(n.Header))
		if n.Body != nil {
			d.node(n.Body, depth+1)
		}
	case Expr:
		d.line(depth, "%s", ExprString(n))
	}
}

// ExprString renders an expression as a position-free S-expression, as
// Dump does.
func ExprString(x Expr) string {
	var b strings.Builder
	sexpr(&b, x)
	return b.String()
}

func sexpr(b *strings.Builder, x Expr) {
	list := func(head string, xs ...Expr) {
		b.WriteString("(" + head)
		for _, x := range xs {
			b.WriteByte(' ')
			sexpr(b, x)
		}
		b.WriteByte(')')
	}
	switch x := x.(type) {
	case nil:
		b.WriteString("<nil>")
	case *Ident:
		b.WriteString(x.Name)
	case *BasicLit:
		switch x.Kind {
		case LitString:
			b.WriteString(strconv.Quote(x.Value))
		default:
			b.WriteString(x.Raw)
		}
	case *FString:
		b.WriteString("(f")
		for _, p := range x.Parts {
			b.WriteByte(' ')
			if p.X != nil {
				b.WriteByte('{')
				sexpr(b, p.X)
				b.WriteByte('}')
			} else {
				b.WriteString(strconv.Quote(p.Lit))
			}
		}
		b.WriteByte(')')
	case *UnaryExpr:
		list(x.Op.String(), x.X)
	case *BinaryExpr:
		list(x.Op.String(), x.X, x.Y)
	case *CompareExpr:
		if len(x.Ops) == 1 {
			list(x.Ops[0].Op.String(), x.X, x.Ys[0])
			return
		}
		b.WriteString("(chain ")
		sexpr(b, x.X)
		for i, op := range x.Ops {
			b.WriteString(" " + op.Op.String() + " ")
			sexpr(b, x.Ys[i])
		}
		b.WriteByte(')')
	case *CondExpr:
		list("cond", x.Cond, x.X, x.Y)
	case *CallExpr:
		b.WriteString("(call ")
		sexpr(b, x.Fun)
		for _, a := range x.Args {
			b.WriteByte(' ')
			sexpr(b, a)
		}
		for _, k := range x.Kwargs {
			b.WriteString(" (kw " + k.Name.Name + " ")
			sexpr(b, k.Value)
			b.WriteByte(')')
		}
		b.WriteByte(')')
	case *SelectorExpr:
		b.WriteString("(. ")
		sexpr(b, x.X)
		b.WriteString(" " + x.Sel.Name + ")")
	case *IndexExpr:
		list("index", x.X, x.Index)
	case *TupleLit:
		list("tuple", x.Elts...)
	case *ListLit:
		list("list", x.Elts...)
	case *SetLit:
		list("set", x.Elts...)
	case *DictLit:
		b.WriteString("(dict")
		for _, e := range x.Entries {
			b.WriteString(" (")
			sexpr(b, e.Key)
			b.WriteByte(' ')
			sexpr(b, e.Value)
			b.WriteByte(')')
		}
		b.WriteByte(')')
	case *ListComp:
		b.WriteString("(comp ")
		sexpr(b, x.Elt)
		b.WriteString(" for " + x.Var.Name + " in ")
		sexpr(b, x.Iter)
		if x.Cond != nil {
			b.WriteString(" if ")
			sexpr(b, x.Cond)
		}
		b.WriteByte(')')
	case *TypedDecl:
		b.WriteString("(decl " + x.Name.Name + " " + x.Type.Name + ")")
	case *ToolRef:
		if !x.Lparen.IsValid() {
			b.WriteString("tool:" + x.Name.Name)
			return
		}
		list("tool:"+x.Name.Name, x.Args...)
	case *ValueRef:
		b.WriteString("<" + x.Name + ">")
	case *Wildcard:
		b.WriteString("*")
	case *BadExpr:
		b.WriteString("(bad)")
	default:
		fmt.Fprintf(b, "(?%T)", x)
	}
}

// Format renders a syntax tree as policy source that parses back to the
// same tree (compared with Dump). Compound expressions are fully
// parenthesised, bodies are indented by four spaces, and literals keep their
// original spelling. Trees with Bad nodes have no faithful rendering.
func Format(f *File) string {
	var b strings.Builder
	for i, s := range f.Stmts {
		if i > 0 {
			b.WriteByte('\n')
		}
		formatStmt(&b, s)
	}
	return b.String()
}

func formatStmt(b *strings.Builder, s Stmt) {
	switch s := s.(type) {
	case *ImportStmt:
		b.WriteString("import " + s.Module.String())
		if s.Alias != nil {
			b.WriteString(" as " + s.Alias.Name)
		}
		b.WriteByte('\n')
	case *FromImportStmt:
		b.WriteString("from " + s.Module.String() + " import ")
		if s.Star.IsValid() {
			b.WriteString("*\n")
			return
		}
		for i, a := range s.Names {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(a.Name.Name)
			if a.Alias != nil {
				b.WriteString(" as " + a.Alias.Name)
			}
		}
		b.WriteByte('\n')
	case *ConstDecl:
		b.WriteString(s.Name.Name + " :=")
		if s.Block {
			b.WriteString("\n    ")
		} else {
			b.WriteByte(' ')
		}
		formatExpr(b, s.Value)
		b.WriteByte('\n')
	case *PredicateDecl:
		b.WriteString(s.Name.Name + "(")
		for i, p := range s.Params {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(p.Name.Name + ": " + p.Type.Name)
		}
		b.WriteString(")")
		if s.Body == nil {
			b.WriteString(" := ")
			formatExpr(b, s.Value)
			b.WriteByte('\n')
			return
		}
		if s.Colon {
			b.WriteString(":\n")
		} else {
			b.WriteString(" :=\n")
		}
		formatBody(b, s.Body, 1)
	case *RuleDecl:
		b.WriteString("raise ")
		formatExpr(b, s.Head)
		b.WriteString(" if:\n")
		formatBody(b, s.Body, 1)
	case *BadStmt:
		b.WriteString("# bad statement\n")
	}
}

func formatBody(b *strings.Builder, body *Body, depth int) {
	if body == nil {
		return
	}
	ind := strings.Repeat("    ", depth)
	for _, l := range body.Lines {
		b.WriteString(ind)
		switch l := l.(type) {
		case *ExprLine:
			formatExpr(b, l.X)
			b.WriteByte('\n')
		case *AssignLine:
			b.WriteString(l.Name.Name + " := ")
			formatExpr(b, l.Value)
			b.WriteByte('\n')
		case *QuantLine:
			if l.Not.IsValid() {
				b.WriteString("not ")
			}
			formatExpr(b, l.Header)
			b.WriteString(":\n")
			formatBody(b, l.Body, depth+1)
		}
	}
}

func formatExprs(b *strings.Builder, xs []Expr) {
	for i, x := range xs {
		if i > 0 {
			b.WriteString(", ")
		}
		formatExpr(b, x)
	}
}

func formatExpr(b *strings.Builder, x Expr) {
	switch x := x.(type) {
	case nil:
	case *Ident:
		b.WriteString(x.Name)
	case *BasicLit:
		b.WriteString(x.Raw)
	case *FString:
		b.WriteString(x.Raw)
	case *UnaryExpr:
		b.WriteByte('(')
		b.WriteString(x.Op.String())
		if x.Op == NOT {
			b.WriteByte(' ')
		}
		formatExpr(b, x.X)
		b.WriteByte(')')
	case *BinaryExpr:
		b.WriteByte('(')
		formatExpr(b, x.X)
		b.WriteString(" " + x.Op.String() + " ")
		formatExpr(b, x.Y)
		b.WriteByte(')')
	case *CompareExpr:
		b.WriteByte('(')
		formatExpr(b, x.X)
		for i, op := range x.Ops {
			b.WriteString(" " + op.Op.String() + " ")
			formatExpr(b, x.Ys[i])
		}
		b.WriteByte(')')
	case *CondExpr:
		b.WriteByte('(')
		formatExpr(b, x.X)
		b.WriteString(" if ")
		formatExpr(b, x.Cond)
		b.WriteString(" else ")
		formatExpr(b, x.Y)
		b.WriteByte(')')
	case *CallExpr:
		formatExpr(b, x.Fun)
		b.WriteByte('(')
		formatExprs(b, x.Args)
		for i, k := range x.Kwargs {
			if i > 0 || len(x.Args) > 0 {
				b.WriteString(", ")
			}
			b.WriteString(k.Name.Name + "=")
			formatExpr(b, k.Value)
		}
		b.WriteByte(')')
	case *SelectorExpr:
		if lit, ok := x.X.(*BasicLit); ok && (lit.Kind == LitInt || lit.Kind == LitFloat) {
			// 1.real would lex as the float "1." followed by a name.
			b.WriteByte('(')
			formatExpr(b, x.X)
			b.WriteByte(')')
		} else {
			formatExpr(b, x.X)
		}
		b.WriteString("." + x.Sel.Name)
	case *IndexExpr:
		formatExpr(b, x.X)
		b.WriteByte('[')
		formatExpr(b, x.Index)
		b.WriteByte(']')
	case *TupleLit:
		b.WriteByte('(')
		formatExprs(b, x.Elts)
		if len(x.Elts) == 1 {
			b.WriteByte(',')
		}
		b.WriteByte(')')
	case *ListLit:
		b.WriteByte('[')
		formatExprs(b, x.Elts)
		b.WriteByte(']')
	case *SetLit:
		b.WriteByte('{')
		formatExprs(b, x.Elts)
		b.WriteByte('}')
	case *DictLit:
		b.WriteByte('{')
		for i, e := range x.Entries {
			if i > 0 {
				b.WriteString(", ")
			}
			formatExpr(b, e.Key)
			b.WriteString(": ")
			formatExpr(b, e.Value)
		}
		b.WriteByte('}')
	case *ListComp:
		b.WriteByte('[')
		formatExpr(b, x.Elt)
		b.WriteString(" for " + x.Var.Name + " in ")
		formatExpr(b, x.Iter)
		if x.Cond != nil {
			b.WriteString(" if ")
			formatExpr(b, x.Cond)
		}
		b.WriteByte(']')
	case *TypedDecl:
		b.WriteString("(" + x.Name.Name + ": " + x.Type.Name + ")")
	case *ToolRef:
		b.WriteString("tool:" + x.Name.Name)
		if x.Lparen.IsValid() {
			b.WriteByte('(')
			formatExprs(b, x.Args)
			b.WriteByte(')')
		}
	case *ValueRef:
		b.WriteString("<" + x.Name + ">")
	case *Wildcard:
		b.WriteByte('*')
	case *BadExpr:
		b.WriteString("None")
	}
}
