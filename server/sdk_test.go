package server

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/vigilhq/vigil/ledger"
)

// sdkChain makes n receipts of session sid signed by key, as
// @invariance/sdk would.
func sdkChain(t *testing.T, sid, agent string, key []byte, n int) []string {
	t.Helper()
	sess := &ledger.Session{ID: sid}
	out := make([]string, n)
	for i := range out {
		r, err := sess.Append(ledger.Action{Agent: agent, Action: "tool_call",
			Input: map[string]any{"tool": "orders.lookup", "n": float64(i)}, Output: map[string]any{"ok": true}}, key)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = string(r.Raw)
	}
	return out
}

func receiptsBody(rs ...string) string { return `{"receipts": [` + strings.Join(rs, ",") + `]}` }

func TestSDKSessions(t *testing.T) {
	forEachBackend(t, func(t *testing.T, ts *testServer) {
		agentKey := mustKey(t)
		agentPub := ledger.PublicKeyHex(ledger.PublicOf(agentKey))
		call := func(method, path, body string, wantStatus int, want ...string) string {
			t.Helper()
			var b any
			if body != "" {
				b = body
			}
			st, out := ts.do(t, method, path, adminKey, b)
			if st != wantStatus {
				t.Fatalf("%s %s: %d %s, want %d", method, path, st, out, wantStatus)
			}
			for _, w := range want {
				if !strings.Contains(string(out), w) {
					t.Fatalf("%s %s: %s lacks %s", method, path, out, w)
				}
			}
			return string(out)
		}
		call("POST", "/api/v1/ledger/agents", `{"agent": "agent/refund-bot", "publicKey": "`+agentPub+`"}`, 200)
		call("POST", "/v1/sessions", `{"id": "sess-1", "name": "refund run", "agent_id": "agent/refund-bot", "created_by": "agent/refund-bot"}`, 201,
			`"id":"sess-1"`, `"status":"open"`, `"receipt_count":0`)
		call("POST", "/v1/sessions", `{"id": "sess-1", "name": "again"}`, 200, `"name":"refund run"`)

		rs := sdkChain(t, "sess-1", "agent/refund-bot", agentKey, 3)
		call("POST", "/v1/receipts", receiptsBody(rs[0], rs[1]), 200, `{"inserted":2}`)
		call("POST", "/v1/receipts", receiptsBody(rs[1]), 200, `{"inserted":0}`) // retry is ignored
		var r1 map[string]any
		json.Unmarshal([]byte(rs[1]), &r1)
		r1["hash"] = strings.Repeat("0", 64)
		changed, _ := json.Marshal(r1)
		call("POST", "/v1/receipts", receiptsBody(string(changed)), 409, "receipt_conflict")
		call("POST", "/v1/receipts", receiptsBody(rs[2]), 200, `{"inserted":1}`)
		call("GET", "/v1/sessions/sess-1/verify", "", 200, `"valid":true`, `"receipt_count":3`, `"errors":[]`)
		call("GET", "/v1/sessions/sess-1", "", 200, `"receipt_count":3`, `"root_hash":"`)
		// The run: events are the receipts, nodes are the receipts.
		var sess struct{ RunID string }
		json.Unmarshal([]byte(call("GET", "/api/v1/ledger/sessions/sess-1", "", 200, `"signer":"agent"`)), &sess)
		call("GET", "/api/v1/runs/"+sess.RunID+"/verify", "", 200, `"valid":true`)
		call("GET", "/api/v1/runs/"+sess.RunID+"/nodes", "", 200, `"actionType":"tool_call"`, `"id":"`+mustID(t, rs[0])+`"`)
		call("GET", "/api/v1/trace/"+sess.RunID, "", 200, `"type":"receipt"`, `"dataset_name":"sessions"`)
		// The stored receipts verify with the agent key, byte for byte.
		body := call("GET", "/api/v1/ledger/sessions/sess-1/receipts", "", 200)
		if !strings.Contains(body, rs[0]) || !strings.Contains(body, rs[2]) {
			t.Fatalf("receipts not stored verbatim: %s", body)
		}
		res, err := ledger.VerifyChain(parseReceipts(t, body), ledger.VerifyOptions{PublicKey: ledger.PublicOf(agentKey), SessionID: "sess-1"})
		if err != nil || !res.Valid {
			t.Fatalf("verify stored receipts: %v %+v", err, res)
		}
		// Close with the right close hash; later receipts are refused.
		var last map[string]any
		json.Unmarshal([]byte(rs[2]), &last)
		call("PATCH", "/v1/sessions/sess-1", `{"status": "closed", "close_hash": "`+last["hash"].(string)+`"}`, 200, `"status":"closed"`)
		more := sdkChain(t, "sess-1", "agent/refund-bot", agentKey, 1)
		call("POST", "/v1/receipts", receiptsBody(more[0]), 409, "SESSION_CLOSED")
		call("GET", "/v1/sessions/sess-1/verify", "", 200, `"valid":true`)

		// An agent without a registered key: the session is created on the
		// fly and server-signed; the client's signature is kept.
		other := mustKey(t)
		rs2 := sdkChain(t, "sess-2", "agent/unknown", other, 2)
		call("POST", "/v1/receipts", receiptsBody(rs2...), 200, `{"inserted":2}`)
		body = call("GET", "/api/v1/ledger/sessions/sess-2/receipts", "", 200, `"clientSignature":"`)
		res, err = ledger.VerifyChain(parseReceipts(t, body), ledger.VerifyOptions{PublicKey: ledger.PublicOf(ts.srv.key)})
		if err != nil || !res.Valid {
			t.Fatalf("server re-signed receipts: %v %+v", err, res)
		}
		call("GET", "/v1/sessions/sess-2/verify", "", 200, `"valid":true`)

		// A receipt that does not link is stored, and the session is tampered.
		bad := sdkChain(t, "sess-1b", "agent/refund-bot", agentKey, 2)
		call("POST", "/v1/receipts", receiptsBody(bad[1]), 200, `{"inserted":1}`)
		call("GET", "/v1/sessions/sess-1b", "", 200, `"status":"tampered"`)
		call("GET", "/v1/sessions/sess-1b/verify", "", 200, `"valid":false`, `"receipt 0: linkage"`)
		// issue_sdk_malformed_close_hash: a close_hash that is not a hash
		// (§5.1) is refused, not stored to make every later verify a 500.
		call("PATCH", "/v1/sessions/sess-2", `{"status": "closed", "close_hash": "NOT-A-HASH"}`, 400, "close_hash")
		call("PATCH", "/v1/sessions/sess-2", `{"status": "closed", "close_hash": "`+strings.Repeat("A", 64)+`"}`, 400, "close_hash")
		call("GET", "/v1/sessions/sess-2", "", 200, `"status":"open"`)
		call("GET", "/v1/sessions/sess-2/verify", "", 200, `"valid":true`)
		// Client-reported tampering; a wrong close hash is kept and flagged.
		call("PATCH", "/v1/sessions/sess-2", `{"status": "closed", "close_hash": "`+strings.Repeat("a", 64)+`"}`, 200, `"status":"tampered"`)
		call("GET", "/v1/sessions/sess-2/verify", "", 200, `"valid":false`, "close_hash_mismatch")
		call("PATCH", "/v1/sessions/sess-2", `{"status": "open"}`, 400, "status must be closed or tampered")
		call("POST", "/v1/receipts", `{"receipts": [{"id": 1}]}`, 400, "receipt 0")
		// issue_sdk_empty_session_id: a receipt without a session id is
		// refused (as POST /v1/sessions refuses an empty id); it used to
		// leave an orphan run in "sessions" and answer 404.
		countRuns := func() int {
			var runs []struct{ ID string }
			json.Unmarshal([]byte(call("GET", "/api/v1/dataset/byuser/admin/sessions/traces", "", 200)), &runs)
			return len(runs)
		}
		before := countRuns()
		noSession := sdkChain(t, "", "agent/x", other, 1)
		call("POST", "/v1/receipts", receiptsBody(noSession[0]), 400, "receipt 0", "sessionId")
		if after := countRuns(); after != before {
			t.Errorf("runs in sessions: %d before, %d after a refused receipt", before, after)
		}
	})
}

