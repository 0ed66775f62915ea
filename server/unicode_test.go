package server

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/vigilhq/vigil/client"
)

// TestInvalidUTF8Rejected: invalid UTF-8 anywhere in a request is a 400
// naming the JSON path of its string, on every ingest path; nothing is
// stored. (It was replaced by U+FFFD and acknowledged, so the stored and
// signed event differed from the one sent.)
func TestInvalidUTF8Rejected(t *testing.T) {
	forEachBackend(t, func(t *testing.T, ts *testServer) {
		ctx := context.Background()
		res, err := ts.c.Push(ctx, client.PushRequest{Dataset: "u", Messages: [][]any{{map[string]any{"role": "user", "content": "ok"}}}})
		if err != nil {
			t.Fatal(err)
		}
		id := res.ID[0]
		for _, tc := range []struct {
			name, method, path, body, where string
		}{
			{"push_content", "POST", "/api/v1/push/trace", `{"dataset": "u", "messages": [[{"role": "user", "content": "a` + "\xff" + `b"}]]}`, "content"},
			{"push_nested", "POST", "/api/v1/push/trace", `{"dataset": "u", "messages": [[{"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": {"k": "` + "\xc3" + `"}}}]}]]}`, "arguments"},
			{"push_metadata", "POST", "/api/v1/push/trace", `{"dataset": "u", "messages": [[{"role": "user", "content": "x"}]], "metadata": [{"note": "` + "\xed\xa0\x80" + `"}]}`, "note"},
			{"push_annotation", "POST", "/api/v1/push/trace", `{"dataset": "u", "messages": [[{"role": "user", "content": "x"}]], "annotations": [[{"content": "` + "\xfe" + `", "address": "messages.0"}]]}`, "content"},
			{"append", "POST", "/api/v1/trace/" + id + "/messages", `{"messages": [{"role": "user", "content": "` + "\x80" + `"}]}`, "content"},
			{"annotate", "POST", "/api/v1/trace/" + id + "/annotate", `{"content": "` + "\xff" + `", "address": "messages.0"}`, "content"},
			{"dataset_metadata", "PUT", "/api/v1/dataset/metadata/u", `{"metadata": {"benchmark": "` + "\xff" + `"}}`, "benchmark"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				st, body := ts.do(t, tc.method, tc.path, adminKey, tc.body)
				if st != 400 || !strings.Contains(string(body), "UTF-8") || !strings.Contains(string(body), tc.where) {
					t.Errorf("%d %s, want a 400 naming invalid UTF-8 at %s", st, body, tc.where)
				}
			})
		}
		t.Run("upload", func(t *testing.T) {
			up := multipartUpload("upl", `[{"role": "user", "content": "fine"}]`+"\n"+`[{"role": "user", "content": "x`+"\xff"+`"}]`+"\n")
			resp, out := ts.sendKeyed(t, up, "", adminKey)
			if resp.StatusCode != 400 || !strings.Contains(string(out), "UTF-8") || !strings.Contains(string(out), "line 2") {
				t.Errorf("upload: %d %s, want a 400 naming invalid UTF-8 on line 2", resp.StatusCode, out)
			}
		})
		st, body := ts.do(t, "GET", "/api/v1/trace/"+id+"?annotated=1", adminKey, nil)
		if st != 200 || !strings.Contains(string(body), `"ok"`) || strings.Contains(string(body), "\uFFFD") || strings.Count(string(body), `"role"`) != 1 {
			t.Errorf("trace after refused requests: %d %s", st, body)
		}
	})
}

