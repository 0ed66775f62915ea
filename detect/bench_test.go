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

func BenchmarkUnicode(b *testing.B) {
	benchText(b, "prose", func(s string) { Unicode(s, []string{"Cf", "Co", "Cn"}) })
}

func BenchmarkPromptInjection(b *testing.B) {
	for _, kind := range []string{"prose", "code"} {
		b.Run(kind, func(b *testing.B) { benchText(b, kind, func(s string) { PromptInjection(s) }) })
	}
}

func BenchmarkPythonCode(b *testing.B) {
	src := strings.Repeat("import os\nfrom a.b import c\n\ndef f(x, y=2):\n    if x:\n        return os.path.join(str(x), 'y')\n    return len([i for i in range(y)])\n\n", 2000)
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		PythonCode(src)
	}
}

func BenchmarkHTMLCode(b *testing.B) {
	doc := strings.Repeat(`<p>Hello <a href="https://example.com/a">a</a><img src="x.png" alt="an image"></p>`+"\n", 10000)
	b.SetBytes(int64(len(doc)))
	for b.Loop() {
		HTMLCode(doc)
	}
}

func BenchmarkFuzzyContains(b *testing.B) {
	text := benchCorpus(b, "prose")[:64<<10]
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		FuzzyContains(text, "harbor wall in winter", 3)
	}
}

// A typical chat message: the per-call overhead matters more than
// throughput for the gateway's inline checks.
func BenchmarkSmallMessage(b *testing.B) {
	msg := "Sure! I've updated the config; the API endpoint is https://api.example.com/v1 and the retry limit is 3. Let me know if you need anything else."
	for _, bc := range []struct {
		name string
		f    func(string)
	}{
		{"secrets", func(s string) { Secrets(s) }},
		{"pii", func(s string) { PII(s, nil) }},
		{"prompt_injection", func(s string) { PromptInjection(s) }},
		{"unicode", func(s string) { Unicode(s, []string{"Cf", "Co", "Cn"}) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(msg)))
			b.ReportAllocs()
			for b.Loop() {
				bc.f(msg)
			}
		})
	}
}

// A long query from the data (fuzzy_contains(msg.content, other.content))
// must not cost len(text) × len(query).
func BenchmarkFuzzyContainsLongQuery(b *testing.B) {
	text := benchCorpus(b, "prose")[:256<<10]
	query := strings.Repeat("a lighthouse keeper finds a letter ", 100)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		FuzzyContains(text, query, 10)
	}
}

func BenchmarkPIIPathological(b *testing.B) {
	for _, unit := range pathologicalPII {
		text := strings.Repeat(unit, 1<<18/len(unit))
		b.Run(strings.TrimSpace(unit), func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				PII(text, nil)
			}
		})
	}
}
