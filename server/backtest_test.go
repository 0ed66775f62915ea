package server

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/vigilhq/vigil/client"
	"github.com/vigilhq/vigil/policy"
	"github.com/vigilhq/vigil/store"
)

// Rules of the backtest tests: rule triggers on traces 1 and 2 of
// backtestTraces, baseline on 2 and 3.
const (
	btRule     = "raise \"bad word\" if:\n    (msg: Message)\n    \"bad\" in msg.content\n"
	btBaseline = "raise \"worse word\" if:\n    (msg: Message)\n    \"worse\" in msg.content\n"
)

// backtestDataset pushes five one-message traces into dataset "bt" and
// returns its id and the trace ids by index.
func backtestDataset(t *testing.T, ts *testServer) (string, []string) {
	t.Helper()
	req := client.PushRequest{Dataset: "bt"}
	for i, c := range []string{"fine", "bad", "bad and worse", "worse", "fine again"} {
		req.Messages = append(req.Messages, []any{map[string]any{"role": "user", "content": c}})
		req.Metadata = append(req.Metadata, map[string]any{"tag": []string{"a", "b", "a", "b", "a"}[i]})
	}
	res, err := ts.c.Push(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	d, err := ts.c.GetDatasetByName(t.Context(), "admin", "bt")
	if err != nil {
		t.Fatal(err)
	}
	return d.ID, res.ID
}

// readFrames reads a whole SSE body into its data frames.
func readFrames(t *testing.T, b []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, ev := range strings.Split(strings.TrimSpace(string(b)), "\n\n") {
		data, ok := strings.CutPrefix(ev, "data: ")
		if !ok || strings.Contains(data, "\n") {
			t.Fatalf("frame %q is not one data line", ev)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(data), &m); err != nil {
			t.Fatalf("frame %q: %v", data, err)
		}
		out = append(out, m)
	}
	return out
}

func TestBacktestStream(t *testing.T) {
	forEachBackend(t, func(t *testing.T, ts *testServer) {
		ds, ids := backtestDataset(t, ts)
		path := "/api/v1/dataset/byid/" + ds + "/policy-check/stream"
		req, _ := http.NewRequest("POST", ts.URL+path, strings.NewReader(`{"policy": `+jsonString(btRule)+`, "max_concurrent": 2, "policy_check_url": "ignored"}`))
		req.Header.Set("Authorization", "Bearer "+adminKey)
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body := new(bytes.Buffer)
		body.ReadFrom(resp.Body)
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("status %d, type %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
		frames := readFrames(t, body.Bytes())
		if len(frames) != 7 {
			t.Fatalf("%d frames, want metadata + 5 traces + summary: %v", len(frames), frames)
		}
		if md, _ := frames[0]["metadata"].(map[string]any); md["num_traces"] != 5.0 || md["max_concurrent"] != 2.0 {
			t.Errorf("metadata frame = %v", frames[0])
		}
		var triggered []string
		seen := map[string]bool{}
		for _, f := range frames[1:6] {
			id, _ := f["traceId"].(string)
			idx := int(f["index"].(float64))
			if id != ids[idx] || f["status"] != "success" || seen[id] {
				t.Errorf("trace frame %v (ids %v)", f, ids)
			}
			seen[id] = true
			errs, _ := f["errors"].([]any)
			if f["triggered"] == true {
				triggered = append(triggered, id)
				e := errs[0].(map[string]any)
				if len(errs) != 1 || e["args"].([]any)[0] != "bad word" || !slices.Contains(e["ranges"].([]any), any("messages.0.content:0-3")) {
					t.Errorf("errors of %v", f)
				}
			} else if f["triggered"] != false || errs == nil || len(errs) != 0 {
				t.Errorf("untriggered frame %v", f)
			}
		}
		slices.Sort(triggered)
		want := []string{ids[1], ids[2]}
		slices.Sort(want)
		if !slices.Equal(triggered, want) {
			t.Errorf("triggered %v, want %v", triggered, want)
		}
		last := frames[6]
		sum, _ := last["summary"].(map[string]any)
		if last["done"] != true || sum["num_traces"] != 5.0 || sum["num_triggered"] != 2.0 || sum["num_errors"] != 0.0 || sum["duration_ms"] == nil {
			t.Errorf("summary frame = %v", last)
		}
	})
}

// TestBacktestQuery: query (the search grammar) restricts the traces a
// backtest checks, and num_traces counts only those.
func TestBacktestQuery(t *testing.T) {
	forEachBackend(t, func(t *testing.T, ts *testServer) {
		ds, ids := backtestDataset(t, ts)
		path := "/api/v1/dataset/byid/" + ds + "/policy-check/stream"
		status, body := ts.do(t, "POST", path, adminKey, `{"policy": `+jsonString(btRule)+`, "query": "worse"}`)
		if status != 200 {
			t.Fatalf("status %d: %s", status, body)
		}
		frames := readFrames(t, body)
		if len(frames) != 4 {
			t.Fatalf("%d frames, want metadata + 2 traces + summary: %v", len(frames), frames)
		}
		if md, _ := frames[0]["metadata"].(map[string]any); md["num_traces"] != 2.0 {
			t.Errorf("metadata frame = %v", frames[0])
		}
		var got []string
		for _, f := range frames[1:3] {
			got = append(got, f["traceId"].(string))
		}
		slices.Sort(got)
		want := []string{ids[2], ids[3]}
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("checked %v, want the traces containing \"worse\" %v", got, want)
		}
		if sum, _ := frames[3]["summary"].(map[string]any); sum["num_traces"] != 2.0 || sum["num_triggered"] != 1.0 {
			t.Errorf("summary frame = %v", frames[3])
		}
	})
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func TestBacktestCompare(t *testing.T) {
	forEachBackend(t, func(t *testing.T, ts *testServer) {
		ds, ids := backtestDataset(t, ts)
		ctx := t.Context()
		got, err := ts.c.BacktestCompare(ctx, ds, client.BacktestRequest{Policy: btRule, CompareTo: &client.BacktestRule{Policy: btBaseline}})
		if err != nil {
			t.Fatal(err)
		}
		s := got.Summary
		if s.NumTraces != 5 || s.NumTriggered != 2 || s.BaselineTriggered != 2 || s.NewlyTriggered != 1 || s.NoLongerTriggered != 1 || s.NumErrors != 0 {
			t.Errorf("summary = %+v", s)
		}
		type row struct {
			id      string
			tr, btr bool
		}
		var rows []row
		for _, tr := range got.Traces {
			rows = append(rows, row{tr.ID, tr.Triggered, tr.BaselineTriggered})
		}
		want := []row{{ids[1], true, false}, {ids[2], true, true}, {ids[3], false, true}}
		if !slices.Equal(rows, want) {
			t.Errorf("traces = %+v, want %+v", rows, want)
		}
		// Without a baseline nothing is new or gone; limit checks the
		// first traces by index.
		got, err = ts.c.BacktestCompare(ctx, ds, client.BacktestRequest{Policy: btRule, Limit: 2})
		if err != nil {
			t.Fatal(err)
		}
		if s := got.Summary; s.NumTraces != 2 || s.NumTriggered != 1 || s.NewlyTriggered != 0 || s.NoLongerTriggered != 0 || len(got.Traces) != 1 || got.Traces[0].ID != ids[1] {
			t.Errorf("limit 2: %+v", got)
		}
	})
}

// TestBacktestParameters: input.* is parameters plus the trace metadata;
// a missing parameter is an error frame per trace; a rule that blows a
// budget is a failure of that trace, not of the run.
func TestBacktestParameters(t *testing.T) {
	forEachBackend(t, func(t *testing.T, ts *testServer) {
		ds, _ := backtestDataset(t, ts)
		ctx := t.Context()
		cases := []struct {
			name                      string
			req                       client.BacktestRequest
			triggered, errors, failed int
		}{
			{"parameter", client.BacktestRequest{Policy: "raise \"p\" if:\n    (msg: Message)\n    input.needle in msg.content\n", Parameters: map[string]any{"needle": "fine"}}, 2, 0, 0},
			{"missing_parameter", client.BacktestRequest{Policy: "raise \"p\" if:\n    (msg: Message)\n    input.needle in msg.content\n"}, 0, 5, 0},
			{"metadata", client.BacktestRequest{Policy: "raise \"m\" if:\n    (msg: Message)\n    input.metadata.tag == \"b\"\n"}, 2, 0, 0},
			{"metadata_parameter_wins", client.BacktestRequest{Policy: "raise \"m\" if:\n    (msg: Message)\n    input.metadata.tag == \"b\"\n", Parameters: map[string]any{"metadata": map[string]any{"tag": "b"}}}, 5, 0, 0},
			{"budget", client.BacktestRequest{Policy: "raise \"big\" if:\n    (msg: Message)\n    len(\"ab\" * 10000000) > 0\n"}, 0, 0, 5},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				var frames []*client.BacktestFrame
				sum, err := ts.c.Backtest(ctx, ds, tc.req, func(f *client.BacktestFrame) error {
					frames = append(frames, f)
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				if sum.NumTraces != 5 || sum.NumTriggered != tc.triggered || sum.NumErrors != tc.errors || sum.NumFailures != tc.failed {
					t.Errorf("summary %+v", sum)
				}
				for _, f := range frames[1:] {
					switch {
					case tc.errors > 0 && (f.Status != "error" || !strings.Contains(f.Error, "missing_parameter")):
						t.Errorf("frame %+v, want a missing_parameter error", f)
					case tc.failed > 0 && (f.Status != "success" || len(f.Failures) != 1 || f.Failures[0].Kind != "budget_exceeded"):
						t.Errorf("frame %+v, want a budget_exceeded failure", f)
					}
				}
			})
		}
	})
}

func TestBacktestBadInput(t *testing.T) {
	forEachBackend(t, func(t *testing.T, ts *testServer) {
		ds, _ := backtestDataset(t, ts)
		stream := "/api/v1/dataset/byid/" + ds + "/policy-check/stream"
		cmp := "/api/v1/dataset/byid/" + ds + "/policy-check"
		cases := []struct {
			name, path, body string
			status           int
			code, detail     string
		}{
			{"policy_invalid", stream, `{"policy": "raise \"x\" if:\n    (msg: Message\n"}`, 400, "policy_invalid", "Invalid Policy string: policy:2:"},
			{"policy_invalid_baseline", cmp, `{"policy": "raise \"x\" if:\n    (msg: Message)\n", "compare_to": {"policy": "raise if"}}`, 400, "policy_invalid", "compare_to:1:"},
			{"no_policy", stream, `{"parameters": {}}`, 400, "invalid_request", "give policy"},
			{"empty_policy", stream, `{"policy": "  "}`, 400, "invalid_request", "non-empty"},
			{"both", stream, `{"policy": "raise \"x\" if:\n    (msg: Message)\n", "policy_id": "x"}`, 400, "invalid_request", "not both"},
			{"version_alone", stream, `{"version": 2}`, 400, "invalid_request", "policy_id"},
			{"query_invalid", stream, `{"policy": "raise \"x\" if:\n    (msg: Message)\n", "query": "meta:"}`, 400, "query_invalid", ""},
			{"compare_on_stream", stream, `{"policy": "raise \"x\" if:\n    (msg: Message)\n", "compare_to": {"policy": "raise \"x\" if:\n    (msg: Message)\n"}}`, 400, "invalid_request", "compare_to"},
			{"negative_limit", stream, `{"policy": "raise \"x\" if:\n    (msg: Message)\n", "limit": -1}`, 400, "invalid_request", "limit"},
			{"bad_json", stream, `{"policy": `, 400, "invalid_json", "invalid JSON"},
			{"wrong_type", stream, `{"policy": 3}`, 400, "invalid_request", "policy"},
			{"unknown_guardrail", stream, `{"policy_id": "0190a000-0000-7000-8000-000000000000", "version": 1}`, 404, "not_found", "Policy not found"},
			{"unknown_dataset", "/api/v1/dataset/byid/0190a000-0000-7000-8000-000000000000/policy-check/stream", `{"policy": "raise \"x\" if:\n    (msg: Message)\n"}`, 404, "not_found", "Dataset not found"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				status, body := ts.do(t, "POST", tc.path, adminKey, tc.body)
				m, _ := decode(t, body).(map[string]any)
				if status != tc.status || m["code"] != tc.code || !strings.Contains(m["detail"].(string), tc.detail) {
					t.Fatalf("%d %s, want %d %s %q", status, body, tc.status, tc.code, tc.detail)
				}
				if tc.code == "policy_invalid" {
					errs, _ := m["errors"].([]any)
					if len(errs) == 0 || errs[0].(map[string]any)["line"] == nil || errs[0].(map[string]any)["column"] == nil {
						t.Errorf("errors = %v", m["errors"])
					}
				}
			})
		}
		// A read key may not run a backtest (auth F).
		status, _ := ts.do(t, "POST", stream, "", `{"policy": "raise \"x\" if:\n    (msg: Message)\n"}`)
		if status != 401 && status != 404 {
			t.Errorf("anonymous: %d", status)
		}
	})
}

// TestBacktestDisconnect: a client that goes away cancels the run; the
// server analyses no further trace (observed through the test hooks).
func TestBacktestDisconnect(t *testing.T) {
	forEachBackend(t, func(t *testing.T, ts *testServer) {
		if _, err := ts.c.Push(t.Context(), pushBatch("many", 50, 3)); err != nil {
			t.Fatal(err)
		}
		d, err := ts.c.GetDatasetByName(t.Context(), "admin", "many")
		if err != nil {
			t.Fatal(err)
		}
		var started atomic.Int64
		three := make(chan struct{})
		ended := make(chan [2]any, 1)
		backtestHooks.beforeTrace = func(ctx context.Context, _ int64) {
			if started.Add(1) == 3 {
				close(three)
			}
			if started.Load() >= 3 {
				<-ctx.Done() // hold the workers until the client is gone
			}
		}
		backtestHooks.done = func(n int, err error) { ended <- [2]any{n, err} }
		t.Cleanup(func() { backtestHooks.beforeTrace, backtestHooks.done = nil, nil })

		ctx, cancel := context.WithCancel(t.Context())
		req, _ := http.NewRequestWithContext(ctx, "POST", ts.URL+"/api/v1/dataset/byid/"+d.ID+"/policy-check/stream",
			strings.NewReader(`{"policy": `+jsonString(btRule)+`, "max_concurrent": 2}`))
		req.Header.Set("Authorization", "Bearer "+adminKey)
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(resp.Body).ReadString('\n')
		if err != nil || !strings.Contains(line, `"num_traces":50`) {
			t.Fatalf("first frame %q: %v", line, err)
		}
		<-three
		cancel()
		resp.Body.Close()
		got := <-ended
		if n := got[0].(int); n >= 50 || got[1] == nil || !errors.Is(got[1].(error), context.Canceled) {
			t.Errorf("after the disconnect the run analysed %d traces and ended with %v; want it cancelled early", n, got[1])
		}
	})
}

// TestBacktestGuardrailVersions: policy_id and version name a stored
// guardrail version (0: the current one), on either side of a comparison;
// a guardrail of another dataset is not found.
func TestBacktestGuardrailVersions(t *testing.T) {
	forEachBackend(t, func(t *testing.T, ts *testServer) {
		ds, _ := backtestDataset(t, ts)
		ctx := t.Context()
		d, err := ts.st.GetDataset(ctx, ds)
		if err != nil {
			t.Fatal(err)
		}
		g := &store.Guardrail{DatasetID: ds, Name: "words", Content: btBaseline, Enabled: true, UpdatedBy: d.OwnerID}
		if err := ts.st.CreateGuardrail(ctx, g, store.GuardrailCreated, ""); err != nil {
			t.Fatal(err)
		}
		rule := btRule
		if _, err := ts.st.UpdateGuardrail(ctx, g.ID, store.GuardrailUpdate{Content: &rule, AuthorID: d.OwnerID}); err != nil {
			t.Fatal(err)
		}
		other := &store.Dataset{OwnerID: d.OwnerID, Name: "other"}
		if err := ts.st.CreateDataset(ctx, other); err != nil {
			t.Fatal(err)
		}
		og := &store.Guardrail{DatasetID: other.ID, Name: "elsewhere", Content: btRule, UpdatedBy: d.OwnerID}
		if err := ts.st.CreateGuardrail(ctx, og, store.GuardrailCreated, ""); err != nil {
			t.Fatal(err)
		}
		cases := []struct {
			name                 string
			req                  client.BacktestRequest
			triggered, base, new int
			code                 string
		}{
			{"v2_against_v1", client.BacktestRequest{PolicyID: g.ID, Version: 2, CompareTo: &client.BacktestRule{PolicyID: g.ID, Version: 1}}, 2, 2, 1, ""},
			{"current_against_text", client.BacktestRequest{PolicyID: g.ID, CompareTo: &client.BacktestRule{Policy: btRule}}, 2, 2, 0, ""},
			{"v1", client.BacktestRequest{PolicyID: g.ID, Version: 1}, 2, 0, 0, ""},
			{"no_v3", client.BacktestRequest{PolicyID: g.ID, Version: 3}, 0, 0, 0, "not_found"},
			{"other_dataset", client.BacktestRequest{PolicyID: og.ID}, 0, 0, 0, "not_found"},
			{"other_dataset_baseline", client.BacktestRequest{Policy: btRule, CompareTo: &client.BacktestRule{PolicyID: og.ID, Version: 1}}, 0, 0, 0, "not_found"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				got, err := ts.c.BacktestCompare(ctx, ds, tc.req)
				var ae *client.APIError
				switch {
				case tc.code != "":
					if !errors.As(err, &ae) || ae.Code != tc.code {
						t.Fatalf("error %v, want %s", err, tc.code)
					}
				case err != nil:
					t.Fatal(err)
				case got.Summary.NumTriggered != tc.triggered || got.Summary.BaselineTriggered != tc.base || got.Summary.NewlyTriggered != tc.new:
					t.Errorf("summary %+v", got.Summary)
				}
			})
		}
	})
}

