// Command testsummary is the CI's test-report filter, not part of vigil:
// it reads `go test -json` on stdin and writes what a plain `go test`
// shows — one line per package ("ok", "FAIL", "?"), the output of every
// failed test, build errors — then, as the very last line, the counts:
//
//	123 passed, 0 failed, 4 skipped
//
// Every test, subtest, example and fuzz target with a result counts once.
// It exits 1 when a test or a package failed (a build error, a panic
// outside any test, a timeout) and 2 when its input is not go test's JSON,
// so `go test -json ./... | go run ./internal/testsummary` keeps the exit
// status right (.ci/run also sets pipefail).
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
)

func main() {
	c, err := summarize(os.Stdin, os.Stdout)
	fmt.Fprintf(os.Stdout, "%d passed, %d failed, %d skipped\n", c.passed, c.failed, c.skipped)
	switch {
	case err != nil:
		fmt.Fprintf(os.Stderr, "testsummary: %v\n", err)
		os.Exit(2)
	case c.failed > 0 || c.failedPkgs > 0 || c.buildFailures > 0:
		os.Exit(1)
	}
}

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action     string
	Package    string
	ImportPath string // build-output, build-fail
	Test       string
	Output     string
}

type counts struct {
	passed, failed, skipped int
	failedPkgs              int // packages whose run failed
	buildFailures           int // packages or test binaries that did not build
}

// summarize copies the plain report of the events in r to w and counts
// the results. A line that is not JSON is copied through (go test prints
// some errors, such as a package that does not exist, as plain text); it
// returns an error only when reading fails or nothing was JSON.
func summarize(r io.Reader, w io.Writer) (counts, error) {
	var c counts
	pending := map[string][]string{} // package + "\x00" + test -> its output
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	events := 0
	for sc.Scan() {
		text := sc.Bytes()
		var e event
		if len(text) == 0 || text[0] != '{' || json.Unmarshal(text, &e) != nil {
			fmt.Fprintf(w, "%s\n", text)
			continue
		}
		events++
		key := e.Package + "\x00" + e.Test
		switch e.Action {
		case "build-output":
			io.WriteString(w, e.Output)
		case "output":
			if e.Test != "" {
				pending[key] = append(pending[key], e.Output)
				continue
			}
			// Package lines: "ok", "FAIL", "?", panics and timeouts outside a
			// test. The bare PASS/FAIL that -test.v adds are not shown by a
			// plain go test for a package that passes.
			if o := strings.TrimRight(e.Output, "\n"); o != "PASS" && !strings.HasPrefix(o, "=== ") {
				io.WriteString(w, e.Output)
			}
		case "pass", "skip", "fail":
			if e.Test == "" {
				// Tests left without a result were cut off (a panic, a
				// timeout): they failed, and their output says why.
				for k, out := range pending {
					if pkg, _, _ := strings.Cut(k, "\x00"); pkg == e.Package {
						if e.Action == "fail" {
							c.failed++
							writeTestOutput(w, out)
						}
						delete(pending, k)
					}
				}
				if e.Action == "fail" {
					c.failedPkgs++
				}
				continue
			}
			switch e.Action {
			case "pass":
				c.passed++
			case "skip":
				c.skipped++
			case "fail":
				c.failed++
				writeTestOutput(w, pending[key])
			}
			delete(pending, key)
		case "build-fail":
			c.buildFailures++
		}
	}
	if err := sc.Err(); err != nil {
		return c, fmt.Errorf("read go test output: %w", err)
	}
	if events == 0 {
		return c, fmt.Errorf("no go test -json events on stdin")
	}
	return c, nil
}

// writeTestOutput writes a failed test's output as a plain go test does,
// without the -test.v progress lines.
func writeTestOutput(w io.Writer, lines []string) {
	for _, o := range lines {
		if !strings.HasPrefix(o, "=== RUN") && !strings.HasPrefix(o, "=== PAUSE") && !strings.HasPrefix(o, "=== CONT") {
			io.WriteString(w, o)
		}
	}
}
