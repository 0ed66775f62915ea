package server

import (
	"context"
	"crypto/ed25519"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vigilhq/vigil/client"
	"github.com/vigilhq/vigil/ledger"
	"github.com/vigilhq/vigil/store/sqlite"

	_ "modernc.org/sqlite" // database/sql driver for the direct-edit test
)

func TestLedgerProofOnIngest(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vigil.db")
	st, err := sqlite.Open(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ts := newTestServer(t, st)
	ctx := context.Background()
	res, err := ts.c.Push(ctx, client.PushRequest{Dataset: "proof", Messages: [][]any{{
		map[string]any{"role": "user", "content": "refund order A-1"},
		map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": "c1", "type": "function", "function": map[string]any{"name": "refund", "arguments": map[string]any{"order": "A-1"}}}}},
		map[string]any{"role": "tool", "tool_call_id": "c1", "content": "ok"},
	}}, Metadata: []map[string]any{{"agent_id": "agent/refund-bot"}}})
	if err != nil {
		t.Fatal(err)
	}
	id := res.ID[0]
	v, err := ts.c.VerifyRun(ctx, id)
	if err != nil || !v.Valid || len(v.Errors) != 0 {
		t.Fatalf("verify fresh run: %v %+v", err, v)
	}
	// Receipts as served verify with the public key, and carry the event.
	pub, err := ts.c.PublicKey(ctx)
	if err != nil || pub != ts.key.pub {
		t.Fatalf("public key %q %v", pub, err)
	}
	body, err := ts.c.SessionReceipts(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	res2, info, err := ledger.VerifyStream(strings.NewReader(string(body)), ledger.VerifyOptions{PublicKey: mustPub(t, pub), SessionID: id})
	if err != nil || !res2.Valid {
		t.Fatalf("receipts verify: %v %+v %+v", err, res2, info)
	}
	var rb struct {
		Receipts []map[string]any `json:"receipts"`
	}
	json.Unmarshal(body, &rb)
	if len(rb.Receipts) != 3 || rb.Receipts[0]["agent"] != "agent/refund-bot" || rb.Receipts[1]["action"] != "llm_step" || rb.Receipts[2]["action"] != "tool_result" {
		t.Fatalf("receipts %v", rb.Receipts)
	}
	// Stateless verify of the same receipts.
	status, out := ts.do(t, "POST", "/api/v1/ledger/verify", adminKey, `{"receipts": `+string(mustField(t, body, "receipts"))+`, "publicKey": "`+pub+`"}`)
	if status != 200 || !strings.HasPrefix(string(out), `{"valid":true,"brokenAt":null,"reason":null,"errors":[]}`) {
		t.Fatalf("stateless verify: %d %s", status, out)
	}
	// Nodes: message, llm_step, its tool_call child, tool_result.
	var nodes struct {
		Nodes []ledger.Node `json:"nodes"`
	}
	if err := ts.c.Raw(ctx, "GET", "/api/v1/runs/"+id+"/nodes", nil, &nodes); err != nil {
		t.Fatal(err)
	}
	if len(nodes.Nodes) != 4 || nodes.Nodes[2].ActionType != "tool_call" || *nodes.Nodes[2].ParentID != nodes.Nodes[1].ID || *nodes.Nodes[3].ParentID != nodes.Nodes[2].ID {
		t.Fatalf("nodes %+v", nodes.Nodes)
	}

	// Finish the run: the session closes; appends get 409 RUN_FINISHED.
	var run ledger.Run
	if err := ts.c.Raw(ctx, "POST", "/api/v1/runs/"+id+"/finish", map[string]string{"status": "completed"}, &run); err != nil || run.Status != "completed" {
		t.Fatalf("finish: %v %+v", err, run)
	}
	status, out = ts.do(t, "POST", "/api/v1/trace/"+id+"/messages", adminKey, `{"messages": [{"role": "user", "content": "late"}]}`)
	if status != 409 || !strings.Contains(string(out), "RUN_FINISHED") {
		t.Fatalf("append after finish: %d %s", status, out)
	}
	v, err = ts.c.VerifySession(ctx, id)
	if err != nil || !v.Valid {
		t.Fatalf("verify closed session: %v %+v", err, v)
	}
	body, _ = ts.c.SessionReceipts(ctx, id)
	if !strings.Contains(string(body), `"closeHash":"`) {
		t.Fatalf("closed session receipts lack closeHash: %s", body)
	}

	// Edit a stored event directly in the database: event_mismatch, and
	// the session becomes tampered.
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`UPDATE messages SET data = replace(data, 'A-1', 'A-9') WHERE trace_id = ? AND idx = 0`, id); err != nil {
		t.Fatal(err)
	}
	v, err = ts.c.VerifyRun(ctx, id)
	if err != nil || v.Valid || v.Reason != "event_mismatch" || *v.BrokenAt != 0 {
		t.Fatalf("verify tampered run: %v %+v", err, v)
	}
	status, out = ts.do(t, "GET", "/api/v1/ledger/sessions/"+id, adminKey, nil)
	if status != 200 || !strings.Contains(string(out), `"status":"tampered"`) {
		t.Fatalf("session after tamper: %s", out)
	}
}

func mustPub(t *testing.T, hex string) []byte {
	k, err := ledger.ParsePublicKey(hex)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func mustField(t *testing.T, body []byte, name string) json.RawMessage {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	return m[name]
}

func TestAgentKeyRegistry(t *testing.T) {
	forEachBackend(t, func(t *testing.T, ts *testServer) {
		pub := ledger.PublicKeyHex(ledger.PublicOf(mustKey(t)))
		for _, tc := range []struct {
			method, path, body string
			status             int
			want               string
		}{
			{"POST", "/api/v1/ledger/agents", `{"agent": "agent/refund-bot", "publicKey": "` + pub + `"}`, 200, `"agent":"agent/refund-bot","publicKey":"` + pub + `"`},
			{"POST", "/api/v1/ledger/agents", `{"agent": "a", "publicKey": "xyz"}`, 400, "publicKey must be 64 hex characters"},
			{"POST", "/api/v1/ledger/agents", `{"publicKey": "` + pub + `"}`, 400, "agent must be a non-empty string"},
			{"GET", "/api/v1/ledger/agents/agent/refund-bot", "", 200, `"revokedAt":null`},
			{"GET", "/api/v1/ledger/agents", "", 200, `{"agents":[{"agent":"agent/refund-bot"`},
			{"DELETE", "/api/v1/ledger/agents/agent/refund-bot", "", 200, `{"success":true}`},
			{"GET", "/api/v1/ledger/agents/agent/refund-bot", "", 404, "no active key"},
			{"DELETE", "/api/v1/ledger/agents/nobody", "", 404, "no active key"},
		} {
			var body any
			if tc.body != "" {
				body = tc.body
			}
			st, out := ts.do(t, tc.method, tc.path, adminKey, body)
			if st != tc.status || !strings.Contains(string(out), tc.want) {
				t.Errorf("%s %s: %d %s, want %d containing %s", tc.method, tc.path, st, out, tc.status, tc.want)
			}
		}
	})
}

func mustKey(t *testing.T) ed25519.PrivateKey {
	k, err := ledger.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}
