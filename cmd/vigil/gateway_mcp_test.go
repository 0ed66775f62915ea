package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/vigilhq/vigil/client"
	"github.com/vigilhq/vigil/gateway/providertest"
)

var gatewayListenRx = regexp.MustCompile(`gateway listening on http://([0-9.:]+)/api/v1/gateway/`)

// startGateway runs `vigil gateway --listen 127.0.0.1:0 --store-url URL`
// in the test process and returns its base URL.
func startGateway(t *testing.T, storeURL string, args ...string) (string, *syncBuffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stderr := &syncBuffer{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		run(ctx, append([]string{"gateway", "--listen", "127.0.0.1:0", "--store-url", storeURL,
			"--data-dir", filepath.Join(t.TempDir(), "gw")}, args...), strings.NewReader(""), io.Discard, stderr)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("the gateway did not stop")
		}
	})
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if m := gatewayListenRx.FindStringSubmatch(stderr.String()); m != nil {
			return "http://" + m[1], stderr
		}
		select {
		case <-done:
			t.Fatalf("the gateway exited:\n%s", stderr.String())
		default:
		}
	}
	t.Fatalf("the gateway did not start:\n%s", stderr.String())
	return "", nil
}

// echoUpstream is a go-sdk streamable MCP server with one tool, echo.
func echoUpstream(t *testing.T) string {
	t.Helper()
	up := sdk.NewServer(&sdk.Implementation{Name: "upstream", Version: "1"}, nil)
	sdk.AddTool(up, &sdk.Tool{Name: "echo", Description: "Echo the text."}, func(ctx context.Context, req *sdk.CallToolRequest, in struct {
		Text string `json:"text"`
	}) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "echo: " + in.Text}}}, nil, nil
	})
	mux := http.NewServeMux()
	mux.Handle("/mcp/", sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return up }, nil))
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	return hs.URL
}

