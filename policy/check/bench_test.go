package check

import (
	"testing"

	"github.com/vigilhq/vigil/policy/syntax"
	"golang.org/x/tools/txtar"
)

func benchPolicy(b *testing.B) string {
	a, err := txtar.ParseFile("../testdata/check/bench.txtar")
	if err != nil {
		b.Fatal(err)
	}
	for _, f := range a.Files {
		if f.Name == "policy" {
			return string(f.Data)
		}
	}
	b.Fatal("no policy section")
	return ""
}

func BenchmarkCheck(b *testing.B) {
	f, err := syntax.ParseString("bench", benchPolicy(b))
	if err != nil {
		b.Fatal(err)
	}
	u := testUniverse()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Check(f, u); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseAndCheck is what loading costs: parse then check.
func BenchmarkParseAndCheck(b *testing.B) {
	text := benchPolicy(b)
	u := testUniverse()
	b.ReportAllocs()
	for b.Loop() {
		f, err := syntax.ParseString("bench", text)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := Check(f, u); err != nil {
			b.Fatal(err)
		}
	}
}
