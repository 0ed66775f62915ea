package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/vigilhq/vigil/client"
	"github.com/vigilhq/vigil/store"
)

// TestFindingAnnotations: a trace's findings are served as read-only
// guardrails-error annotations (explorer-api §15) by the annotation list,
// the trace object, the trace download, the dataset export and the trace
// list's annotations_by_source, alongside the stored ones; PUT and DELETE
// on them get 409 read_only and …/annotations/update leaves them alone.
func TestFindingAnnotations(t *testing.T) {
	forEachBackend(t, func(t *testing.T, ts *testServer) {
		ctx := t.Context()
		run := pushRun(t, ts.c, "fa", nil)
		tr, err := ts.st.GetTrace(ctx, run, true)
		if err != nil {
			t.Fatal(err)
		}
		m0, m1 := tr.Messages[0], tr.Messages[1]
		if code, b := ts.do(t, "POST", "/api/v1/trace/"+run+"/annotate", adminKey,
			map[string]any{"content": "looks odd", "address": "messages.0.content:0-4"}); code != http.StatusOK {
			t.Fatalf("annotate: %d %s", code, b)
		}
		mon := addFinding(t, ts, run, "g-mail", "(0, (0, 1))", "critical", 1,
			m0.NodeIDs[0]+"@messages.0.content:5-20", m1.NodeIDs[1]+"@messages.1.tool_calls.0.function.arguments.to")
		ctxJSON := json.RawMessage(`{"source":"monitor","guardrail":{"id":"g-mail","name":"no mail","version":2}}`)
		mon.Context = ctxJSON
		if _, _, err := ts.st.UpsertFinding(ctx, mon); err != nil {
			t.Fatal(err)
		}
		whole := addFinding(t, ts, run, "adhoc:0123456789abcdef", "(1, ())", "info", 0.3)
		whole.Context = json.RawMessage(`{"backtest":true,"policy_hash":"0123"}`)
		if _, _, err := ts.st.UpsertFinding(ctx, whole); err != nil {
			t.Fatal(err)
		}
		gone := addFinding(t, ts, run, "g-mail", "(0, (7,))", "warn", 0.6, "@messages.7.content")

		type ann struct {
			ID            string         `json:"id"`
			TraceID       string         `json:"trace_id"`
			Content       string         `json:"content"`
			Address       string         `json:"address"`
			ExtraMetadata map[string]any `json:"extra_metadata"`
			User          *userRef       `json:"user"`
			MessageID     *string        `json:"message_id"`
			Resolved      bool           `json:"resolved"`
		}
		list := func(query string) []ann {
			t.Helper()
			code, b := ts.do(t, "GET", "/api/v1/trace/"+run+"/annotations"+query, adminKey, nil)
			if code != http.StatusOK {
				t.Fatalf("annotations%s: %d %s", query, code, b)
			}
			var out []ann
			if err := json.Unmarshal(b, &out); err != nil {
				t.Fatal(err)
			}
			return out
		}
		all := list("")
		summary := func(as []ann) string {
			var parts []string
			for _, a := range as {
				parts = append(parts, a.ID+" "+a.Address)
			}
			return strings.Join(parts, "\n")
		}
		var userID string
		if len(all) > 0 {
			userID = all[0].ID
		}
		want := strings.Join([]string{
			userID + " messages.0.content:0-4",
			mon.ID + ".0 messages.0.content:5-20",
			mon.ID + ".1 messages.1.tool_calls.0.function.arguments.to",
			whole.ID + ".0 <root>",
			gone.ID + ".0 messages.7.content",
		}, "\n")
		if got := summary(all); got != want {
			t.Fatalf("annotations (by time created)\n got %s\nwant %s", got, want)
		}
		a := all[1]
		md := a.ExtraMetadata
		g, _ := md["guardrail"].(map[string]any)
		if a.Content != "found (0, (0, 1))" || a.TraceID != run || a.User != nil || !a.Resolved || a.MessageID == nil || *a.MessageID != m0.ID ||
			md["source"] != "guardrails-error" || md["finding_id"] != mon.ID || md["status"] != "open" || md["severity"] != "critical" ||
			md["score"] != 1.0 || md["key"] != "(0, (0, 1))" || md["monitor"] != "g-mail-name" || md["monitor_id"] != "g-mail" ||
			g["id"] != "g-mail" || g["version"] != 2.0 || md["backtest"] != nil {
			t.Errorf("monitor finding annotation %+v", a)
		}
		if md := all[3].ExtraMetadata; md["backtest"] != true || md["finding_id"] != whole.ID || all[3].MessageID != nil || !all[3].Resolved {
			t.Errorf("backtest finding annotation %+v", all[3])
		}
		if all[4].Resolved || all[4].MessageID != nil {
			t.Errorf("a citation of a missing event is unresolved: %+v", all[4])
		}
		if got := list("?address_form=id")[2].Address; got != "messages.@"+m1.ID+".tool_calls.0.function.arguments.to" {
			t.Errorf("id form address %q", got)
		}
		if got := summary(list("?source=user")); got != userID+" messages.0.content:0-4" {
			t.Errorf("source=user lists %q, want only the stored comment", got)
		}
		if got := list("?source=guardrails-error"); len(got) != 4 || got[0].ID != mon.ID+".0" {
			t.Errorf("source=guardrails-error lists\n%s", summary(got))
		}

		// The trace object and its download carry them too.
		tj, err := ts.c.GetTrace(ctx, run, true)
		if err != nil {
			t.Fatal(err)
		}
		if len(tj.Annotations) != 5 || tj.Annotations[1].ID != mon.ID+".0" {
			t.Errorf("trace object annotations: %+v", tj.Annotations)
		}
		for _, path := range []string{"/api/v1/trace/" + run + "/download", "/api/v1/dataset/byid/" + tr.DatasetID + "/download"} {
			code, b := ts.do(t, "GET", path, adminKey, nil)
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")
			var line struct {
				Annotations []struct {
					Content       string         `json:"content"`
					Address       string         `json:"address"`
					ExtraMetadata map[string]any `json:"extra_metadata"`
				} `json:"annotations"`
			}
			if code != http.StatusOK || json.Unmarshal([]byte(lines[len(lines)-1]), &line) != nil {
				t.Fatalf("%s: %d %s", path, code, b)
			}
			if n := len(line.Annotations); n != 5 || line.Annotations[2].Address != "messages.1.tool_calls.0.function.arguments.to" ||
				line.Annotations[2].ExtraMetadata["finding_id"] != mon.ID || line.Annotations[2].Content != "found (0, (0, 1))" {
				t.Errorf("%s annotations: %+v", path, line.Annotations)
			}
		}

		// The trace list counts them by source.
		code, b := ts.do(t, "GET", "/api/v1/dataset/byid/"+tr.DatasetID+"/traces", adminKey, nil)
		var rows []struct {
			AnnotationsBySource map[string]int `json:"annotations_by_source"`
		}
		if code != http.StatusOK || json.Unmarshal(b, &rows) != nil || len(rows) != 1 {
			t.Fatalf("traces: %d %s", code, b)
		}
		if got := rows[0].AnnotationsBySource; got["guardrails-error"] != 4 || got["user"]+got[""] != 1 {
			t.Errorf("annotations_by_source %v, want 4 guardrails-error and the stored one", got)
		}

		// Read-only: writes are refused, the replace endpoint leaves them.
		for _, method := range []string{"PUT", "DELETE"} {
			code, b := ts.do(t, method, "/api/v1/trace/"+run+"/annotation/"+mon.ID+".1", adminKey, map[string]any{"content": "x"})
			var e struct{ Code, Detail string }
			if json.Unmarshal(b, &e); code != http.StatusConflict || e.Code != CodeReadOnly || !strings.Contains(e.Detail, "read-only") {
				t.Errorf("%s on a finding annotation: %d %s, want 409 read_only", method, code, b)
			}
		}
		if code, b := ts.do(t, "POST", "/api/v1/trace/"+run+"/annotations/update", adminKey,
			map[string]any{"source": "guardrails-error", "annotations": []any{}}); code != http.StatusOK {
			t.Fatalf("annotations/update: %d %s", code, b)
		}
		if got := list("?source=guardrails-error"); len(got) != 4 {
			t.Errorf("after annotations/update: %d finding annotations, want 4", len(got))
		}
		if f, err := ts.st.GetFinding(ctx, mon.ID); err != nil || f.Status != store.FindingOpen {
			t.Errorf("finding after the writes: %+v, %v", f, err)
		}
	})
}

