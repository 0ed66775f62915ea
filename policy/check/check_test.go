package check

import (
	"errors"
	"flag"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/vigilhq/vigil/policy/syntax"
	"golang.org/x/tools/txtar"
)

var update = flag.Bool("update", false, "rewrite the -- program -- sections of testdata/check/*.txtar")

type marker struct {
	line int
	kind string
	rx   *regexp.Regexp
	used bool
}

// The regular expression is the text between the quotes, taken literally
// (as in go/parser's error tests).
var markerRx = regexp.MustCompile(`#\s*(ERROR|WARNING)\s+"([^"]*)"`)

func markers(t *testing.T, text string) []*marker {
	t.Helper()
	var ms []*marker
	for i, line := range strings.Split(text, "\n") {
		for _, m := range markerRx.FindAllStringSubmatch(line, -1) {
			rx, err := regexp.Compile(m[2])
			if err != nil {
				t.Fatalf("line %d: bad marker: %v", i+1, err)
			}
			ms = append(ms, &marker{line: i + 1, kind: m[1], rx: rx})
		}
	}
	return ms
}

func checkMarkers(t *testing.T, ms []*marker, kind string, errs syntax.ErrorList) {
	t.Helper()
	for _, e := range errs {
		line := e.Position().Line
		found := false
		for _, m := range ms {
			if m.kind == kind && m.line == line && !m.used && m.rx.MatchString(e.Msg) {
				m.used, found = true, true
				break
			}
		}
		if !found {
			t.Errorf("unexpected %s %s", strings.ToLower(kind), e.Short())
		}
	}
	for _, m := range ms {
		if m.kind == kind && !m.used {
			t.Errorf("line %d: missing %s matching %q", m.line, strings.ToLower(kind), m.rx)
		}
	}
}

// load parses and checks a policy, returning syntax and load errors together.
func load(text string, u Universe) (*Program, syntax.ErrorList, error) {
	f, perr := syntax.ParseString("policy", text)
	prog, cerr := Check(f, u)
	var all syntax.ErrorList
	for _, err := range []error{perr, cerr} {
		var l syntax.ErrorList
		if errors.As(err, &l) {
			all = append(all, l...)
		}
	}
	return prog, all, all.Err()
}

func TestCheckGolden(t *testing.T) {
	files, err := filepath.Glob("../testdata/check/*.txtar")
	if err != nil || len(files) == 0 {
		t.Fatalf("no test files: %v", err)
	}
	u := testUniverse()
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".txtar")
		if name == "conformance" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			a, err := txtar.ParseFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var text string
			want, hasWant := "", false
			for _, f := range a.Files {
				switch f.Name {
				case "policy":
					text = string(f.Data)
				case "program":
					want, hasWant = string(f.Data), true
				}
			}
			prog, errs, _ := load(text, u)
			ms := markers(t, text)
			checkMarkers(t, ms, "ERROR", errs)
			checkMarkers(t, ms, "WARNING", prog.Warnings)
			got := dumpProgram(prog)
			switch {
			case *update:
				found := false
				for i := range a.Files {
					if a.Files[i].Name == "program" {
						a.Files[i].Data, found = []byte(got), true
					}
				}
				if !found {
					a.Files = append(a.Files, txtar.File{Name: "program", Data: []byte(got)})
				}
				if err := os.WriteFile(file, txtar.Format(a), 0o644); err != nil {
					t.Fatal(err)
				}
			case !hasWant:
				t.Errorf("no -- program -- section (run with -update)")
			case got != want:
				t.Errorf("program mismatch\n--- got\n%s--- want\n%s", got, want)
			}
		})
	}
}

// dumpProgram renders what the checker computed, deterministically.
func dumpProgram(p *Program) string {
	var b strings.Builder
	pos := func(n syntax.Node) string { return p.File.Source.Position(n.Pos()).String() }
	for _, imp := range p.Imports {
		if imp.Symbol.Kind == SymModule {
			fmt.Fprintf(&b, "import %s = %s (module)\n", imp.Name.Name, imp.Symbol.Module)
			continue
		}
		fmt.Fprintf(&b, "import %s = %s.%s (%s)\n", imp.Name.Name, imp.Module, imp.Symbol.Name, kindName(imp.Symbol.Kind))
	}
	for _, k := range p.Constants {
		fmt.Fprintf(&b, "const %s", k.Name)
		if k.Folded {
			fmt.Fprintf(&b, " = %s", valueString(k.Const))
		}
		b.WriteByte('\n')
	}
	for _, pr := range p.Predicates {
		var ps []string
		for _, v := range pr.Params {
			ps = append(ps, v.Name+": "+v.Type)
		}
		fmt.Fprintf(&b, "pred %s(%s) cost=%+v\n", pr.Name, strings.Join(ps, ", "), pr.Cost)
		dumpBody(&b, pr.Body, 1)
	}
	for _, r := range p.Rules {
		fmt.Fprintf(&b, "rule %d head uses %s cost=%+v\n", r.Index, varList(r.HeadUses), r.Cost)
		dumpBody(&b, r.Body, 1)
	}
	if len(p.Inputs) > 0 {
		fmt.Fprintf(&b, "inputs %s\n", strings.Join(p.Inputs, ", "))
	}
	// Resolutions, in source order.
	type res struct {
		pos  syntax.Pos
		text string
	}
	var rs []res
	for id, ref := range p.Refs {
		rs = append(rs, res{id.Pos(), fmt.Sprintf("%s %s -> %s", pos(id), id.Name, refString(ref))})
	}
	for sel, ref := range p.Members {
		rs = append(rs, res{sel.Sel.Pos(), fmt.Sprintf("%s .%s -> %s", p.File.Source.Position(sel.Sel.Pos()), sel.Sel.Name, refString(ref))})
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i].pos < rs[j].pos })
	for _, r := range rs {
		b.WriteString("ref " + r.text + "\n")
	}
	return b.String()
}

