package server

import (
	"context"
	"database/sql"
	"encoding/json"
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
