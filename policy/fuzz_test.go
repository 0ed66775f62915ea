package policy_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/vigilhq/vigil/policy"
	"github.com/vigilhq/vigil/trace"
)

// FuzzAnalyze runs the conformance policies on random and mutated traces:
// an analysis never panics and never fails except with an analysis error
// of spec §11.7 (internal errors, i.e. recovered panics, fail the test).
// The seeds are the conformance traces, so they run in the normal suite.
func FuzzAnalyze(f *testing.F) {
	cases := loadCases(f)
	var pols []*policy.Policy
	var params []map[string]any
	for _, c := range cases {
		p, err := policy.Load(c.Policy, policy.Options{MaxSteps: 20000})
		if err != nil {
			continue
		}
		pols = append(pols, p)
		params = append(params, c.Parameters)
	}
	for i, c := range cases {
		f.Add(uint8(i), []byte(c.Trace), uint8(c.Past))
	}
	f.Add(uint8(3), []byte(`[{"role":"user","content":[{"type":"text","text":"abc"},{"image_url":"x"},{"foo":1}]},{"type":"function","function":{"name":"f","arguments":"[1]"}},{"tools":[{"name":"t","inputSchema":{"properties":{"a":{"type":["string","null"]}}}}]},{"role":"tool","content":{"a":1}}]`), uint8(1))
	f.Fuzz(func(t *testing.T, pi uint8, data []byte, past uint8) {
		if len(pols) == 0 {
			return
		}
		i := int(pi) % len(pols)
		p := pols[i]
		tr, err := trace.Decode(data)
		if err != nil {
			return
		}
		check := func(res *policy.Result, err error) {
			if err != nil {
				var ae *policy.AnalysisError
				if !errors.As(err, &ae) {
					t.Fatalf("policy %d: %v", i, err)
				}
				return
			}
			if _, err := json.Marshal(res); err != nil {
				t.Fatalf("policy %d: result does not marshal: %v", i, err)
			}
		}
		check(p.Analyze(context.Background(), tr, params[i]))
		n := min(int(past), len(tr.Events))
		check(p.AnalyzePending(context.Background(), &trace.Trace{Events: tr.Events[:n]}, &trace.Trace{Events: tr.Events[n:]}, params[i]))
	})
}

// FuzzLoadAnalyze loads mutated policies and runs the ones that load on a
// fixed trace: loading and analysis never panic.
func FuzzLoadAnalyze(f *testing.F) {
	for _, c := range loadCases(f) {
		f.Add(c.Policy)
	}
	tr, err := trace.Decode([]byte(`[{"role":"user","content":"abc X1Y"},{"role":"assistant","content":null,"tool_calls":[{"id":"1","type":"function","function":{"name":"get_inbox","arguments":{"x":2,"to":"Peter"}}}]},{"role":"tool","tool_call_id":"1","content":"{\"sender\": \"a\"}"},{"tools":[{"name":"t","description":"d","inputSchema":{"properties":{"q":{"type":"string"}}}}]}]`))
	if err != nil {
		f.Fatal(err)
	}
	params := map[string]any{"pattern": "a", "username": "alice"}
	f.Fuzz(func(t *testing.T, src string) {
		p, err := policy.Load(src, policy.Options{MaxSteps: 5000})
		if err != nil {
			if !errors.Is(err, policy.ErrLoad) {
				t.Fatalf("load error does not wrap ErrLoad: %v", err)
			}
			return
		}
		if _, err := p.Analyze(context.Background(), tr, params); err != nil {
			var ae *policy.AnalysisError
			if !errors.As(err, &ae) {
				t.Fatalf("%v", err)
			}
		}
	})
}
