package gateway_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vigilhq/vigil/gateway"
)

// stepTwoRule blocks the model's second tool call.
const stepTwoRule = `raise "step 2 is forbidden" if:
    (call: ToolCall)
    call is tool:step({n: 2})
`

type frameworkResult struct {
	OK       bool   `json:"ok"`
	Steps    []int  `json:"steps"`
	Text     string `json:"text"`
	Error    string `json:"error"`
	APIError bool   `json:"apiError"`
}

// TestFrameworks runs the OpenAI Agents SDK, the Vercel AI SDK and
// LangChain through the gateway, changing only their base URL: a
// 3-call tool loop (chat completions and Responses, streaming and not)
// finishes and is one trace; a rule blocking the second tool call stops
// the tool from running, and the framework reports an API error.
// VIGIL_TEST_NODE_GATEWAY is a folder where gateway/testdata/frameworks/
// package.json is installed (.ci/run does it).
func TestFrameworks(t *testing.T) {
	dir := os.Getenv("VIGIL_TEST_NODE_GATEWAY")
	if dir == "" {
		t.Skip("VIGIL_TEST_NODE_GATEWAY is unset (a folder with the agent frameworks installed; .ci/run sets it)")
	}
	node := filepath.Join(dir, "node_modules", ".bin", "node")
	if _, err := os.Stat(node); err != nil {
		node = "node"
	}
	script, _ := filepath.Abs("testdata/frameworks/run.mjs")
	// The script runs from the install folder so its imports resolve.
	b, err := os.ReadFile(script)
	if err != nil {
		t.Fatal(err)
	}
	runner := filepath.Join(dir, "vigil-gateway-run.mjs")
	if err := os.WriteFile(runner, b, 0o644); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(o *gateway.Options) { o.OpenAIErrorNative = true })
	e.mock.SetScript(loopScript(2))
	run := func(t *testing.T, fw, api, mode, dataset string, hdr map[string]string) frameworkResult {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		base := e.base + "/" + dataset + "/openai"
		cmd := exec.CommandContext(ctx, node, runner, fw, api, mode, base, adminKey)
		cmd.Dir = dir
		cmd.Env = os.Environ()
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("node: %v\n%s", err, out)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		var r frameworkResult
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &r); err != nil {
			t.Fatalf("output %s", out)
		}
		return r
	}
	for _, fw := range []string{"agents", "ai", "langchain"} {
		for _, api := range []string{"chat", "responses"} {
			for _, mode := range []string{"json", "stream"} {
				name := fw + "-" + api + "-" + mode
				t.Run(name, func(t *testing.T) {
					r := run(t, fw, api, mode, name, nil)
					if !r.OK || len(r.Steps) != 2 || !strings.Contains(r.Text, "All done.") {
						t.Fatalf("run: %+v", r)
					}
					trs := e.traces(name)
					if len(trs) != 1 {
						var sizes []int
						for _, tr := range trs {
							sizes = append(sizes, len(tr.Messages))
						}
						t.Fatalf("%d traces (sizes %v), want 1", len(trs), sizes)
					}
				})
			}
		}
	}
	// Blocking step 2: a guardrail on the dataset.
	for _, fw := range []string{"agents", "ai", "langchain"} {
		for _, api := range []string{"chat", "responses"} {
			for _, mode := range []string{"json", "stream"} {
				name := "blocked-" + fw + "-" + api + "-" + mode
				t.Run(name, func(t *testing.T) {
					e.addGuardrail(name, "no step 2", stepTwoRule, "block", nil)
					r := run(t, fw, api, mode, name, nil)
					if r.OK || len(r.Steps) != 1 {
						t.Fatalf("step 2 ran or no error: %+v", r)
					}
					if !strings.Contains(r.Error, "guardrail") && !strings.Contains(r.Error, "did not pass") {
						t.Errorf("error does not name the guardrail: %q", r.Error)
					}
					if !r.APIError && mode == "json" {
						t.Errorf("not surfaced as an API error: %+v", r)
					}
				})
			}
		}
	}
}
