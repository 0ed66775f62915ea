package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/vigilhq/vigil/internal/tracegen"
)

// referenceCheck is the reference analyzer's time (Invariant's Python
// analyzer, whole process) for the 300-event check below: the issue's
// figure, which `vigil check` must beat 100 times.
const referenceCheck = 1410 * time.Millisecond

// buildHello builds a hello-world Go program into dir: the baseline
// start-up of a Go binary on this machine.
func buildHello(tb testing.TB, dir string) string {
	tb.Helper()
	src := filepath.Join(dir, "hello")
	if err := os.MkdirAll(src, 0o755); err != nil {
		tb.Fatal(err)
	}
	files := map[string]string{
		"go.mod":  "module hello\n\ngo 1.22\n",
		"main.go": "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"hello\") }\n",
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(src, name), []byte(text), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "hello-bin")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("build hello: %v\n%s", err, out)
	}
	return bin
}

// buildStatic builds ./cmd/vigil into dir with CGO_ENABLED=0: a static
// binary, as `go build` makes on a machine without a C compiler. With
// cgo, the net package links the C library, and every start pays the
// dynamic loader.
func buildStatic(tb testing.TB, dir string) string {
	tb.Helper()
	bin := filepath.Join(dir, "vigil-static")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/vigilhq/vigil/cmd/vigil")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("go build (static): %v\n%s", err, out)
	}
	return bin
}

// runOnce runs bin with args to completion and returns its wall and CPU
// (user + system) time; an exit status other than exit fails tb.
func runOnce(tb testing.TB, exit int, bin string, args ...string) (wall, cpu time.Duration) {
	cmd := exec.Command(bin, args...)
	// nil: /dev/null, as a shell redirection would (a pipe drained by a
	// goroutine would add its own cost to a command that prints much).
	cmd.Stdout, cmd.Stderr = nil, nil
	start := time.Now()
	err := cmd.Run()
	wall = time.Since(start)
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		tb.Fatal(err)
	}
	if code != exit {
		tb.Fatalf("%s %q: exit %d, want %d", filepath.Base(bin), args, code, exit)
	}
	return wall, cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
}

// BenchmarkStartup measures whole processes, as a user or a CI job runs
// them: a hello-world Go binary (the baseline), `vigil version`, `vigil
// --help`, and `vigil check` of the guardrail benchmark policy
// (tracegen.GuardrailPolicy, 5 rules) on traces of 300 and 10,000 events
// (tracegen.GuardrailRun; the in-process figures for the same work are
// policy's BenchmarkAnalyze). The -static cases run a CGO_ENABLED=0
// build of the same source. ns/op is the mean wall time; min-ns the
// fastest run (steadier on a shared machine); cpu-ns/op the process's
// user+system time; x-hello is min-ns over the hello-world's min-ns, and
// for the checks x-faster-than-ref is the reference analyzer's 1.41 s over
// min-ns.
func BenchmarkStartup(b *testing.B) {
	dir := b.TempDir()
	vigil := buildVigil(b, dir)
	static := buildStatic(b, dir)
	hello := buildHello(b, dir)
	policy := filepath.Join(dir, "policy.py")
	if err := os.WriteFile(policy, []byte(tracegen.GuardrailPolicy), 0o644); err != nil {
		b.Fatal(err)
	}
	traceFile := func(n int) string {
		data, err := json.Marshal(tracegen.GuardrailRun(n))
		if err != nil {
			b.Fatal(err)
		}
		p := filepath.Join(dir, fmt.Sprintf("trace-%d.json", n))
		if err := os.WriteFile(p, data, 0o644); err != nil {
			b.Fatal(err)
		}
		return p
	}
	t300, t10k := traceFile(300), traceFile(10000)

	// The baseline, measured up front so that every ratio has it even
	// when -bench selects one case.
	helloMin := time.Duration(1 << 62)
	for range 30 {
		w, _ := runOnce(b, 0, hello)
		helloMin = min(helloMin, w)
	}
	cases := []struct {
		name string
		bin  string
		args []string
		exit int
		ref  bool
	}{
		{"hello", hello, nil, 0, false},
		{"version", vigil, []string{"version"}, 0, false},
		{"help", vigil, []string{"--help"}, 0, false},
		// Exit 1: the corpus has violations.
		{"check-300", vigil, []string{"check", "--policy", policy, "--trace", t300}, 1, true},
		{"check-10000", vigil, []string{"check", "--policy", policy, "--trace", t10k}, 1, false},
		{"version-static", static, []string{"version"}, 0, false},
		{"help-static", static, []string{"--help"}, 0, false},
		{"check-300-static", static, []string{"check", "--policy", policy, "--trace", t300}, 1, true},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			var cpu time.Duration
			fastest := time.Duration(1 << 62)
			for b.Loop() {
				w, u := runOnce(b, c.exit, c.bin, c.args...)
				cpu += u
				fastest = min(fastest, w)
			}
			b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(fastest), "min-ns")
			b.ReportMetric(float64(fastest)/float64(helloMin), "x-hello")
			if c.ref {
				b.ReportMetric(float64(referenceCheck)/float64(fastest), "x-faster-than-ref")
			}
		})
	}
}
