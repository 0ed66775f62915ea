package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// vigil bench mcp: the MCP configurations of the gateway benchmark, M1
// (tools/call through the stdio wrapper) and M2 (through the streamable
// HTTP proxy), measured against the same mock MCP server called directly
// with the official MCP Go SDK as the client.

// benchMCPText is the argument of every benchmarked tools/call.
const benchMCPText = "the quick brown fox jumps over the lazy dog"

// benchMCPServer is the mock MCP server: one tool, echo, answering with
// its text argument.
func benchMCPServer() *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "vigil-bench-mock", Version: "1"}, nil)
	sdk.AddTool(s, &sdk.Tool{Name: "echo", Description: "Echo the text."}, func(ctx context.Context, req *sdk.CallToolRequest, in struct {
		Text string `json:"text"`
	}) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: in.Text}}}, nil, nil
	})
	return s
}

// benchMCPHandler serves the mock MCP server over streamable HTTP.
func benchMCPHandler() http.Handler {
	s := benchMCPServer()
	return sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil)
}

// serveMCPStdio runs the mock MCP server on stdin and stdout until the
// client closes stdin.
func serveMCPStdio(ctx context.Context, stdin io.Reader, stdout io.Writer) error {
	err := benchMCPServer().Run(ctx, &sdk.IOTransport{Reader: io.NopCloser(stdin), Writer: nopWriteCloser{stdout}})
	if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, io.EOF) {
		return fmt.Errorf("bench mock --mcp-stdio: %w", err)
	}
	return nil
}

// lockedWriter serialises writes to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (lw *lockedWriter) Write(p []byte) (int, error) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return lw.w.Write(p)
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// mcpTarget is one way to reach the mock: a streamable HTTP endpoint or a
// stdio command.
type mcpTarget struct {
	name    string
	url     string
	command []string
	header  http.Header
	stderr  io.Writer // the command's stderr
}

// mcpSession is one client session of a target; over HTTP it sees each
// response's Vigil-Overhead-Ms.
type mcpSession struct {
	cs       *sdk.ClientSession
	overhead *overheadRT
}

// overheadRT adds headers to requests and keeps the last response's
// Vigil-Overhead-Ms (-1 when absent). A session makes one call at a time.
type overheadRT struct {
	header http.Header
	base   http.RoundTripper
	mu     sync.Mutex
	last   float64
}

func (rt *overheadRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range rt.header {
		r.Header[k] = v
	}
	resp, err := rt.base.RoundTrip(r)
	if err == nil && r.Method == http.MethodPost {
		v := -1.0
		if h := resp.Header.Get("Vigil-Overhead-Ms"); h != "" {
			if f, perr := strconv.ParseFloat(h, 64); perr == nil {
				v = f
			}
		}
		rt.mu.Lock()
		rt.last = v
		rt.mu.Unlock()
	}
	return resp, err
}

func (rt *overheadRT) take() float64 {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	v := rt.last
	rt.last = -1
	return v
}

func (t mcpTarget) connect(ctx context.Context, tr http.RoundTripper) (*mcpSession, error) {
	c := sdk.NewClient(&sdk.Implementation{Name: "vigil-bench", Version: "1"}, nil)
	s := &mcpSession{}
	var transport sdk.Transport
	if t.url != "" {
		s.overhead = &overheadRT{header: t.header, base: tr, last: -1}
		transport = &sdk.StreamableClientTransport{Endpoint: t.url, HTTPClient: &http.Client{Transport: s.overhead}, DisableStandaloneSSE: true}
	} else {
		cmd := exec.Command(t.command[0], t.command[1:]...)
		cmd.Stderr = t.stderr
		transport = &sdk.CommandTransport{Command: cmd}
	}
	cs, err := c.Connect(ctx, transport, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: connect: %w", t.name, err)
	}
	s.cs = cs
	return s, nil
}

