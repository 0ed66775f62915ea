package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/vigilhq/vigil/client"
	"github.com/vigilhq/vigil/store"
)

const (
	ruleEmail = "raise \"email\" if:\n    (msg: Message)\n    \"@\" in msg.content\n"
	ruleShell = "raise \"shell\" if:\n    (call: ToolCall)\n    call is tool:run_shell\n"
	ruleBad   = "raise \"x\" if:\n    (msg: Message)\n    nosuch(msg)\n"
)

// guardrailFixture is a server with a dataset "gd" of admin, and bob, a
// member with a full key.
type guardrailFixture struct {
	ts  *testServer
	ds  *client.Dataset
	bob *client.Client
}

func newGuardrailFixture(t *testing.T, ts *testServer) *guardrailFixture {
	t.Helper()
	ctx := context.Background()
	ds, err := ts.c.CreateDataset(ctx, "gd", nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := ts.st.CreateUser(ctx, &store.User{Username: "bob", Role: store.RoleMember}); err != nil {
		t.Fatal(err)
	}
	bk, err := ts.c.CreateKey(ctx, client.KeyCreate{User: "bob", Scope: "full"})
	if err != nil {
		t.Fatal(err)
	}
	return &guardrailFixture{ts: ts, ds: ds, bob: client.New(ts.URL, bk.Key, client.WithRetries(0))}
}

func apiError(t *testing.T, err error) *client.APIError {
	t.Helper()
	var ae *client.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("want an *APIError, got %v", err)
	}
	return ae
}