func toolText(res *sdk.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// TestStandaloneGatewayMCP: the standalone gateway serves the MCP routes
// with keys, rules, pins and recording through a real vigil serve's HTTP
// API. A go-sdk client lists and calls a go-sdk streamable server through
// it; the session is a trace of the dataset read back through the API,
// the tool is pinned, and a dataset guardrail created afterwards (the
// change feed drops the cached rules) blocks a call before the server
// sees it.
func TestStandaloneGatewayMCP(t *testing.T) {
	serveEnv(t)
	upstream := echoUpstream(t)
	p := startInProcess(t, "--data-dir", filepath.Join(t.TempDir(), "data"))
	gw, gwLog := startGateway(t, p.url)

	hc := &http.Client{Transport: headerRT{http.Header{
		"Mcp-Server-Base-Url":     {upstream},
		"Invariant-Authorization": {"Bearer " + testKey},
	}}}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	connect := func() *sdk.ClientSession {
		c := sdk.NewClient(&sdk.Implementation{Name: "agent", Version: "1"}, nil)
		cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: gw + "/api/v1/gateway/gwds/mcp/streamable", HTTPClient: hc}, nil)
		if err != nil {
			t.Fatalf("connect through the standalone gateway: %v\n%s", err, gwLog.String())
		}
		return cs
	}

	cs := connect()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) != 1 || tools.Tools[0].Name != "echo" || tools.Tools[0].Description != "Echo the text." {
		t.Fatalf("tools/list: %v %+v", err, tools)
	}
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hello standalone"}})
	if err != nil || res.IsError || toolText(res) != "echo: hello standalone" {
		t.Fatalf("echo: %v %+v", err, res)
	}
	cs.Close()

	// The session is a trace of gwds holding the call and its output.
	vc := client.New(p.url, testKey)
	var traceID string
	for deadline := time.Now().Add(15 * time.Second); traceID == "" && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		req, _ := http.NewRequest("GET", p.url+"/api/v1/search?q="+`"hello%20standalone"`, nil)
		req.Header.Set("Authorization", "Bearer "+testKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var out struct {
			Traces []struct {
				ID      string `json:"id"`
				Dataset struct {
					Name string `json:"name"`
				} `json:"dataset"`
			} `json:"traces"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if len(out.Traces) > 0 && out.Traces[0].Dataset.Name == "gwds" {
			traceID = out.Traces[0].ID
		}
	}
	if traceID == "" {
		t.Fatalf("the MCP session was not recorded:\ngateway:\n%s\nserve:\n%s", gwLog.String(), p.stderr.String())
	}
	var tr map[string]any
	if err := vc.Raw(ctx, "GET", "/api/v1/trace/"+traceID, nil, &tr); err != nil {
		t.Fatalf("read the trace back: %v", err)
	}
	msgs, _ := json.Marshal(tr["messages"])
	for _, want := range []string{`"echo"`, "hello standalone", "echo: hello standalone"} {
		if !strings.Contains(string(msgs), want) {
			t.Errorf("the recorded trace lacks %s: %s", want, msgs)
		}
	}

	// tools/list pinned the tool on the server.
	pins, err := vc.MCPPins(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(pins) != 1 || pins[0].Tool != "echo" || pins[0].Status != "approved" {
		t.Fatalf("pins: %+v", pins)
	}

	// A blocking guardrail on the dataset stops a call before the server
	// sees it, once the change feed has dropped the cached rules.
	var ds struct {
		ID string `json:"id"`
	}
	if err := vc.Raw(ctx, "GET", "/api/v1/dataset/byuser/admin/gwds", nil, &ds); err != nil || ds.ID == "" {
		t.Fatalf("dataset gwds: %v", err)
	}
	yes := true
	if _, err := vc.CreateGuardrail(ctx, ds.ID, client.GuardrailCreate{Name: "no-secret", Action: "block", Enabled: &yes,
		Policy: "raise \"no secret echo\" if:\n    (call: ToolCall)\n    call is tool:echo\n    \"secret\" in call.function.arguments.text\n"}); err != nil {
		t.Fatalf("create guardrail: %v", err)
	}
	blocked := false
	for deadline := time.Now().Add(15 * time.Second); !blocked && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		cs := connect()
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "the secret"}})
		cs.Close()
		if err == nil && !res.IsError {
			continue // the old rules are still cached
		}
		if err == nil && !strings.Contains(toolText(res), "no secret echo") {
			t.Fatalf("blocked call: want the guardrail's message, got %s", toolText(res))
		}
		if err != nil && !strings.Contains(err.Error(), "no secret echo") {
			t.Fatalf("blocked call: want the guardrail's message, got %v", err)
		}
		blocked = true
	}
	if !blocked {
		t.Fatalf("the dataset guardrail never applied in the standalone gateway:\n%s", gwLog.String())
	}
}

// TestStandaloneSharedSessionTrace: an agent's LLM calls through the
// standalone gateway and its MCP calls, through the standalone gateway's
// streamable proxy and through `vigil mcp run --session`, carry the same
// session key and share one trace of the dataset, as in-process.
func TestStandaloneSharedSessionTrace(t *testing.T) {
	serveEnv(t)
	upstream := echoUpstream(t)
	llm := httptest.NewServer(&providertest.Mock{Script: func(*providertest.Request) providertest.Reply {
		return providertest.Reply{Text: "I will call the echo tool."}
	}})
	defer llm.Close()
	cfg := filepath.Join(t.TempDir(), "vigil.yaml")
	if err := os.WriteFile(cfg, []byte("gateway:\n  upstreams:\n    - {name: openai, base_url: \""+llm.URL+"/v1\"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startInProcess(t, "--data-dir", filepath.Join(t.TempDir(), "data"))
	gw, gwLog := startGateway(t, p.url, "--config", cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	vc := client.New(p.url, testKey)

	// 1. The LLM call, stitched by Invariant-Session.
	req, _ := http.NewRequest("POST", gw+"/api/v1/gateway/shared/openai/chat/completions",
		strings.NewReader(`{"model":"mock-model","messages":[{"role":"user","content":"echo hello please"}]}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer sk-test")
	req.Header.Set("Invariant-Authorization", "Bearer "+testKey)
	req.Header.Set("Invariant-Session", "agent-9")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("LLM call: %d %s", resp.StatusCode, body)
	}
	traces := func() []client.TraceSummary {
		d, err := vc.GetDatasetByName(ctx, "admin", "shared")
		if err != nil {
			return nil
		}
		ts, _ := vc.ListTraces(ctx, d.ID, 10, 0)
		return ts
	}
	var llmTrace string
	for deadline := time.Now().Add(15 * time.Second); llmTrace == "" && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if ts := traces(); len(ts) == 1 {
			llmTrace = ts[0].ID
		}
	}
	if llmTrace == "" {
		t.Fatalf("the LLM call was not recorded:\n%s", gwLog.String())
	}
	var tr struct {
		SessionKey *string `json:"session_key"`
	}
	if err := vc.Raw(ctx, "GET", "/api/v1/trace/"+llmTrace, nil, &tr); err != nil || tr.SessionKey == nil || *tr.SessionKey != "h:agent-9" {
		t.Fatalf("the pushed LLM trace's session key: %v %v", tr.SessionKey, err)
	}

	// 2. An MCP session through the standalone proxy with the same key.
	hc := &http.Client{Transport: headerRT{http.Header{
		"Mcp-Server-Base-Url":     {upstream},
		"Invariant-Authorization": {"Bearer " + testKey},
		"Invariant-Session":       {"agent-9"},
	}}}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "agent", Version: "1"}, nil).Connect(ctx,
		&sdk.StreamableClientTransport{Endpoint: gw + "/api/v1/gateway/shared/mcp/streamable", HTTPClient: hc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "via proxy"}}); err != nil || res.IsError {
		t.Fatalf("echo: %v %+v", err, res)
	}
	cs.Close()

	// 3. A stdio session with the same key.
	t.Setenv("VIGIL_URL", p.url)
	t.Setenv("VIGIL_CMD_MCP_SERVER", "1")
	if _, echo, err, code, stderr := mcpRun(t, "--dataset", "shared", "--session", "agent-9", "--log-file", filepath.Join(t.TempDir(), "l")); err != nil || code != 4 || echo != "echo: cli" { // 4: the test server's exit status
		t.Fatalf("vigil mcp run --session: %v %d %q %s", err, code, echo, stderr)
	}

	// One trace holds the LLM call and both MCP calls.
	var msgs string
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		var full map[string]any
		if err := vc.Raw(ctx, "GET", "/api/v1/trace/"+llmTrace, nil, &full); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(full["messages"])
		if msgs = string(b); strings.Contains(msgs, "echo: via proxy") && strings.Contains(msgs, "echo: cli") {
			break
		}
	}
	for _, want := range []string{"echo hello please", "I will call the echo tool.", "echo: via proxy", "echo: cli"} {
		if !strings.Contains(msgs, want) {
			t.Errorf("the shared trace lacks %q: %s", want, msgs)
		}
	}
	if ts := traces(); len(ts) != 1 {
		t.Errorf("%d traces in the dataset, want the one shared trace", len(ts))
	}
}

