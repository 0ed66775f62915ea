package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/vigilhq/vigil/client"
	"github.com/vigilhq/vigil/store"
)

// newFindingsServer starts the real server on a loopback port and returns
// its URL and store (findings are written through the store, as a monitor
// would).
func newFindingsServer(t *testing.T) (string, store.Store) {
	url, st, _ := startInProcessServer(t)
	return url, st
}

// pushEvalRun pushes one run of eval case suite/kase and returns its id.
func pushEvalRun(t *testing.T, c *client.Client, suite, kase string) string {
	t.Helper()
	res, err := c.Push(context.Background(), client.PushRequest{Dataset: "cli-evals",
		Messages: [][]any{{map[string]any{"role": "user", "content": "hi"}}},
		Metadata: []map[string]any{{"eval": map[string]any{"suite": suite, "case": kase}}}})
	if err != nil {
		t.Fatal(err)
	}
	return res.ID[0]
}

func storeFinding(t *testing.T, st store.Store, runID, key, severity string) *store.Finding {
	t.Helper()
	tr, err := st.GetTrace(context.Background(), runID, false)
	if err != nil {
		t.Fatal(err)
	}
	f, _, err := st.UpsertFinding(context.Background(), &store.Finding{RunID: runID, OwnerID: tr.OwnerID, MonitorID: "g1",
		Monitor: "no-email", Key: key, Title: "email\nsent " + key, Severity: severity, Score: 0.6})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Millisecond)
	return f
}

// TestFindingsAndEvalsCommands drives vigil findings and vigil evals
// against a real server.
func TestFindingsAndEvalsCommands(t *testing.T) {
	url, st := newFindingsServer(t)
	t.Setenv("VIGIL_URL", url)
	t.Setenv("VIGIL_API_KEY", testKey)
	c := client.New(url, testKey)
	pass := pushEvalRun(t, c, "smoke", "greet")
	fail := pushEvalRun(t, c, "smoke", "mail")
	info := storeFinding(t, st, pass, "k-info", "info")
	warn := storeFinding(t, st, fail, "k-warn", "warn")
	crit := storeFinding(t, st, fail, "k-crit", "critical")

	// Evals fail while the warn and critical findings are open.
	code, out, errs := runVigil(t, "", "evals")
	if code != 1 || errs != "" {
		t.Fatalf("evals: %d %q", code, errs)
	}
	containsInOrder(t, "evals", out, []string{"SUITE", "smoke", "greet", "pass", pass, "smoke", "mail", "fail", fail,
		"suite smoke: fail (1 of 2 cases passed)"})

	tests := []struct {
		name     string
		args     []string
		wantCode int
		want     []string // in order in stdout
		stderr   string
	}{
		{"list table", []string{"findings", "list"}, 0, []string{"ID", "TITLE", info.ID, "info", "open", "email sent k-info", warn.ID, crit.ID}, ""},
		{"queue", []string{"findings", "list", "--queue"}, 0, []string{crit.ID, warn.ID, info.ID}, ""},
		{"filter", []string{"findings", "list", "--severity", "warn,critical", "--run", fail, "--json"}, 0, []string{`"id":"` + warn.ID, `"id":"` + crit.ID}, ""},
		{"limit", []string{"findings", "list", "--limit", "1", "--json"}, 0, []string{info.ID}, ""},
		{"show", []string{"findings", "show", crit.ID}, 0, []string{`"severity":"critical"`, `"status":"open"`}, ""},
		{"accept", []string{"findings", "accept", warn.ID, "--note", "known"}, 0, []string{`"status":"accepted"`, `"note":"known"`}, ""},
		{"dismiss", []string{"findings", "dismiss", crit.ID}, 0, []string{`"status":"dismissed"`}, ""},
		{"accept twice", []string{"findings", "accept", warn.ID}, 2, nil, "vigil: findings accept " + warn.ID + ": it is already accepted\n"},
		{"dismiss accepted", []string{"findings", "dismiss", warn.ID}, 2, nil, "reopen it before marking it dismissed"},
		{"unknown id", []string{"findings", "show", "01JNOPE"}, 2, nil, "404"},
		{"no id", []string{"findings", "show"}, 2, nil, "want exactly one finding ID"},
		{"queue and status", []string{"findings", "list", "--queue", "--status", "open"}, 2, nil, "leave out --status"},
		{"bad status", []string{"findings", "list", "--status", "closed"}, 2, nil, "status must be one or more of open, accepted, dismissed"},
		{"unknown subcommand", []string{"findings", "close"}, 2, nil, `unknown subcommand "close"`},
	}
	for _, tc := range tests {
		code, out, errs := runVigil(t, "", tc.args...)
		if code != tc.wantCode {
			t.Errorf("%s: exit %d, want %d; stderr %q", tc.name, code, tc.wantCode, errs)
			continue
		}
		containsInOrder(t, tc.name, out, tc.want)
		if !strings.Contains(errs, tc.stderr) {
			t.Errorf("%s: stderr %q, want %q", tc.name, errs, tc.stderr)
		}
	}
	// The limit printed one line only.
	if _, out, _ := runVigil(t, "", "findings", "list", "--limit", "1", "--json"); strings.Count(out, "\n") != 1 {
		t.Errorf("--limit 1 printed %q", out)
	}

	// Both blocking findings reviewed: the suite passes.
	code, out, errs = runVigil(t, "", "evals", "--json", "--suite", "smoke")
	if code != 0 || errs != "" {
		t.Fatalf("evals after review: %d %q %s", code, errs, out)
	}
	var res client.EvalResults
	if err := json.Unmarshal([]byte(out), &res); err != nil || len(res.Results) != 2 || res.Suites[0].Status != "pass" {
		t.Errorf("evals --json = %s (%v)", out, err)
	}
	// Reopening a finding fails the suite again.
	if code, _, errs := runVigil(t, "", "findings", "reopen", crit.ID, "--note", "again"); code != 0 {
		t.Fatalf("reopen: %d %s", code, errs)
	}
	if code, _, _ := runVigil(t, "", "evals"); code != 1 {
		t.Errorf("evals after reopen: exit %d, want 1", code)
	}
	if code, out, _ := runVigil(t, "", "evals", "--suite", "none"); code != 0 || !strings.Contains(out, "no eval cases") {
		t.Errorf("evals of an unknown suite: %d %q", code, out)
	}
}