func rulesetVersion(t *testing.T, ts *testServer, id string) int64 {
	t.Helper()
	d, err := ts.st.GetDataset(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return d.RulesetVersion
}

// TestGuardrailCreateErrors checks Invariant's 400 texts, the
// policy_invalid error with line and column, and that nothing is saved.
func TestGuardrailCreateErrors(t *testing.T) {
	forEachBackend(t, func(t *testing.T, ts *testServer) {
		fx := newGuardrailFixture(t, ts)
		path := "/api/v1/dataset/" + fx.ds.ID + "/policy"
		tests := []struct {
			name   string
			body   string
			status int
			detail string
		}{
			{"empty body", ``, 400, "Request should not be empty"},
			{"empty object", `{}`, 400, "Request should not be empty"},
			{"no name", `{"policy": "x"}`, 400, "Name must be provided and non-empty"},
			{"empty name", `{"name": "", "policy": "x"}`, 400, "Name must be provided and non-empty"},
			{"no policy", `{"name": "n"}`, 400, "Policy content must be provided and non-empty"},
			{"empty policy", `{"name": "n", "policy": ""}`, 400, "Policy content must be provided and non-empty"},
			{"bad action", `{"name": "n", "policy": "x", "action": "deny"}`, 400, `action must be "block" or "log", got "deny"`},
			{"bad severity", `{"name": "n", "policy": "x", "severity": "high"}`, 400, `severity must be "info", "warn" or "critical", got "high"`},
			{"bad scope kind", `{"name": "n", "policy": "x", "scope": {"kinds": ["web"]}}`, 400, `scope.kinds[0] must be "llm" or "mcp", got "web"`},
			{"name not a string", `{"name": 3, "policy": "x"}`, 400, "name must be a string"},
			{"rule does not compile", `{"name": "n", "policy": ` + quote(ruleBad) + `}`, 400,
				"Invalid Policy string: policy:3:5: failed to resolve identifier nosuch"},
			{"not JSON", `{"name":`, 400, ""},
		}
		for _, tc := range tests {
			st, b := ts.do(t, "POST", path, adminKey, tc.body)
			if st != tc.status {
				t.Errorf("%s: status %d, want %d: %s", tc.name, st, tc.status, b)
				continue
			}
			var e map[string]any
			_ = json.Unmarshal(b, &e)
			if tc.detail != "" && e["detail"] != tc.detail {
				t.Errorf("%s: detail %q, want %q", tc.name, e["detail"], tc.detail)
			}
		}
		// The compile error carries each error's line and column.
		_, err := ts.c.CreateGuardrail(context.Background(), fx.ds.ID, client.GuardrailCreate{Name: "n", Policy: ruleBad})
		ae := apiError(t, err)
		errs, _ := ae.Body["errors"].([]any)
		if ae.Code != "policy_invalid" || len(errs) != 1 {
			t.Fatalf("policy_invalid body = %v", ae.Body)
		}
		e0 := errs[0].(map[string]any)
		if e0["line"] != 3.0 || e0["column"] != 5.0 || e0["message"] != "failed to resolve identifier nosuch" {
			t.Errorf("errors[0] = %v", e0)
		}
		// Nothing was saved by any of the failures.
		if rv := rulesetVersion(t, ts, fx.ds.ID); rv != 0 {
			t.Errorf("ruleset_version = %d after only failed creates", rv)
		}
		if gs, _ := ts.st.ListGuardrails(context.Background(), fx.ds.ID); len(gs) != 0 {
			t.Errorf("%d guardrails saved by failed creates", len(gs))
		}
	})
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestGuardrailAccess checks Invariant's 403 texts for a visible dataset
// of someone else, 404 for an invisible one, and the key scopes.
func TestGuardrailAccess(t *testing.T) {
	ts := newTestServer(t, openSQLite(t))
	fx := newGuardrailFixture(t, ts)
	ctx := context.Background()
	d, err := ts.c.CreateGuardrail(ctx, fx.ds.ID, client.GuardrailCreate{Name: "email", Policy: ruleEmail})
	if err != nil {
		t.Fatal(err)
	}
	gs, _ := d.Policies()
	pid := gs[0].ID
	// Private: bob sees nothing.
	if _, err := fx.bob.CreateGuardrail(ctx, fx.ds.ID, client.GuardrailCreate{Name: "n", Policy: ruleEmail}); !client.IsNotFound(err) {
		t.Errorf("bob creates on a private dataset: %v", err)
	}
	if _, err := fx.bob.Guardrails(ctx, "admin", "gd", client.GuardrailFilter{}); !client.IsNotFound(err) {
		t.Errorf("bob lists a private dataset's guardrails: %v", err)
	}
	// Public: bob sees the dataset, and gets Invariant's 403s.
	if st, b := ts.do(t, "PUT", "/api/v1/dataset/byid/"+fx.ds.ID, adminKey, `{"is_public": true}`); st != 200 {
		t.Fatalf("make public: %d %s", st, b)
	}
	name := "x"
	tests := []struct {
		verb string
		call func() error
	}{
		{"create", func() error {
			_, err := fx.bob.CreateGuardrail(ctx, fx.ds.ID, client.GuardrailCreate{Name: "n", Policy: ruleEmail})
			return err
		}},
		{"get", func() error {
			_, err := fx.bob.Guardrails(ctx, "admin", "gd", client.GuardrailFilter{})
			return err
		}},
		{"update", func() error {
			_, err := fx.bob.UpdateGuardrail(ctx, fx.ds.ID, pid, client.GuardrailUpdate{Name: &name})
			return err
		}},
		{"delete", func() error {
			_, err := fx.bob.DeleteGuardrail(ctx, fx.ds.ID, pid, "")
			return err
		}},
	}
	for _, tc := range tests {
		ae := apiError(t, tc.call())
		if want := "Not allowed to " + tc.verb + " policy for this dataset"; ae.StatusCode != 403 || ae.Detail != want {
			t.Errorf("bob %s: %d %q, want 403 %q", tc.verb, ae.StatusCode, ae.Detail, want)
		}
	}
	// The dataset object shows the guardrails to its owner only.
	own, err := ts.c.GetDataset(ctx, fx.ds.ID)
	if err != nil {
		t.Fatal(err)
	}
	if pol, _ := own.ExtraMetadata["policies"].([]any); len(pol) != 1 {
		t.Errorf("owner's dataset extra_metadata.policies = %v", own.ExtraMetadata["policies"])
	}
	var raw map[string]any
	if err := ts.c.Raw(ctx, "GET", "/api/v1/dataset/byuser/admin/gd", nil, &raw); err != nil || raw["ruleset_version"] != 1.0 {
		t.Errorf("owner's dataset ruleset_version = %v (%v)", raw["ruleset_version"], err)
	}
	other, err := fx.bob.GetDataset(ctx, fx.ds.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := other.ExtraMetadata["policies"]; ok {
		t.Errorf("bob sees the guardrails in extra_metadata: %v", other.ExtraMetadata)
	}
	md, err := ts.c.GetMetadata(ctx, "gd", "")
	if _, ok := md["policies"]; ok || err != nil {
		t.Errorf("the metadata API shows policies: %v, %v", md, err)
	}
	// History is the owner's: 404 for bob.
	if _, err := fx.bob.GuardrailVersions(ctx, fx.ds.ID, pid); !client.IsNotFound(err) {
		t.Errorf("bob reads versions: %v", err)
	}
	// A read key cannot poll the ruleset (ingest scope), an ingest key can.
	for scope, want := range map[string]int{"read": 403, "ingest": 200} {
		k, err := ts.c.CreateKey(ctx, client.KeyCreate{Scope: scope})
		if err != nil {
			t.Fatal(err)
		}
		if st, b := ts.do(t, "GET", "/api/v1/dataset/byuser/admin/gd/policy", k.Key, nil); st != want {
			t.Errorf("%s key lists guardrails: %d, want %d: %s", scope, st, want, b)
		}
	}
}

// TestGuardrailLifecycle runs create, list with ETag/304, update with
// optimistic concurrency, delete, versions, restore, history and
// ruleset snapshots on both stores.
func TestGuardrailLifecycle(t *testing.T) {
	forEachBackend(t, func(t *testing.T, ts *testServer) {
		fx := newGuardrailFixture(t, ts)
		ctx := context.Background()
		c := ts.c
		off := false
		d, err := c.CreateGuardrail(ctx, fx.ds.ID, client.GuardrailCreate{Name: "email", Policy: ruleEmail, Comment: "first",
			Severity: "critical", ExtraMetadata: map[string]any{"stream_check": "final"}})
		if err != nil {
			t.Fatal(err)
		}
		if d.RulesetVersion != 1 || d.ID != fx.ds.ID {
			t.Errorf("create returned dataset %s at ruleset_version %d", d.ID, d.RulesetVersion)
		}
		gs, err := d.Policies()
		if err != nil || len(gs) != 1 {
			t.Fatalf("extra_metadata.policies = %v (%v)", d.ExtraMetadata["policies"], err)
		}
		g := gs[0]
		if g.Name != "email" || g.Content != ruleEmail || !g.Enabled || g.Action != "log" || g.Severity != "critical" ||
			g.Version != 1 || g.UpdatedBy != "admin" || g.Scope != nil || g.ExtraMetadata["stream_check"] != "final" ||
			len(g.LastUpdatedTime) != len("2006-01-02 15:04:05") {
			t.Errorf("created guardrail = %+v", g)
		}
		d, err = c.CreateGuardrail(ctx, fx.ds.ID, client.GuardrailCreate{Name: "shell", Policy: ruleShell, Enabled: &off, Action: "block",
			Scope: &client.GuardrailScope{Kinds: []string{"mcp"}, MCPServers: []string{"Shell-*"}}})
		if err != nil {
			t.Fatal(err)
		}
		gs, _ = d.Policies()
		shell := gs[1]

		// The polled list: ETag, 304, scope filters.
		list, err := c.Guardrails(ctx, "admin", "gd", client.GuardrailFilter{})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Policies) != 2 || list.ETag != `"rs-2"` {
			t.Fatalf("list = %d policies, ETag %s", len(list.Policies), list.ETag)
		}
		same, err := c.Guardrails(ctx, "admin", "gd", client.GuardrailFilter{IfNoneMatch: list.ETag})
		if err != nil || !same.NotModified {
			t.Errorf("If-None-Match with the current tag: %+v, %v", same, err)
		}
		filters := []struct {
			f    client.GuardrailFilter
			want []string
		}{
			{client.GuardrailFilter{Kind: "llm"}, []string{"email"}},
			{client.GuardrailFilter{Kind: "mcp"}, []string{"email", "shell"}},
			{client.GuardrailFilter{Kind: "mcp", ServerName: "shell-tools"}, []string{"email", "shell"}},
			{client.GuardrailFilter{Kind: "mcp", ServerName: "files"}, []string{"email"}},
			{client.GuardrailFilter{ClientName: "cursor"}, []string{"email", "shell"}},
		}
		for _, tc := range filters {
			l, err := c.Guardrails(ctx, "admin", "gd", tc.f)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, p := range l.Policies {
				names = append(names, p.Name)
			}
			if strings.Join(names, ",") != strings.Join(tc.want, ",") {
				t.Errorf("filter %+v: %v, want %v", tc.f, names, tc.want)
			}
		}

		// Update: partial, Invariant's texts, 404, If-Match conflict,
		// invalid rule saves nothing.
		path := "/api/v1/dataset/" + fx.ds.ID + "/policy/" + g.ID
		updateErrors := []struct {
			name, path, body string
			status           int
			detail           string
		}{
			{"empty", path, `{}`, 400, "Request should not be empty"},
			{"empty name", path, `{"name": ""}`, 400, "Name must be non-empty if provided"},
			{"empty policy", path, `{"policy": ""}`, 400, "Policy must be non-empty if provided"},
			{"unknown policy", "/api/v1/dataset/" + fx.ds.ID + "/policy/" + store.NewID(), `{"name": "x"}`, 404, "Policy to update not found"},
			{"stale base_version", path, `{"name": "x", "base_version": 7}`, 409, ""},
			{"rule does not compile", path, `{"policy": ` + quote(ruleBad) + `}`, 400, "Invalid Policy string: policy:3:5: failed to resolve identifier nosuch"},
		}
		for _, tc := range updateErrors {
			st, b := ts.do(t, "PUT", tc.path, adminKey, tc.body)
			var e map[string]any
			_ = json.Unmarshal(b, &e)
			if st != tc.status || (tc.detail != "" && e["detail"] != tc.detail) {
				t.Errorf("update %s: %d %s, want %d %q", tc.name, st, b, tc.status, tc.detail)
			}
		}
		if rv := rulesetVersion(t, ts, fx.ds.ID); rv != 2 {
			t.Errorf("ruleset_version = %d after failed updates, want 2", rv)
		}
		req, _ := http.NewRequest("PUT", ts.URL+path, strings.NewReader(`{"enabled": false}`))
		req.Header.Set("Authorization", "Bearer "+adminKey)
		req.Header.Set("If-Match", `"1"`)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("update with the current If-Match: %d", resp.StatusCode)
		}
		newName := "email-v2"
		d, err = c.UpdateGuardrail(ctx, fx.ds.ID, g.ID, client.GuardrailUpdate{Name: &newName, BaseVersion: 1, Comment: "stale"})
		if ae := apiError(t, err); ae.StatusCode != 409 || ae.Code != "version_conflict" {
			t.Errorf("stale BaseVersion: %v", err)
		}
		d, err = c.UpdateGuardrail(ctx, fx.ds.ID, g.ID, client.GuardrailUpdate{Name: &newName, BaseVersion: 2, Comment: "rename"})
		if err != nil {
			t.Fatal(err)
		}
		if d.RulesetVersion != 4 {
			t.Errorf("ruleset_version after two updates = %d, want 4", d.RulesetVersion)
		}
		// The old ETag no longer matches.
		l, err := c.Guardrails(ctx, "admin", "gd", client.GuardrailFilter{IfNoneMatch: list.ETag})
		if err != nil || l.NotModified || l.ETag != `"rs-4"` || l.Policies[0].Name != "email-v2" || l.Policies[0].Enabled {
			t.Errorf("after update: %+v, %v", l, err)
		}

		// Delete, then restore version 1.
		if _, err := c.DeleteGuardrail(ctx, fx.ds.ID, store.NewID(), ""); apiError(t, err).Detail != "Policy not found" {
			t.Errorf("delete unknown: %v", err)
		}
		d, err = c.DeleteGuardrail(ctx, fx.ds.ID, g.ID, "gone")
		if err != nil {
			t.Fatal(err)
		}
		if gs, _ := d.Policies(); len(gs) != 1 || gs[0].ID != shell.ID {
			t.Errorf("after delete: %v", gs)
		}
		vs, err := c.GuardrailVersions(ctx, fx.ds.ID, g.ID)
		if err != nil {
			t.Fatal(err)
		}
		var changes []string
		for _, v := range vs {
			changes = append(changes, v.Change+":"+v.Comment)
		}
		if strings.Join(changes, " ") != "deleted:gone updated:rename updated: created:first" || vs[0].Author.Username != "admin" {
			t.Errorf("versions = %v", changes)
		}
		r, err := c.RestoreGuardrail(ctx, fx.ds.ID, g.ID, 1, "back")
		if err != nil {
			t.Fatal(err)
		}
		if r.Version != 5 || r.Name != "email" || !r.Enabled || r.Content != ruleEmail {
			t.Errorf("restored = %+v", r)
		}
		v1, err := c.GetGuardrailVersion(ctx, fx.ds.ID, g.ID, 1)
		if err != nil || v1.Name != "email" || v1.Change != "created" || v1.RulesetVersion != 1 {
			t.Errorf("version 1 = %+v, %v", v1, err)
		}
		if _, err := c.GetGuardrailVersion(ctx, fx.ds.ID, g.ID, 99); !client.IsNotFound(err) {
			t.Errorf("version 99: %v", err)
		}

		// History pages and ruleset snapshots.
		var all []client.GuardrailVersion
		cursor := ""
		for range 10 {
			h, err := c.PolicyHistory(ctx, fx.ds.ID, 2, cursor)
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, h.Versions...)
			if h.NextCursor == nil {
				break
			}
			cursor = *h.NextCursor
		}
		if len(all) != 6 || all[0].Change != "restored" || all[len(all)-1].RulesetVersion != 1 {
			t.Errorf("history: %d versions", len(all))
		}
		rs, err := c.RulesetAt(ctx, fx.ds.ID, 2)
		if err != nil || len(rs.Policies) != 2 || rs.Policies[0].Name != "email" {
			t.Errorf("ruleset 2 = %+v, %v", rs, err)
		}
		rs, err = c.RulesetAt(ctx, fx.ds.ID, 5)
		if err != nil || len(rs.Policies) != 1 || rs.Policies[0].Name != "shell" {
			t.Errorf("ruleset 5 (after the delete) = %+v, %v", rs, err)
		}
		if _, err := c.RulesetAt(ctx, fx.ds.ID, 99); !client.IsNotFound(err) {
			t.Errorf("ruleset 99: %v", err)
		}
	})
}

