package policy_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/vigilhq/vigil/internal/tracegen"
	"github.com/vigilhq/vigil/policy"
	"github.com/vigilhq/vigil/trace"
)

// TestAnalyzeNewMatchesPending: AnalyzeNew reports exactly the violations
// AnalyzePending does (it only skips work), for the five-rule benchmark
// policy at several split points of a run, also on a Pending another
// policy analysed first.
func TestAnalyzeNewMatchesPending(t *testing.T) {
	p, err := policy.Load(tracegen.GuardrailPolicy, policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	other, err := policy.Load("raise \"tool\" if:\n    (c: ToolCall)\n    (o: ToolOutput)\n    c is tool:bash\n", policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(tracegen.GuardrailRun(600))
	if err != nil {
		t.Fatal(err)
	}
	full, err := trace.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	keys := func(res *policy.Result) []string {
		var out []string
		for _, v := range res.Errors {
			out = append(out, v.Key)
		}
		slices.Sort(out)
		return out
	}
	for _, split := range []int{0, 1, 199, 300, 590, 599} {
		past, pending := &trace.Trace{Events: full.Events[:split]}, &trace.Trace{Events: full.Events[split:]}
		want, err := p.AnalyzePending(t.Context(), past, pending, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := p.AnalyzeNew(t.Context(), past, pending, nil)
		if err != nil {
			t.Fatal(err)
		}
		if g, w := keys(got), keys(want); !slices.Equal(g, w) || len(w) == 0 && split < 590 {
			t.Errorf("split %d: AnalyzeNew keys %v, AnalyzePending %v", split, g, w)
		}
		// one prepared trace shared by another policy first, then this one
		pd := policy.NewPending(past, pending)
		if _, err := other.AnalyzeNewPending(t.Context(), pd, nil); err != nil {
			t.Fatal(err)
		}
		shared, err := p.AnalyzeNewPending(t.Context(), pd, nil)
		if err != nil {
			t.Fatal(err)
		}
		if g, w := keys(shared), keys(want); !slices.Equal(g, w) {
			t.Errorf("split %d: AnalyzeNewPending on a shared trace: keys %v, want %v", split, g, w)
		}
	}
}