// TestBacktestFindingAnnotations: findings a backtest stores are served
// as guardrails-error annotations with extra_metadata.backtest true.
func TestBacktestFindingAnnotations(t *testing.T) {
	forEachBackend(t, func(t *testing.T, ts *testServer) {
		ds, ids := backtestDataset(t, ts)
		if _, err := ts.c.Backtest(t.Context(), ds, client.BacktestRequest{Policy: btRule, Store: true}, nil); err != nil {
			t.Fatal(err)
		}
		for i, id := range ids {
			code, b := ts.do(t, "GET", "/api/v1/trace/"+id+"/annotations?source=guardrails-error", adminKey, nil)
			var as []annotationJSON
			if code != http.StatusOK || json.Unmarshal(b, &as) != nil {
				t.Fatalf("annotations of trace %d: %d %s", i, code, b)
			}
			triggered := i == 1 || i == 2 // "bad" and "bad and worse"
			if !triggered {
				if len(as) != 0 {
					t.Errorf("trace %d: %s, want no annotation", i, b)
				}
				continue
			}
			var md map[string]any
			json.Unmarshal(as[0].ExtraMetadata, &md)
			if len(as) != 1 || as[0].Content != "bad word" || as[0].Address != "messages.0.content:0-3" || md["backtest"] != true ||
				md["monitor_id"] != "adhoc:"+sha16(btRule) || !as[0].Resolved {
				t.Errorf("trace %d: %s", i, b)
			}
		}
	})
}
