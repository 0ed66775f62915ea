package server

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vigilhq/vigil/client"
	"github.com/vigilhq/vigil/store"
)

// pushRun pushes one trace (a user message and an assistant tool call)
// into dataset ds with metadata md and returns its id.
func pushRun(t *testing.T, c *client.Client, ds string, md map[string]any) string {
	t.Helper()
	msgs := []any{
		map[string]any{"role": "user", "content": "mail bob@example.com"},
		map[string]any{"role": "assistant", "content": "", "tool_calls": []any{map[string]any{
			"id": "c1", "type": "function", "function": map[string]any{"name": "send", "arguments": map[string]any{"to": "bob@example.com"}}}}},
	}
	req := client.PushRequest{Dataset: ds, Messages: [][]any{msgs}}
	if md != nil {
		req.Metadata = []map[string]any{md}
	}
	res, err := c.Push(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return res.ID[0]
}

// addFinding stores a finding the way a monitor would: through the store.
func addFinding(t *testing.T, ts *testServer, runID, monitor, key, severity string, score float64, cites ...string) *store.Finding {
	t.Helper()
	ctx := context.Background()
	tr, err := ts.st.GetTrace(ctx, runID, false)
	if err != nil {
		t.Fatal(err)
	}
	var cj []string
	node := ""
	for i, c := range cites {
		id, addr, _ := strings.Cut(c, "@")
		cj = append(cj, fmt.Sprintf(`{"nodeId":%q,"address":%q}`, id, addr))
		if i == 0 {
			node = id
		}
	}
	f, _, err := ts.st.UpsertFinding(ctx, &store.Finding{RunID: runID, OwnerID: tr.OwnerID, NodeID: node, MonitorID: monitor,
		Monitor: monitor + "-name", Key: key, Title: "found " + key, Severity: severity, Score: score,
		Citations: json.RawMessage("[" + strings.Join(cj, ",") + "]")})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Millisecond) // distinct createdAt
	return f
}

func findingIDs(fs []client.Finding) string {
	var ids []string
	for _, f := range fs {
		ids = append(ids, f.Key)
	}
	return strings.Join(ids, ",")
}

// TestFindingsAPI lists, filters, pages, reads and reviews findings over
// HTTP on both stores.
func TestFindingsAPI(t *testing.T) {
	forEachBackend(t, func(t *testing.T, ts *testServer) {
		ctx := context.Background()
		c := ts.c
		r1 := pushRun(t, c, "fd", nil)
		r2 := pushRun(t, c, "fd", nil)
		addFinding(t, ts, r1, "m1", "a", "warn", 0.6)
		addFinding(t, ts, r1, "m2", "b", "critical", 1)
		addFinding(t, ts, r2, "m1", "c", "info", 0.3)
		fd := addFinding(t, ts, r2, "m2", "d", "critical", 1)

		filters := []struct {
			name string
			f    client.FindingFilter
			want string
		}{
			{"all", client.FindingFilter{}, "a,b,c,d"},
			{"run", client.FindingFilter{RunID: r2}, "c,d"},
			{"monitor", client.FindingFilter{MonitorID: "m1"}, "a,c"},
			{"severity list", client.FindingFilter{Severity: []string{"info", "warn"}}, "a,c"},
			{"status", client.FindingFilter{Status: []string{"accepted"}}, ""},
			{"combined", client.FindingFilter{RunID: r1, Severity: []string{"critical"}}, "b"},
		}
		for _, tc := range filters {
			p, err := c.Findings(ctx, tc.f)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			if got := findingIDs(p.Findings); got != tc.want {
				t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
			}
		}
		// Pages of one.
		var keys []string
		cursor := ""
		for range 10 {
			p, err := c.Findings(ctx, client.FindingFilter{Limit: 1, Cursor: cursor})
			if err != nil {
				t.Fatal(err)
			}
			keys = append(keys, findingIDs(p.Findings))
			if p.NextCursor == nil {
				break
			}
			cursor = *p.NextCursor
		}
		if strings.Join(keys, ",") != "a,b,c,d" {
			t.Errorf("pages: %v", keys)
		}
		for _, q := range []string{"status=closed", "severity=high", "limit=0", "limit=1001", "cursor=x"} {
			if st, b := ts.do(t, "GET", "/api/v1/findings?"+q, adminKey, nil); st != 400 {
				t.Errorf("%s: %d %s", q, st, b)
			}
		}

		// Get.
		got, err := c.GetFinding(ctx, fd.ID)
		if err != nil || got.RunID != r2 || got.Key != "d" || got.Severity != "critical" || got.Status != "open" ||
			got.CreatedAt != fd.CreatedAt.UnixMilli() || got.Monitor != "m2-name" || got.NodeID != nil || got.History == nil {
			t.Errorf("GetFinding = %+v, %v", got, err)
		}
		if _, err := c.GetFinding(ctx, store.NewULID()); !client.IsNotFound(err) {
			t.Errorf("unknown finding: %v", err)
		}

		// Review transitions, in order.
		steps := []struct {
			to, note string
			status   int
		}{
			{"accepted", "known", 200},
			{"accepted", "", 409},  // same status
			{"dismissed", "", 409}, // accepted -> dismissed needs a reopen
			{"open", "look again", 200},
			{"dismissed", "false positive", 200},
			{"closed", "", 400},
		}
		for i, s := range steps {
			f, err := c.ReviewFinding(ctx, fd.ID, s.to, s.note)
			status := 200
			if err != nil {
				status = apiError(t, err).StatusCode
			}
			if status != s.status {
				t.Errorf("step %d (-> %s): %d, want %d (%v)", i, s.to, status, s.status, err)
			}
			if err == nil && f.Status != s.to {
				t.Errorf("step %d: status %s", i, f.Status)
			}
		}
		got, _ = c.GetFinding(ctx, fd.ID)
		var hist []string
		for _, h := range got.History {
			hist = append(hist, h.From+">"+h.To+":"+h.By+":"+h.Note)
		}
		if strings.Join(hist, " ") != "open>accepted:admin:known accepted>open:admin:look again open>dismissed:admin:false positive" {
			t.Errorf("history = %v", hist)
		}
		if st, b := ts.do(t, "PATCH", "/api/v1/findings/"+fd.ID, adminKey, `{"note": "no status"}`); st != 400 {
			t.Errorf("PATCH without status: %d %s", st, b)
		}

		// Review queue: open only, critical first, then oldest.
		q, err := c.ReviewQueue(ctx, client.FindingFilter{})
		if err != nil || findingIDs(q.Findings) != "b,a,c" {
			t.Errorf("review queue = %s, %v", findingIDs(q.Findings), err)
		}
		if st, _ := ts.do(t, "GET", "/api/v1/review-queue?status=accepted", adminKey, nil); st != 400 {
			t.Errorf("review queue with status: %d", st)
		}
	})
}

