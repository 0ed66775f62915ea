package mcp_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/vigilhq/vigil/client"
	"github.com/vigilhq/vigil/mcp"
)

// upstream is a go-sdk streamable HTTP server with the test tools, whose
// environment (description variant, tool names) a test may change
// between sessions. A tools/call of "crash" drops the connection.
type upstream struct {
	*httptest.Server
	mu      sync.Mutex
	env     map[string]string
	calls   []string
	headers http.Header // of the last request
}

func (u *upstream) getenv(k string) string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.env[k]
}

func (u *upstream) set(k, v string) {
	u.mu.Lock()
	u.env[k] = v
	u.mu.Unlock()
}

func newUpstream(t *testing.T, opts *sdk.StreamableHTTPOptions) *upstream {
	t.Helper()
	u := &upstream{env: map[string]string{}}
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server {
		s := sdk.NewServer(&sdk.Implementation{Name: "httpsrv", Version: "2.0.0"}, nil)
		testTools(s, u.getenv)
		return s
	}, opts)
	mux := http.NewServeMux()
	mux.Handle("/mcp/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.headers = r.Header.Clone()
		u.mu.Unlock()
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			if strings.Contains(string(body), `"name":"crash"`) {
				if hj, ok := w.(http.Hijacker); ok {
					c, _, _ := hj.Hijack()
					c.Close()
					return
				}
			}
			if strings.Contains(string(body), `"tools/call"`) {
				u.mu.Lock()
				u.calls = append(u.calls, string(body))
				u.mu.Unlock()
			}
			r.Body = io.NopCloser(strings.NewReader(string(body)))
		}
		h.ServeHTTP(w, r)
	}))
	u.Server = httptest.NewServer(mux)
	t.Cleanup(u.Close)
	return u
}

// headerTransport adds headers to every request.
type headerTransport struct {
	h    http.Header
	base http.RoundTripper
}

func (ht headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range ht.h {
		r.Header[k] = v
	}
	return ht.base.RoundTrip(r)
}

// mountProxy mounts the proxy on the backend's listener the way the
// gateway router will: [/{dataset}]/mcp/{server}.
func mountProxy(b *backend, p *mcp.Proxy) {
	for _, m := range []string{"POST", "GET", "DELETE", "PUT"} {
		b.srv.Mount(m+" /api/v1/gateway/{dataset}/mcp/{server}", p)
		b.srv.Mount(m+" /api/v1/gateway/mcp/{server}", p)
	}
}

func connectHTTP(t *testing.T, endpoint string, h http.Header, revision string) *sdk.ClientSession {
	t.Helper()
	c := sdk.NewClient(&sdk.Implementation{Name: "http-client", Version: "0.2"}, nil)
	tr := &sdk.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: headerTransport{h, http.DefaultTransport}}, MaxRetries: -1}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, tr, &sdk.ClientSessionOptions{ProtocolVersion: revision})
	if err != nil {
		t.Fatalf("connect through the proxy: %v", err)
	}
	return cs
}

