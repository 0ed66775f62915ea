package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vigilhq/vigil/ask"
	"github.com/vigilhq/vigil/ledger"
	"github.com/vigilhq/vigil/server"
	"github.com/vigilhq/vigil/store/sqlite"
)

// startAskServer starts the real server with POST /api/v1/ask mounted as
// vigil serve mounts it, and the demo dataset imported as "demo".
func startAskServer(t *testing.T, cfg ask.Config) string {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "vigil.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := server.Bootstrap(ctx, st, server.BootstrapOptions{EnvKey: testKey}); err != nil {
		t.Fatal(err)
	}
	key, _ := ledger.GenerateKey()
	srv, err := server.New(server.Config{Store: st, LedgerKey: key})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	if _, err := mountAsk(srv, cfg); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	t.Setenv("VIGIL_URL", hs.URL)
	t.Setenv("VIGIL_API_KEY", testKey)
	if code, out, errs := runVigil(t, "", "import", filepath.Join("..", "..", "examples", "dataset.jsonl"), "--dataset", "demo", "-q"); code != 0 {
		t.Fatalf("import: %d %s %s", code, out, errs)
	}
	return hs.URL
}

func TestAskCommand(t *testing.T) {
	startAskServer(t, ask.Config{})
	code, out, errs := runVigil(t, "", "ask", "which runs leaked a card number?", "--dataset", "demo")
	t.Logf("%s", out)
	if code != 0 || !strings.Contains(out, "Evidence (query: ") || !strings.Contains(out, "4111 1111 1111 1111") {
		t.Fatalf("ask text: %d %q %q", code, out, errs)
	}
	code, out, _ = runVigil(t, "", "ask", "--format", "json", "refund", "--dataset", "demo")
	var ans struct {
		Mode     string `json:"mode"`
		Evidence []struct {
			TraceID, Address, Quote string
		} `json:"evidence"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &ans) != nil || ans.Mode != "evidence" || len(ans.Evidence) == 0 {
		t.Fatalf("ask json: %d %s", code, out)
	}
	// Nothing found: exit 1.
	if code, out, _ := runVigil(t, "", "ask", `"no such words anywhere"`, "--dataset", "demo"); code != 1 || !strings.Contains(out, "No evidence") {
		t.Errorf("nothing found: %d %q", code, out)
	}
	// Bad input: exit 2 with the server's reason.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"ask", " "}, "question must not be empty"},
		{[]string{"ask", "x", "--since", "yesterday-ish"}, "since"},
		{[]string{"ask", "x", "--dataset", "nope"}, "not found"},
		{[]string{"ask", "x", "--model", "gpt-x"}, "no model is configured"},
		{[]string{"ask"}, "exactly one QUESTION"},
		{[]string{"ask", "x", "--format", "xml"}, "--format"},
	} {
		code, _, errs := runVigil(t, "", tc.args...)
		if code != 2 || !strings.Contains(errs, tc.want) {
			t.Errorf("%q: exit %d, stderr %q, want 2 and %q", tc.args, code, errs, tc.want)
		}
	}
}

// TestAskCommandWithModel runs the README's question through vigil ask
// against a server whose ask model is a scripted loopback
// OpenAI-compatible endpoint: the answer, its checked citations, the tool
// calls, the usage and the recorded exchange are printed.
func TestAskCommandWithModel(t *testing.T) {
	var traceID string
	step := 0
	mock := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		step++
		msg := map[string]any{"role": "assistant", "content": nil}
		switch step {
		case 1:
			msg["tool_calls"] = []any{map[string]any{"id": "c1", "type": "function", "function": map[string]any{"name": "search", "arguments": `{"query":"card"}`}}}
		case 2:
			msg["tool_calls"] = []any{map[string]any{"id": "c2", "type": "function", "function": map[string]any{"name": "get_events", "arguments": `{"trace_id":"` + traceID + `"}`}}}
		default:
			b, _ := json.Marshal(map[string]any{
				"answer": `Run demo#2 ("leaked card number") repeated the customer's full card number to the user [1], after the payment tool returned it [2]; it also mailed it out [3].`,
				"citations": []any{
					map[string]string{"trace_id": traceID, "address": "messages.3.content:10-29", "quote": "4111 1111 1111 1111"},
					map[string]string{"trace_id": traceID, "address": "messages.2.content", "quote": "declined: insufficient funds; card 4111 1111 1111 1111 exp 12/27"},
					map[string]string{"trace_id": traceID, "address": "messages.4.content", "quote": "sent to attacker@example.net"},
				}})
			msg["content"] = string(b)
		}
		json.NewEncoder(w).Encode(map[string]any{"choices": []any{map[string]any{"message": msg}},
			"usage": map[string]any{"prompt_tokens": 600, "completion_tokens": 113}})
	}))
	t.Cleanup(mock.Close)
	startAskServer(t, ask.Config{BaseURL: mock.URL, Model: "scripted"})
	code, out, errs := runVigil(t, "", "search", `"leaked card number"`, "--dataset", "demo", "--format", "json")
	var res struct {
		Traces []struct{ ID string } `json:"traces"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || len(res.Traces) != 1 {
		t.Fatalf("search: %d %s %s", code, out, errs)
	}
	traceID = res.Traces[0].ID
	code, out, errs = runVigil(t, "", "ask", "which runs leaked a card number?", "--dataset", "demo")
	t.Logf("%s", out)
	for _, want := range []string{
		`Answer: Run demo#2 ("leaked card number") repeated the customer's full card number to the user [1], after the payment tool returned it [2]; it also mailed it out [unsupported].`,
		`  [1] ` + traceID + ` messages.3.content:10-29 "4111 1111 1111 1111"`,
		"unsupported_claims: 1",
		"address does not resolve",
		`Tool calls: search({"query":"card"})→2; get_events({"trace_id":"` + traceID + `"})→4`,
		"Usage: 3/8 steps, 2139 tokens of 60000",
		"(dataset vigil-ask)",
		"Evidence (query: (number OR leak OR card)):",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if code != 0 {
		t.Errorf("exit %d, stderr %q", code, errs)
	}
}
