package policy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"testing"

	_ "github.com/vigilhq/vigil/detect" // registers the detectors the suite calls
	"github.com/vigilhq/vigil/policy"
	"github.com/vigilhq/vigil/policy/builtin"
	"github.com/vigilhq/vigil/trace"
)

// conformanceCase is one line of testdata/policy-cases.jsonl (see
// shared/conformance/README.md) or of testdata/regressions.jsonl, our own
// cases in the same format (differences from the reference found and
// fixed in Vigil, and budget cases).
type conformanceCase struct {
	Name       string          `json:"name"`
	Policy     string          `json:"policy"`
	Trace      json.RawMessage `json:"trace"`
	Parameters map[string]any  `json:"parameters"`
	Mode       string          `json:"mode"`
	Past       int             `json:"past"`
	Requires   []string        `json:"requires"`
	Expected   struct {
		Violations    int        `json:"violations"`
		Messages      []string   `json:"messages"`
		Keys          []string   `json:"keys"`
		Ranges        [][]string `json:"ranges"`
		LoadError     bool       `json:"load_error"`
		Failure       bool       `json:"failure"`
		AnalysisError string     `json:"analysis_error"`
		Warning       bool       `json:"warning"`
	} `json:"expected"`
	Reference json.RawMessage `json:"reference"`
	Notes     string          `json:"notes"`
}

// caseFiles are the case files every conformance test runs, in order.
var caseFiles = []string{"testdata/policy-cases.jsonl", "testdata/regressions.jsonl"}

// loadCases returns the cases of every file of caseFiles.
func loadCases(t testing.TB) []conformanceCase {
	t.Helper()
	var cases []conformanceCase
	for _, name := range caseFiles {
		cases = append(cases, loadCaseFile(t, name)...)
	}
	return cases
}

func loadCaseFile(t testing.TB, name string) []conformanceCase {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cases []conformanceCase
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for line := 1; sc.Scan(); line++ {
		var c conformanceCase
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatalf("%s:%d: %v", name, line, err)
		}
		cases = append(cases, c)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return cases
}

// provides reports whether the build provides a capability a case requires.
func provides(capability string) bool {
	b, ok := builtin.Lookup(capability)
	return ok && b.Usable() == nil
}

func TestConformance(t *testing.T) {
	for _, c := range loadCases(t) {
		t.Run(c.Name, func(t *testing.T) {
			for _, r := range c.Requires {
				if !provides(r) {
					t.Skipf("requires %s, which this build does not provide", r)
				}
			}
			fail := func(format string, args ...any) {
				t.Helper()
				t.Errorf(format, args...)
				t.Logf("notes: %s", c.Notes)
				t.Logf("policy:\n%s", c.Policy)
				t.Logf("reference: %s", c.Reference)
			}
			p, err := policy.Load(c.Policy, policy.Options{Name: c.Name})
			if c.Expected.LoadError {
				if err == nil {
					fail("policy loaded, want a load error")
				}
				return
			}
			if err != nil {
				fail("load: %v", err)
				return
			}
			res, err := analyze(p, c)
			if c.Expected.AnalysisError != "" {
				var ae *policy.AnalysisError
				if !errors.As(err, &ae) || ae.Code.Error() != c.Expected.AnalysisError {
					fail("analysis error = %v, want %s", err, c.Expected.AnalysisError)
				}
				return
			}
			if err != nil {
				fail("analyze: %v", err)
				return
			}
			var msgs, keys []string
			ranges := [][]string{}
			for _, v := range res.Errors {
				msgs = append(msgs, v.Message)
				keys = append(keys, v.Key)
				ranges = append(ranges, v.Ranges)
			}
			if len(res.Errors) != c.Expected.Violations {
				fail("violations = %d %v, want %d %v", len(res.Errors), keys, c.Expected.Violations, c.Expected.Keys)
			}
			if c.Expected.Messages != nil && len(c.Expected.Messages) > 0 && !reflect.DeepEqual(msgs, c.Expected.Messages) {
				fail("messages = %q, want %q", msgs, c.Expected.Messages)
			}
			if c.Expected.Keys != nil && len(c.Expected.Keys) > 0 && !reflect.DeepEqual(keys, c.Expected.Keys) {
				fail("keys = %q, want %q", keys, c.Expected.Keys)
			}
			if c.Expected.Ranges != nil && len(c.Expected.Ranges) > 0 && !reflect.DeepEqual(ranges, c.Expected.Ranges) {
				fail("ranges = %q, want %q", ranges, c.Expected.Ranges)
			}
			if c.Expected.Failure != (len(res.Failures) > 0) {
				fail("failures = %+v, want failure=%v", res.Failures, c.Expected.Failure)
			}
			if c.Expected.Warning && len(res.Warnings) == 0 {
				fail("no warnings, want one")
			}
		})
	}
}

func analyze(p *policy.Policy, c conformanceCase) (*policy.Result, error) {
	ctx := context.Background()
	if c.Mode != "pending" {
		return p.AnalyzeJSON(ctx, c.Trace, c.Parameters)
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(c.Trace, &elems); err != nil {
		return nil, err
	}
	past, err := decodeElems(elems[:c.Past])
	if err != nil {
		return nil, err
	}
	pending, err := decodeElems(elems[c.Past:])
	if err != nil {
		return nil, err
	}
	return p.AnalyzePending(ctx, past, pending, c.Parameters)
}

func decodeElems(elems []json.RawMessage) (*trace.Trace, error) {
	data, err := json.Marshal(elems)
	if err != nil {
		return nil, err
	}
	return policy.DecodeTrace(data)
}