func dumpBody(b *strings.Builder, body *Body, depth int) {
	ind := strings.Repeat("  ", depth)
	var vs []string
	for _, v := range body.Vars {
		vs = append(vs, fmt.Sprintf("%s:%s:%s@%d", v.Name, v.Kind, v.Type, v.Line))
	}
	fmt.Fprintf(b, "%svars [%s] free %s\n", ind, strings.Join(vs, " "), varList(body.Free))
	for _, ln := range body.Lines {
		fmt.Fprintf(b, "%s%d %s declares %s uses %s", ind, ln.Index, ln.Kind, varList(ln.Declares), varList(ln.Uses))
		if ln.Kind == LineFlow {
			var parts []string
			for i, v := range ln.FlowVars {
				if i > 0 {
					parts = append(parts, ln.FlowOps[i-1].String())
				}
				if v == nil {
					parts = append(parts, "?")
				} else {
					parts = append(parts, v.Name)
				}
			}
			fmt.Fprintf(b, " flow %s", strings.Join(parts, " "))
		}
		if q := ln.Quant; q != nil {
			kind := "forall"
			if q.Kind == Count {
				kind = fmt.Sprintf("count(min=%s, max=%s)", exprOrNil(q.Min), exprOrNil(q.Max))
			}
			if q.Not {
				kind = "not " + kind
			}
			fmt.Fprintf(b, " %s\n", kind)
			if q.Body != nil {
				dumpBody(b, q.Body, depth+1)
			}
			continue
		}
		b.WriteByte('\n')
	}
}

func exprOrNil(x syntax.Expr) string {
	if x == nil {
		return "nil"
	}
	return syntax.ExprString(x)
}

func varList(vs []*Var) string {
	var names []string
	for _, v := range vs {
		names = append(names, v.Name)
	}
	return "[" + strings.Join(names, " ") + "]"
}

func kindName(k SymbolKind) string {
	return [...]string{"func", "type", "quantifier", "module", "value"}[k]
}

func refString(r *Ref) string {
	switch r.Kind {
	case RefVar:
		return fmt.Sprintf("var %s (%s)", r.Var.Name, r.Var.Kind)
	case RefParam:
		return "param " + r.Var.Name
	case RefCompVar:
		return "comp " + r.Var.Name
	case RefConst:
		return "const " + r.Const.Name
	case RefPredicate:
		return "pred " + r.Pred.Name
	case RefBuiltin:
		return kindName(r.Symbol.Kind) + " " + r.Symbol.Name
	case RefModule:
		return "module " + r.Symbol.Module
	case RefInput:
		return "input " + r.Name
	}
	return "?"
}

