package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSummarizeRealRun runs `go test -json` on a small module whose
// tests pass, fail, skip, have subtests, panic, and one of whose packages
// does not build, and checks the report and the counts.
func TestSummarizeRealRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module with the go command")
	}
	dir := t.TempDir()
	files := map[string]string{
		"go.mod": "module example.com/m\n\ngo 1.22\n",
		"a/a_test.go": `package a

import "testing"

func TestPass(t *testing.T) { t.Log("quiet when passing") }
func TestFail(t *testing.T) { t.Error("the failure message") }
func TestSkip(t *testing.T) { t.Skip("not today") }
func TestSub(t *testing.T) {
	t.Run("ok", func(t *testing.T) {})
	t.Run("bad", func(t *testing.T) { t.Fatal("sub failure") })
}
`,
		"b/b_test.go": `package b

import "testing"

func TestB(t *testing.T) {}
func ExampleB() {
	println()
	// Output:
}
`,
		"c/c_test.go": `package c

import "testing"

func TestOK(t *testing.T) {}
func TestPanics(t *testing.T) { panic("boom") }
`,
		"d/d_test.go": "package d\n\nimport \"testing\"\n\nfunc TestX(t *testing.T) { undefined() }\n",
		"e/e.go":      "package e\n",
	}
	for name, src := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("go", "test", "-json", "./...")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false", "GOTOOLCHAIN=local", "GOWORK=off")
	out, err := cmd.Output()
	if err == nil {
		t.Fatal("go test passed a module with failing tests")
	}
	var report bytes.Buffer
	c, err := summarize(bytes.NewReader(out), &report)
	if err != nil {
		t.Fatal(err)
	}
	// a: Pass, Sub/ok pass; Fail, Sub/bad, Sub fail; Skip skips.
	// b: TestB, ExampleB pass. c: TestOK passes, TestPanics fails.
	if c.passed != 5 || c.failed != 4 || c.skipped != 1 {
		t.Errorf("counts %+v, want 5 passed, 4 failed, 1 skipped\n%s", c, report.String())
	}
	if c.failedPkgs != 3 || c.buildFailures != 1 { // a, c, and d (build failure)
		t.Errorf("%d failed packages, %d build failures; want 3 and 1\n%s", c.failedPkgs, c.buildFailures, report.String())
	}
	r := report.String()
	for _, want := range []string{
		"the failure message", "sub failure", "--- FAIL: TestFail", "panic: boom",
		"FAIL\texample.com/m/a", "ok  \texample.com/m/b", "undefined: undefined",
		"?   \texample.com/m/e\t[no test files]",
	} {
		if !strings.Contains(r, want) {
			t.Errorf("report lacks %q:\n%s", want, r)
		}
	}
	for _, not := range []string{"quiet when passing", "=== RUN", "not today", "\nPASS\n"} {
		if strings.Contains(r, not) {
			t.Errorf("report has %q:\n%s", not, r)
		}
	}
}

func TestSummarizeNotJSON(t *testing.T) {
	var report bytes.Buffer
	if _, err := summarize(strings.NewReader("no Go files in /x\n"), &report); err == nil {
		t.Error("no error for input without events")
	}
	if report.String() != "no Go files in /x\n" {
		t.Errorf("plain line not copied: %q", report.String())
	}
}

// TestMainLastLine runs the command: the counts are the last line, alone,
// and the exit status says whether something failed.
func TestMainLastLine(t *testing.T) {
	if os.Getenv("TESTSUMMARY_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	for _, tt := range []struct {
		in   string
		last string
		code int
	}{
		{`{"Action":"pass","Package":"p","Test":"T"}` + "\n" + `{"Action":"skip","Package":"p","Test":"S"}` + "\n" + `{"Action":"output","Package":"p","Output":"ok  \tp\t0.1s\n"}` + "\n" + `{"Action":"pass","Package":"p"}` + "\n",
			"1 passed, 0 failed, 1 skipped", 0},
		{`{"Action":"fail","Package":"p","Test":"T"}` + "\n" + `{"Action":"fail","Package":"p"}` + "\n", "0 passed, 1 failed, 0 skipped", 1},
		{`{"ImportPath":"q","Action":"build-fail"}` + "\n", "0 passed, 0 failed, 0 skipped", 1},
		{"", "0 passed, 0 failed, 0 skipped", 2},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestMainLastLine$")
		cmd.Env = append(os.Environ(), "TESTSUMMARY_MAIN=1")
		cmd.Stdin = strings.NewReader(tt.in)
		out, err := cmd.Output()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
		if last := lines[len(lines)-1]; last != tt.last || !strings.HasSuffix(string(out), tt.last+"\n") {
			t.Errorf("input %q: last line %q, want %q", tt.in, last, tt.last)
		}
		if code != tt.code {
			t.Errorf("input %q: exit %d, want %d", tt.in, code, tt.code)
		}
	}
}
