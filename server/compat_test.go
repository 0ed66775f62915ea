package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/vigilhq/vigil/client"
)

// These tests drive the server with raw requests shaped exactly as
// Invariant's Python SDK (invariant-sdk) sends them: push with null
// annotations/metadata, push with everything, append, dataset metadata.

func TestInvariantSDKFlow(t *testing.T) {
	forEachBackend(t, func(t *testing.T, ts *testServer) {
		// invariant-sdk: create_request_and_push_trace(messages=[[...]], dataset="sdk")
		status, body := ts.do(t, "POST", "/api/v1/push/trace", adminKey, `{
			"messages": [[{"role": "user", "content": "What is the weather?"},
			              {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
			                "function": {"name": "get_weather", "arguments": "{\"city\": \"Zurich\"}"}}]},
			              {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}]],
			"annotations": null, "metadata": null, "dataset": "sdk"}`)
		if status != 200 {
			t.Fatalf("push: %d %s", status, body)
		}
		var pr struct {
			ID       []string `json:"id"`
			Dataset  string   `json:"dataset"`
			Username string   `json:"username"`
		}
		if err := json.Unmarshal(body, &pr); err != nil || len(pr.ID) != 1 || pr.Dataset != "sdk" || pr.Username != "admin" {
			t.Fatalf("push response %s", body)
		}
		traceID := pr.ID[0]

		// Push with annotations and metadata, two traces.
		status, body = ts.do(t, "POST", "/api/v1/push/trace", adminKey, map[string]any{
			"messages": []any{
				[]any{map[string]any{"role": "user", "content": "one"}},
				[]any{map[string]any{"role": "user", "content": "two"}, map[string]any{"role": "assistant", "content": "2"}},
			},
			"annotations": []any{
				[]any{map[string]any{"content": "first word", "address": "messages.0.content:0-3", "extra_metadata": map[string]any{"source": "analyzer", "severity": 0.5}}},
				[]any{},
			},
			"metadata": []any{map[string]any{"name": "run one", "hierarchy_path": []string{"a", "b"}, "uploader": "x"}, map[string]any{"k": 1}},
			"dataset":  "sdk",
		})
		if status != 200 {
			t.Fatalf("push 2: %d %s", status, body)
		}
		var pr2 struct{ ID []string }
		json.Unmarshal(body, &pr2)

		// Indices are 0, 1, 2 in push order.
		d, err := ts.c.GetDatasetByName(context.Background(), "admin", "sdk")
		if err != nil {
			t.Fatal(err)
		}
		rows, err := ts.c.ListTraces(context.Background(), d.ID, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != 3 || rows[0].ID != traceID || rows[1].Index != 1 || rows[2].Index != 2 {
			t.Fatalf("trace rows %+v", rows)
		}
		if rows[1].Name == nil || *rows[1].Name != "run one" || rows[1].AnnotationsBySource["analyzer"] != 1 {
			t.Errorf("row 1 = %+v", rows[1])
		}
		if _, ok := rows[1].ExtraMetadata["uploader"]; ok {
			t.Errorf("uploader was stored: %v", rows[1].ExtraMetadata)
		}

		// Tool arguments were normalised to an object; message ids added.
		tr, err := ts.c.GetTrace(context.Background(), traceID, true)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(tr.Messages[1]), `"arguments":{"city":"Zurich"}`) || !strings.Contains(string(tr.Messages[0]), `"message_id":`) {
			t.Errorf("messages not normalised: %s", tr.Messages[1])
		}

		// invariant-sdk: append_messages(trace_id, messages=[...], annotations=[...])
		status, body = ts.do(t, "POST", "/api/v1/trace/"+traceID+"/messages", adminKey, `{
			"messages": [{"role": "assistant", "content": "It is sunny in Zurich.", "timestamp": "2025-01-23T10:30:00+01:00"}],
			"annotations": [{"content": "good", "address": "messages.3.content:0-5", "extra_metadata": {}}]}`)
		if status != 200 || !strings.Contains(string(body), `"success":true`) {
			t.Fatalf("append: %d %s", status, body)
		}
		tr, _ = ts.c.GetTrace(context.Background(), traceID, true)
		if len(tr.Messages) != 4 || !strings.Contains(string(tr.Messages[3]), `"timestamp":"2025-01-23T09:30:00.000000Z"`) {
			t.Fatalf("after append: %d messages, last %s", len(tr.Messages), tr.Messages[len(tr.Messages)-1])
		}
		if len(tr.Annotations) != 1 || tr.Annotations[0].Address != "messages.3.content:0-5" || !tr.Annotations[0].Resolved {
			t.Errorf("append annotation = %+v", tr.Annotations)
		}

		// invariant-sdk: get_dataset_metadata / update_dataset_metadata
		status, body = ts.do(t, "GET", "/api/v1/dataset/metadata/sdk", adminKey, nil)
		if status != 200 || !strings.Contains(string(body), `"created_on"`) {
			t.Fatalf("metadata get: %d %s", status, body)
		}
		status, body = ts.do(t, "PUT", "/api/v1/dataset/metadata/sdk", adminKey, `{"metadata": {"benchmark": "b1", "accuracy": 0.5, "extra": [1]}, "replace_all": false}`)
		if status != 200 || !strings.Contains(string(body), `"benchmark":"b1"`) || !strings.Contains(string(body), `"created_on"`) {
			t.Fatalf("metadata put: %d %s", status, body)
		}
		status, body = ts.do(t, "PUT", "/api/v1/dataset/metadata/sdk", adminKey, `{"metadata": {"accuracy": 1}, "replace_all": true}`)
		if status != 200 || strings.Contains(string(body), "benchmark") || !strings.Contains(string(body), "created_on") {
			t.Fatalf("metadata replace_all: %d %s", status, body)
		}

		// Identity, as gateways call it.
		status, body = ts.do(t, "GET", "/api/v1/user/identity", adminKey, nil)
		if status != 200 || !strings.Contains(string(body), `"username":"admin"`) {
			t.Fatalf("identity: %d %s", status, body)
		}

		// Trace download is one JSONL line.
		line, err := ts.c.DownloadTrace(context.Background(), traceID)
		if err != nil || !strings.HasPrefix(string(line), `{"index":0,"id":"`+traceID) || strings.Count(string(line), "\n") != 1 {
			t.Fatalf("download: %v %s", err, line)
		}

		// Delete the trace, then it is gone.
		if err := ts.c.DeleteTrace(context.Background(), traceID); err != nil {
			t.Fatal(err)
		}
		if _, err := ts.c.GetTrace(context.Background(), traceID, false); !client.IsNotFound(err) {
			t.Fatalf("get deleted trace: %v", err)
		}
	})
}

