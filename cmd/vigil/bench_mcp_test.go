package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// With VIGIL_CMD_AS_VIGIL=1 this test binary is vigil itself: its
// arguments are vigil's (the commands `vigil bench mcp` starts for M1).
func init() {
	if os.Getenv("VIGIL_CMD_AS_VIGIL") != "1" {
		return
	}
	os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

var mockListenRx = regexp.MustCompile(`vigil bench (?:mock|proxy|relay): listening on (http://[0-9.:]+)`)

// startBenchMock runs `vigil bench mock --listen 127.0.0.1:0` in the test
// process and returns its base URL.
func startBenchMock(t *testing.T) string {
	t.Helper()
	return startBench(t, "mock")
}

// startBench runs `vigil bench <what> --listen 127.0.0.1:0 args…` in the
// test process and returns its base URL.
func startBench(t *testing.T, what string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stderr := &syncBuffer{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		run(ctx, append([]string{"bench", what, "--listen", "127.0.0.1:0"}, args...), strings.NewReader(""), io.Discard, stderr)
	}()
	t.Cleanup(func() { cancel(); <-done })
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if m := mockListenRx.FindStringSubmatch(stderr.String()); m != nil {
			return m[1]
		}
	}
	t.Fatalf("bench %s did not start: %s", what, stderr.String())
	return ""
}

// readBenchResults reads bench-results.json.
func readBenchResults(t *testing.T, path string) []BenchResult {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rs []BenchResult
	if err := json.Unmarshal(b, &rs); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return rs
}

// checkMCPResults asserts the c=1 and concurrent-session results of
// config: both targets, every call answered, latencies measured.
func checkMCPResults(t *testing.T, rs []BenchResult, config string, sessions float64) map[string]BenchResult {
	t.Helper()
	got := map[string]BenchResult{}
	for _, r := range rs {
		if r.Config != config {
			continue
		}
		if r.Payload != "tools/call" {
			t.Errorf("%s %s %s: payload %q", config, r.Measurement, r.Target, r.Payload)
		}
		got[r.Measurement+"/"+r.Target] = r
	}
	for _, k := range []string{"c1/direct", "c1/gateway", "sessions/direct", "sessions/gateway"} {
		r, ok := got[k]
		if !ok {
			t.Fatalf("%s: no %s result in %+v", config, k, rs)
		}
		if r.Values["errors"] != 0 {
			t.Errorf("%s %s: %v errors", config, k, r.Values["errors"])
		}
		if !(r.Values["p50_ms"] > 0 && r.Values["p99_ms"] >= r.Values["p50_ms"]) {
			t.Errorf("%s %s: p50 %v p99 %v", config, k, r.Values["p50_ms"], r.Values["p99_ms"])
		}
		if _, ok := r.Values["added_p50_ms"]; !ok {
			t.Errorf("%s %s: no added_p50_ms", config, k)
		}
	}
	if s := got["sessions/gateway"].Values["sessions"]; s != sessions {
		t.Errorf("%s: sessions %v, want %v", config, s, sessions)
	}
	return got
}