// call makes one tools/call and measures it.
func (s *mcpSession) call(ctx context.Context) sample {
	start := time.Now()
	res, err := s.cs.CallTool(ctx, &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": benchMCPText}})
	out := sample{total: time.Since(start), overhead: -1}
	if s.overhead != nil {
		out.overhead = s.overhead.take()
	}
	if err != nil || res.IsError {
		out.err = true
	}
	return out
}

func benchMCP(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("bench mcp", "bench mcp (--direct URL --gateway URL | --direct-command CMD --gateway-command CMD) [flags]",
		"Measure MCP tools/call round trips through Vigil against direct calls to the same mock MCP\n"+
			"server, with the official MCP Go SDK as the client: M2 over streamable HTTP (--direct\n"+
			"http://127.0.0.1:9000/mcp/ of `vigil bench mock`, --gateway the proxy's endpoint with\n"+
			"--header MCP-SERVER-BASE-URL: …, optionally --floor through `vigil bench proxy` and --relay\n"+
			"through `vigil bench relay`) or M1 over stdio (--direct-command 'vigil bench mock\n"+
			"--mcp-stdio', --gateway-command 'vigil mcp run -- vigil bench mock --mcp-stdio', optionally\n"+
			"--relay-command 'vigil bench relay -- vigil bench mock --mcp-stdio'; commands are split at spaces). One session per target at concurrency 1 in interleaved rounds, then\n"+
			"--sessions concurrent sessions in a closed loop. Results are appended to --out as JSON and\n"+
			"summarised in Markdown on stdout (and --md).", stderr)
	direct := fs.String("direct", "", "the mock's streamable HTTP endpoint URL (M2)")
	gw := fs.String("gateway", "", "the proxy's streamable HTTP endpoint URL (M2)")
	floor := fs.String("floor", "", "the mock's endpoint through `vigil bench proxy` (M2, optional): what one more HTTP hop costs")
	relay := fs.String("relay", "", "the mock's endpoint through `vigil bench relay --upstream` (M2, optional): the hardware floor of one more hop")
	directCmd := fs.String("direct-command", "", "the command serving the mock over stdio (M1)")
	relayCmd := fs.String("relay-command", "", "the mock served through `vigil bench relay -- …` (M1, optional): the hardware floor of one more process")
	gwCmd := fs.String("gateway-command", "", "the wrapper command serving the mock over stdio (M1)")
	config := fs.String("config-id", "", "configuration id recorded with the results (default M2 over HTTP, M1 over stdio)")
	n := fs.Int("requests", 2000, "measured calls per target at concurrency 1")
	warm := fs.Int("warmup", 200, "warm-up calls per target")
	rounds := fs.Int("rounds", 7, "interleaved rounds")
	sessions := fs.String("sessions", "32", "concurrent session counts for the closed loop, e.g. 32 (empty: none)")
	out := fs.String("out", "bench-results.json", "results file (a JSON array; appended to)")
	md := fs.String("md", "", "also write the Markdown summary to this file")
	var hdrs headerFlags
	fs.Var(&hdrs, "header", "a header sent to the gateway, \"Name: value\" (repeatable)")
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	var targets []mcpTarget
	switch {
	case *direct != "" && *gw != "" && *directCmd == "" && *gwCmd == "":
		gh := http.Header{}
		for _, x := range hdrs {
			k, v, ok := strings.Cut(x, ":")
			if !ok {
				return exitCode(2, "bench mcp: --header "+x+": want \"Name: value\"")
			}
			gh.Add(strings.TrimSpace(k), strings.TrimSpace(v))
		}
		targets = []mcpTarget{{name: "direct", url: *direct}}
		if *relay != "" {
			targets = append(targets, mcpTarget{name: "relay", url: *relay})
		}
		if *floor != "" {
			targets = append(targets, mcpTarget{name: "floor", url: *floor})
		}
		targets = append(targets, mcpTarget{name: "gateway", url: *gw, header: gh})
		if *config == "" {
			*config = "M2"
		}
	case *directCmd != "" && *gwCmd != "" && *direct == "" && *gw == "":
		if len(hdrs) > 0 || *floor != "" || *relay != "" {
			return exitCode(2, "bench mcp: --header, --floor and --relay apply to URLs (M2), not to commands")
		}
		// Every session's command writes to stderr: one at a time.
		errw := &lockedWriter{w: stderr}
		targets = []mcpTarget{{name: "direct", command: strings.Fields(*directCmd), stderr: errw}}
		if *relayCmd != "" {
			targets = append(targets, mcpTarget{name: "relay", command: strings.Fields(*relayCmd), stderr: errw})
		}
		targets = append(targets, mcpTarget{name: "gateway", command: strings.Fields(*gwCmd), stderr: errw})
		if *config == "" {
			*config = "M1"
		}
	default:
		return exitCode(2, "bench mcp: give --direct and --gateway (streamable HTTP) or --direct-command and --gateway-command (stdio)")
	}
	var concs []int
	for _, s := range strings.Split(*sessions, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		c, err := strconv.Atoi(s)
		if err != nil || c < 1 {
			return exitCode(2, "bench mcp: --sessions "+s+": want a positive number")
		}
		concs = append(concs, c)
	}
	if *n < 1 || *rounds < 1 || *warm < 0 {
		return exitCode(2, "bench mcp: --requests and --rounds must be positive, --warmup not negative")
	}
	tr := &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 4096, MaxIdleConns: 4096, DisableCompression: true, IdleConnTimeout: time.Minute}
	defer tr.CloseIdleConnections()

	var results []BenchResult
	add := func(meas, target string, v map[string]float64) {
		for k, x := range v {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				delete(v, k)
			}
		}
		results = append(results, BenchResult{Config: *config, Payload: "tools/call", Measurement: meas, Target: target, Values: v})
	}
	var summary strings.Builder
	transport := "streamable HTTP"
	if targets[0].url == "" {
		transport = "stdio"
	}
	fmt.Fprintf(&summary, "## vigil bench: %s, MCP tools/call over %s\n\n%s\n\n", *config, transport, envLine())

	// 1. Concurrency 1: one session per target, interleaved rounds.
	one := make([]*mcpSession, len(targets))
	for i, t := range targets {
		s, err := t.connect(ctx, tr)
		if err != nil {
			return fmt.Errorf("bench mcp: %w", err)
		}
		defer s.cs.Close()
		one[i] = s
		for range *warm {
			if x := s.call(ctx); x.err {
				return fmt.Errorf("bench mcp: %s: a warm-up tools/call failed", t.name)
			}
		}
	}
	per := max(1, *n / *rounds)
	all := map[string][]sample{}
	roundP50 := map[string][]float64{}
	for range *rounds {
		for i, t := range targets {
			ss := make([]sample, 0, per)
			for range per {
				ss = append(ss, one[i].call(ctx))
			}
			all[t.name] = append(all[t.name], ss...)
			roundP50[t.name] = append(roundP50[t.name], pct(totals(ss), 50))
		}
	}
	fmt.Fprintf(&summary, "### concurrency 1 (%d calls per target in %d interleaved rounds)\n\n", per**rounds, *rounds)
	fmt.Fprintf(&summary, "| target | p50 µs | p90 µs | p99 µs | max µs | added p50 µs | added p99 µs | errors |\n|---|---|---|---|---|---|---|---|\n")
	d := totals(all["direct"])
	for _, t := range targets {
		v := c1Stats(all, roundP50, t.name)
		if t.name == "gateway" {
			if acc, ok := headerAccuracy(all["gateway"], pct(d, 50)); ok {
				v["overhead_header_mean_abs_diff_ms"] = acc
			}
		}
		add("c1", t.name, v)
		fmt.Fprintf(&summary, "| %s | %.0f | %.0f | %.0f | %.0f | %+.0f | %+.0f | %d |\n", t.name, 1000*v["p50_ms"], 1000*v["p90_ms"], 1000*v["p99_ms"], 1000*v["max_ms"],
			1000*v["added_p50_ms"], 1000*v["added_p99_ms"], errs(all[t.name]))
	}
	if *floor != "" {
		g, f := totals(all["gateway"]), totals(all["floor"])
		fmt.Fprintf(&summary, "\ngateway − floor: p50 %+.0f µs, p99 %+.0f µs\n", 1000*(pct(g, 50)-pct(f, 50)), 1000*(pct(g, 99)-pct(f, 99)))
		add("c1", "gateway-floor", map[string]float64{"p50_ms": pct(g, 50) - pct(f, 50), "p99_ms": pct(g, 99) - pct(f, 99)})
	}
	if *relay != "" || *relayCmd != "" {
		g, f := totals(all["gateway"]), totals(all["relay"])
		fmt.Fprintf(&summary, "\ngateway − relay: p50 %+.0f µs, p99 %+.0f µs\n", 1000*(pct(g, 50)-pct(f, 50)), 1000*(pct(g, 99)-pct(f, 99)))
		add("c1", "gateway-relay", map[string]float64{"p50_ms": pct(g, 50) - pct(f, 50), "p99_ms": pct(g, 99) - pct(f, 99)})
	}
	if r := results[len(targets)-1]; r.Values["overhead_header_mean_abs_diff_ms"] != 0 {
		fmt.Fprintf(&summary, "\nVigil-Overhead-Ms vs measured added latency: mean absolute difference %.3f ms\n", r.Values["overhead_header_mean_abs_diff_ms"])
	}

	// 2. Concurrent sessions, closed loop.
	if len(concs) > 0 {
		fmt.Fprintf(&summary, "\n### concurrent sessions (closed loop)\n\n| target | sessions | calls/s | p50 µs | p99 µs | added p50 µs | added p99 µs | errors |\n|---|---|---|---|---|---|---|---|\n")
	}
	for _, c := range concs {
		var dp50, dp99 float64
		for _, t := range targets {
			ss, secs, err := mcpClosedLoop(ctx, t, tr, c, max(*n, 20*c))
			if err != nil {
				return fmt.Errorf("bench mcp: %w", err)
			}
			x := totals(ss)
			if t.name == "direct" {
				dp50, dp99 = pct(x, 50), pct(x, 99)
			}
			v := map[string]float64{"sessions": float64(c), "rps": float64(len(ss)) / secs, "p50_ms": pct(x, 50), "p99_ms": pct(x, 99),
				"added_p50_ms": pct(x, 50) - dp50, "added_p99_ms": pct(x, 99) - dp99, "errors": float64(errs(ss))}
			add("sessions", t.name, v)
			fmt.Fprintf(&summary, "| %s | %d | %.0f | %.0f | %.0f | %+.0f | %+.0f | %d |\n", t.name, c, v["rps"], 1000*v["p50_ms"], 1000*v["p99_ms"],
				1000*v["added_p50_ms"], 1000*v["added_p99_ms"], errs(ss))
		}
	}
	if err := appendResults(*out, results); err != nil {
		return fmt.Errorf("bench mcp: %w", err)
	}
	fmt.Fprint(stdout, summary.String())
	if *md != "" {
		f, err := os.OpenFile(*md, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return fmt.Errorf("bench mcp: %w", err)
		}
		defer f.Close()
		fmt.Fprintln(f, summary.String())
	}
	return nil
}

// mcpClosedLoop opens c sessions of t, warms each up, then makes n calls
// spread over them, each session one call at a time.
func mcpClosedLoop(ctx context.Context, t mcpTarget, tr http.RoundTripper, c, n int) ([]sample, float64, error) {
	ss := make([]*mcpSession, c)
	defer func() {
		for _, s := range ss {
			if s != nil {
				s.cs.Close()
			}
		}
	}()
	for i := range ss {
		s, err := t.connect(ctx, tr)
		if err != nil {
			return nil, 0, err
		}
		ss[i] = s
		for range 10 {
			s.call(ctx)
		}
	}
	next := make(chan struct{}, n)
	for range n {
		next <- struct{}{}
	}
	close(next)
	var mu sync.Mutex
	var out []sample
	var wg sync.WaitGroup
	start := time.Now()
	for _, s := range ss {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range next {
				x := s.call(ctx)
				mu.Lock()
				out = append(out, x)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return out, time.Since(start).Seconds(), nil
}
