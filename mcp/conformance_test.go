package mcp_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/vigilhq/vigil/mcp"
)

// TestConformance runs the server scenarios of the official MCP
// conformance suite (@modelcontextprotocol/conformance, installed with
// Node ≥ 22 from mcp/testdata/conformance/package.json) against our
// everything-server directly and through the streamable HTTP proxy, and
// requires the same outcome for every check, including the
// DNS-rebinding scenario that the proxy answers itself.
func TestConformance(t *testing.T) {
	dir := os.Getenv("VIGIL_TEST_MCP_CONFORMANCE")
	if dir == "" {
		t.Skip("VIGIL_TEST_MCP_CONFORMANCE is unset (a folder with node_modules from mcp/testdata/conformance/package.json; .ci/run sets it)")
	}
	node := filepath.Join(dir, "node_modules", ".bin", "node")
	cli := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js")
	for _, p := range []string{node, cli} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("VIGIL_TEST_MCP_CONFORMANCE=%s: %v", dir, err)
		}
	}
	srv := everythingServer()
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, &sdk.StreamableHTTPOptions{EventStore: sdk.NewMemoryEventStore(nil)})
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	up := httptest.NewServer(mux)
	defer up.Close()

	b := newBackend(t)
	p := mcp.NewProxy(mcp.ProxyConfig{Backend: mcp.NewServerBackend(b.srv), Servers: []mcp.ServerConfig{{Name: "everything", URL: up.URL + "/mcp"}}})
	defer p.Close(context.Background())
	mountProxy(b, p)

	localhost := func(u string) string { return strings.Replace(u, "127.0.0.1", "localhost", 1) }
	direct := runConformance(t, node, cli, localhost(up.URL)+"/mcp")
	proxied := runConformance(t, node, cli, localhost(b.URL)+"/api/v1/gateway/mcp/everything")

	nChecks, nFail := 0, 0
	for _, cs := range direct {
		for _, c := range cs {
			nChecks++
			if strings.HasSuffix(c, "=FAILURE") {
				nFail++
			}
		}
	}
	t.Logf("%d scenarios, %d checks (%d failing directly)", len(direct), nChecks, nFail)
	if len(direct) < 25 {
		t.Fatalf("only %d scenarios ran directly: %v", len(direct), keys(direct))
	}
	for sc, want := range direct {
		got, ok := proxied[sc]
		if !ok {
			t.Errorf("%s: did not run through the proxy", sc)
			continue
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: through the proxy %v, directly %v", sc, got, want)
		}
		for _, c := range want {
			if strings.HasSuffix(c, "=FAILURE") {
				t.Errorf("%s: %s fails against the everything-server itself", sc, c)
			}
		}
	}
}

// runConformance runs every server scenario against url and returns, per
// scenario, its checks as sorted "id=status" strings (INFO checks left
// out: they describe traffic, not outcomes).
func runConformance(t *testing.T, node, cli, url string) map[string][]string {
	t.Helper()
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, cli, "server", "--suite", "all", "--url", url, "-o", out)
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	log, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("conformance against %s timed out: %s", url, log)
	}
	_ = err // failures are compared below
	res := map[string][]string{}
	_ = filepath.WalkDir(out, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "checks.json" {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		var checks []struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		}
		if json.Unmarshal(data, &checks) != nil {
			return nil
		}
		sc := filepath.Base(filepath.Dir(path))
		sc = strings.TrimPrefix(sc, "server-")
		sc = stampRx.ReplaceAllString(sc, "")
		var list []string
		for _, c := range checks {
			if c.Status != "INFO" {
				list = append(list, c.ID+"="+c.Status)
			}
		}
		sort.Strings(list)
		res[sc] = list
		return nil
	})
	if len(res) == 0 {
		t.Fatalf("no results from the conformance suite against %s: %s", url, log)
	}
	return res
}

// stampRx matches the time stamp the suite appends to result folders.
var stampRx = regexp.MustCompile(`-\d{4}-\d{2}-\d{2}T[0-9-]+Z?$`)

func keys(m map[string][]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
