package mcp_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vigilhq/vigil/mcp"
)

// upstreamDelay is how long the scripted upstream takes per answer.
const upstreamDelay = 40 * time.Millisecond

// scriptedUpstream answers tools/call after upstreamDelay, as one JSON
// body or (with ?sse) as an event stream whose headers go out at once
// and whose event comes after the delay; notifications get 202.
func scriptedUpstream(t *testing.T) *httptest.Server {
	t.Helper()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !strings.Contains(string(body), `"id"`) {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		answer := `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"done"}]}}`
		if r.URL.Query().Has("sse") {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			time.Sleep(upstreamDelay)
			io.WriteString(w, "event: message\ndata: "+answer+"\n\n")
			return
		}
		time.Sleep(upstreamDelay)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, answer)
	}))
	t.Cleanup(hs.Close)
	return hs
}

// TestHTTPProxyOverheadHeaders: every answer of the MCP routes carries
// Vigil-Overhead-Ms, Vigil-Upstream-Ms and Vigil-Guardrails-Ms (spec
// §3.5). The upstream time covers the upstream's answer (for an event
// stream, up to its first event, with the headers held until then), and
// overhead plus upstream time never exceeds what the client measured.
func TestHTTPProxyOverheadHeaders(t *testing.T) {
	up := scriptedUpstream(t)
	rule, err := mcp.LoadRule("r1", "no forbidden", "raise \"forbidden tool\" if:\n    (call: ToolCall)\n    call is tool:forbidden\n", "block")
	if err != nil {
		t.Fatal(err)
	}
	p := mcp.NewProxy(mcp.ProxyConfig{GlobalRules: []*mcp.Rule{rule}, Servers: []mcp.ServerConfig{
		{Name: "json", URL: up.URL + "/mcp/"}, {Name: "events", URL: up.URL + "/mcp/?sse"}}})
	defer p.Close(t.Context())
	mux := http.NewServeMux()
	mux.Handle("/mcp/{server}", p)
	hs := httptest.NewServer(mux)
	defer hs.Close()

	call := func(tool string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + tool + `","arguments":{"x":"y"}}}`
	}
	tests := []struct {
		name         string
		server, body string
		minUpstream  time.Duration // Vigil-Upstream-Ms at least
		zeroUpstream bool
		want         string
	}{
		{"JSON answer", "json", call("echo"), upstreamDelay, false, `"done"`},
		{"event stream", "events", call("echo"), upstreamDelay, false, `"done"`},
		{"blocked call", "json", call("forbidden"), 0, true, "forbidden tool"},
		{"notification", "json", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, 0, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", hs.URL+"/mcp/"+tt.server, strings.NewReader(tt.body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			start := time.Now()
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			measured := time.Since(start) // headers received
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if !strings.Contains(string(body), tt.want) {
				t.Fatalf("%d %s: want %q", resp.StatusCode, body, tt.want)
			}
			hdr := map[string]time.Duration{}
			for _, h := range []string{"Vigil-Overhead-Ms", "Vigil-Upstream-Ms", "Vigil-Guardrails-Ms"} {
				v := resp.Header.Get(h)
				f, err := strconv.ParseFloat(v, 64)
				if err != nil || f < 0 || !strings.Contains(v, ".") || len(v)-strings.Index(v, ".") != 4 {
					t.Fatalf("%s = %q: want milliseconds with 3 decimals", h, v)
				}
				hdr[h] = time.Duration(f * float64(time.Millisecond))
			}
			if up := hdr["Vigil-Upstream-Ms"]; up < tt.minUpstream || tt.zeroUpstream && up != 0 {
				t.Errorf("Vigil-Upstream-Ms %v, want ≥ %v (zero: %v)", up, tt.minUpstream, tt.zeroUpstream)
			}
			if sum := hdr["Vigil-Overhead-Ms"] + hdr["Vigil-Upstream-Ms"]; sum > measured+time.Millisecond {
				t.Errorf("overhead %v + upstream %v exceeds the %v the client measured", hdr["Vigil-Overhead-Ms"], hdr["Vigil-Upstream-Ms"], measured)
			}
			if g := hdr["Vigil-Guardrails-Ms"]; g > hdr["Vigil-Overhead-Ms"]+time.Millisecond {
				t.Errorf("Vigil-Guardrails-Ms %v is more than the overhead %v it is part of", g, hdr["Vigil-Overhead-Ms"])
			}
		})
	}
}
