package main

import (
	"context"
	"encoding/json"
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
	if err := mountAsk(srv, cfg); err != nil {
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
