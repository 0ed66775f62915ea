package syntax

// Inspect traverses the tree rooted at n in depth-first order: it calls
// f(n); if that returns true, it inspects each child of n, then calls
// f(nil). Nil children are skipped. It is go/ast.Inspect for this tree.
func Inspect(n Node, f func(Node) bool) {
	if n == nil || !f(n) {
		return
	}
	for _, c := range children(n) {
		Inspect(c, f)
	}
	f(nil)
}

// children returns the non-nil children of n in source order.
func children(n Node) []Node {
	var out []Node
	add := func(ns ...Node) {
		for _, c := range ns {
			if c != nil && !isNilNode(c) {
				out = append(out, c)
			}
		}
	}
	switch n := n.(type) {
	case *File:
		for _, s := range n.Stmts {
			add(s)
		}
	case *ImportStmt:
		add(n.Module)
		if n.Alias != nil {
			add(n.Alias)
		}
	case *FromImportStmt:
		add(n.Module)
		for _, a := range n.Names {
			add(a)
		}
	case *ImportAlias:
		add(n.Name)
		if n.Alias != nil {
			add(n.Alias)
		}
	case *DottedName:
		for _, p := range n.Parts {
			add(p)
		}
	case *ConstDecl:
		add(n.Name)
		if n.Value != nil {
			add(n.Value)
		}
	case *Param:
		add(n.Name, n.Type)
	case *PredicateDecl:
		add(n.Name)
		for _, p := range n.Params {
			add(p)
		}
		if n.Value != nil {
			add(n.Value)
		}
		if n.Body != nil {
			add(n.Body)
		}
	case *RuleDecl:
		if n.Head != nil {
			add(n.Head)
		}
		if n.Body != nil {
			add(n.Body)
		}
	case *Body:
		for _, l := range n.Lines {
			add(l)
		}
	case *ExprLine:
		add(n.X)
	case *AssignLine:
		add(n.Name)
		if n.Value != nil {
			add(n.Value)
		}
	case *QuantLine:
		add(n.Header)
		if n.Body != nil {
			add(n.Body)
		}
	case *FString:
		for _, p := range n.Parts {
			if p.X != nil {
				add(p.X)
			}
		}
	case *UnaryExpr:
		add(n.X)
	case *BinaryExpr:
		add(n.X, n.Y)
	case *CompareExpr:
		add(n.X)
		for _, y := range n.Ys {
			add(y)
		}
	case *CondExpr:
		add(n.X, n.Cond, n.Y)
	case *KeywordArg:
		add(n.Name, n.Value)
	case *CallExpr:
		add(n.Fun)
		for _, a := range n.Args {
			add(a)
		}
		for _, k := range n.Kwargs {
			add(k)
		}
	case *SelectorExpr:
		add(n.X, n.Sel)
	case *IndexExpr:
		add(n.X, n.Index)
	case *TupleLit:
		for _, e := range n.Elts {
			add(e)
		}
	case *ListLit:
		for _, e := range n.Elts {
			add(e)
		}
	case *SetLit:
		for _, e := range n.Elts {
			add(e)
		}
	case *DictEntry:
		add(n.Key, n.Value)
	case *DictLit:
		for _, e := range n.Entries {
			add(e)
		}
	case *ListComp:
		add(n.Elt, n.Var, n.Iter)
		if n.Cond != nil {
			add(n.Cond)
		}
	case *TypedDecl:
		add(n.Name, n.Type)
	case *ToolRef:
		add(n.Name)
		for _, a := range n.Args {
			add(a)
		}
	}
	return out
}

// isNilNode reports whether c is a typed nil pointer.
func isNilNode(c Node) bool {
	switch c := c.(type) {
	case *Ident:
		return c == nil
	case *Body:
		return c == nil
	case *DottedName:
		return c == nil
	}
	return false
}
