package server

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/vigilhq/vigil/client"
)

// TestMCPSessionTraceEndpoint: a push whose metadata has a string
// "session_key" gives the trace that session key, and GET
// /api/v1/mcp/session-trace finds the caller's trace by it, with an
// ingest-scope key; other owners' traces and bad queries are not found.
func TestMCPSessionTraceEndpoint(t *testing.T) {
	forEachBackend(t, func(t *testing.T, ts *testServer) {
		ctx := context.Background()
		ingest, err := ts.c.CreateKey(ctx, client.KeyCreate{Scope: "ingest"})
		if err != nil {
			t.Fatal(err)
		}
		push := func(md string) string {
			code, b := ts.do(t, "POST", "/api/v1/push/trace", ingest.Key,
				`{"messages": [[{"role": "user", "content": "hi"}]], "metadata": [`+md+`], "dataset": "agents"}`)
			if code != 200 {
				t.Fatalf("push: %d %s", code, b)
			}
			var out struct{ ID []string }
			_ = json.Unmarshal(b, &out)
			return out.ID[0]
		}
		id := push(`{"session_key": "h:agent-1", "x": 1}`)
		push(`{"session_key": 7}`) // not a string: no session key
		push(`{"session_key": "` + strings.Repeat("k", 300) + `"}`)

		var tr struct {
			SessionKey *string        `json:"session_key"`
			Metadata   map[string]any `json:"extra_metadata"`
		}
		if err := ts.c.Raw(ctx, "GET", "/api/v1/trace/"+id, nil, &tr); err != nil {
			t.Fatal(err)
		}
		if tr.SessionKey == nil || *tr.SessionKey != "h:agent-1" {
			t.Fatalf("session_key %v, want h:agent-1", tr.SessionKey)
		}
		tests := []struct {
			name, key, query string
			code             int
			want             string
		}{
			{"found", ingest.Key, "dataset=agents&session_key=h:agent-1", 200, `"trace_id":"` + id + `"`},
			{"other key", ingest.Key, "dataset=agents&session_key=h:agent-2", 200, `"trace_id":null`},
			{"no dataset yet", ingest.Key, "dataset=none&session_key=h:agent-1", 200, `"trace_id":null`},
			{"missing key", ingest.Key, "dataset=agents", 400, "session_key"},
			{"too long", ingest.Key, "dataset=agents&session_key=" + strings.Repeat("k", 300), 400, "at most"},
			{"anonymous", "", "dataset=agents&session_key=h:agent-1", 401, ""},
		}
		for _, tt := range tests {
			q, _ := url.ParseQuery(tt.query)
			code, b := ts.do(t, "GET", "/api/v1/mcp/session-trace?"+q.Encode(), tt.key, nil)
			compact := strings.ReplaceAll(string(b), " ", "")
			if code != tt.code || !strings.Contains(string(b), tt.want) && !strings.Contains(compact, tt.want) {
				t.Errorf("%s: %d %s, want %d with %s", tt.name, code, b, tt.code, tt.want)
			}
		}
		// Through the client.
		c := client.New(ts.URL, ingest.Key, client.WithRetries(0))
		if got, err := c.MCPSessionTrace(ctx, "agents", "h:agent-1"); err != nil || got != id {
			t.Errorf("client: %q %v, want %s", got, err, id)
		}
		if got, err := c.MCPSessionTrace(ctx, "agents", "h:nobody"); err != nil || got != "" {
			t.Errorf("client, no trace: %q %v", got, err)
		}
	})
}
