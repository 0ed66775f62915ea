//go:build ignore

// extract_examples writes testdata/gitleaks-examples.json: the literal
// true-positive (tps) and false-positive (fps) examples of gitleaks' rule
// definitions (cmd/generate/config/rules/*.go, MIT licence, see
// LICENSE.gitleaks), by rule id. Examples that gitleaks generates at run
// time are not literals and are skipped. Run from detect/:
//
//	go mod download -json github.com/zricethezav/gitleaks/v8@v8.30.1   # prints "Dir"
//	go run rules/extract_examples.go DIR > testdata/gitleaks-examples.json
package main

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
)

type examples struct {
	Rule string   `json:"rule"`
	TPs  []string `json:"tps,omitempty"`
	FPs  []string `json:"fps,omitempty"`
}

func litString(e ast.Expr) (string, bool) {
	switch x := e.(type) {
	case *ast.BasicLit:
		if x.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(x.Value)
		return s, err == nil
	case *ast.BinaryExpr:
		if x.Op != token.ADD {
			return "", false
		}
		a, ok1 := litString(x.X)
		b, ok2 := litString(x.Y)
		return a + b, ok1 && ok2
	case *ast.ParenExpr:
		return litString(x.X)
	}
	return "", false
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: go run rules/extract_examples.go GITLEAKS_MODULE_DIR")
		os.Exit(2)
	}
	files, err := filepath.Glob(filepath.Join(os.Args[1], "cmd", "generate", "config", "rules", "*.go"))
	if err != nil || len(files) == 0 {
		fmt.Fprintln(os.Stderr, "no rule files under", os.Args[1])
		os.Exit(1)
	}
	fs := token.NewFileSet()
	var out []examples
	for _, f := range files {
		af, err := parser.ParseFile(fs, f, nil, 0)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		for _, d := range af.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			var ex examples
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				switch x := n.(type) {
				case *ast.KeyValueExpr:
					if k, ok := x.Key.(*ast.Ident); ok && k.Name == "RuleID" {
						if s, ok := litString(x.Value); ok {
							ex.Rule = s
						}
					}
				case *ast.AssignStmt:
					if len(x.Lhs) != 1 || len(x.Rhs) != 1 {
						return true
					}
					id, ok := x.Lhs[0].(*ast.Ident)
					cl, ok2 := x.Rhs[0].(*ast.CompositeLit)
					if !ok || !ok2 || (id.Name != "tps" && id.Name != "fps") {
						return true
					}
					for _, e := range cl.Elts {
						if s, ok := litString(e); ok {
							if id.Name == "tps" {
								ex.TPs = append(ex.TPs, s)
							} else {
								ex.FPs = append(ex.FPs, s)
							}
						}
					}
				}
				return true
			})
			if ex.Rule != "" && len(ex.TPs)+len(ex.FPs) > 0 {
				out = append(out, ex)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Rule < out[j].Rule })
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", " ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
