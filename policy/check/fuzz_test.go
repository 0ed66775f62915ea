package check

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vigilhq/vigil/policy/syntax"
	"golang.org/x/tools/txtar"
)

// FuzzCheck checks that the loader never panics, on complete and on
// partial (syntax-error) trees, and that every error and warning lies
// inside the source.
func FuzzCheck(f *testing.F) {
	for _, pat := range []string{"../testdata/parse/*.txtar", "../testdata/check/*.txtar"} {
		files, _ := filepath.Glob(pat)
		for _, file := range files {
			a, err := txtar.ParseFile(file)
			if err != nil {
				f.Fatal(err)
			}
			for _, s := range a.Files {
				if s.Name == "policy" || strings.HasPrefix(s.Name, "ok/") || strings.HasPrefix(s.Name, "error/") {
					f.Add(string(s.Data))
				}
			}
		}
	}
	u := testUniverse()
	f.Fuzz(func(t *testing.T, text string) {
		src := syntax.NewSource("fuzz", text)
		file, _ := syntax.Parse(src)
		prog, err := Check(file, u)
		if prog == nil {
			t.Fatal("nil program")
		}
		var l syntax.ErrorList
		if err != nil && !errors.As(err, &l) {
			t.Fatalf("error of type %T: %v", err, err)
		}
		for _, e := range append(l, prog.Warnings...) {
			if e.Pos < 0 || int(e.Pos) > src.Len() {
				t.Fatalf("position %d outside [0, %d]: %s", e.Pos, src.Len(), e.Msg)
			}
		}
		if err == nil {
			for i, r := range prog.Rules {
				if r.Index != i || r.Body == nil {
					t.Fatalf("rule %d malformed", i)
				}
			}
		}
	})
}