// TestBacktestPanic: a panic while analysing a trace (an engine bug) is
// that trace's error frame; the run and the server go on.
func TestBacktestPanic(t *testing.T) {
	ts := newTestServer(t, openSQLite(t))
	ds, ids := backtestDataset(t, ts)
	backtestHooks.beforeTrace = func(_ context.Context, index int64) {
		if index == 2 {
			panic("engine bug")
		}
	}
	t.Cleanup(func() { backtestHooks.beforeTrace = nil })
	var bad []*client.BacktestFrame
	sum, err := ts.c.Backtest(t.Context(), ds, client.BacktestRequest{Policy: btRule}, func(f *client.BacktestFrame) error {
		if f.Status == "error" {
			bad = append(bad, f)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if sum.NumTraces != 5 || sum.NumErrors != 1 || sum.NumTriggered != 1 || len(bad) != 1 || bad[0].TraceID != ids[2] || !strings.Contains(bad[0].Error, "engine bug") {
		t.Errorf("summary %+v, error frames %+v", sum, bad)
	}
}

// TestBacktestClientStops: an error from the client's frame callback ends
// Backtest with that error, and the server's run is cancelled.
func TestBacktestClientStops(t *testing.T) {
	ts := newTestServer(t, openSQLite(t))
	if _, err := ts.c.Push(t.Context(), pushBatch("many", 40, 3)); err != nil {
		t.Fatal(err)
	}
	d, err := ts.c.GetDatasetByName(t.Context(), "admin", "many")
	if err != nil {
		t.Fatal(err)
	}
	ended := make(chan error, 1)
	backtestHooks.beforeTrace = func(ctx context.Context, index int64) {
		if index >= 2 {
			<-ctx.Done() // the later traces wait for the cancellation
		}
	}
	backtestHooks.done = func(_ int, err error) { ended <- err }
	t.Cleanup(func() { backtestHooks.beforeTrace, backtestHooks.done = nil, nil })
	stop := errors.New("seen enough")
	_, err = ts.c.Backtest(t.Context(), d.ID, client.BacktestRequest{Policy: btRule, MaxConcurrent: 2}, func(f *client.BacktestFrame) error {
		if f.TraceID != "" {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) {
		t.Errorf("Backtest = %v, want the callback's error", err)
	}
	if err := <-ended; !errors.Is(err, context.Canceled) {
		t.Errorf("the server's run ended with %v, want it cancelled", err)
	}
}

// TestBacktestStoreFindings: store:true files each violation as a
// finding once; a rerun updates the same findings.
func TestBacktestStoreFindings(t *testing.T) {
	forEachBackend(t, func(t *testing.T, ts *testServer) {
		ds, ids := backtestDataset(t, ts)
		ctx := t.Context()
		d, err := ts.st.GetDataset(ctx, ds)
		if err != nil {
			t.Fatal(err)
		}
		g := &store.Guardrail{DatasetID: ds, Name: "no-worse", Content: btBaseline, Enabled: true, Action: "log", Severity: "critical", UpdatedBy: d.OwnerID}
		if err := ts.st.CreateGuardrail(ctx, g, store.GuardrailCreated, ""); err != nil {
			t.Fatal(err)
		}
		run := func(req client.BacktestRequest) {
			t.Helper()
			req.Store = true
			if _, err := ts.c.Backtest(ctx, ds, req, nil); err != nil {
				t.Fatal(err)
			}
		}
		list := func(monitor string) []*store.Finding {
			t.Helper()
			fs, err := ts.st.ListFindings(ctx, store.FindingFilter{MonitorID: monitor})
			if err != nil {
				t.Fatal(err)
			}
			return fs
		}
		for range 2 { // the second run finds the same violations
			run(client.BacktestRequest{Policy: btRule})
			run(client.BacktestRequest{PolicyID: g.ID, Version: 1})
		}
		adhoc := list("adhoc:" + sha16(btRule))
		var runs []string
		for _, f := range adhoc {
			runs = append(runs, f.RunID)
			var c map[string]any
			json.Unmarshal(f.Context, &c)
			var cites []map[string]any
			json.Unmarshal(f.Citations, &cites)
			if f.Title != "bad word" || f.Severity != "warn" || f.Score != 0.6 || f.Status != "open" || f.OwnerID != d.OwnerID ||
				c["backtest"] != true || c["policy_hash"] == nil || len(cites) != 1 || cites[0]["nodeId"] == nil || f.NodeID == "" {
				t.Errorf("finding %+v context %s citations %s", f, f.Context, f.Citations)
			}
		}
		slices.Sort(runs)
		want := []string{ids[1], ids[2]}
		slices.Sort(want)
		if !slices.Equal(runs, want) {
			t.Errorf("ad-hoc findings on %v, want %v (one per violation, no duplicates after a rerun)", runs, want)
		}
		// The findings API shows them too.
		page, err := ts.c.Findings(ctx, client.FindingFilter{MonitorID: "adhoc:" + sha16(btRule)})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Findings) != 2 || page.Findings[0].Title != "bad word" || len(page.Findings[0].Citations) != 1 {
			t.Errorf("findings API: %+v", page)
		}
		byGuardrail := list(g.ID)
		if len(byGuardrail) != 2 {
			t.Fatalf("%d findings of the guardrail, want 2", len(byGuardrail))
		}
		for _, f := range byGuardrail {
			var c struct {
				Backtest  bool
				Guardrail map[string]any
			}
			json.Unmarshal(f.Context, &c)
			if f.Monitor != "no-worse" || f.Severity != "critical" || f.Score != 1 || !c.Backtest || c.Guardrail["id"] != g.ID || c.Guardrail["version"] != 1.0 {
				t.Errorf("guardrail finding %+v context %s", f, f.Context)
			}
		}
	})
}

// TestBacktestStoredPositions: a stored finding's key and citations name
// stored event positions (policy-language §11.4), not the engine's trace
// indices, which a tools element holding two tools shifts by one; so a
// backtest and a monitor that find the same violation write one finding.
func TestBacktestStoredPositions(t *testing.T) {
	forEachBackend(t, func(t *testing.T, ts *testServer) {
		ctx := t.Context()
		res, err := ts.c.Push(ctx, client.PushRequest{Dataset: "btpos", Messages: [][]any{{
			map[string]any{"role": "user", "content": "hi"},
			map[string]any{"tools": []any{map[string]any{"name": "t1", "description": "d"}, map[string]any{"name": "t2", "description": "e"}}},
			map[string]any{"role": "assistant", "content": "a bad one"},
		}}})
		if err != nil {
			t.Fatal(err)
		}
		d, err := ts.c.GetDatasetByName(ctx, "admin", "btpos")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ts.c.Backtest(ctx, d.ID, client.BacktestRequest{Policy: btRule, Store: true}, nil); err != nil {
			t.Fatal(err)
		}
		fs, err := ts.st.ListFindings(ctx, store.FindingFilter{RunID: res.ID[0]})
		if err != nil {
			t.Fatal(err)
		}
		tr, err := ts.st.GetTrace(ctx, res.ID[0], true)
		if err != nil {
			t.Fatal(err)
		}
		if len(fs) != 1 {
			t.Fatalf("%d findings, want 1", len(fs))
		}
		f := fs[0]
		wantCites := `[{"nodeId":"` + tr.Messages[2].NodeIDs[0] + `","address":"messages.2.content:2-5"}]`
		if f.Key != "(0, (2,))" || string(f.Citations) != wantCites || f.NodeID != tr.Messages[2].NodeIDs[0] {
			t.Errorf("finding key %q citations %s node %q,\nwant key %q citations %s", f.Key, f.Citations, f.NodeID, "(0, (2,))", wantCites)
		}
	})
}

// TestBacktestConcurrentRuns: runs at once over one dataset each see
// every trace once.
func TestBacktestConcurrentRuns(t *testing.T) {
	forEachBackend(t, func(t *testing.T, ts *testServer) {
		ds, _ := backtestDataset(t, ts)
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				n := 0
				sum, err := ts.c.Backtest(t.Context(), ds, client.BacktestRequest{Policy: btRule, MaxConcurrent: 3}, func(f *client.BacktestFrame) error {
					if f.TraceID != "" {
						n++
					}
					return nil
				})
				if err != nil || n != 5 || sum.NumTriggered != 2 {
					t.Errorf("run: %d frames, %+v, %v", n, sum, err)
				}
			})
		}
		wg.Wait()
	})
}

// sha16 is the ad-hoc monitor id suffix of a rule text (ledger.md §8.0).
func sha16(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:16]
}