// TestBenchMCP runs the reduced MCP benchmark: M2 through the
// streamable proxy of a real vigil serve against the mock's /mcp/, and
// M1 through `vigil mcp run` against `vigil bench mock --mcp-stdio`.
func TestBenchMCP(t *testing.T) {
	t.Run("M2", func(t *testing.T) {
		serveEnv(t)
		mock := startBenchMock(t)
		floor := startBench(t, "proxy", "--upstream", mock)
		relay := startBench(t, "relay", "--upstream", strings.TrimPrefix(mock, "http://"))
		p := startInProcess(t, "--data-dir", filepath.Join(t.TempDir(), "data"))
		dir := t.TempDir()
		res, md := filepath.Join(dir, "bench-results.json"), filepath.Join(dir, "bench-summary.md")
		code, out, errs := runVigil(t, "", "bench", "mcp", "--direct", mock+"/mcp/", "--gateway", p.url+"/api/v1/gateway/mcp/streamable",
			"--header", "MCP-SERVER-BASE-URL: "+mock, "--floor", floor+"/mcp/", "--relay", relay+"/mcp/", "--requests", "70", "--warmup", "5", "--sessions", "4", "--out", res, "--md", md)
		if code != 0 {
			t.Fatalf("bench mcp: %d\n%s\n%s", code, out, errs)
		}
		got := checkMCPResults(t, readBenchResults(t, res), "M2", 4)
		for _, k := range []string{"c1/floor", "sessions/floor", "c1/gateway-floor", "c1/relay", "sessions/relay", "c1/gateway-relay"} {
			if _, ok := got[k]; !ok {
				t.Errorf("no %s result", k)
			}
		}
		if len(got["c1/direct"].Values) == 0 || got["c1/direct"].Values["added_p50_ms"] != 0 {
			t.Errorf("direct's added latency is against itself: %v", got["c1/direct"].Values)
		}
		if _, ok := got["c1/gateway"].Values["overhead_header_mean_abs_diff_ms"]; !ok {
			t.Errorf("the proxy's Vigil-Overhead-Ms was not compared with the measured added latency: %v", got["c1/gateway"].Values)
		}
		summary, _ := os.ReadFile(md)
		for _, want := range []string{"## vigil bench: M2, MCP tools/call over streamable HTTP", "### concurrency 1 (70 calls per target", "| gateway | 4 |", "| floor | 4 |", "| relay | 4 |", "gateway − floor: p50", "gateway − relay: p50"} {
			if !strings.Contains(string(summary), want) || !strings.Contains(out, want) {
				t.Errorf("summary lacks %q:\n%s", want, summary)
			}
		}
	})
	t.Run("M1", func(t *testing.T) {
		serveEnv(t)
		t.Setenv("VIGIL_API_KEY", "")
		t.Setenv("VIGIL_CMD_AS_VIGIL", "1")
		exe, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		res := filepath.Join(dir, "bench-results.json")
		mockCmd := exe + " bench mock --mcp-stdio"
		wrapCmd := exe + " mcp run --log-file " + filepath.Join(dir, "mcp.log") + " --cache-dir " + filepath.Join(dir, "cache") +
			" --spool-dir " + filepath.Join(dir, "spool") + " -- " + mockCmd
		code, out, errs := runVigil(t, "", "bench", "mcp", "--direct-command", mockCmd, "--gateway-command", wrapCmd,
			"--relay-command", exe+" bench relay -- "+mockCmd, "--requests", "35", "--warmup", "5", "--sessions", "2", "--out", res)
		if code != 0 {
			t.Fatalf("bench mcp: %d\n%s\n%s", code, out, errs)
		}
		got := checkMCPResults(t, readBenchResults(t, res), "M1", 2)
		for _, k := range []string{"c1/relay", "sessions/relay", "c1/gateway-relay"} {
			if _, ok := got[k]; !ok {
				t.Errorf("no %s result", k)
			}
		}
		if !strings.Contains(out, "## vigil bench: M1, MCP tools/call over stdio") {
			t.Errorf("summary:\n%s", out)
		}
	})
	t.Run("usage", func(t *testing.T) {
		for _, args := range [][]string{
			{"bench", "mcp"},
			{"bench", "mcp", "--direct", "http://127.0.0.1:1/mcp/"},
			{"bench", "mcp", "--direct", "http://x/", "--gateway", "http://y/", "--direct-command", "a", "--gateway-command", "b"},
			{"bench", "mcp", "--direct-command", "a", "--gateway-command", "b", "--header", "X: y"},
			{"bench", "mcp", "--direct-command", "a", "--gateway-command", "b", "--floor", "http://z/"},
			{"bench", "mcp", "--direct-command", "a", "--gateway-command", "b", "--relay", "http://z/"},
			{"bench", "mcp", "--direct", "http://x/", "--gateway", "http://y/", "--sessions", "zero"},
		} {
			code, _, errs := runVigil(t, "", args...)
			if code != 2 || !strings.Contains(errs, "bench mcp:") {
				t.Errorf("%v: code %d, stderr %q", args, code, errs)
			}
		}
		for _, args := range [][]string{{"bench", "relay"}, {"bench", "relay", "--upstream", "127.0.0.1:1", "--", "cat"}} {
			code, _, errs := runVigil(t, "", args...)
			if code != 2 || !strings.Contains(errs, "bench relay:") {
				t.Errorf("%v: code %d, stderr %q", args, code, errs)
			}
		}
	})
}
