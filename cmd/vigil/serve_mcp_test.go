package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// headerRT adds headers to every request a client sends.
type headerRT struct{ h http.Header }

func (rt headerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range rt.h {
		r.Header[k] = v
	}
	return http.DefaultTransport.RoundTrip(r)
}

// TestServeMCPThroughGateway: vigil serve's gateway router hands the MCP
// routes to the MCP proxy. A go-sdk client reaches a go-sdk streamable
// server through /api/v1/gateway/DATASET/mcp/streamable, its call passes
// and is recorded as a trace of DATASET, and a dataset rule blocks a call.
func TestServeMCPThroughGateway(t *testing.T) {
	serveEnv(t)
	up := sdk.NewServer(&sdk.Implementation{Name: "upstream", Version: "1"}, nil)
	sdk.AddTool(up, &sdk.Tool{Name: "echo", Description: "Echo the text."}, func(ctx context.Context, req *sdk.CallToolRequest, in struct {
		Text string `json:"text"`
	}) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "echo: " + in.Text}}}, nil, nil
	})
	mux := http.NewServeMux()
	mux.Handle("/mcp/", sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return up }, nil))
	upstream := httptest.NewServer(mux)
	defer upstream.Close()

	p := startInProcess(t, "--data-dir", filepath.Join(t.TempDir(), "data"))
	hc := &http.Client{Transport: headerRT{http.Header{
		"Mcp-Server-Base-Url":     {upstream.URL},
		"Invariant-Authorization": {"Bearer " + testKey},
	}}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	connect := func() *sdk.ClientSession {
		c := sdk.NewClient(&sdk.Implementation{Name: "agent", Version: "1"}, nil)
		cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: p.url + "/api/v1/gateway/mcpds/mcp/streamable", HTTPClient: hc}, nil)
		if err != nil {
			t.Fatalf("connect through the gateway: %v\n%s", err, p.stderr.String())
		}
		return cs
	}
	text := func(res *sdk.CallToolResult) string {
		var b strings.Builder
		for _, c := range res.Content {
			if tc, ok := c.(*sdk.TextContent); ok {
				b.WriteString(tc.Text)
			}
		}
		return b.String()
	}

	cs := connect()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hello through vigil"}})
	if err != nil || res.IsError || text(res) != "echo: hello through vigil" {
		t.Fatalf("echo: %v %+v", err, res)
	}
	cs.Close()

	// The session is a trace of mcpds holding the call and its output.
	var found bool
	for deadline := time.Now().Add(10 * time.Second); !found && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		req, _ := http.NewRequest("GET", p.url+"/api/v1/search?q="+`"hello%20through%20vigil"`, nil)
		req.Header.Set("Authorization", "Bearer "+testKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var out struct {
			Traces []struct {
				Dataset struct {
					Name string `json:"name"`
				} `json:"dataset"`
			} `json:"traces"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		found = len(out.Traces) > 0 && out.Traces[0].Dataset.Name == "mcpds"
	}
	if !found {
		t.Fatalf("the MCP session was not recorded:\n%s", p.stderr.String())
	}

	// A blocking guardrail on the dataset stops a call before the server
	// sees it.
	body := `{"name": "no-secret", "policy": "raise \"no secret echo\" if:\n    (call: ToolCall)\n    call is tool:echo\n    \"secret\" in call.function.arguments.text\n", "action": "block", "enabled": true}`
	dsReq, _ := http.NewRequest("GET", p.url+"/api/v1/dataset/byuser/admin/mcpds", nil)
	dsReq.Header.Set("Authorization", "Bearer "+testKey)
	resp, err := http.DefaultClient.Do(dsReq)
	if err != nil {
		t.Fatal(err)
	}
	var ds struct {
		ID string `json:"id"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&ds)
	resp.Body.Close()
	if ds.ID == "" {
		t.Fatalf("dataset mcpds: %d", resp.StatusCode)
	}
	greq, _ := http.NewRequest("POST", p.url+"/api/v1/dataset/"+ds.ID+"/policy", strings.NewReader(body))
	greq.Header.Set("Authorization", "Bearer "+testKey)
	greq.Header.Set("Content-Type", "application/json")
	if resp, err := http.DefaultClient.Do(greq); err != nil || resp.StatusCode != 200 {
		t.Fatalf("create guardrail: %v %v", err, resp.StatusCode)
	}
	cs = connect()
	defer cs.Close()
	res, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "the secret"}})
	if err == nil && !res.IsError {
		t.Fatalf("a call the rule forbids passed: %+v", res)
	}
	if err == nil && strings.Contains(text(res), "echo: the secret") {
		t.Fatalf("the upstream answered a blocked call: %s", text(res))
	}
}
