package syntax

import (
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/tools/txtar"
)

// seedPolicies returns every policy text in ../testdata (parse goldens,
// check cases and the conformance policies).
func seedPolicies(t testing.TB) []string {
	var seeds []string
	for _, pat := range []string{"../testdata/parse/*.txtar", "../testdata/check/*.txtar"} {
		files, _ := filepath.Glob(pat)
		for _, file := range files {
			a, err := txtar.ParseFile(file)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range a.Files {
				if f.Name == "policy" || strings.HasPrefix(f.Name, "ok/") || strings.HasPrefix(f.Name, "error/") {
					seeds = append(seeds, string(f.Data))
				}
			}
		}
	}
	if len(seeds) == 0 {
		t.Fatal("no seeds")
	}
	return seeds
}

// FuzzParse checks that parsing never panics, that every error lies inside
// the source, and that a policy that parses prints (Format) to a policy that
// parses to the same tree.
func FuzzParse(f *testing.F) {
	for _, s := range seedPolicies(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		src := NewSource("fuzz", text)
		file, err := Parse(src)
		if file == nil {
			t.Fatal("nil file")
		}
		if err != nil {
			l, ok := err.(ErrorList)
			if !ok || len(l) == 0 || len(l) > MaxErrors {
				t.Fatalf("bad error value %T %v", err, err)
			}
			for _, e := range l {
				if e.Pos < 0 || int(e.Pos) > src.Len() {
					t.Fatalf("error position %d outside [0, %d]: %s", e.Pos, src.Len(), e.Msg)
				}
				_ = e.Error()
			}
			return
		}
		for _, w := range file.Warnings {
			if w.Pos < 0 || int(w.Pos) > src.Len() {
				t.Fatalf("warning position %d outside [0, %d]", w.Pos, src.Len())
			}
		}
		checkPositions(t, file, src.Len())
		checkNodePositions(t, file, src.Len())
		roundTrip(t, file)
	})
}

// checkPositions checks that every statement and line lies inside the source.
func checkPositions(t *testing.T, f *File, n int) {
	t.Helper()
	for _, s := range f.Stmts {
		if s.Pos() < 0 || int(s.End()) > n || s.End() < s.Pos() {
			t.Fatalf("statement %T at [%d, %d) outside [0, %d]", s, s.Pos(), s.End(), n)
		}
	}
}

// checkNodePositions checks that every node lies inside the source and
// inside its parent.
func checkNodePositions(t *testing.T, f *File, n int) {
	t.Helper()
	var stack []Node
	Inspect(f, func(node Node) bool {
		if node == nil {
			stack = stack[:len(stack)-1]
			return true
		}
		p, e := node.Pos(), node.End()
		if p < 0 || int(e) > n || e < p {
			t.Fatalf("%T at [%d, %d) outside [0, %d]", node, p, e, n)
		}
		if len(stack) > 0 {
			parent := stack[len(stack)-1]
			if _, isFile := parent.(*File); !isFile && (p < parent.Pos() || e > parent.End()) {
				t.Fatalf("%T at [%d, %d) outside its parent %T at [%d, %d)", node, p, e, parent, parent.Pos(), parent.End())
			}
		}
		stack = append(stack, node)
		return true
	})
}
