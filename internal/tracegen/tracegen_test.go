package tracegen

import (
	"encoding/json"
	"testing"

	"github.com/vigilhq/vigil/trace"
)

func TestAgentRunIsAValidTrace(t *testing.T) {
	for _, m := range []int{1, 3, 20, 31} {
		run := AgentRun(7, m)
		if len(run) != m {
			t.Fatalf("AgentRun(7, %d) has %d events", m, len(run))
		}
		data, _ := json.Marshal(run)
		tr, err := trace.Decode(data)
		if err != nil {
			t.Fatalf("m=%d: %v", m, err)
		}
		if len(tr.Events) != m {
			t.Fatalf("decoded %d events, want %d", len(tr.Events), m)
		}
	}
	if runs := AgentRuns(4, 5); len(runs) != 4 || len(runs[3]) != 5 {
		t.Fatalf("AgentRuns(4, 5) shape %d×%d", len(runs), len(runs[3]))
	}
}

func TestGuardrailRunIsAValidTrace(t *testing.T) {
	for _, n := range []int{1, 4, 300, 1001} {
		run := GuardrailRun(n)
		data, _ := json.Marshal(run)
		tr, err := trace.Decode(data)
		if err != nil {
			t.Fatalf("n=%d: %v", n, err)
		}
		if len(run) != n || len(tr.Events) < n {
			t.Fatalf("GuardrailRun(%d): %d values, %d events decoded", n, len(run), len(tr.Events))
		}
	}
}
