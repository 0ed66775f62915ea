package server

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/vigilhq/vigil/client"
	"github.com/vigilhq/vigil/store"
)

func TestSnippetsSharingAndViews(t *testing.T) {
	forEachBackend(t, func(t *testing.T, ts *testServer) {
		ctx := context.Background()
		call := func(method, path, key, body string, status int, want ...string) string {
			t.Helper()
			var b any
			if body != "" {
				b = body
			}
			st, out := ts.do(t, method, path, key, b)
			if st != status {
				t.Fatalf("%s %s: %d %s, want %d", method, path, st, out, status)
			}
			for _, w := range want {
				if !strings.Contains(string(out), w) {
					t.Fatalf("%s %s: %s lacks %s", method, path, out, w)
				}
			}
			return string(out)
		}
		var sn struct{ ID string }
		json.Unmarshal([]byte(call("POST", "/api/v1/trace/snippets/new", adminKey,
			`{"content": [{"role": "user", "content": "snip"}], "name": "s1", "extra_metadata": {"k": 1}}`, 200, `"id":"`)), &sn)
		call("GET", "/api/v1/trace/snippets", adminKey, "", 200, `"id":"`+sn.ID+`"`, `"name":"s1"`, `"dataset":null`, `"content":"snip"`)
		call("GET", "/api/v1/runs/"+sn.ID+"/verify", adminKey, "", 200, `"valid":true`)
		call("PATCH", "/api/v1/trace/"+sn.ID, adminKey, `{"name": "renamed", "hierarchy_path": ["a"], "metadata_merge": {"k": null, "j": 2}}`, 200,
			`"name":"renamed"`, `"hierarchy_path":["a"]`, `"extra_metadata":{"j":2}`)
		call("PATCH", "/api/v1/trace/"+sn.ID, adminKey, `{"metadata_merge": 3}`, 400, "metadata_merge must be an object")

		// Link sharing: another user cannot read a snippet until it is shared.
		bob := &store.User{Username: "bob", Role: store.RoleMember}
		ts.st.CreateUser(ctx, bob)
		bk, _ := ts.c.CreateKey(ctx, client.KeyCreate{User: "bob", Scope: "full"})
		call("GET", "/api/v1/trace/"+sn.ID, bk.Key, "", 404)
		call("GET", "/api/v1/trace/"+sn.ID+"/shared", adminKey, "", 200, `{"shared":false}`)
		call("PUT", "/api/v1/trace/"+sn.ID+"/shared", bk.Key, "", 404)
		call("PUT", "/api/v1/trace/"+sn.ID+"/shared", adminKey, "", 200, `{"shared":true}`)
		call("GET", "/api/v1/trace/"+sn.ID, bk.Key, "", 200, `"name":"renamed"`)
		call("DELETE", "/api/v1/trace/"+sn.ID+"/shared", adminKey, "", 200, `{"shared":false}`)
		call("GET", "/api/v1/trace/"+sn.ID, bk.Key, "", 404)

		// Dataset index and full views.
		if _, err := ts.c.Upload(ctx, "views", strings.NewReader(uploadFile), client.UploadOptions{}); err != nil {
			t.Fatal(err)
		}
		call("GET", "/api/v1/dataset/byuser/admin/views/indices", adminKey, "", 200, `[{"index":3,"id":"`, `"name":"three"`, `"messages":[]`)
		call("GET", "/api/v1/dataset/byuser/admin/views/full", adminKey, "", 200, `"name":"views"`, `"num_traces":2`,
			`"traces":[{"id":"`, `"annotations":[{"id":"`, `"address":"messages.1.content:0-5"`)
		call("GET", "/api/v1/dataset/byuser/admin/nope/full", adminKey, "", 404)
	})
	ts := newTestServer(t, openSQLite(t), func(c *Config) { c.SharingDisabled = true })
	res, _ := ts.c.Push(context.Background(), client.PushRequest{Messages: [][]any{{map[string]any{"role": "user"}}}})
	if st, body := ts.do(t, "PUT", "/api/v1/trace/"+res.ID[0]+"/shared", adminKey, nil); st != 403 || !strings.Contains(string(body), "sharing is disabled") {
		t.Fatalf("share with sharing disabled: %d %s", st, body)
	}
}
