package server

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vigilhq/vigil/client"
	"github.com/vigilhq/vigil/store/sqlite"
)

// TestOneVerification: every endpoint that verifies a run's session gives
// the answer run verification gives (ledger.md §7.5): an SDK session whose
// stored event was edited is invalid on GET /v1/sessions/{id}/verify too
// (it said valid: true), and a run whose session row was deleted is
// {valid: false, reason: "missing_session"} (it was a 404 with internal
// text).
func TestOneVerification(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vigil.db")
	st, err := sqlite.Open(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ts := newTestServer(t, st)
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	type result struct {
		Valid    bool    `json:"valid"`
		BrokenAt *int    `json:"brokenAt"`
		Reason   *string `json:"reason"`
	}
	get := func(path string) result {
		t.Helper()
		code, body := ts.do(t, "GET", path, adminKey, nil)
		if code != 200 {
			t.Fatalf("GET %s: %d %s", path, code, body)
		}
		var r result
		if err := json.Unmarshal(body, &r); err != nil {
			t.Fatalf("GET %s: %v %s", path, err, body)
		}
		return r
	}
	t.Run("issue_17_sdk_verify_sees_edited_event", func(t *testing.T) {
		rs := sdkChain(t, "sdk-1", "agent/unregistered", mustKey(t), 2)
		if code, body := ts.do(t, "POST", "/v1/receipts", adminKey, receiptsBody(rs...)); code != 200 {
			t.Fatalf("receipts: %d %s", code, body)
		}
		_, body := ts.do(t, "GET", "/api/v1/ledger/sessions/sdk-1", adminKey, nil)
		var sess struct{ RunID string }
		json.Unmarshal(body, &sess)
		if r := get("/v1/sessions/sdk-1/verify"); !r.Valid {
			t.Fatalf("fresh SDK session invalid: %+v", r)
		}
		if _, err := db.Exec(`UPDATE messages SET data = replace(data, 'orders.lookup', 'orders.refund') WHERE trace_id = ? AND idx = 1`, sess.RunID); err != nil {
			t.Fatal(err)
		}
		// The SDK endpoint first, so it cannot lean on a tamper mark that
		// run verification left.
		sdk := get("/v1/sessions/sdk-1/verify")
		run := get("/api/v1/runs/" + sess.RunID + "/verify")
		ses := get("/api/v1/ledger/sessions/sdk-1/verify")
		for name, r := range map[string]result{"sdk": sdk, "run": run, "session": ses} {
			if r.Valid || r.Reason == nil || *r.Reason != "event_mismatch" || r.BrokenAt == nil || *r.BrokenAt != 1 {
				t.Errorf("%s verification of an edited event: %+v", name, r)
			}
		}
	})
	t.Run("issue_17_deleted_session_row", func(t *testing.T) {
		res, err := ts.c.Push(context.Background(), client.PushRequest{Dataset: "d", Messages: [][]any{{map[string]any{"role": "user", "content": "x"}}}})
		if err != nil {
			t.Fatal(err)
		}
		id := res.ID[0]
		if _, err := db.Exec(`DELETE FROM ledger_sessions WHERE id = ?`, id); err != nil {
			t.Fatal(err)
		}
		code, body := ts.do(t, "GET", "/api/v1/runs/"+id+"/verify", adminKey, nil)
		if code != 200 || !strings.Contains(string(body), `"valid":false`) || !strings.Contains(string(body), `"reason":"missing_session"`) {
			t.Errorf("verify a run without its session row: %d %s", code, body)
		}
	})
}

// TestSDKSessionIDsPerOwner: SDK session ids are scoped to their owner.
// Another user's id was a 409 "taken" (leaking that it existed) and a 404
// for the receipts of the user who chose it second.
func TestSDKSessionIDsPerOwner(t *testing.T) {
	forEachBackend(t, func(t *testing.T, ts *testServer) {
		ctx := context.Background()
		keyOf := func(name string) string {
			if code, body := ts.do(t, "POST", "/api/v1/users", adminKey, map[string]string{"username": name}); code != 200 {
				t.Fatalf("create %s: %d %s", name, code, body)
			}
			k, err := ts.c.CreateKey(ctx, client.KeyCreate{User: name, Scope: "full"})
			if err != nil {
				t.Fatal(err)
			}
			return k.Key
		}
		alice, bob := keyOf("alice"), keyOf("bob")
		if code, body := ts.do(t, "POST", "/v1/sessions", bob, `{"id": "shared-id", "name": "bob's"}`); code != 201 {
			t.Fatalf("bob creates: %d %s", code, body)
		}
		// Alice's create and receipts are hers, not a conflict with Bob's.
		code, body := ts.do(t, "POST", "/v1/sessions", alice, `{"id": "shared-id", "name": "alice's"}`)
		if code != 201 || !strings.Contains(string(body), `"name":"alice's"`) || !strings.Contains(string(body), `"id":"shared-id"`) {
			t.Fatalf("alice creates the same id: %d %s", code, body)
		}
		rs := sdkChain(t, "shared-id", "agent/a", mustKey(t), 2)
		if code, body := ts.do(t, "POST", "/v1/receipts", alice, receiptsBody(rs...)); code != 200 || !strings.Contains(string(body), `"inserted":2`) {
			t.Fatalf("alice's receipts: %d %s", code, body)
		}
		for _, tc := range []struct {
			key, name string
			count     int
		}{{alice, "alice's", 2}, {bob, "bob's", 0}} {
			code, body := ts.do(t, "GET", "/v1/sessions/shared-id", tc.key, nil)
			if code != 200 || !strings.Contains(string(body), `"name":"`+tc.name+`"`) || !strings.Contains(string(body), fmt.Sprintf(`"receipt_count":%d`, tc.count)) {
				t.Errorf("%s reads shared-id: %d %s", tc.name, code, body)
			}
			code, body = ts.do(t, "GET", "/v1/sessions/shared-id/verify", tc.key, nil)
			if code != 200 || !strings.Contains(string(body), `"valid":true`) {
				t.Errorf("%s verifies shared-id: %d %s", tc.name, code, body)
			}
			code, body = ts.do(t, "GET", "/api/v1/ledger/sessions/shared-id/verify", tc.key, nil)
			if code != 200 || !strings.Contains(string(body), `"valid":true`) || !strings.Contains(string(body), `"sessionId":"shared-id"`) {
				t.Errorf("%s ledger-verifies shared-id: %d %s", tc.name, code, body)
			}
		}
		// Closing with the SDK: the close statement names the SDK id, so
		// the closed session still verifies.
		if code, body := ts.do(t, "PATCH", "/v1/sessions/shared-id", alice, `{"status": "closed"}`); code != 200 || !strings.Contains(string(body), `"id":"shared-id"`) {
			t.Fatalf("alice closes: %d %s", code, body)
		}
		if code, body := ts.do(t, "GET", "/api/v1/ledger/sessions/shared-id/verify", alice, nil); code != 200 || !strings.Contains(string(body), `"valid":true`) {
			t.Errorf("closed session verifies: %d %s", code, body)
		}
		// Someone without a session of that id learns nothing.
		carol := keyOf("carol")
		if code, body := ts.do(t, "GET", "/v1/sessions/shared-id", carol, nil); code != 404 {
			t.Errorf("carol reads shared-id: %d %s", code, body)
		}
	})
}