func TestDatasetsAndAnnotations(t *testing.T) {
	forEachBackend(t, func(t *testing.T, ts *testServer) {
		ctx := context.Background()
		d, err := ts.c.CreateDataset(ctx, "ds-1", map[string]any{"benchmark": "x"}, false)
		if err != nil {
			t.Fatal(err)
		}
		if d.ExtraMetadata["created_on"] == nil || d.NumTraces == nil || *d.NumTraces != 0 {
			t.Errorf("created dataset %+v", d)
		}
		if _, err := ts.c.CreateDataset(ctx, "ds-1", nil, false); err == nil || !strings.Contains(err.Error(), "dataset_exists") {
			t.Errorf("duplicate create: %v", err)
		}
		list, err := ts.c.ListDatasets(ctx, "private")
		if err != nil || len(list) != 1 || list[0].Name != "ds-1" {
			t.Fatalf("list: %v %+v", err, list)
		}
		res, err := ts.c.Push(ctx, client.PushRequest{Dataset: "ds-1", Messages: [][]any{{map[string]any{"role": "user", "content": "hello world"}}}})
		if err != nil {
			t.Fatal(err)
		}
		tid := res.ID[0]
		a, err := ts.c.Annotate(ctx, tid, client.AnnotationCreate{Content: "greeting", Address: "messages[0].content:0-5"})
		if err != nil {
			t.Fatal(err)
		}
		if a.Address != "messages.0.content:0-5" || !a.Resolved || a.User == nil || a.User.Username != "admin" {
			t.Errorf("annotation %+v", a)
		}
		bad, err := ts.c.Annotate(ctx, tid, client.AnnotationCreate{Content: "x", Address: "messages.7.content"})
		if err != nil || bad.Resolved {
			t.Errorf("unresolvable annotation: %v %+v", err, bad)
		}
		if _, err := ts.c.Annotate(ctx, tid, client.AnnotationCreate{Content: "x", Address: "nonsense"}); err == nil || !strings.Contains(err.Error(), "invalid_address") {
			t.Errorf("bad address: %v", err)
		}
		c := "updated"
		up, err := ts.c.UpdateAnnotation(ctx, tid, a.ID, &c, map[string]any{"status": "accepted"})
		if err != nil || up.Content != "updated" || up.ExtraMetadata["status"] != "accepted" {
			t.Fatalf("update: %v %+v", err, up)
		}
		if err := ts.c.DeleteAnnotation(ctx, tid, bad.ID); err != nil {
			t.Fatal(err)
		}
		anns, err := ts.c.Annotations(ctx, tid)
		if err != nil || len(anns) != 1 || anns[0].ID != a.ID {
			t.Fatalf("annotations: %v %+v", err, anns)
		}
		// Replace by source keeps accepted ones.
		status, body := ts.do(t, "POST", "/api/v1/trace/"+tid+"/annotations/update", adminKey,
			`{"source": "user", "annotations": [{"content": "new", "address": "messages.0"}]}`)
		if status != 200 || string(body) != "{\"deleted\":0,\"inserted\":1}\n" {
			t.Fatalf("replace: %d %s", status, body)
		}
		// Public flag via Invariant's {"content": bool}.
		status, body = ts.do(t, "PUT", "/api/v1/dataset/byid/"+d.ID, adminKey, `{"content": true}`)
		if status != 200 || !strings.Contains(string(body), `"is_public":true`) {
			t.Fatalf("make public: %d %s", status, body)
		}
		if err := ts.c.DeleteDataset(ctx, d.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := ts.c.GetDataset(ctx, d.ID); !client.IsNotFound(err) {
			t.Fatalf("deleted dataset: %v", err)
		}
		// The run's ledger session survives the delete, closed.
		status, body = ts.do(t, "GET", "/api/v1/ledger/sessions/"+tid, adminKey, nil)
		if status != http.StatusOK || !strings.Contains(string(body), `"status":"closed"`) {
			t.Errorf("session after delete: %d %s", status, body)
		}
	})
}
