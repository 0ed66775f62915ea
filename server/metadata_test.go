package server

import (
	"context"
	"strings"
	"testing"

	"github.com/vigilhq/vigil/client"
)

// TestMetadataOwnerParam: the dataset metadata endpoint takes the owner
// as ?owner_username= (Invariant's sync client) and as ?owner= (its async
// client); issue 11 item 15: ?owner= was ignored and the caller's own
// namespace searched.
func TestMetadataOwnerParam(t *testing.T) {
	ts := newTestServer(t, openSQLite(t))
	ctx := context.Background()
	if st, body := ts.do(t, "POST", "/api/v1/users", adminKey, `{"username": "carol"}`); st != 200 {
		t.Fatalf("create user: %d %s", st, body)
	}
	k, err := ts.c.CreateKey(ctx, client.KeyCreate{User: "carol", Scope: "full"})
	if err != nil {
		t.Fatal(err)
	}
	for _, ds := range []struct {
		name   string
		public bool
	}{{"pub", true}, {"priv", false}} {
		if st, body := ts.do(t, "POST", "/api/v1/dataset/create", adminKey, map[string]any{"name": ds.name, "is_public": ds.public}); st != 200 {
			t.Fatalf("create dataset: %d %s", st, body)
		}
	}
	for _, tc := range []struct {
		query      string
		wantStatus int
	}{
		{"?owner_username=admin", 200},
		{"?owner=admin", 200},
		{"?owner=admin&owner_username=nobody", 404}, // owner_username wins
		{"?owner=nobody", 404},
		{"", 404}, // carol's own namespace has no "pub"
	} {
		st, body := ts.do(t, "GET", "/api/v1/dataset/metadata/pub"+tc.query, k.Key, nil)
		if st != tc.wantStatus {
			t.Errorf("GET metadata/pub%s: %d %s, want %d", tc.query, st, body, tc.wantStatus)
		}
	}
	for _, q := range []string{"?owner=admin", "?owner_username=admin"} {
		st, body := ts.do(t, "GET", "/api/v1/dataset/metadata/priv"+q, k.Key, nil)
		if st != 403 || !strings.Contains(string(body), "Not allowed to view metadata") {
			t.Errorf("private metadata%s: %d %s, want 403", q, st, body)
		}
	}
}