func TestHTTPProxy(t *testing.T) {
	for _, rev := range revisions {
		for _, jsonResp := range []bool{false, true} {
			name := rev + "/sse"
			if jsonResp {
				name = rev + "/json"
			}
			t.Run(name, func(t *testing.T) {
				b := newBackend(t)
				up := newUpstream(t, &sdk.StreamableHTTPOptions{JSONResponse: jsonResp})
				p := mcp.NewProxy(mcp.ProxyConfig{Backend: mcp.NewServerBackend(b.srv), GlobalRules: guard(t, argRule, outRule).Rules})
				defer p.Close(context.Background())
				mountProxy(b, p)
				h := http.Header{"Invariant-Api-Key": {adminKey}, "Mcp-Server-Base-Url": {up.URL}, "Invariant-X-Mcp-Server-X-Probe": {"hello"}}
				cs := connectHTTP(t, b.URL+"/api/v1/gateway/httpds/mcp/streamable", h, rev)
				tools := toolNames(t, cs)
				up.mu.Lock()
				if got := up.headers.Get("X-Probe"); got != "hello" {
					t.Errorf("INVARIANT-X-MCP-SERVER-X-Probe reached the upstream as %q, want X-Probe: hello", got)
				}
				for _, k := range []string{"Invariant-Api-Key", "Mcp-Server-Base-Url", "Invariant-X-Mcp-Server-X-Probe"} {
					if up.headers.Get(k) != "" {
						t.Errorf("%s was forwarded upstream", k)
					}
				}
				up.mu.Unlock()
				if tools["echo"] == nil || tools["secret"] == nil {
					t.Fatalf("tools = %v", tools)
				}
				if text, _, err := callText(t, cs, "echo", map[string]any{"text": "hi"}); err != nil || text != "echo: hi" {
					t.Fatalf("echo: %q, %v", text, err)
				}
				_, _, err := callText(t, cs, "echo", map[string]any{"text": "forbidden"})
				if err == nil || !strings.Contains(err.Error(), "forbidden text") {
					t.Errorf("blocked call: %v", err)
				}
				_, _, err = callText(t, cs, "secret", nil)
				if err == nil || !strings.Contains(err.Error(), "secret in tool output") {
					t.Errorf("blocked result: %v", err)
				}
				// A crash of the upstream mid-call: a clean error.
				if _, _, err := callText(t, cs, "crash", nil); err == nil {
					t.Error("crashed call succeeded")
				}
				cs.Close()
				p.Close(context.Background())
				up.mu.Lock()
				for _, c := range up.calls {
					if strings.Contains(c, "forbidden") {
						t.Errorf("the blocked call reached the upstream: %s", c)
					}
				}
				up.mu.Unlock()
				trs := b.traces(t, "httpds")
				if len(trs) != 1 {
					t.Fatalf("%d traces, want 1 per session", len(trs))
				}
				tr := trs[0]
				if tr.ExtraMetadata["mcp_server"] != "httpsrv" || tr.ExtraMetadata["transport"] != "streamable-http" || tr.ExtraMetadata["mcp_client"] != "http-client" {
					t.Errorf("metadata = %v", tr.ExtraMetadata)
				}
				if v, _ := tr.ExtraMetadata["vigil"].(map[string]any); v["blocked_calls"] != float64(2) || tr.ExtraMetadata["tools"] == nil {
					t.Errorf("metadata vigil = %v, tools %v", tr.ExtraMetadata["vigil"], tr.ExtraMetadata["tools"] != nil)
				}
				// list (2) + echo (2) + blocked call (2) + blocked result (2) + crash (2)
				if len(tr.Messages) != 10 {
					t.Errorf("%d events, want 10", len(tr.Messages))
				}
			})
		}
	}
}

func TestHTTPProxyRugPull(t *testing.T) {
	for _, rev := range revisions {
		t.Run(rev, func(t *testing.T) {
			b := newBackend(t)
			up := newUpstream(t, nil)
			p := mcp.NewProxy(mcp.ProxyConfig{Backend: mcp.NewServerBackend(b.srv), Servers: []mcp.ServerConfig{{Name: "tools", URL: up.URL + "/mcp/"}}})
			defer p.Close(context.Background())
			mountProxy(b, p)
			h := http.Header{"Invariant-Authorization": {"Bearer " + adminKey}}
			endpoint := b.URL + "/api/v1/gateway/pinds/mcp/tools"
			cs := connectHTTP(t, endpoint, h, rev)
			toolNames(t, cs)
			cs.Close()
			up.set("VIGIL_MCP_DESC", "v2")
			cs = connectHTTP(t, endpoint, h, rev)
			tools := toolNames(t, cs)
			if tools["blocked_echo"] == nil || tools["echo"] != nil {
				t.Fatalf("tools after change = %v", tools)
			}
			if _, _, err := callText(t, cs, "echo", map[string]any{"text": "x"}); err == nil || !strings.Contains(err.Error(), "rug pull") {
				t.Errorf("changed tool call: %v", err)
			}
			cs.Close()
			pins, _ := b.c.MCPPins(context.Background(), "httpsrv")
			for _, pin := range pins {
				if pin.Status == "pending" {
					if _, err := b.c.ApproveMCPPin(context.Background(), pin.ID); err != nil {
						t.Fatal(err)
					}
				}
			}
			cs = connectHTTP(t, endpoint, h, rev)
			if tools := toolNames(t, cs); tools["echo"] == nil {
				t.Fatalf("tools after approval = %v", tools)
			}
			if text, _, err := callText(t, cs, "echo", map[string]any{"text": "ok"}); err != nil || text != "echo: ok" {
				t.Errorf("approved tool: %q, %v", text, err)
			}
			cs.Close()
		})
	}
}

