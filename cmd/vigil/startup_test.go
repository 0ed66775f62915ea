package main

import (
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"testing"
)

// initBudget bounds what each of vigil's own packages may allocate while
// it initialises: every command pays for every package's init before main
// runs, so tables, regexps and parsed data must be built on first use
// (internal/lazyregexp, sync.OnceValue), not in a package-level var or
// init. detect's remaining ~100 KB are pii.go's regexps and python.go's
// name tables.
const (
	initBudgetBytes  = 128 << 10
	initBudgetAllocs = 600
)

var initLine = regexp.MustCompile(`^init (github\.com/vigilhq/vigil\S*) @\S+ ms, \S+ ms clock, (\d+) bytes, (\d+) allocs$`)

// TestInitAllocations runs this test binary again with
// GODEBUG=inittrace=1 and no tests, and checks each vigil package's init
// against the budget. (The detectors compiled ~2.4 MB of regexps and the
// server ~120 KB at init, for every command, `vigil version` included.)
func TestInitAllocations(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	seen := 0
	for _, line := range regexp.MustCompile(`\r?\n`).Split(string(out), -1) {
		m := initLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		seen++
		bytes, _ := strconv.Atoi(m[2])
		allocs, _ := strconv.Atoi(m[3])
		if bytes > initBudgetBytes || allocs > initBudgetAllocs {
			t.Errorf("package %s allocates %d bytes in %d allocations at init (budget %d bytes, %d allocations): build tables and regexps on first use", m[1], bytes, allocs, initBudgetBytes, initBudgetAllocs)
		}
	}
	if seen < 5 {
		t.Fatalf("only %d vigil packages in the init trace:\n%s", seen, out)
	}
}
