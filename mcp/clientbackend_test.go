package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vigilhq/vigil/client"
	"github.com/vigilhq/vigil/mcp"
	"github.com/vigilhq/vigil/server"
)

// TestClientBackend: the standalone gateway's Backend against a real
// server: a key opens its owner's store and the dataset's MCP rules;
// the rules are cached (the same Guard while nothing changed) until the
// change feed reports a change; LLM-only guardrails are not loaded; bad
// keys, read keys and an unreachable server are told apart.
func TestClientBackend(t *testing.T) {
	b := newBackend(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cb := mcp.NewClientBackend(b.URL, t.TempDir(), nil)
	defer cb.Close()

	acc, err := cb.Open(ctx, adminKey, "cbds")
	if err != nil {
		t.Fatal(err)
	}
	if acc.Store == nil || acc.Owner != b.adminID(t) || acc.Guard == nil || len(acc.Guard.Rules) != 0 || acc.Guard.Unavailable != "" {
		t.Fatalf("access: %+v", acc)
	}
	again, err := cb.Open(ctx, adminKey, "cbds")
	if err != nil || again.Guard != acc.Guard {
		t.Fatalf("the dataset rules were not cached: %v", err)
	}

	d, err := b.c.CreateDataset(ctx, "cbds", nil, false)
	if err != nil {
		t.Fatal(err)
	}
	yes := true
	if _, err := b.c.CreateGuardrail(ctx, d.ID, client.GuardrailCreate{Name: "llm only", Enabled: &yes, Action: "block",
		Scope:  &client.GuardrailScope{Kinds: []string{"llm"}},
		Policy: "raise \"x\" if:\n    (msg: Message)\n    \"x\" in msg.content\n"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.c.CreateGuardrail(ctx, d.ID, client.GuardrailCreate{Name: "mcp rule", Enabled: &yes, Action: "block",
		Scope:  &client.GuardrailScope{Kinds: []string{"mcp"}, MCPServers: []string{"files*"}},
		Policy: "raise \"no rm\" if:\n    (call: ToolCall)\n    call is tool:rm\n"}); err != nil {
		t.Fatal(err)
	}
	var g *mcp.Guard
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		a, err := cb.Open(ctx, adminKey, "cbds")
		if err != nil {
			t.Fatal(err)
		}
		if a.Guard != acc.Guard && len(a.Guard.Rules) == 1 {
			g = a.Guard
			break
		}
	}
	if g == nil {
		t.Fatal("the change feed never dropped the cached rules")
	}
	if r := g.Rules[0]; r.Name != "mcp rule" || r.Action != "block" || len(r.Servers) != 1 || r.Servers[0] != "files*" {
		t.Errorf("rule: %+v", r)
	}

	read, err := b.c.CreateKey(ctx, client.KeyCreate{Scope: "read"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, url, key string
		want           error
	}{
		{"unknown key", b.URL, "not-a-key-0123456789abcdef", server.ErrInvalidKey},
		{"read key", b.URL, read.Key, mcp.ErrForbidden},
	} {
		if _, err := mcp.NewClientBackend(tt.url, "", nil).Open(ctx, tt.key, "cbds"); !errors.Is(err, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
		}
	}
	down := mcp.NewClientBackend("http://127.0.0.1:1", "", nil)
	defer down.Close()
	if _, err := down.Open(ctx, adminKey, "cbds"); err == nil || errors.Is(err, server.ErrInvalidKey) || errors.Is(err, mcp.ErrForbidden) {
		t.Errorf("unreachable server: %v, want a transport error", err)
	}
	if acc, err := down.Open(ctx, "", ""); err != nil || acc.Store != nil {
		t.Errorf("no key: %+v %v, want an empty access", acc, err)
	}
}

// TestClientBackendSpool: while the server refuses pushes (503), the
// standalone proxy's session is spooled under a folder of the key (the
// key itself is not written), and a later gateway writes it when the
// key is next used.
func TestClientBackendSpool(t *testing.T) {
	b := newBackend(t)
	var down atomic.Bool
	down.Store(true)
	vigil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() && (r.URL.Path == "/api/v1/push/trace" || strings.HasSuffix(r.URL.Path, "/messages")) {
			http.Error(w, `{"detail":"down for the test"}`, http.StatusServiceUnavailable)
			return
		}
		b.srv.ServeHTTP(w, r)
	}))
	defer vigil.Close()
	up := newUpstream(t, nil)
	spool := t.TempDir()
	cb := mcp.NewClientBackend(vigil.URL, spool, nil)
	p := mcp.NewProxy(mcp.ProxyConfig{Backend: cb, Servers: []mcp.ServerConfig{{Name: "up", URL: up.URL + "/mcp/"}}})
	mux := http.NewServeMux()
	mux.Handle("/gw/{dataset}/mcp/{server}", p)
	gw := httptest.NewServer(mux)
	defer gw.Close()

	cs := connectHTTP(t, gw.URL+"/gw/spooled/mcp/up", http.Header{"Invariant-Api-Key": {adminKey}}, "2025-11-25")
	if text, _, err := callText(t, cs, "echo", map[string]any{"text": "kept for later"}); err != nil || !strings.Contains(text, "kept for later") {
		t.Fatalf("echo: %q %v", text, err)
	}
	cs.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p.Close(ctx)
	cb.Close()

	var files []string
	_ = filepath.WalkDir(spool, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, path)
			if b, _ := os.ReadFile(path); strings.Contains(string(b), adminKey) {
				t.Errorf("%s holds the key", path)
			}
		}
		return nil
	})
	if len(files) == 0 || filepath.Dir(filepath.Dir(files[0])) != spool {
		t.Fatalf("spooled files %v, want them in a folder of the key under %s", files, spool)
	}
	if _, err := b.c.GetDatasetByName(ctx, "admin", "spooled"); err == nil {
		t.Fatal("the session was recorded while pushes were refused")
	}

	down.Store(false)
	cb2 := mcp.NewClientBackend(vigil.URL, spool, nil)
	defer cb2.Close()
	if _, err := cb2.Open(ctx, adminKey, ""); err != nil {
		t.Fatal(err)
	}
	var trs []*client.Trace
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if _, err := b.c.GetDatasetByName(ctx, "admin", "spooled"); err == nil {
			if trs = b.traces(t, "spooled"); len(trs) == 1 {
				break
			}
		}
	}
	if len(trs) != 1 {
		t.Fatalf("the spooled session was not written at the key's next use: %d traces", len(trs))
	}
	if msgs, _ := json.Marshal(trs[0].Messages); !strings.Contains(string(msgs), "echo: kept for later") {
		t.Errorf("the written trace lacks the call: %s", msgs)
	}
}