// TestFindingsVisibility: another user sees no finding of a private run;
// on a public dataset they read but cannot review it.
func TestFindingsVisibility(t *testing.T) {
	ts := newTestServer(t, openSQLite(t))
	fx := newGuardrailFixture(t, ts)
	ctx := context.Background()
	run := pushRun(t, ts.c, "gd", nil)
	f := addFinding(t, ts, run, "m", "k", "warn", 0.6)
	if _, err := fx.bob.GetFinding(ctx, f.ID); !client.IsNotFound(err) {
		t.Errorf("bob reads a private finding: %v", err)
	}
	if p, err := fx.bob.Findings(ctx, client.FindingFilter{}); err != nil || len(p.Findings) != 0 {
		t.Errorf("bob lists: %+v, %v", p, err)
	}
	if _, err := fx.bob.Findings(ctx, client.FindingFilter{RunID: run}); !client.IsNotFound(err) {
		t.Errorf("bob lists a private run's findings: %v", err)
	}
	if st, b := ts.do(t, "PUT", "/api/v1/dataset/byid/"+fx.ds.ID, adminKey, `{"is_public": true}`); st != 200 {
		t.Fatalf("make public: %d %s", st, b)
	}
	if _, err := fx.bob.GetFinding(ctx, f.ID); err != nil {
		t.Errorf("bob reads a public run's finding: %v", err)
	}
	if p, err := fx.bob.Findings(ctx, client.FindingFilter{RunID: run}); err != nil || len(p.Findings) != 1 {
		t.Errorf("bob lists a public run's findings: %+v, %v", p, err)
	}
	if _, err := fx.bob.ReviewFinding(ctx, f.ID, "dismissed", ""); apiError(t, err).StatusCode != 403 {
		t.Errorf("bob reviews admin's finding: %v", err)
	}
}

