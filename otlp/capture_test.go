package otlp_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vigilhq/vigil/otlp"
)

// The Node captures: testdata/node/capture.js runs a two-step tool loop
// (the official openai client, or the AI SDK, against a mock upstream)
// under each instrumentation people run; testdata/captures/<mode>/ holds
// the OTLP export requests it sent (traces-N.pb, logs-N.pb, in order),
// committed so that the mapping is checked everywhere. Every mode must
// become the same trace.

var captureModes = []string{"openinference", "openllmetry", "contrib", "vercel", "vercel-legacy"}

const wantCapture = `system "You are a weather assistant."
user "What is the weather in Paris?"
assistant call(call_weather_1 get_weather {"city":"Paris"})
tool "18°C, sunny" for call_weather_1
assistant "It is 18°C and sunny in Paris."`

// checkCapture checks the one trace of dataset capture-<mode>: events,
// model and usage (40+60 input, 7+11 output tokens: the chat calls only,
// never the agent or wrapper spans' totals on top).
func checkCapture(t *testing.T, b *backend, mode string) {
	t.Helper()
	ts := b.traces(t, "capture-"+mode)
	if len(ts) != 1 {
		for _, tr := range ts {
			t.Logf("%s:\n%s", tr.SessionKey, summary(tr.events))
		}
		t.Fatalf("%d traces, want 1", len(ts))
	}
	if got := summary(ts[0].events); got != wantCapture {
		t.Errorf("events:\n%s\nwant:\n%s", got, wantCapture)
	}
	usage, _ := ts[0].meta["usage"].(map[string]any)
	if usage["input_tokens"] != 100.0 || usage["output_tokens"] != 18.0 {
		t.Errorf("usage = %v, want 100/18", ts[0].meta["usage"])
	}
	if m, _ := ts[0].meta["model"].(string); !strings.HasPrefix(m, "gpt-4o-mini") {
		t.Errorf("model = %v", ts[0].meta["model"])
	}
}

// TestCaptures replays the committed captures, twice (the second time
// is an exporter retry and must add nothing).
func TestCaptures(t *testing.T) {
	for _, mode := range captureModes {
		t.Run(mode, func(t *testing.T) {
			files, _ := filepath.Glob(filepath.Join("testdata", "captures", mode, "*.pb"))
			if len(files) == 0 {
				t.Fatal("no capture")
			}
			seq := func(f string) string { _, n, _ := strings.Cut(filepath.Base(f), "-"); return n }
			slices.SortFunc(files, func(a, b string) int { return strings.Compare(seq(a), seq(b)) })
			b := newBackend(t, sqliteStore, otlp.Config{})
			for range 2 {
				for _, f := range files {
					body, err := os.ReadFile(f)
					if err != nil {
						t.Fatal(err)
					}
					path := "/v1/traces"
					if strings.HasPrefix(filepath.Base(f), "logs-") {
						path = "/v1/logs"
					}
					if resp, out := post(t, b.url+path, b.key, "application/x-protobuf", body, nil); resp.StatusCode != 200 {
						t.Fatalf("%s: %d %s", f, resp.StatusCode, out)
					}
				}
				checkCapture(t, b, mode)
			}
		})
	}
}

// TestNodeCaptures runs the instrumentations themselves (Node >= 22 and
// the packages of testdata/node/package.json, installed in the folder
// VIGIL_TEST_NODE_OTEL names, which .ci/run sets) against a real server.
func TestNodeCaptures(t *testing.T) {
	dir := os.Getenv("VIGIL_TEST_NODE_OTEL")
	if dir == "" {
		t.Skip("VIGIL_TEST_NODE_OTEL not set: skipping the Node instrumentation captures")
	}
	node := filepath.Join(dir, "node_modules", ".bin", "node")
	script, _ := filepath.Abs(filepath.Join("testdata", "node", "capture.js"))
	for _, mode := range captureModes {
		t.Run(mode, func(t *testing.T) {
			b := newBackend(t, sqliteStore, otlp.Config{})
			cmd := exec.Command(node, script, mode)
			cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(dir, "node_modules"), "VIGIL_OTLP_URL="+b.url, "VIGIL_API_KEY="+b.key, "CAPTURE_DIR=")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("node capture.js %s: %v\n%s", mode, err, out)
			}
			checkCapture(t, b, mode)
		})
	}
}
