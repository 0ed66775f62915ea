package detect

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// benchCorpus returns about 1 MiB of clean prose (testdata/prose.txt
// repeated) or of code (the Go standard library's net/http sources, a
// realistic mix of identifiers such as key, token and auth).
func benchCorpus(tb testing.TB, kind string) string {
	tb.Helper()
	var unit string
	switch kind {
	case "prose":
		b, err := os.ReadFile("testdata/prose.txt")
		if err != nil {
			tb.Fatal(err)
		}
		unit = string(b)
	case "code":
		files, err := filepath.Glob(filepath.Join(runtime.GOROOT(), "src", "net", "http", "*.go"))
		if err != nil {
			tb.Fatal(err)
		}
		var sb strings.Builder
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				tb.Fatal(err)
			}
			sb.Write(b)
		}
		unit = sb.String()
	}
	return strings.Repeat(unit, 1<<20/len(unit)+1)
}

func benchText(b *testing.B, kind string, f func(string)) {
	text := benchCorpus(b, kind)
	f(text) // warm up lazily compiled tables
	b.SetBytes(int64(len(text)))
	b.ResetTimer()
	for b.Loop() {
		f(text)
	}
}

func BenchmarkSecrets(b *testing.B) {
	for _, kind := range []string{"prose", "code"} {
		b.Run(kind, func(b *testing.B) { benchText(b, kind, func(s string) { Secrets(s) }) })
	}
}

func BenchmarkPII(b *testing.B) {
	for _, kind := range []string{"prose", "code"} {
		b.Run(kind, func(b *testing.B) { benchText(b, kind, func(s string) { PII(s, nil) }) })
	}
}
