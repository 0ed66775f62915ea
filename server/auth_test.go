package server

import (
	"context"
	"testing"

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
				if st, out := ts.do(t, rq.method, rq.path, k.Key, body); st != 403 {
					t.Errorf("%s %s with a demoted admin's key: %d %s", rq.method, rq.path, st, out)
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