// TestLoneSurrogatesKept: a lone surrogate escape is kept exactly as sent
// (ledger.md §2.1), on every ingest path and both backends: served back as
// the same escape, and the run verifies. (It was rewritten to U+FFFD.)
func TestLoneSurrogatesKept(t *testing.T) {
	forEachBackend(t, func(t *testing.T, ts *testServer) {
		const lone = `\ud800x\udfff`
		st, body := ts.do(t, "POST", "/api/v1/push/trace", adminKey, `{"dataset": "s", "messages": [[{"role": "user", "content": "`+lone+`"}]],
			"metadata": [{"note": "`+lone+`"}], "annotations": [[{"content": "`+lone+`", "address": "messages.0"}]]}`)
		if st != 200 {
			t.Fatalf("push: %d %s", st, body)
		}
		var pr struct{ ID []string }
		if err := json.Unmarshal(body, &pr); err != nil {
			t.Fatal(err)
		}
		id := pr.ID[0]
		for _, rq := range []struct{ method, path, body string }{
			{"POST", "/api/v1/trace/" + id + "/messages", `{"messages": [{"role": "assistant", "content": "` + lone + `"}]}`},
			{"POST", "/api/v1/trace/" + id + "/annotate", `{"content": "` + lone + `", "address": "messages.1"}`},
		} {
			if st, body := ts.do(t, rq.method, rq.path, adminKey, rq.body); st != 200 {
				t.Fatalf("%s %s: %d %s", rq.method, rq.path, st, body)
			}
		}
		st, body = ts.do(t, "GET", "/api/v1/trace/"+id+"?annotated=1", adminKey, nil)
		if st != 200 || strings.Count(string(body), lone) < 3 || strings.Contains(string(body), "\uFFFD") || strings.Contains(string(body), `\ufffd`) {
			t.Errorf("trace: %d %s, want %s kept in both events and the metadata", st, body, lone)
		}
		st, body = ts.do(t, "GET", "/api/v1/trace/"+id+"/annotations", adminKey, nil)
		if st != 200 || strings.Count(string(body), lone) != 2 {
			t.Errorf("annotations: %d %s, want %s kept in both", st, body, lone)
		}
		st, body = ts.do(t, "GET", "/api/v1/runs/"+id+"/verify", adminKey, nil)
		if st != 200 || !strings.Contains(string(body), `"valid":true`) {
			t.Errorf("verify: %d %s", st, body)
		}
		// Dataset metadata and an uploaded JSONL file.
		if st, body := ts.do(t, "PUT", "/api/v1/dataset/metadata/s", adminKey, `{"metadata": {"note": "`+lone+`"}}`); st != 200 || !strings.Contains(string(body), lone) {
			t.Errorf("dataset metadata: %d %s", st, body)
		}
		up := multipartUpload("uploaded", `[{"role": "user", "content": "`+lone+`"}]`+"\n")
		resp, out := ts.sendKeyed(t, up, "", adminKey)
		if resp.StatusCode != 200 {
			t.Fatalf("upload: %d %s", resp.StatusCode, out)
		}
		st, body = ts.do(t, "GET", "/api/v1/dataset/byuser/admin/uploaded/traces", adminKey, nil)
		var traces []struct{ ID string }
		if err := json.Unmarshal(body, &traces); err != nil || st != 200 || len(traces) != 1 {
			t.Fatalf("uploaded traces: %d %s", st, body)
		}
		st, body = ts.do(t, "GET", "/api/v1/trace/"+traces[0].ID, adminKey, nil)
		if st != 200 || !strings.Contains(string(body), `"content":"`+lone+`"`) {
			t.Errorf("uploaded trace: %d %s", st, body)
		}
	})
}

// TestNULNameSameOnBothBackends: a NUL in a name or id the store keeps in
// a column is the same 400 on every backend (SQLite stored it; PostgreSQL
// refused it), and nothing is stored.
func TestNULNameSameOnBothBackends(t *testing.T) {
	forEachBackend(t, func(t *testing.T, ts *testServer) {
		for _, rq := range []struct{ method, path, body string }{
			{"POST", "/api/v1/push/trace", `{"dataset": "nul", "messages": [[{"role": "user", "content": "x"}]], "metadata": [{"name": "a\u0000b"}]}`},
			{"POST", "/api/v1/users", `{"username": "carol", "email": "c\u0000@example.com"}`},
			{"POST", "/api/v1/keys/create", `{"name": "k\u0000"}`},
			{"POST", "/v1/sessions", `{"id": "s\u0000", "name": "n"}`},
			{"POST", "/v1/sessions", `{"id": "nul-name", "name": "n\u0000"}`},
		} {
			st, body := ts.do(t, rq.method, rq.path, adminKey, rq.body)
			if st != 400 || !strings.Contains(string(body), "NUL") {
				t.Errorf("%s %s %s: %d %s, want a 400 naming the NUL", rq.method, rq.path, rq.body, st, body)
			}
		}
		st, body := ts.do(t, "GET", "/api/v1/users", adminKey, nil)
		if st != 200 || strings.Contains(string(body), "carol") {
			t.Errorf("a refused user was stored: %s", body)
		}
		if st, body := ts.do(t, "GET", "/v1/sessions/nul-name", adminKey, nil); st != 404 {
			t.Errorf("a refused session was stored: %d %s", st, body)
		}
	})
}
