package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vigilhq/vigil/client"
	"github.com/vigilhq/vigil/ledger"
	"github.com/vigilhq/vigil/server"
	"github.com/vigilhq/vigil/store/sqlite"
)

// TestRecorderSignedRun: the Go client's run recorder records a nested
// run (LLM step, a tool with a nested tool and an LLM call made through
// the recording transport, a failing tool, a log) signed with the
// agent's own key; the stored run's nodes are the receipts, with their
// parents; `vigil receipts verify` accepts the chain, and rejects it
// once a receipt is altered in the store.
func TestRecorderSignedRun(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	dbFile := filepath.Join(dir, "vigil.db")
	st, err := sqlite.Open(ctx, dbFile, nil)
	if err != nil {
		t.Fatal(err)
	}
	skey, _ := ledger.GenerateKey()
	srv, err := server.New(server.Config{Store: st, LedgerKey: skey})
	if err != nil {
		t.Fatal(err)
	}
	boot, err := server.Bootstrap(ctx, st, server.BootstrapOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer func() { hs.Close(); srv.Close(); st.Close() }()
	// A mock LLM upstream the agent calls directly (no gateway).
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"id":"chatcmpl-1","model":"gpt-4o","choices":[{"message":{"role":"assistant","content":"Sunny."}}]}`))
	}))
	defer upstream.Close()

	agentKey, _ := ledger.GenerateKey()
	pub := ledger.PublicKeyHex(ledger.PublicOf(agentKey))
	c := client.New(hs.URL, boot.GeneratedKey)
	if err := c.Raw(ctx, "POST", "/api/v1/ledger/agents", map[string]string{"agent": "agent/weather", "publicKey": pub}, nil); err != nil {
		t.Fatal(err)
	}
	var bgErr error
	rec, err := c.NewRecorder(client.RecorderOptions{Agent: "agent/weather", Key: agentKey, FlushInterval: 10 * time.Millisecond, BatchSize: 2,
		OnError: func(err error) { bgErr = err }})
	if err != nil {
		t.Fatal(err)
	}
	llm := &http.Client{Transport: client.Transport(nil, nil)}
	var runID string
	handler := rec.Wrap("weather run", func(ctx context.Context) error {
		runID = client.RunFrom(ctx).ID
		client.Step(ctx, "plan", map[string]any{"prompt": "weather in Paris?"}, func(context.Context) (any, error) {
			return map[string]any{"text": "call lookup"}, nil
		})
		_, err := client.Tool(ctx, "lookup", map[string]any{"city": "Paris"}, func(ctx context.Context) (any, error) {
			client.Tool(ctx, "geocode", map[string]any{"q": "Paris"}, func(context.Context) (any, error) {
				return map[string]any{"lat": 48.85}, nil
			})
			req, _ := http.NewRequestWithContext(ctx, "POST", upstream.URL+"/v1/chat/completions", strings.NewReader(`{"model":"gpt-4o","messages":[{"role":"user","content":"sky?"}]}`))
			req.Header.Set("Content-Type", "application/json")
			resp, err := llm.Do(req)
			if err != nil {
				return nil, err
			}
			resp.Body.Close()
			return map[string]any{"temp": 18}, nil
		})
		if err != nil {
			return err
		}
		client.Tool(ctx, "notify", nil, func(context.Context) (any, error) { return nil, errors.New("boom") })
		client.RunFrom(ctx).Log(ctx, "done", map[string]any{"n": 3})
		return nil
	})
	if err := handler(ctx); err != nil {
		t.Fatal(err)
	}
	if bgErr != nil {
		t.Fatal(bgErr)
	}
	raw, err := c.SessionReceipts(ctx, runID)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Receipts []struct {
			ID     string         `json:"id"`
			Action string         `json:"action"`
			Input  map[string]any `json:"input"`
			Output any            `json:"output"`
			Error  string         `json:"error"`
		} `json:"receipts"`
		CloseHash string `json:"closeHash"`
	}
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	// Completion order, with parents.
	type node struct{ action, name, parent, err string }
	var nodes []node
	byName := map[string]string{}
	for _, r := range got.Receipts {
		name, _ := r.Input["name"].(string)
		if name == "" {
			name, _ = r.Input["message"].(string)
		}
		byName[name] = r.ID
		p, _ := r.Input["parentId"].(string)
		nodes = append(nodes, node{r.Action, name, p, r.Error})
	}
	want := []node{
		{"llm_step", "plan", "", ""},
		{"tool_call", "geocode", byName["lookup"], ""},
		{"llm_step", "POST " + strings.TrimPrefix(upstream.URL, "http://") + "/v1/chat/completions", byName["lookup"], ""},
		{"tool_call", "lookup", "", ""},
		{"tool_call", "notify", "", "boom"},
		{"log", "done", "", ""},
	}
	if len(nodes) != len(want) {
		t.Fatalf("nodes %+v", nodes)
	}
	for i := range want {
		if nodes[i] != want[i] {
			t.Errorf("node %d = %+v, want %+v", i, nodes[i], want[i])
		}
	}
	if out, _ := json.Marshal(got.Receipts[2].Output); !bytes.Contains(out, []byte(`"Sunny."`)) {
		t.Errorf("LLM call output %s", out)
	}
	if got.CloseHash == "" {
		t.Error("the session is not closed")
	}
	// The run as a trace: one event per receipt, in order.
	var tr struct {
		Messages []map[string]any `json:"messages"`
	}
	users, err := st.ListUsers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sess, err := st.GetSDKSession(ctx, users[0].ID, runID)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Raw(ctx, "GET", "/api/v1/trace/"+sess.RunID, nil, &tr); err != nil {
		t.Fatal(err)
	}
	if len(tr.Messages) != len(got.Receipts) {
		t.Fatalf("trace has %d events, %d receipts", len(tr.Messages), len(got.Receipts))
	}
	for i, m := range tr.Messages {
		if m["receipt_id"] != got.Receipts[i].ID || m["action"] != got.Receipts[i].Action {
			t.Errorf("event %d = %v", i, m)
		}
	}
	// vigil receipts verify accepts the chain with the agent's key.
	file := filepath.Join(dir, "receipts.json")
	os.WriteFile(file, raw, 0o600)
	if code, out, errs := runVigil(t, "", "receipts", "verify", "--public-key", pub, "--session-id", runID, file); code != 0 || !strings.HasPrefix(out, `{"valid":true`) {
		t.Fatalf("verify: %d %s %s", code, out, errs)
	}
	// Alter a stored receipt: verification fails.
	db, err := sql.Open("sqlite", dbFile)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	res, err := db.Exec(`UPDATE receipts SET text = replace(text, '"temp":18', '"temp":81') WHERE text LIKE '%"temp":18%'`)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("altered %d receipts", n)
	}
	raw, err = c.SessionReceipts(ctx, runID)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(file, raw, 0o600)
	code, out, _ := runVigil(t, "", "receipts", "verify", "--public-key", pub, "--session-id", runID, file)
	if code != 1 || !strings.Contains(out, `"valid":false`) || !strings.Contains(out, `"brokenAt":3`) {
		t.Errorf("verify after tampering: %d %s", code, out)
	}
}