// FuzzBacktestBody sends arbitrary bodies to both backtest endpoints of a
// real handler: each answer is a 200 or a 4xx with the JSON error shape,
// never a 5xx or a panic.
func FuzzBacktestBody(f *testing.F) {
	for _, s := range []string{
		`{"policy": ` + jsonString(btRule) + `}`,
		`{"policy": ` + jsonString(btRule) + `, "compare_to": {"policy": ` + jsonString(btBaseline) + `}, "limit": 2, "max_concurrent": 1}`,
		`{"policy": "raise \"p\" if:\n    (msg: Message)\n    input.needle in msg.content\n", "parameters": {"needle": ["x", 1, null]}}`,
		`{"policy_id": "x", "version": 1}`, `{"policy": null}`, `{"parameters": 3}`, `{"limit": 1e99}`, `[]`, `{`, `""`,
		`{"policy": "raise \"x\" if:\n    (msg: Message)\n", "query": "is:annotated", "store": true}`,
	} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	ts := newTestServer(f, openSQLite(f))
	req := client.PushRequest{Dataset: "bt"}
	for _, c := range []string{"fine", "bad"} {
		req.Messages = append(req.Messages, []any{map[string]any{"role": "user", "content": c}})
	}
	if _, err := ts.c.Push(context.Background(), req); err != nil {
		f.Fatal(err)
	}
	d, err := ts.c.GetDatasetByName(context.Background(), "admin", "bt")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte, compare bool) {
		path := "/api/v1/dataset/byid/" + d.ID + "/policy-check"
		if !compare {
			path += "/stream"
		}
		req := httptest.NewRequest("POST", path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+adminKey)
		w := httptest.NewRecorder()
		ts.srv.ServeHTTP(w, req)
		switch {
		case w.Code == 200:
		case w.Code >= 400 && w.Code < 500:
			var e struct{ Detail, Code string }
			if json.Unmarshal(w.Body.Bytes(), &e) != nil || e.Detail == "" || e.Code == "" {
				t.Fatalf("%d %q for %q", w.Code, w.Body, body)
			}
		default:
			t.Fatalf("%d %q for %q", w.Code, w.Body, body)
		}
	})
}

// TestBacktestCleanFrame: the directly written frame of a clean trace is
// the one encoding/json writes for it.
func TestBacktestCleanFrame(t *testing.T) {
	for _, tc := range []struct {
		id    string
		index int64
	}{{"01a21692-6335-7000-93c8-eaf9df50ae9a", 0}, {"x", 123456789}, {"a b~", -1}} {
		if !plainJSONString(tc.id) {
			t.Fatalf("%q is not plain", tc.id)
		}
		no := false
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(backtestFrame{TraceID: tc.id, Index: tc.index, Status: "success", Triggered: &no, Errors: []policy.Violation{}}); err != nil {
			t.Fatal(err)
		}
		want := "data: " + strings.TrimSuffix(buf.String(), "\n") + "\n\n"
		if got := string(appendCleanFrame(nil, tc.id, tc.index)); got != want {
			t.Errorf("frame %q, want %q", got, want)
		}
	}
	for _, s := range []string{`a"b`, `a\b`, "a\nb", "é", "a\u2028", "\x7f"} {
		if plainJSONString(s) {
			t.Errorf("%q is plain", s)
		}
	}
}
