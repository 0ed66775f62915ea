package bench

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// With VIGIL_BENCH_MCP_SERVER set, this test binary is the MCP server of
// BenchmarkMCPStdioBinary: a go-sdk server over stdio with one tool.
func init() {
	if os.Getenv("VIGIL_BENCH_MCP_SERVER") == "" {
		return
	}
	s := sdk.NewServer(&sdk.Implementation{Name: "bench", Version: "1"}, nil)
	sdk.AddTool(s, &sdk.Tool{Name: "echo", Description: "Echo the text."}, func(ctx context.Context, req *sdk.CallToolRequest, in struct {
		Text string `json:"text"`
	}) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: in.Text}}}, nil, nil
	})
	_ = s.Run(context.Background(), &sdk.StdioTransport{})
	os.Exit(0)
}

// BenchmarkMCPStdioBinary is M1 with the real binary: a go-sdk client
// calls tools/call on a stdio server directly and through
// `vigil mcp run` (a separate process, one blocking rule from
// --guardrails-file, no store), interleaved, on 1 and 32 sessions, and
// reports the percentiles and the added latency.
//
//	go test ./bench -run '^$' -bench MCPStdioBinary -benchtime 2000x -count 1
func BenchmarkMCPStdioBinary(b *testing.B) {
	dir := b.TempDir()
	bin := buildVigil(b, dir)
	rule := filepath.Join(dir, "rule.gr")
	if err := os.WriteFile(rule, []byte("raise \"no rm\" if:\n    (call: ToolCall)\n    \"rm -rf\" in call.function.arguments.text\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	env := append(os.Environ(), "VIGIL_BENCH_MCP_SERVER=1")
	connect := func(cmd *exec.Cmd) *sdk.ClientSession {
		cmd.Env = env
		cs, err := sdk.NewClient(&sdk.Implementation{Name: "bench", Version: "1"}, nil).Connect(context.Background(), &sdk.CommandTransport{Command: cmd}, &sdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { cs.Close() })
		return cs
	}
	call := func(cs *sdk.ClientSession) (time.Duration, error) {
		t := time.Now()
		_, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "bench"}})
		return time.Since(t), err
	}
	for _, conc := range []int{1, 32} {
		name := "c=1"
		if conc > 1 {
			name = "c=32"
		}
		b.Run(name, func(b *testing.B) {
			type pair struct{ direct, vigil *sdk.ClientSession }
			pairs := make([]pair, conc)
			for i := range pairs {
				pairs[i].direct = connect(exec.Command(exe, "-test.run=^$"))
				pairs[i].vigil = connect(exec.Command(bin, "mcp", "run", "--guardrails-file", rule, "--log-file", filepath.Join(dir, "mcp.log"),
					"--cache-dir", filepath.Join(dir, "cache"), "--spool-dir", filepath.Join(dir, "spool"), "--", exe, "-test.run=^$"))
				for range 50 {
					call(pairs[i].direct)
					call(pairs[i].vigil)
				}
			}
			var mu sync.Mutex
			var direct, vigil []time.Duration
			errs := 0
			per := max(1, b.N/conc)
			b.ResetTimer()
			var wg sync.WaitGroup
			for _, p := range pairs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range per {
						d, err1 := call(p.direct)
						v, err2 := call(p.vigil)
						mu.Lock()
						if err1 != nil || err2 != nil {
							errs++
						} else {
							direct, vigil = append(direct, d), append(vigil, v)
						}
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			slices.Sort(direct)
			slices.Sort(vigil)
			pct := func(s []time.Duration, q float64) float64 {
				if len(s) == 0 {
					return 0
				}
				return float64(s[min(len(s)-1, int(q*float64(len(s))))].Microseconds())
			}
			b.ReportMetric(pct(direct, 0.5), "direct-p50-µs")
			b.ReportMetric(pct(vigil, 0.5), "vigil-p50-µs")
			b.ReportMetric(pct(vigil, 0.5)-pct(direct, 0.5), "added-p50-µs")
			b.ReportMetric(pct(vigil, 0.99)-pct(direct, 0.99), "added-p99-µs")
			b.ReportMetric(float64(errs), "errors")
			if errs > 0 {
				b.Errorf("%d calls failed", errs)
			}
		})
	}
}
