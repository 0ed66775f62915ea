package server

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/vigilhq/vigil/client"
	"github.com/vigilhq/vigil/store"
)

// TestDemotedAdminLosesPowers: after a demotion, the user's admin-scope
// keys pass no admin route, whether the demotion went through this
// server's API (which evicts its cache) or reached the database another way
// (another process behind the same PostgreSQL).
func TestDemotedAdminLosesPowers(t *testing.T) {
	for _, tc := range []struct {
		name   string
		demote func(t *testing.T, ts *testServer, id string)
	}{
		{"api_patch", func(t *testing.T, ts *testServer, id string) {
			if st, body := ts.do(t, "PATCH", "/api/v1/users/"+id, adminKey, `{"role":"member"}`); st != 200 {
				t.Fatalf("demote: %d %s", st, body)
			}
		}},
		{"other_process", func(t *testing.T, ts *testServer, id string) {
			member := store.RoleMember
			if _, err := ts.st.UpdateUser(context.Background(), id, store.UserUpdate{Role: &member}); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := newTestServer(t, openSQLite(t))
			ctx := context.Background()
			if st, body := ts.do(t, "POST", "/api/v1/users", adminKey, `{"username":"dave","role":"admin"}`); st != 200 {
				t.Fatalf("create: %d %s", st, body)
			}
			dave, err := ts.st.GetUserByName(ctx, "dave")
			if err != nil {
				t.Fatal(err)
			}
			k, err := ts.c.CreateKey(ctx, client.KeyCreate{User: "dave", Scope: "admin"})
			if err != nil {
				t.Fatal(err)
			}
			// Warm the principal cache while dave is an admin.
			if st, body := ts.do(t, "GET", "/api/v1/users", k.Key, nil); st != 200 {
				t.Fatalf("admin lists users: %d %s", st, body)
			}
			tc.demote(t, ts, dave.ID)
			for _, rq := range []struct{ method, path, body string }{
				{"GET", "/api/v1/users", ""},
				{"POST", "/api/v1/users", `{"username":"eve"}`},
				{"PATCH", "/api/v1/users/" + dave.ID, `{"role":"admin"}`},
				{"POST", "/api/v1/ledger/agents", `{"agent":"a","public_key":"00"}`},
			} {
				var body any
				if rq.body != "" {
					body = rq.body
				}
				if st, out := ts.do(t, rq.method, rq.path, k.Key, body); st != 403 || !strings.Contains(string(out), "user dave is a member now") {
					t.Errorf("%s %s with a demoted admin's key: %d %s, want 403 saying dave is a member now", rq.method, rq.path, st, out)
				}
			}
			if u, _ := ts.st.GetUser(ctx, dave.ID); u.Role != store.RoleMember {
				t.Errorf("dave re-promoted himself: role %q", u.Role)
			}
			// Another admin's key creation for dave is refused too (admin
			// keys belong to admins), and his own data stays his.
			if _, err := ts.c.CreateKey(ctx, client.KeyCreate{User: "dave", Scope: "admin"}); err == nil {
				t.Error("admin key minted for a member")
			}
			// Promoting him back restores the powers at once.
			if st, body := ts.do(t, "PATCH", "/api/v1/users/"+dave.ID, adminKey, `{"role":"admin"}`); st != 200 {
				t.Fatalf("promote: %d %s", st, body)
			}
			if st, body := ts.do(t, "GET", "/api/v1/users", k.Key, nil); st != 200 {
				t.Errorf("re-promoted admin: %d %s", st, body)
			}
		})
	}
}

// TestCallerChosenLimits: names and ids a caller chooses have a length
// limit (1 MB was accepted), and a key cannot be born expired; each is a
// 400 naming the field.
func TestCallerChosenLimits(t *testing.T) {
	ts := newTestServer(t, openSQLite(t))
	long := strings.Repeat("x", 1<<20)
	past := time.Now().Add(-time.Second).UTC().Format(time.RFC3339Nano)
	for _, tc := range []struct {
		name, path string
		body       any
		field      string
	}{
		{"issue_17_key_name_1mb", "/api/v1/keys/create", map[string]string{"name": long}, "name"},
		{"key_name_257", "/api/v1/keys/create", map[string]string{"name": strings.Repeat("k", 257)}, "name"},
		{"issue_17_key_expired_at_birth", "/api/v1/keys/create", map[string]string{"expires_at": past}, "expires_at"},
		{"issue_17_sdk_session_id_1mb", "/v1/sessions", map[string]string{"id": long}, "id"},
		{"sdk_session_id_257", "/v1/sessions", map[string]string{"id": strings.Repeat("s", 257)}, "id"},
		{"sdk_receipt_session_id_1mb", "/v1/receipts", map[string]any{"receipts": []any{map[string]any{
			"id": "r0", "sessionId": long, "agent": "a", "action": "x", "hash": "h", "previousHash": "0", "timestamp": 1}}}, "receipts[0].sessionId"},
		// a NUL is refused by the store too, with no field named
		{"key_name_nul", "/api/v1/keys/create", map[string]string{"name": "k\x00"}, "name holds a NUL character"},
		{"sdk_session_id_nul", "/v1/sessions", map[string]string{"id": "s\x00n"}, "id holds a NUL character"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, body := ts.do(t, "POST", tc.path, adminKey, tc.body)
			if st != 400 || !strings.Contains(string(body), tc.field) || len(body) > 1000 {
				t.Errorf("%d %.300s, want a short 400 naming %s", st, body, tc.field)
			}
		})
	}
	// At the limit, both are accepted.
	if st, body := ts.do(t, "POST", "/api/v1/keys/create", adminKey, map[string]string{"name": strings.Repeat("k", 256)}); st != 200 {
		t.Errorf("256-byte key name: %d %s", st, body)
	}
	if st, body := ts.do(t, "POST", "/v1/sessions", adminKey, map[string]string{"id": strings.Repeat("s", 256)}); st != 201 {
		t.Errorf("256-byte session id: %d %s", st, body)
	}
}