// TestAnomalyScores checks node.anomalyScore: the highest score of the
// non-dismissed findings citing the node, absent when none.
func TestAnomalyScores(t *testing.T) {
	forEachBackend(t, func(t *testing.T, ts *testServer) {
		ctx := context.Background()
		run := pushRun(t, ts.c, "as", nil)
		type node struct {
			ID           string   `json:"id"`
			Address      string   `json:"address"`
			AnomalyScore *float64 `json:"anomalyScore"`
		}
		nodes := func() map[string]node {
			var out struct {
				Nodes []node `json:"nodes"`
			}
			if err := ts.c.Raw(ctx, "GET", "/api/v1/runs/"+run+"/nodes", nil, &out); err != nil {
				t.Fatal(err)
			}
			m := map[string]node{}
			for _, n := range out.Nodes {
				m[n.Address] = n
			}
			return m
		}
		first := nodes()
		user, call := first["messages.0"].ID, first["messages.1.tool_calls.0"].ID
		if user == "" || call == "" {
			t.Fatalf("nodes: %+v", first)
		}
		addFinding(t, ts, run, "m1", "low", "info", 0.3, user+"@messages.0.content:5-20")
		high := addFinding(t, ts, run, "m2", "high", "critical", 0.9, call+"@messages.1.tool_calls.0.function.arguments.to:0-15", user+"@messages.0")
		check := func(when string, wantUser, wantCall float64) {
			t.Helper()
			m := nodes()
			for addr, want := range map[string]float64{"messages.0": wantUser, "messages.1.tool_calls.0": wantCall} {
				got := m[addr].AnomalyScore
				switch {
				case want == 0 && got != nil:
					t.Errorf("%s: %s anomalyScore %v, want none", when, addr, *got)
				case want != 0 && (got == nil || *got != want):
					t.Errorf("%s: %s anomalyScore %v, want %v", when, addr, got, want)
				}
			}
			if m["messages.1"].AnomalyScore != nil {
				t.Errorf("%s: uncited node messages.1 has a score", when)
			}
		}
		check("both open", 0.9, 0.9)
		if _, err := ts.c.ReviewFinding(ctx, high.ID, "accepted", ""); err != nil {
			t.Fatal(err)
		}
		check("high accepted (still counts)", 0.9, 0.9)
		if _, err := ts.c.ReviewFinding(ctx, high.ID, "open", ""); err != nil {
			t.Fatal(err)
		}
		if _, err := ts.c.ReviewFinding(ctx, high.ID, "dismissed", ""); err != nil {
			t.Fatal(err)
		}
		check("high dismissed", 0.3, 0)
	})
}

// TestEvals checks eval results computed on read (ledger.md §8.3).
func TestEvals(t *testing.T) {
	forEachBackend(t, func(t *testing.T, ts *testServer) {
		ctx := context.Background()
		ev := func(suite, kase string) map[string]any {
			return map[string]any{"eval": map[string]any{"suite": suite, "case": kase}}
		}
		oldFail := pushRun(t, ts.c, "ev", ev("s1", "c1"))
		addFinding(t, ts, oldFail, "m", "old", "critical", 1)
		time.Sleep(2 * time.Millisecond)
		c1 := pushRun(t, ts.c, "ev", ev("s1", "c1")) // the latest run of c1
		c2 := pushRun(t, ts.c, "ev", ev("s1", "c2"))
		w := addFinding(t, ts, c2, "m", "warn", "warn", 0.6)
		addFinding(t, ts, c1, "m", "info", "info", 0.3) // info never fails
		other := pushRun(t, ts.c, "ev", ev("s2", "x"))
		pushRun(t, ts.c, "ev", map[string]any{"note": "not an eval"})

		res, err := ts.c.Evals(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range res.Results {
			got = append(got, fmt.Sprintf("%s/%s:%s:%s:%d", r.Suite, r.Case, r.Status, r.RunID, len(r.Blocking)))
		}
		want := []string{"s1/c1:pass:" + c1 + ":0", "s1/c2:fail:" + c2 + ":1", "s2/x:pass:" + other + ":0"}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("evals:\n got %v\nwant %v", got, want)
		}
		if len(res.Suites) != 2 || res.Suites[0].Status != "fail" || res.Suites[0].Failed != 1 || res.Suites[1].Status != "pass" {
			t.Errorf("suites = %+v", res.Suites)
		}
		if res.Results[1].Blocking[0] != w.ID {
			t.Errorf("blocking = %v, want %s", res.Results[1].Blocking, w.ID)
		}
		// Accepting the blocking finding turns the failure into a pass.
		if _, err := ts.c.ReviewFinding(ctx, w.ID, "accepted", "waived"); err != nil {
			t.Fatal(err)
		}
		res, err = ts.c.Evals(ctx, "s1")
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Results) != 2 || res.Results[1].Status != "pass" || len(res.Suites) != 1 || res.Suites[0].Status != "pass" {
			t.Errorf("after accepting: %+v", res)
		}
	})
}