// TestStandaloneGatewayMCPRefusals: the standalone gateway's MCP routes
// resolve keys through the server: an unknown key is 401, a read-scope
// key 403, a dataset without a key 400; without a dataset and key the
// call is proxied unrecorded.
func TestStandaloneGatewayMCPRefusals(t *testing.T) {
	serveEnv(t)
	upstream := echoUpstream(t)
	p := startInProcess(t, "--data-dir", filepath.Join(t.TempDir(), "data"))
	gw, _ := startGateway(t, p.url)
	ctx := context.Background()
	read, err := client.New(p.url, testKey).CreateKey(ctx, client.KeyCreate{Scope: "read"})
	if err != nil {
		t.Fatal(err)
	}
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
	tests := []struct {
		name, path, key string
		status          int
		want            string
	}{
		{"unknown key", "/api/v1/gateway/ds/mcp/streamable", "vgl_unknown_0123456789abcdef0123456789", 401, "Invalid Invariant API key"},
		{"read-scope key", "/api/v1/gateway/ds/mcp/streamable", read.Key, 403, "forbidden"},
		{"dataset without key", "/api/v1/gateway/ds/mcp/streamable", "", 400, "Missing invariant api key"},
		{"no dataset, no key", "/api/v1/gateway/mcp/streamable", "", 200, `"serverInfo"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", gw+tt.path, strings.NewReader(init))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Mcp-Server-Base-Url", upstream)
			if tt.key != "" {
				req.Header.Set("Invariant-Authorization", "Bearer "+tt.key)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.status || !strings.Contains(string(body), tt.want) {
				t.Errorf("%d %s, want %d with %q", resp.StatusCode, body, tt.status, tt.want)
			}
		})
	}
}