// TestGuardrailReadYourWrites checks that the cached ruleset the hot path
// reads (currentRuleset) reflects a write as soon as its response is sent.
func TestGuardrailReadYourWrites(t *testing.T) {
	forEachBackend(t, func(t *testing.T, ts *testServer) {
		fx := newGuardrailFixture(t, ts)
		ctx := context.Background()
		rs, err := ts.srv.currentRuleset(ctx, fx.ds.ID)
		if err != nil || len(rs.Guardrails) != 0 {
			t.Fatalf("empty ruleset: %+v, %v", rs, err)
		}
		for i, rule := range []string{ruleEmail, ruleShell} {
			if _, err := ts.c.CreateGuardrail(ctx, fx.ds.ID, client.GuardrailCreate{Name: "r", Policy: rule}); err != nil {
				t.Fatal(err)
			}
			rs, err := ts.srv.currentRuleset(ctx, fx.ds.ID)
			if err != nil || len(rs.Guardrails) != i+1 || len(rs.Rules) != i+1 {
				t.Fatalf("after create %d: %d guardrails, %d compiled, %v", i+1, len(rs.Guardrails), len(rs.Rules), err)
			}
		}
		// Both rules came from the compile cache the writes filled.
		hits, misses := ts.srv.rules.Stats()
		if hits < 2 || misses != 2 {
			t.Errorf("rule cache hits, misses = %d, %d; want the ruleset to reuse the 2 rules compiled on write", hits, misses)
		}
		var m strings.Builder
		if err := ts.srv.Metrics().Write(&m); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"vigil_rules_cache_misses_total 2\n", "vigil_rules_cache_hits_total " + strconv.FormatUint(hits, 10) + "\n", "vigil_rules_compile_seconds_count 2\n"} {
			if !strings.Contains(m.String(), want) {
				t.Errorf("metrics lack %q", want)
			}
		}
	})
}

