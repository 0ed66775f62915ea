package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/vigilhq/vigil/client"
	"github.com/vigilhq/vigil/monitor"
	"github.com/vigilhq/vigil/policy"
)

// TestGuardrailRuleErrors: the monitor errors the store counts per
// guardrail are shown as rule_errors on the current guardrail objects (the
// policy list, the dataset's extra_metadata.policies of a guardrail write,
// a restore's answer) and not on ruleset snapshots. The errors come from
// a real monitor pool whose step budget no evaluation fits in.
func TestGuardrailRuleErrors(t *testing.T) {
	forEachBackend(t, func(t *testing.T, ts *testServer) {
		fx := newGuardrailFixture(t, ts)
		ctx := t.Context()
		if _, err := ts.c.CreateGuardrail(ctx, fx.ds.ID, client.GuardrailCreate{Name: "email", Policy: ruleEmail}); err != nil {
			t.Fatal(err)
		}
		d, err := ts.c.CreateGuardrail(ctx, fx.ds.ID, client.GuardrailCreate{Name: "shell", Policy: ruleShell, Enabled: new(bool)})
		if err != nil {
			t.Fatal(err)
		}
		gs, err := d.Policies()
		if err != nil || len(gs) != 2 {
			t.Fatalf("policies %v (%v)", d.ExtraMetadata["policies"], err)
		}
		email, shell := gs[0].ID, gs[1].ID
		if gs[0].Name != "email" {
			email, shell = shell, email
		}
		pool := monitor.Start(ts.st, monitor.Options{Workers: 1, Poll: 10 * time.Millisecond, Policy: policy.Options{MaxSteps: 1}, Logger: discardLogger()})
		defer pool.Stop()
		for range 2 {
			pushRun(t, ts.c, "gd", nil)
		}
		deadline := time.Now().Add(20 * time.Second)
		for {
			st, err := ts.st.MonitorErrors(ctx, []string{email})
			if err != nil {
				t.Fatal(err)
			}
			if st[email] != nil && st[email].Count >= 2 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("monitor errors of the guardrail: %+v, want 2", st[email])
			}
			time.Sleep(20 * time.Millisecond)
		}
		pool.Stop()

		type ruleErrors struct {
			Count     int64   `json:"count"`
			LastError *string `json:"last_error"`
			LastAt    *string `json:"last_at"`
		}
		type guardrail struct {
			ID         string      `json:"id"`
			RuleErrors *ruleErrors `json:"rule_errors"`
		}
		byID := func(list []guardrail) map[string]*ruleErrors {
			m := map[string]*ruleErrors{}
			for _, g := range list {
				m[g.ID] = g.RuleErrors
			}
			return m
		}
		check := func(where string, m map[string]*ruleErrors) {
			t.Helper()
			e, s := m[email], m[shell]
			if e == nil || e.Count != 2 || e.LastError == nil || !strings.Contains(*e.LastError, "budget") || e.LastAt == nil ||
				!strings.HasPrefix(*e.LastAt, time.Now().UTC().Format("2006-01-02")) {
				t.Errorf("%s: rule_errors of the failing guardrail %+v, want count 2, the budget message and a time", where, e)
			}
			if s == nil || s.Count != 0 || s.LastError != nil || s.LastAt != nil {
				t.Errorf("%s: rule_errors of the disabled guardrail %+v, want count 0 and nulls", where, s)
			}
		}

		code, b := ts.do(t, "GET", "/api/v1/dataset/byuser/admin/gd/policy", adminKey, nil)
		var pl struct{ Policies []guardrail }
		if code != http.StatusOK || json.Unmarshal(b, &pl) != nil {
			t.Fatalf("policy list: %d %s", code, b)
		}
		check("policy list", byID(pl.Policies))

		code, b = ts.do(t, "PUT", "/api/v1/dataset/"+fx.ds.ID+"/policy/"+shell, adminKey, map[string]any{"comment": "touch", "action": "log"})
		var ds struct {
			ExtraMetadata struct{ Policies []guardrail } `json:"extra_metadata"`
		}
		if code != http.StatusOK || json.Unmarshal(b, &ds) != nil {
			t.Fatalf("update: %d %s", code, b)
		}
		check("dataset policies", byID(ds.ExtraMetadata.Policies))

		code, b = ts.do(t, "POST", "/api/v1/dataset/"+fx.ds.ID+"/policy/"+email+"/versions/1/restore", adminKey, map[string]any{})
		var one guardrail
		if code != http.StatusOK || json.Unmarshal(b, &one) != nil || one.RuleErrors == nil || one.RuleErrors.Count != 2 {
			t.Errorf("restore answer: %d %s, want rule_errors with count 2", code, b)
		}

		code, b = ts.do(t, "GET", "/api/v1/dataset/"+fx.ds.ID+"/ruleset/2", adminKey, nil)
		var snap struct{ Policies []guardrail }
		if code != http.StatusOK || json.Unmarshal(b, &snap) != nil || len(snap.Policies) != 2 || snap.Policies[0].RuleErrors != nil {
			t.Errorf("ruleset snapshot: %d %s, want two guardrails without rule_errors", code, b)
		}
	})
}