func TestHTTPProxyRefusals(t *testing.T) {
	b := newBackend(t)
	up := newUpstream(t, nil)
	p := mcp.NewProxy(mcp.ProxyConfig{Backend: mcp.NewServerBackend(b.srv), AllowedOrigins: []string{"https://app.example"}})
	mountProxy(b, p)
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
	tests := []struct {
		name   string
		path   string
		header map[string]string
		host   string
		body   string
		status int
		want   string
	}{
		{"foreign origin", "/api/v1/gateway/mcp/streamable", map[string]string{"Origin": "https://evil.example", "Mcp-Server-Base-Url": up.URL}, "", init, 403, "Origin"},
		{"allowed origin", "/api/v1/gateway/mcp/streamable", map[string]string{"Origin": "https://app.example", "Mcp-Server-Base-Url": up.URL}, "", init, 200, `"result"`},
		{"own origin", "/api/v1/gateway/mcp/streamable", map[string]string{"Origin": b.URL, "Mcp-Server-Base-Url": up.URL}, "", init, 200, `"result"`},
		{"rebinding host", "/api/v1/gateway/mcp/streamable", map[string]string{"Mcp-Server-Base-Url": up.URL}, "evil.example:80", init, 403, "Host"},
		{"upstream host not allowed", "/api/v1/gateway/mcp/streamable", map[string]string{"Mcp-Server-Base-Url": "http://10.1.2.3:9"}, "", init, 403, "allowed_upstream_hosts"},
		{"no base url", "/api/v1/gateway/mcp/streamable", nil, "", init, 400, "MCP-SERVER-BASE-URL"},
		{"unknown server", "/api/v1/gateway/mcp/nosuch", nil, "", init, 404, "nosuch"},
		{"SSE transport", "/api/v1/gateway/mcp/sse", nil, "", init, 501, "use streamable HTTP"},
		{"bad key", "/api/v1/gateway/ds/mcp/streamable", map[string]string{"Invariant-Api-Key": "nope-nope-nope-nope-nope", "Mcp-Server-Base-Url": up.URL}, "", init, 401, "Invalid Invariant API key"},
		{"dataset without key", "/api/v1/gateway/ds/mcp/streamable", map[string]string{"Mcp-Server-Base-Url": up.URL}, "", init, 400, "Missing invariant api key"},
		{"malformed JSON", "/api/v1/gateway/mcp/streamable", map[string]string{"Mcp-Server-Base-Url": up.URL}, "", `{"jsonrpc":`, 400, "-32700"},
		{"not JSON-RPC", "/api/v1/gateway/mcp/streamable", map[string]string{"Mcp-Server-Base-Url": up.URL}, "", `{"a":1}`, 400, "-32700"},
		{"oversized", "/api/v1/gateway/mcp/streamable", map[string]string{"Mcp-Server-Base-Url": up.URL}, "", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"` + strings.Repeat("a", mcp.MaxMessageBytes) + `"}}`, 413, "limit"},
		{"wrong method", "/api/v1/gateway/mcp/streamable", map[string]string{"Mcp-Server-Base-Url": up.URL, "X-Method": "PUT"}, "", init, 405, "method not allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			method := "POST"
			if m := tt.header["X-Method"]; m != "" {
				method = m
			}
			req, _ := http.NewRequest(method, b.URL+tt.path, strings.NewReader(tt.body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			if tt.host != "" {
				req.Host = tt.host
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
			if resp.StatusCode == 200 && resp.Header.Get("Vigil-Request-Id") == "" {
				t.Error("no Vigil-Request-Id on a proxied answer")
			}
		})
	}
}

// TestHTTPProxyStatelessUpstream: an upstream without sessions gets a
// Vigil session id the proxy strips before forwarding.
func TestHTTPProxyStatelessUpstream(t *testing.T) {
	b := newBackend(t)
	up := newUpstream(t, &sdk.StreamableHTTPOptions{Stateless: true})
	p := mcp.NewProxy(mcp.ProxyConfig{Backend: mcp.NewServerBackend(b.srv)})
	defer p.Close(context.Background())
	mountProxy(b, p)
	h := http.Header{"Invariant-Api-Key": {adminKey}, "Mcp-Server-Base-Url": {up.URL}}
	cs := connectHTTP(t, b.URL+"/api/v1/gateway/sl/mcp/streamable", h, "2025-11-25")
	if !strings.HasPrefix(cs.ID(), "vgl-") {
		t.Errorf("session id %q, want a vgl- id from Vigil", cs.ID())
	}
	if text, _, err := callText(t, cs, "echo", map[string]any{"text": "s"}); err != nil || text != "echo: s" {
		t.Fatalf("echo: %q, %v", text, err)
	}
	cs.Close()
	p.Close(context.Background())
	trs := b.traces(t, "sl")
	if len(trs) != 1 || trs[0].ExtraMetadata["session_id"] != cs.ID() {
		t.Fatalf("traces = %d; session_id %v, want %s", len(trs), trs[0].ExtraMetadata["session_id"], cs.ID())
	}
}

// TestHTTPProxySharedSessionTrace: MCP sessions carrying the same
// Invariant-Session key as the agent's LLM calls record into the trace
// the gateway keeps for that key ("h:<value>").
func TestHTTPProxySharedSessionTrace(t *testing.T) {
	b := newBackend(t)
	up := newUpstream(t, nil)
	p := mcp.NewProxy(mcp.ProxyConfig{Backend: mcp.NewServerBackend(b.srv)})
	defer p.Close(context.Background())
	mountProxy(b, p)
	// The LLM side of the agent session, recorded first (as the gateway does).
	caller, err := b.srv.AuthenticateKey(context.Background(), adminKey)
	if err != nil {
		t.Fatal(err)
	}
	llm, err := b.srv.RecordMCPTrace(context.Background(), caller, "agents", "h:agent-7", map[string]any{"via_gateway": true},
		[]byte(`[{"role":"user","content":"list the files"},{"role":"assistant","content":"calling the tool"}]`))
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{"Invariant-Api-Key": {adminKey}, "Mcp-Server-Base-Url": {up.URL}, "Invariant-Session": {"agent-7"}}
	for range 2 {
		cs := connectHTTP(t, b.URL+"/api/v1/gateway/agents/mcp/streamable", h, "2025-11-25")
		if _, _, err := callText(t, cs, "echo", map[string]any{"text": "x"}); err != nil {
			t.Fatal(err)
		}
		cs.Close()
	}
	p.Close(context.Background())
	trs := b.traces(t, "agents")
	if len(trs) != 1 || trs[0].ID != llm {
		t.Fatalf("%d traces, want the LLM trace %s only", len(trs), llm)
	}
	if n := len(trs[0].Messages); n != 2+4 {
		t.Errorf("%d events, want the 2 LLM events and 2 calls with results", n)
	}
	// A bad session key is refused.
	req, _ := http.NewRequest("POST", b.URL+"/api/v1/gateway/agents/mcp/streamable", strings.NewReader(`{}`))
	req.Header.Set("Invariant-Session", strings.Repeat("x", 129))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Errorf("long session key: %d, want 400", resp.StatusCode)
	}
}

// swappable serves the current proxy, so a test can restart it.
type swappable struct {
	mu sync.Mutex
	p  *mcp.Proxy
}

func (s *swappable) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	p := s.p
	s.mu.Unlock()
	p.ServeHTTP(w, r)
}

// TestHTTPProxyRestart: a proxy restarted under a live upstream session
// re-attaches it to the same trace.
func TestHTTPProxyRestart(t *testing.T) {
	b := newBackend(t)
	up := newUpstream(t, nil)
	cfg := mcp.ProxyConfig{Backend: mcp.NewServerBackend(b.srv)}
	sw := &swappable{p: mcp.NewProxy(cfg)}
	for _, m := range []string{"POST", "GET", "DELETE"} {
		b.srv.Mount(m+" /api/v1/gateway/{dataset}/mcp/{server}", sw)
	}
	h := http.Header{"Invariant-Api-Key": {adminKey}, "Mcp-Server-Base-Url": {up.URL}}
	cs := connectHTTP(t, b.URL+"/api/v1/gateway/rs/mcp/streamable", h, "2025-11-25")
	if _, _, err := callText(t, cs, "echo", map[string]any{"text": "before"}); err != nil {
		t.Fatal(err)
	}
	sw.p.Close(context.Background())
	sw.mu.Lock()
	sw.p = mcp.NewProxy(cfg)
	sw.mu.Unlock()
	if text, _, err := callText(t, cs, "echo", map[string]any{"text": "after"}); err != nil || text != "echo: after" {
		t.Fatalf("call after the restart: %q, %v", text, err)
	}
	cs.Close()
	sw.p.Close(context.Background())
	trs := b.traces(t, "rs")
	if len(trs) != 1 || len(trs[0].Messages) != 4 {
		t.Fatalf("%d traces (%v), want one with both calls", len(trs), trs)
	}
}

// TestHTTPProxyRuleChange: a guardrail written to the dataset applies to
// the next request of a session already open.
func TestHTTPProxyRuleChange(t *testing.T) {
	b := newBackend(t)
	up := newUpstream(t, nil)
	p := mcp.NewProxy(mcp.ProxyConfig{Backend: mcp.NewServerBackend(b.srv)})
	defer p.Close(context.Background())
	mountProxy(b, p)
	h := http.Header{"Invariant-Api-Key": {adminKey}, "Mcp-Server-Base-Url": {up.URL}}
	cs := connectHTTP(t, b.URL+"/api/v1/gateway/live/mcp/streamable", h, "2025-11-25")
	defer cs.Close()
	if _, _, err := callText(t, cs, "echo", map[string]any{"text": "forbidden"}); err != nil {
		t.Fatalf("before the rule: %v", err)
	}
	var ds *client.Dataset
	var err error
	for range 50 {
		if ds, err = b.c.GetDatasetByName(context.Background(), "admin", "live"); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if ds == nil {
		t.Fatal(err)
	}
	// A request once the dataset exists: its id and ruleset version are
	// now cached, and the write below must still apply at once.
	if _, _, err := callText(t, cs, "echo", map[string]any{"text": "still allowed"}); err != nil {
		t.Fatalf("before the rule: %v", err)
	}
	if _, err := b.c.CreateGuardrail(context.Background(), ds.ID, client.GuardrailCreate{Name: "no forbidden", Action: "block", Policy: argRule}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := callText(t, cs, "echo", map[string]any{"text": "forbidden"}); err == nil || !strings.Contains(err.Error(), "forbidden text") {
		t.Errorf("after the rule: %v, want the block", err)
	}
}

// TestHTTPProxyCancelRenameRemove: a cancelled call, then a server that
// renames one tool and drops another, through the proxy.
func TestHTTPProxyCancelRenameRemove(t *testing.T) {
	b := newBackend(t)
	up := newUpstream(t, nil)
	p := mcp.NewProxy(mcp.ProxyConfig{Backend: mcp.NewServerBackend(b.srv), Servers: []mcp.ServerConfig{{Name: "tools", URL: up.URL + "/mcp/"}}})
	defer p.Close(context.Background())
	mountProxy(b, p)
	h := http.Header{"Invariant-Api-Key": {adminKey}}
	endpoint := b.URL + "/api/v1/gateway/crr/mcp/tools"
	cs := connectHTTP(t, endpoint, h, "2026-07-28")
	toolNames(t, cs)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	_, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "slow", Arguments: map[string]any{}})
	cancel()
	if err == nil {
		t.Fatal("cancelled call returned a result")
	}
	if text, _, err := callText(t, cs, "echo", map[string]any{"text": "after"}); err != nil || text != "echo: after" {
		t.Fatalf("after cancel: %q, %v", text, err)
	}
	cs.Close()
	up.set("VIGIL_MCP_ECHO_NAME", "repeat")
	up.set("VIGIL_MCP_NO_SECRET", "1")
	cs = connectHTTP(t, endpoint, h, "2026-07-28")
	if tools := toolNames(t, cs); tools["repeat"] == nil || tools["secret"] != nil {
		t.Fatalf("tools = %v", tools)
	}
	cs.Close()
	p.Close(context.Background())
	fs := pinFindings(t, b)
	got := map[string]string{}
	for _, f := range fs {
		parts := strings.SplitN(f.Key, ":", 3)
		got[parts[0]+" "+parts[1]] = f.Severity
	}
	for k, v := range map[string]string{"added httpsrv/repeat": "warn", "removed httpsrv/echo": "info", "removed httpsrv/secret": "info"} {
		if got[k] != v {
			t.Errorf("finding %s = %q, want %q (all %v)", k, got[k], v, got)
		}
	}
}

// TestHTTPProxyAuthorization: the client's Authorization belongs to the
// MCP server (forwarded as is, an upstream 401 passed back with its
// WWW-Authenticate); a Vigil key smuggled as ";invariant-auth=" is cut
// off before forwarding.
func TestHTTPProxyAuthorization(t *testing.T) {
	b := newBackend(t)
	var mu sync.Mutex
	var gotAuth []string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		gotAuth = append(gotAuth, r.Header.Get("Authorization"))
		mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer oauth-token" {
			w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="http://localhost/.well-known/oauth-protected-resource"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{}}`)
	}))
	defer up.Close()
	p := mcp.NewProxy(mcp.ProxyConfig{Backend: mcp.NewServerBackend(b.srv)})
	mountProxy(b, p)
	send := func(auth string) *http.Response {
		req, _ := http.NewRequest("POST", b.URL+"/api/v1/gateway/authds/mcp/streamable", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		req.Header.Set("Mcp-Server-Base-Url", up.URL)
		req.Header.Set("Content-Type", "application/json")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	if resp := send("Bearer oauth-token;invariant-auth=" + adminKey); resp.StatusCode != 200 {
		t.Errorf("smuggled key: %d, want 200", resp.StatusCode)
	}
	resp := send("Bearer wrong;invariant-auth=" + adminKey)
	if resp.StatusCode != 401 || !strings.Contains(resp.Header.Get("WWW-Authenticate"), "resource_metadata") {
		t.Errorf("upstream 401: %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	if resp := send("Bearer oauth-token;invariant-auth=bogus-bogus-bogus-bogus"); resp.StatusCode != 401 {
		t.Errorf("bad smuggled key: %d, want Vigil's 401", resp.StatusCode)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, a := range gotAuth {
		if strings.Contains(a, "invariant-auth") || strings.Contains(a, adminKey) {
			t.Errorf("the Vigil key reached the upstream: %q", a)
		}
	}
	if len(gotAuth) != 2 || gotAuth[0] != "Bearer oauth-token" {
		t.Errorf("upstream saw %q", gotAuth)
	}
}