// TestGuardrailChangeFeed covers §9.3: after=0, long-poll answered on a
// change, the timeout, visibility and reset.
func TestGuardrailChangeFeed(t *testing.T) {
	forEachBackend(t, func(t *testing.T, ts *testServer) {
		fx := newGuardrailFixture(t, ts)
		ctx := context.Background()
		start, err := ts.c.GuardrailChangesAfter(ctx, 0, 0)
		if err != nil || start.Seq != 0 || len(start.Changes) != 0 {
			t.Fatalf("after=0 on an empty feed: %+v, %v", start, err)
		}
		// On a feed that never changed, after=0 is held until the first
		// change (seq 0 gives the client nothing else to wait from).
		first := make(chan *client.GuardrailChanges, 1)
		go func() {
			r, _ := ts.c.GuardrailChangesAfter(ctx, 0, 20*time.Second)
			first <- r
		}()
		time.Sleep(100 * time.Millisecond)
		if _, err := ts.c.CreateGuardrail(ctx, fx.ds.ID, client.GuardrailCreate{Name: "a", Policy: ruleEmail}); err != nil {
			t.Fatal(err)
		}
		select {
		case r := <-first:
			if r == nil || len(r.Changes) != 1 || r.Seq == 0 {
				t.Errorf("held after=0 on an empty feed answered %+v", r)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("held after=0 request not answered by the first change")
		}
		now, err := ts.c.GuardrailChangesAfter(ctx, 0, 0)
		if err != nil || now.Seq == 0 || len(now.Changes) != 0 {
			t.Fatalf("after=0 returns only the seq: %+v, %v", now, err)
		}
		// Timeout: nothing newer, answered empty after the wait.
		t0 := time.Now()
		got, err := ts.c.GuardrailChangesAfter(ctx, now.Seq, 300*time.Millisecond)
		if err != nil || len(got.Changes) != 0 || got.Seq != now.Seq {
			t.Errorf("timeout: %+v, %v", got, err)
		}
		if el := time.Since(t0); el < 250*time.Millisecond {
			t.Errorf("long-poll answered after %v, before its wait", el)
		}
		// Bob cannot read admin's private dataset: his held request sees
		// no change.
		bobDone := make(chan *client.GuardrailChanges, 1)
		go func() {
			r, _ := fx.bob.GuardrailChangesAfter(ctx, now.Seq, 2*time.Second)
			bobDone <- r
		}()
		// Held request answered on a change.
		done := make(chan *client.GuardrailChanges, 1)
		go func() {
			r, err := ts.c.GuardrailChangesAfter(ctx, now.Seq, 30*time.Second)
			if err != nil {
				t.Error(err)
			}
			done <- r
		}()
		time.Sleep(200 * time.Millisecond)
		wrote := time.Now()
		if _, err := ts.c.CreateGuardrail(ctx, fx.ds.ID, client.GuardrailCreate{Name: "b", Policy: ruleShell}); err != nil {
			t.Fatal(err)
		}
		select {
		case r := <-done:
			if r == nil || len(r.Changes) != 1 || r.Changes[0].DatasetID != fx.ds.ID || r.Changes[0].Dataset != "gd" ||
				r.Changes[0].Owner != "admin" || r.Changes[0].RulesetVersion != 2 || r.Seq != r.Changes[0].Seq {
				t.Errorf("held request answered with %+v", r)
			}
			if el := time.Since(wrote); el > time.Second {
				t.Errorf("held request answered %v after the write", el)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("held request not answered after a change")
		}
		if r := <-bobDone; r == nil || len(r.Changes) != 0 {
			t.Errorf("bob saw admin's private change: %+v", r)
		}
		// A seq the feed never had: reset.
		r, err := ts.c.GuardrailChangesAfter(ctx, 1<<40, 0)
		if err != nil || !r.Reset {
			t.Errorf("after beyond the feed: %+v, %v", r, err)
		}
		for _, q := range []string{"after=-1", "after=x", "wait=61", "wait=-1"} {
			if st, _ := ts.do(t, "GET", "/api/v1/guardrails/changes?"+q, adminKey, nil); st != 400 {
				t.Errorf("%s: %d, want 400", q, st)
			}
		}
	})
}

// TestReadyzStaleFeed checks that /readyz reports a guardrail feed that
// lost its subscription (here: its store was closed under it).
func TestReadyzStaleFeed(t *testing.T) {
	ts := newTestServer(t, openSQLite(t))
	st, b := ts.do(t, "GET", "/readyz", "", nil)
	if st != 200 || !strings.Contains(string(b), `"guardrail_feed":"ok"`) {
		t.Fatalf("readyz: %d %s", st, b)
	}
	ts.st.Close()
	deadline := time.Now().Add(3 * time.Second)
	for {
		st, b = ts.do(t, "GET", "/readyz", "", nil)
		if strings.Contains(string(b), `"guardrail_feed":"stale since`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("readyz never reported the stale feed: %d %s", st, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if st != 503 {
		t.Errorf("readyz with a stale feed: %d", st)
	}
}

func TestGlobMatch(t *testing.T) {
	tests := []struct {
		pattern, name string
		want          bool
	}{
		{"*", "", true},
		{"*", "abc", true},
		{"a*", "abc", true},
		{"a*c", "abbbc", true},
		{"a?c", "abc", true},
		{"a?c", "ac", false},
		{"*.tools", "shell.tools", true},
		{"*.tools", "shell.tool", false},
		{"sh*ll*", "shell", true},
		{"héllo?", "héllo!", true},
		{"[a]", "a", false},  // no character classes: [ is literal
		{"*xy", "*xy", true}, // a * in the name is an ordinary rune (found by FuzzGlobMatch)
		{"a*", "*", false},
	}
	for _, tc := range tests {
		if got := globMatch(tc.pattern, tc.name); got != tc.want {
			t.Errorf("globMatch(%q, %q) = %v", tc.pattern, tc.name, got)
		}
	}
}

// TestGuardrailRoutesFallback: paths under /api/v1/dataset/{id}/ that no
// guardrail route serves get the API's JSON 404, and the dataset routes
// the catch-all sits beside still answer.
func TestGuardrailRoutesFallback(t *testing.T) {
	ts := newTestServer(t, openSQLite(t))
	fx := newGuardrailFixture(t, ts)
	for _, tc := range []struct{ method, path string }{
		{"GET", "/api/v1/dataset/" + fx.ds.ID + "/nonsense"},
		{"GET", "/api/v1/dataset/" + fx.ds.ID + "/policy"}, // create is POST
		{"PATCH", "/api/v1/dataset/" + fx.ds.ID + "/policy"},
		{"DELETE", "/api/v1/dataset/" + fx.ds.ID + "/policy-history"},
	} {
		st, b := ts.do(t, tc.method, tc.path, adminKey, nil)
		if st != 404 || !strings.Contains(string(b), `"code":"not_found"`) {
			t.Errorf("%s %s: %d %s", tc.method, tc.path, st, b)
		}
	}
	for _, path := range []string{"/api/v1/dataset/byid/" + fx.ds.ID, "/api/v1/dataset/byuser/admin/gd", "/api/v1/dataset/byid/" + fx.ds.ID + "/traces"} {
		if st, b := ts.do(t, "GET", path, adminKey, nil); st != 200 {
			t.Errorf("GET %s: %d %s", path, st, b)
		}
	}
}

// FuzzGlobMatch checks the scope glob matcher: it never panics, a pattern
// without metacharacters matches exactly itself, and "*" + name matches
// anything ending in name (for valid UTF-8).
func FuzzGlobMatch(f *testing.F) {
	for _, s := range [][2]string{{"*", ""}, {"a*c", "abbc"}, {"?", "é"}, {"**?*", "xy"}, {"shell-*", "shell-tools"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, name string) {
		got := globMatch(pattern, name)
		if !utf8.ValidString(pattern) || !utf8.ValidString(name) {
			return // scopes and names come from JSON strings; only no panic is required here
		}
		if !strings.ContainsAny(pattern, "*?") && got != (pattern == name) {
			t.Fatalf("globMatch(%q, %q) = %v for a literal pattern", pattern, name, got)
		}
		if !strings.ContainsAny(name, "*?") && !globMatch("*"+name, pattern+name) {
			t.Fatalf("globMatch(%q, %q) = false", "*"+name, pattern+name)
		}
	})
}

// FuzzCheckScope checks the scope validator: it never panics, and what it
// accepts is valid JSON it accepts again unchanged.
func FuzzCheckScope(f *testing.F) {
	for _, s := range []string{`null`, `{"kinds":["llm"]}`, `{"mcp_servers":["a*"],"mcp_clients":[]}`, `{"kinds":["web"]}`, `{"x":1}`, `[]`, `"s"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		out, err := checkScope(json.RawMessage(raw))
		if err != nil || out == nil {
			return
		}
		again, err := checkScope(out)
		if err != nil || string(again) != string(out) {
			t.Fatalf("checkScope(%s) = %s, then %s, %v", raw, out, again, err)
		}
		_ = scopeMatches(out, "mcp", "srv", "cli")
	})
}

// TestGuardrailLoadWarnings: a rule's load-time warnings (here an entity
// type no recogniser reports) are stored with the guardrail in
// extra_metadata.load_warnings, beside the caller's own members, and
// cleared when an update's rule has none (issue 18: no silent gaps).
func TestGuardrailLoadWarnings(t *testing.T) {
	forEachBackend(t, func(t *testing.T, ts *testServer) {
		fx := newGuardrailFixture(t, ts)
		ctx := context.Background()
		warned := "from invariant.detectors import pii\nraise \"p\" if:\n    (msg: Message)\n    len(pii(msg, entities=[\"PERSON\", \"NRP\"])) > 0\n"
		d, err := ts.c.CreateGuardrail(ctx, fx.ds.ID, client.GuardrailCreate{Name: "pii", Policy: warned,
			ExtraMetadata: map[string]any{"team": "privacy"}})
		if err != nil {
			t.Fatal(err)
		}
		gs, err := d.Policies()
		if err != nil || len(gs) != 1 {
			t.Fatalf("policies = %v (%v)", d.ExtraMetadata["policies"], err)
		}
		ws, _ := gs[0].ExtraMetadata["load_warnings"].([]any)
		if len(ws) != 1 || !strings.Contains(fmt.Sprint(ws[0]), "4:") || !strings.Contains(fmt.Sprint(ws[0]), "entity NRP") ||
			gs[0].ExtraMetadata["team"] != "privacy" {
			t.Fatalf("extra_metadata = %v, want the NRP warning at line 4 and the team member", gs[0].ExtraMetadata)
		}
		clean := ruleEmail
		d, err = ts.c.UpdateGuardrail(ctx, fx.ds.ID, gs[0].ID, client.GuardrailUpdate{Policy: &clean})
		if err != nil {
			t.Fatal(err)
		}
		gs, _ = d.Policies()
		if _, ok := gs[0].ExtraMetadata["load_warnings"]; ok || gs[0].ExtraMetadata["team"] != "privacy" {
			t.Errorf("after a rule without warnings, extra_metadata = %v", gs[0].ExtraMetadata)
		}
	})
}