func mustID(t *testing.T, raw string) string {
	var m map[string]any
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		t.Fatal(err)
	}
	return m["id"].(string)
}

func parseReceipts(t *testing.T, body string) []*ledger.Receipt {
	t.Helper()
	var doc struct {
		Receipts []json.RawMessage `json:"receipts"`
	}
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatal(err)
	}
	out := make([]*ledger.Receipt, len(doc.Receipts))
	for i, raw := range doc.Receipts {
		r, err := ledger.ParseReceipt(raw)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = r
	}
	return out
}

// TestSDKReceiptFractionalTimestamps: the ingest check of each receipt
// against the stored tail (§7.4) compares the tail's real timestamp, not
// the integer milliseconds kept in the session row. A receipt at 1.2 after
// one at 1.5 (sent in another request) breaks §5.2 timestamp_order and
// must mark the session tampered at once, as verification says.
func TestSDKReceiptFractionalTimestamps(t *testing.T) {
	forEachBackend(t, func(t *testing.T, ts *testServer) {
		key := mustKey(t)
		mk := func(prev string, ms float64) string {
			one := int64(1)
			r, err := ledger.Append(ledger.Tail{Hash: prev}, ledger.Action{SessionID: "frac", Agent: "agent/frac", Action: "step",
				Input: map[string]any{}, Timestamp: &one}, nil)
			if err != nil {
				t.Fatal(err)
			}
			r.Timestamp = ms
			if r.Hash, err = r.ComputeHash(); err != nil {
				t.Fatal(err)
			}
			r.Signature = ledger.SignHash(key, r.Hash)
			b, err := r.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			return string(b)
		}
		r0 := mk("", 1.5)
		var h0 struct{ Hash string }
		json.Unmarshal([]byte(r0), &h0)
		r1 := mk(h0.Hash, 1.2)
		for _, r := range []string{r0, r1} {
			if st, b := ts.do(t, "POST", "/v1/receipts", adminKey, receiptsBody(r)); st != 200 {
				t.Fatalf("post receipt: %d %s", st, b)
			}
		}
		if _, b := ts.do(t, "GET", "/v1/sessions/frac", adminKey, nil); !strings.Contains(string(b), `"status":"tampered"`) {
			t.Errorf("session after an out-of-order receipt: %s", b)
		}
		if _, b := ts.do(t, "GET", "/v1/sessions/frac/verify", adminKey, nil); !strings.Contains(string(b), "timestamp_order") {
			t.Errorf("verify: %s", b)
		}
	})
}
