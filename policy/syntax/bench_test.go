package syntax

import (
	"testing"

	"golang.org/x/tools/txtar"
)

// benchPolicy returns the 5-rule policy of testdata/check/bench.txtar.
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

func BenchmarkParse(b *testing.B) {
	text := benchPolicy(b)
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseString("bench", text); err != nil {
			b.Fatal(err)
		}
	}
}