func valueString(v any) string {
	switch x := v.(type) {
	case nil:
		return "None"
	case bool:
		if x {
			return "True"
		}
		return "False"
	case *big.Int:
		return x.String()
	case float64:
		return fmt.Sprint(x)
	case string:
		return fmt.Sprintf("%q", x)
	case List:
		return "[" + joinValues(x) + "]"
	case Tuple:
		return "(" + joinValues(x) + ")"
	case *Dict:
		var parts []string
		for i, k := range x.Keys {
			parts = append(parts, fmt.Sprintf("%q: %s", k, valueString(x.Values[i])))
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	return "?"
}

func joinValues(vs []any) string {
	var parts []string
	for _, v := range vs {
		parts = append(parts, valueString(v))
	}
	return strings.Join(parts, ", ")
}

// TestConformancePolicies loads every policy of the conformance suite: the
// ones marked load_error must fail, every other one must load.
func TestConformancePolicies(t *testing.T) {
	a, err := txtar.ParseFile("../testdata/check/conformance.txtar")
	if err != nil {
		t.Fatal(err)
	}
	u := testUniverse()
	n := 0
	for _, f := range a.Files {
		kind, name, _ := strings.Cut(f.Name, "/")
		t.Run(name, func(t *testing.T) {
			_, _, err := load(string(f.Data), u)
			switch kind {
			case "ok":
				if err != nil {
					t.Errorf("load failed:\n%v", err)
				}
			case "error":
				if err == nil {
					t.Errorf("loaded, want a load error")
				}
			default:
				t.Fatalf("bad section name %q", f.Name)
			}
		})
		n++
	}
	if n != 97 {
		t.Errorf("%d conformance policies, want 97", n)
	}
}

func TestSuggest(t *testing.T) {
	cands := []string{"Message", "ToolCall", "secrets", "len", "role", "content", "EMAIL_ADDRESS"}
	for _, tt := range []struct{ name, want string }{
		{"Mesage", "Message"},
		{"message", "Message"},
		{"toolcall", "ToolCall"},
		{"secret", "secrets"},
		{"lenn", "len"},
		{"rol", "role"},
		{"EMAILADDRESS", "EMAIL_ADDRESS"},
		{"xyz", ""},
		{"Message", ""},
		{"", ""},
	} {
		if got := suggest(tt.name, cands); got != tt.want {
			t.Errorf("suggest(%q) = %q, want %q", tt.name, got, tt.want)
		}
	}
	if d := editDistance("kitten", "sitting"); d != 3 {
		t.Errorf("editDistance = %d", d)
	}
}

func TestTable(t *testing.T) {
	u := testUniverse()
	if s, ok := u.Member("invariant", "detectors"); !ok || s.Kind != SymModule || s.Module != "invariant.detectors" {
		t.Errorf("Member(invariant, detectors) = %+v, %v", s, ok)
	}
	if s, ok := u.Member("invariant.detectors", "secrets"); !ok || s.Kind != SymFunc || s.Name != "secrets" {
		t.Errorf("Member(invariant.detectors, secrets) = %+v, %v", s, ok)
	}
	if _, ok := u.Member("invariant", "nope"); ok {
		t.Error("Member(invariant, nope) found")
	}
	members := strings.Join(u.Members("invariant.detectors"), " ")
	for _, want := range []string{"secrets", "pii", "code", "fuzzy_matching"} {
		if !strings.Contains(members, want) {
			t.Errorf("Members(invariant.detectors) = %s, missing %s", members, want)
		}
	}
	if strings.Contains(members, "invariant") {
		t.Errorf("Members lists full paths: %s", members)
	}
	if cfg, ok := u.Capability(CapModerated); ok || cfg != "detectors.base_url" {
		t.Errorf("Capability(moderated) = %q, %v", cfg, ok)
	}
	if _, ok := u.Capability("other"); !ok {
		t.Error("unknown capabilities are available")
	}
	if (&Table{}).CheckRegex("(") != nil {
		t.Error("a Table without Regex checks nothing")
	}
}

// TestCheckPartialTree checks a tree with syntax errors: the loader reports
// its own errors too and does not panic on Bad nodes.
func TestCheckPartialTree(t *testing.T) {
	_, errs, _ := load("raise \"x\" if:\n    (m: Message)\n    m.role == \n    undefined_name\n", testUniverse())
	var msgs []string
	for _, e := range errs {
		msgs = append(msgs, e.Short())
	}
	got := strings.Join(msgs, "\n")
	if !strings.Contains(got, "expected expression") || !strings.Contains(got, "failed to resolve identifier undefined_name") {
		t.Errorf("errors:\n%s", got)
	}
}

func TestCheckNilInputs(t *testing.T) {
	f, err := syntax.ParseString("", "X := 1\nX := len\n")
	if err != nil {
		t.Fatal(err)
	}
	_, err = Check(&syntax.File{Stmts: f.Stmts}, nil)
	if err == nil || !strings.Contains(err.Error(), "X already declared") || !strings.Contains(err.Error(), "failed to resolve identifier len") {
		t.Errorf("err = %v", err)
	}
}

// TestFoldRepeatOverflow: a constant repetition whose length overflows an
// int64 is left to the evaluator instead of panicking in strings.Repeat at
// load time.
func TestFoldRepeatOverflow(t *testing.T) {
	huge := new(big.Int).Lsh(big.NewInt(1), 62)
	for _, s := range []string{"abcd", "ab", "é"} {
		if v, ok := foldBinary(syntax.STAR, s, huge); ok {
			t.Errorf("%q * 2**62 folded to a %d-byte string", s, len(v.(string)))
		}
		if v, ok := foldBinary(syntax.STAR, huge, s); ok {
			t.Errorf("2**62 * %q folded to a %d-byte string", s, len(v.(string)))
		}
	}
	if v, ok := foldBinary(syntax.STAR, "", huge); !ok || v != "" {
		t.Errorf(`"" * 2**62 = %v, %v; want "", true`, v, ok)
	}
	if v, ok := foldBinary(syntax.STAR, "ab", big.NewInt(3)); !ok || v != "ababab" {
		t.Errorf(`"ab" * 3 = %v, %v`, v, ok)
	}
}
