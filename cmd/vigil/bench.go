package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/vigilhq/vigil/gateway/providertest"
	"github.com/vigilhq/vigil/internal/buildinfo"
)

// vigil bench: the gateway benchmark (docs/gateway.md, Benchmarks): a
// mock upstream, a plain reverse proxy (the floor: what one extra
// loopback hop costs), and a load generator that measures the gateway
// against direct calls and the floor, interleaved.

func init() {
	register(command{name: "bench", summary: "gateway benchmark: mock upstream, floor proxy and load generator", run: runBench})
}

func runBench(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	usage := "Usage: vigil bench mock|proxy|run|mcp|relay|gate [flags]\n\n" +
		"  mock   serve the mock upstream (OpenAI, Anthropic, Gemini; streaming and not; an MCP server)\n" +
		"  proxy  serve a plain httputil.ReverseProxy in front of an upstream (the floor)\n" +
		"  run    measure direct, floor and gateway URLs; write bench-results.json and a summary\n" +
		"  mcp    measure MCP tools/call direct and through Vigil (M1 stdio, M2 streamable HTTP)\n" +
		"  relay  copy raw bytes both ways over TCP or stdio (the hardware floor under M1, M2)\n" +
		"  gate   compare a results file with a stored baseline; exit 1 on a regression (CI)\n"
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stderr, usage)
		if len(args) == 0 {
			return exitCode(2, "")
		}
		return nil
	}
	switch args[0] {
	case "mock":
		return benchMock(ctx, args[1:], stdin, stdout, stderr)
	case "proxy":
		return benchProxy(ctx, args[1:], stdout, stderr)
	case "run":
		return benchRun(ctx, args[1:], stdout, stderr)
	case "mcp":
		return benchMCP(ctx, args[1:], stdout, stderr)
	case "relay":
		return benchRelay(ctx, args[1:], stdin, stdout, stderr)
	case "gate":
		return benchGate(ctx, args[1:], stdout, stderr)
	}
	fmt.Fprint(stderr, usage)
	return exitCode(2, "bench: unknown subcommand "+args[0])
}

func serveUntil(ctx context.Context, ln net.Listener, h http.Handler) error {
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return hs.Shutdown(sctx)
	}
}

func benchMock(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("bench mock", "bench mock [--listen 127.0.0.1:9000] [flags]",
		"Serve the mock upstream: OpenAI chat completions and Responses under /v1, Anthropic at\n"+
			"/v1/messages, Gemini at /{ver}/models/{model}:generateContent|streamGenerateContent, and an\n"+
			"MCP server with one tool, echo, over streamable HTTP at /mcp/ (or on stdin and stdout with\n"+
			"--mcp-stdio).", stderr)
	listen := fs.String("listen", "127.0.0.1:9000", "listen address")
	latency := fs.Duration("latency", 0, "fixed latency before the response headers")
	size := fs.Int("response-chars", 500, "characters of assistant text (the 0.5 KB small payload)")
	chunks := fs.Int("chunk-chars", 8, "characters per streamed chunk")
	delay := fs.Duration("chunk-delay", 0, "pause before each streamed content chunk (spec: 20ms)")
	tools := fs.Bool("tool-calls", false, "answer with a tool call instead of text")
	mcpStdio := fs.Bool("mcp-stdio", false, "serve only the MCP server, over stdin and stdout (M1)")
	plain := fs.Bool("plain-http", false, "serve every request with net/http (by default non-streaming chat, messages and generateContent\nrequests are answered from a cache of whole responses, without net/http, unless --latency is set)")
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	if *mcpStdio {
		return serveMCPStdio(ctx, stdin, stdout)
	}
	text := strings.Repeat("lorem ipsum dolor sit amet, ", *size/28+1)[:*size]
	m := &providertest.Mock{Latency: *latency, ChunkChars: *chunks, ChunkDelay: *delay}
	m.Script = func(*providertest.Request) providertest.Reply {
		if *tools {
			return providertest.Reply{ToolCalls: []providertest.ToolCall{{ID: "call_1", Name: "send_email", Arguments: `{"to":"bob@example.com","body":"hello"}`}}}
		}
		return providertest.Reply{Text: text}
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("bench mock: %w", err)
	}
	fmt.Fprintf(stderr, "vigil bench mock: listening on http://%s\n", ln.Addr())
	mux := http.NewServeMux()
	mux.Handle("/mcp/", benchMCPHandler())
	mux.Handle("/", m)
	if *latency == 0 && !*plain {
		// The script's answers never change: the standard requests are
		// answered from a cache of whole responses (bench_mock_fast.go).
		return serveFastMock(ctx, ln, mux)
	}
	return serveUntil(ctx, ln, mux)
}

func benchProxy(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("bench proxy", "bench proxy --upstream URL [--listen 127.0.0.1:9001]",
		"Serve a plain net/http/httputil.ReverseProxy in front of --upstream: the floor the gateway\n"+
			"is compared with (one extra loopback hop, no parsing).", stderr)
	listen := fs.String("listen", "127.0.0.1:9001", "listen address")
	upstream := fs.String("upstream", "http://127.0.0.1:9000", "upstream URL")
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	u, err := url.Parse(*upstream)
	if err != nil {
		return fmt.Errorf("bench proxy: --upstream: %w", err)
	}
	rp := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(u) }, FlushInterval: -1,
		Transport: &http.Transport{MaxIdleConnsPerHost: 1024, ForceAttemptHTTP2: false}}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("bench proxy: %w", err)
	}
	fmt.Fprintf(stderr, "vigil bench proxy: listening on http://%s -> %s\n", ln.Addr(), u)
	return serveUntil(ctx, ln, rp)
}

// headerFlags is a repeatable "Name: value" flag.
type headerFlags []string

func (h *headerFlags) String() string     { return strings.Join(*h, ", ") }
func (h *headerFlags) Set(v string) error { *h = append(*h, v); return nil }

// benchTarget is one URL measured.
type benchTarget struct {
	name   string
	url    string
	header http.Header
}

// sample is one request's measurement.
type sample struct {
	total    time.Duration
	ttfb     time.Duration // first body byte
	gaps     []time.Duration
	overhead float64 // Vigil-Overhead-Ms, -1 when absent
	err      bool
}

// BenchResult is one object of bench-results.json.
type BenchResult struct {
	Config      string             `json:"config"`
	Payload     string             `json:"payload"`
	Measurement string             `json:"measurement"`
	Target      string             `json:"target"`
	Values      map[string]float64 `json:"values"`
}

func benchRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("bench run", "bench run --direct URL --gateway URL [--floor URL] [flags]",
		"Measure the gateway against direct calls to the same mock and against the floor proxy\n"+
			"(full endpoint URLs, e.g. http://127.0.0.1:9000/v1/chat/completions). Closed loop at\n"+
			"concurrency 1 in interleaved rounds, then --concurrency and --rates (open loop, constant\n"+
			"arrival rate, latency from the scheduled start). Results are appended to --out as JSON and\n"+
			"summarised in Markdown on stdout (and --md).", stderr)
	direct := fs.String("direct", "", "the mock's endpoint URL")
	floor := fs.String("floor", "", "the floor proxy's endpoint URL (optional)")
	gw := fs.String("gateway", "", "the gateway's endpoint URL")
	config := fs.String("config-id", "G1", "configuration id recorded with the results (G0, G1, G2, S1, …)")
	payload := fs.String("payload", "small", "payload: small (1 KB request) or large (100 KB history in 50 messages)")
	stream := fs.Bool("stream", false, "streaming requests")
	n := fs.Int("requests", 2000, "measured requests per target at concurrency 1")
	warm := fs.Int("warmup", 200, "warm-up requests per target")
	rounds := fs.Int("rounds", 7, "interleaved rounds")
	conc := fs.String("concurrency", "", "closed-loop concurrency levels, e.g. 16,64")
	rates := fs.String("rates", "", "open-loop rates in requests/s, e.g. 500,1000,2000,5000 (the floor, when given, runs each rate too)")
	dur := fs.Duration("rate-duration", 5*time.Second, "duration of each open-loop rate")
	conns := fs.Int("conns", 512, "open loop: requests in flight per target at most (one connection each); later ones wait, their wait counted")
	out := fs.String("out", "bench-results.json", "results file (a JSON array; appended to)")
	md := fs.String("md", "", "also write the Markdown summary to this file")
	pid := fs.Int("gateway-pid", 0, "the gateway's process id, to report its RSS")
	var hdrs headerFlags
	fs.Var(&hdrs, "header", "a header sent to the gateway, \"Name: value\" (repeatable)")
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	if *direct == "" || *gw == "" {
		return exitCode(2, "bench run: --direct and --gateway are required")
	}
	h := http.Header{"Content-Type": {"application/json"}, "Authorization": {"Bearer sk-bench"}}
	gh := h.Clone()
	for _, x := range hdrs {
		k, v, ok := strings.Cut(x, ":")
		if !ok {
			return exitCode(2, "bench run: --header "+x+": want \"Name: value\"")
		}
		gh.Add(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	targets := []benchTarget{{"direct", *direct, h}}
	if *floor != "" {
		targets = append(targets, benchTarget{"floor", *floor, h})
	}
	targets = append(targets, benchTarget{"gateway", *gw, gh})
	body := benchBody(*payload, *stream)
	// The load engine (bench_loop.go) drives the closed and open loops;
	// concurrency 1 keeps net/http.
	loads := map[string]*loadClient{}
	if *conc != "" || *rates != "" {
		for _, t := range targets {
			lc, err := newLoadClient(t, body, *stream)
			if err != nil {
				return fmt.Errorf("bench run: %w", err)
			}
			loads[t.name] = lc
			defer lc.closeAll()
		}
	}
	tr := &http.Transport{MaxIdleConnsPerHost: 4096, MaxIdleConns: 4096, DisableCompression: true, IdleConnTimeout: time.Minute}
	hc := &http.Client{Transport: tr, Timeout: time.Minute}
	var results []BenchResult
	add := func(meas, target string, v map[string]float64) {
		for k, x := range v {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				delete(v, k) // not measured (no samples)
			}
		}
		results = append(results, BenchResult{Config: *config, Payload: *payload, Measurement: meas, Target: target, Values: v})
	}
	var summary strings.Builder
	fmt.Fprintf(&summary, "## vigil bench: %s, %s payload, stream=%v\n\n%s\n\n", *config, *payload, *stream, envLine())
	cpu0 := cpuSeconds(*pid)
	rec0, recOK := recorderStats(hc, *gw)
	if *pid > 0 {
		add("resources", "gateway", map[string]float64{"rss_idle_mib": rssMiB(*pid)})
		fmt.Fprintf(&summary, "gateway RSS before the run: %.1f MiB\n\n", rssMiB(*pid))
	}
	// 1. Concurrency 1, interleaved rounds.
	for _, t := range targets {
		for i := 0; i < *warm; i++ {
			benchOne(ctx, hc, t, body, *stream)
		}
	}
	per := max(1, *n / *rounds)
	all := map[string][]sample{}
	roundP50 := map[string][]float64{}
	for r := 0; r < *rounds; r++ {
		for _, t := range targets {
			var ss []sample
			for i := 0; i < per; i++ {
				ss = append(ss, benchOne(ctx, hc, t, body, *stream))
			}
			all[t.name] = append(all[t.name], ss...)
			roundP50[t.name] = append(roundP50[t.name], pct(totals(ss), 50))
		}
	}
	fmt.Fprintf(&summary, "### concurrency 1 (%d requests per target in %d interleaved rounds)\n\n", per**rounds, *rounds)
	fmt.Fprintf(&summary, "| target | p50 ms | p90 ms | p99 ms | max ms | added p50 | added p90 | added p99 | errors |\n|---|---|---|---|---|---|---|---|---|\n")
	d := totals(all["direct"])
	for _, t := range targets {
		v := c1Stats(all, roundP50, t.name)
		if *stream {
			tt, gg := ttfbs(all[t.name]), gapsOf(all[t.name])
			dt, dg := ttfbs(all["direct"]), gapsOf(all["direct"])
			v["ttfb_p50_ms"], v["added_ttfb_p50_ms"] = pct(tt, 50), pct(tt, 50)-pct(dt, 50)
			v["gap_p50_ms"], v["gap_p99_ms"] = pct(gg, 50), pct(gg, 99)
			v["added_gap_p50_ms"], v["added_gap_p99_ms"] = pct(gg, 50)-pct(dg, 50), pct(gg, 99)-pct(dg, 99)
		}
		if t.name == "gateway" {
			if acc, ok := headerAccuracy(all["gateway"], pct(d, 50)); ok {
				v["overhead_header_mean_abs_diff_ms"] = acc
			}
		}
		add("c1", t.name, v)
		fmt.Fprintf(&summary, "| %s | %.3f | %.3f | %.3f | %.3f | %+.3f | %+.3f | %+.3f | %d |\n", t.name, v["p50_ms"], v["p90_ms"], v["p99_ms"], v["max_ms"],
			v["added_p50_ms"], v["added_p90_ms"], v["added_p99_ms"], errs(all[t.name]))
	}
	if *floor != "" {
		g, f := totals(all["gateway"]), totals(all["floor"])
		fmt.Fprintf(&summary, "\ngateway − floor: p50 %+.3f ms, p99 %+.3f ms\n", pct(g, 50)-pct(f, 50), pct(g, 99)-pct(f, 99))
		add("c1", "gateway-floor", map[string]float64{"p50_ms": pct(g, 50) - pct(f, 50), "p99_ms": pct(g, 99) - pct(f, 99)})
	}
	if *stream {
		fmt.Fprintf(&summary, "\n| target | ttfb p50 ms | added ttfb p50 | gap p50 ms | gap p99 ms | added gap p99 |\n|---|---|---|---|---|---|\n")
		for _, r := range results {
			if r.Measurement == "c1" && r.Values["ttfb_p50_ms"] != 0 {
				fmt.Fprintf(&summary, "| %s | %.3f | %+.3f | %.3f | %.3f | %+.3f |\n", r.Target, r.Values["ttfb_p50_ms"], r.Values["added_ttfb_p50_ms"],
					r.Values["gap_p50_ms"], r.Values["gap_p99_ms"], r.Values["added_gap_p99_ms"])
			}
		}
	}
	// 2. Closed loop at higher concurrency.
	if *conc != "" {
		fmt.Fprintf(&summary, "\n### closed loop\n\n| target | concurrency | req/s | p50 ms | p99 ms | added p50 | added p99 | errors |\n|---|---|---|---|---|---|---|---|\n")
		for _, cs := range strings.Split(*conc, ",") {
			c, err := strconv.Atoi(strings.TrimSpace(cs))
			if err != nil || c < 1 {
				return exitCode(2, "bench run: --concurrency "+cs+": want a number")
			}
			var dp50, dp99 float64
			for _, t := range targets {
				ss, secs := closedLoopRun(ctx, loads[t.name], c, max(*n, 20*c))
				x := totals(ss)
				if t.name == "direct" {
					dp50, dp99 = pct(x, 50), pct(x, 99)
				}
				v := map[string]float64{"concurrency": float64(c), "rps": float64(len(ss)) / secs, "p50_ms": pct(x, 50), "p99_ms": pct(x, 99),
					"added_p50_ms": pct(x, 50) - dp50, "added_p99_ms": pct(x, 99) - dp99, "errors": float64(errs(ss))}
				add("closed", t.name, v)
				fmt.Fprintf(&summary, "| %s | %d | %.0f | %.3f | %.3f | %+.3f | %+.3f | %d |\n", t.name, c, v["rps"], v["p50_ms"], v["p99_ms"], v["added_p50_ms"], v["added_p99_ms"], errs(ss))
			}
		}
	}
	// 3. Open loop: constant arrival rate. With a floor target, the floor
	// runs each rate too, so that the gateway's frontier can be read
	// against what a plain proxy reaches on the same core.
	if *rates != "" {
		fmt.Fprintf(&summary, "\n### open loop (constant arrival rate, latency from the scheduled start)\n\n| rate/s | direct p99 ms | floor p99 ms | gateway p50 ms | gateway p99 ms | added p99 | errors |\n|---|---|---|---|---|---|---|\n")
		sweeps := map[string]*frontierSweep{"gateway": newFrontierSweep()}
		_, hasFloor := loads["floor"]
		if hasFloor {
			sweeps["floor"] = newFrontierSweep()
		}
		var notes []string
		for _, rs := range strings.Split(*rates, ",") {
			rate, err := strconv.Atoi(strings.TrimSpace(rs))
			if err != nil || rate < 1 {
				return exitCode(2, "bench run: --rates "+rs+": want a number")
			}
			dx := totals(openLoopRun(ctx, loads["direct"], rate, *dur, *conns))
			floorP99 := "–"
			if hasFloor {
				fs := openLoopRun(ctx, loads["floor"], rate, *dur, *conns)
				fx := totals(fs)
				add("open", "floor", map[string]float64{"rate": float64(rate), "p50_ms": pct(fx, 50), "p99_ms": pct(fx, 99), "added_p99_ms": pct(fx, 99) - pct(dx, 99), "errors": float64(errs(fs)), "direct_p99_ms": pct(dx, 99)})
				sweeps["floor"].rate(rate, pct(fx, 99)-pct(dx, 99), errs(fs), pct(dx, 99))
				floorP99 = fmt.Sprintf("%.3f", pct(fx, 99))
			}
			gs := openLoopRun(ctx, loads["gateway"], rate, *dur, *conns)
			gx := totals(gs)
			addedP99 := pct(gx, 99) - pct(dx, 99)
			e := errs(gs)
			add("open", "gateway", map[string]float64{"rate": float64(rate), "p50_ms": pct(gx, 50), "p99_ms": pct(gx, 99), "added_p99_ms": addedP99, "errors": float64(e), "direct_p99_ms": pct(dx, 99)})
			fmt.Fprintf(&summary, "| %d | %.3f | %s | %.3f | %.3f | %+.3f | %d |\n", rate, pct(dx, 99), floorP99, pct(gx, 50), pct(gx, 99), addedP99, e)
			sweeps["gateway"].rate(rate, addedP99, e, pct(dx, 99))
			if pct(dx, 99) > directP99Limit {
				notes = append(notes, fmt.Sprintf("at %d req/s the direct target's own p99 is %.1f ms: the load generator or the mock is the limit there", rate, pct(dx, 99)))
			}
		}
		for _, name := range []string{"gateway", "floor"} {
			f := sweeps[name]
			if f == nil {
				continue
			}
			add("frontier", name, map[string]float64{"added_p99_1ms": f.best[1], "added_p99_5ms": f.best[5], "added_p99_10ms": f.best[10]})
			label := "throughput frontier"
			if name == "floor" {
				label = "floor's throughput frontier"
			}
			fmt.Fprintf(&summary, "\n%s: %.0f req/s at added p99 ≤ 1 ms, %.0f at ≤ 5 ms, %.0f at ≤ 10 ms\n", label, f.best[1], f.best[5], f.best[10])
		}
		for _, n := range notes {
			fmt.Fprintf(&summary, "\n%s\n", n)
		}
	}
	// 6. Recording (spec §11.6): what the gateway's recorder wrote and
	// dropped during the run, its largest queue depth, and the time from
	// the last response to the last record written.
	if rec1, _ := recorderStats(hc, *gw); recOK && (rec1.Written > rec0.Written || rec1.Dropped > rec0.Dropped || rec1.Pending > 0) {
		end := time.Now()
		for rec1.Pending > 0 && time.Since(end) < 60*time.Second {
			time.Sleep(5 * time.Millisecond)
			rec1, _ = recorderStats(hc, *gw)
		}
		drain := time.Since(end)
		v := map[string]float64{"written": float64(rec1.Written - rec0.Written), "dropped": float64(rec1.Dropped - rec0.Dropped),
			"max_queue": float64(rec1.MaxQueue), "drain_ms": float64(drain.Microseconds()) / 1000}
		add("recording", "gateway", v)
		fmt.Fprintf(&summary, "\nrecording: %.0f records written, %.0f dropped, largest queue depth %.0f (since the gateway started), last record written %.0f ms after the last response\n",
			v["written"], v["dropped"], v["max_queue"], v["drain_ms"])
	}
	if *pid > 0 {
		if n := gatewayRequests.Load(); n > 0 && cpu0 >= 0 {
			per := (cpuSeconds(*pid) - cpu0) / float64(n)
			add("resources", "gateway", map[string]float64{"cpu_s_per_1000": per * 1000})
			fmt.Fprintf(&summary, "\ngateway CPU: %.0f µs per request (%d requests, recording included)\n", per*1e6, n)
		}
		add("resources", "gateway", map[string]float64{"rss_after_mib": rssMiB(*pid)})
		fmt.Fprintf(&summary, "\ngateway RSS after the run: %.1f MiB\n", rssMiB(*pid))
	}
	if err := appendResults(*out, results); err != nil {
		return fmt.Errorf("bench run: %w", err)
	}
	fmt.Fprint(stdout, summary.String())
	if *md != "" {
		f, err := os.OpenFile(*md, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return fmt.Errorf("bench run: %w", err)
		}
		defer f.Close()
		fmt.Fprintln(f, summary.String())
	}
	return nil
}

// benchBody is the request body of a payload.
func benchBody(payload string, stream bool) []byte {
	msgs := []map[string]any{{"role": "system", "content": "You are a helpful assistant that answers briefly."}}
	switch payload {
	case "large":
		for i := 0; i < 49; i++ {
			role := "user"
			if i%2 == 1 {
				role = "assistant"
			}
			msgs = append(msgs, map[string]any{"role": role, "content": strings.Repeat("history text ", 157)})
		}
	default:
		msgs = append(msgs, map[string]any{"role": "user", "content": strings.Repeat("Please summarise this. ", 38)})
	}
	b, _ := json.Marshal(map[string]any{"model": "mock-model", "messages": msgs, "stream": stream})
	return b
}

// benchOne sends one request and reads the whole response.
// gatewayRequests counts the requests sent to the gateway target (for
// its CPU time per request).
var gatewayRequests atomic.Int64

func benchOne(ctx context.Context, hc *http.Client, t benchTarget, body []byte, stream bool) sample {
	if t.name == "gateway" {
		gatewayRequests.Add(1)
	}
	start := time.Now()
	s := sample{overhead: -1}
	req, _ := http.NewRequestWithContext(ctx, "POST", t.url, bytes.NewReader(body))
	req.Header = t.header
	resp, err := hc.Do(req)
	if err != nil {
		s.err, s.total = true, time.Since(start)
		return s
	}
	defer resp.Body.Close()
	if v := resp.Header.Get("Vigil-Overhead-Ms"); v != "" {
		s.overhead, _ = strconv.ParseFloat(v, 64)
	}
	if resp.StatusCode != 200 {
		s.err = true
	}
	if !stream {
		io.Copy(io.Discard, resp.Body)
		s.total = time.Since(start)
		return s
	}
	rd := bufio.NewReader(resp.Body)
	last := time.Time{}
	for {
		line, err := rd.ReadSlice('\n')
		if len(line) > 0 && bytes.HasPrefix(line, []byte("data:")) {
			now := time.Now()
			if last.IsZero() {
				s.ttfb = now.Sub(start)
			} else {
				s.gaps = append(s.gaps, now.Sub(last))
			}
			last = now
		}
		if err != nil {
			if !errors.Is(err, bufio.ErrBufferFull) {
				break
			}
		}
	}
	s.total = time.Since(start)
	return s
}

// directP99Limit (ms) is the direct target's open-loop p99 beyond which
// the load generator and the mock, not the gateway, are the limit.
const directP99Limit = 10

func totals(ss []sample) []float64 {
	out := make([]float64, 0, len(ss))
	for _, s := range ss {
		out = append(out, float64(s.total)/1e6)
	}
	slices.Sort(out)
	return out
}

func ttfbs(ss []sample) []float64 {
	out := make([]float64, 0, len(ss))
	for _, s := range ss {
		out = append(out, float64(s.ttfb)/1e6)
	}
	slices.Sort(out)
	return out
}

func gapsOf(ss []sample) []float64 {
	var out []float64
	for _, s := range ss {
		for _, g := range s.gaps {
			out = append(out, float64(g)/1e6)
		}
	}
	slices.Sort(out)
	return out
}

func errs(ss []sample) int {
	n := 0
	for _, s := range ss {
		if s.err {
			n++
		}
	}
	return n
}

// pct is the p-th percentile of sorted xs (100 = max).
func pct(xs []float64, p float64) float64 { return pctSorted(xs, p) }

func pctSorted(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	i := int(math.Ceil(p/100*float64(len(xs)))) - 1
	return xs[min(max(i, 0), len(xs)-1)]
}

// headerAccuracy is the mean absolute difference between Vigil-Overhead-Ms
// and the measured added latency (gateway − median direct).
func headerAccuracy(ss []sample, directP50 float64) (float64, bool) {
	var sum float64
	n := 0
	for _, s := range ss {
		if s.overhead < 0 || s.err {
			continue
		}
		sum += math.Abs(s.overhead - (float64(s.total)/1e6 - directP50))
		n++
	}
	if n == 0 {
		return 0, false
	}
	return sum / float64(n), true
}

// cpuSeconds is the user and system CPU time of process pid; -1 when
// unknown.
func cpuSeconds(pid int) float64 {
	if pid <= 0 {
		return -1
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return -1
	}
	// The fields after the command (which may hold spaces), from state.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return -1
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return -1
	}
	u, err1 := strconv.ParseFloat(f[11], 64)
	st, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return -1
	}
	return (u + st) / 100 // USER_HZ
}

// recStats is the "recorder" object of the gateway's health route.
type recStats struct {
	Written  uint64 `json:"written"`
	Dropped  uint64 `json:"dropped"`
	MaxQueue int64  `json:"max_queue"`
	Pending  int    `json:"pending"`
}

// recorderStats reads the recorder counters from the health route of
// the gateway serving gwURL; false when it reports none (no recorder).
func recorderStats(hc *http.Client, gwURL string) (recStats, bool) {
	i := strings.Index(gwURL, "/api/v1/gateway/")
	if i < 0 {
		return recStats{}, false
	}
	resp, err := hc.Get(gwURL[:i] + "/api/v1/gateway/health")
	if err != nil {
		return recStats{}, false
	}
	defer resp.Body.Close()
	var h struct {
		Recorder *recStats `json:"recorder"`
	}
	if json.NewDecoder(resp.Body).Decode(&h) != nil || h.Recorder == nil {
		return recStats{}, false
	}
	return *h.Recorder, true
}

func rssMiB(pid int) float64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return math.NaN()
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
			return kb / 1024
		}
	}
	return math.NaN()
}

// envLine records the machine and build.
func envLine() string {
	cpu := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				cpu = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	return fmt.Sprintf("%s, %d CPUs, %s, load generator GOMAXPROCS=%d, vigil %s", cpu, runtime.NumCPU(), runtime.Version(), runtime.GOMAXPROCS(0), buildinfo.Read(version).String())
}

func appendResults(path string, rs []BenchResult) error {
	var all []BenchResult
	if b, err := os.ReadFile(path); err == nil && len(bytes.TrimSpace(b)) > 0 {
		if err := json.Unmarshal(b, &all); err != nil {
			return fmt.Errorf("%s: not a results array: %w", path, err)
		}
	}
	all = append(all, rs...)
	b, err := json.MarshalIndent(all, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// c1Stats are the concurrency-1 figures of target name against "direct":
// percentiles of all its samples, the added latency at each, errors, and
// the median and IQR over rounds of the added p50 (spec §11, measurement 1).
func c1Stats(all map[string][]sample, roundP50 map[string][]float64, name string) map[string]float64 {
	x, d := totals(all[name]), totals(all["direct"])
	v := map[string]float64{"p50_ms": pct(x, 50), "p90_ms": pct(x, 90), "p99_ms": pct(x, 99), "max_ms": pct(x, 100),
		"added_p50_ms": pct(x, 50) - pct(d, 50), "added_p90_ms": pct(x, 90) - pct(d, 90), "added_p99_ms": pct(x, 99) - pct(d, 99),
		"errors": float64(errs(all[name]))}
	var added []float64
	for i := range roundP50[name] {
		added = append(added, roundP50[name][i]-roundP50["direct"][i])
	}
	slices.Sort(added)
	v["round_added_p50_median_ms"] = pctSorted(added, 50)
	v["round_added_p50_iqr_ms"] = pctSorted(added, 75) - pctSorted(added, 25)
	return v
}

// frontierSweep finds a target's throughput frontier (spec §11): the
// highest rate with added p99 within each limit and zero errors. The
// sweep goes upward until failure: a rate counts only if it and every
// rate below it met the limit. A rate at which the direct target's own
// p99 exceeds directP99Limit is a failure too: the load generator or the
// mock did not keep up, so the added p99 there (taken against that p99)
// means nothing.
type frontierSweep struct {
	best   map[float64]float64 // limit (ms) → rate
	failed map[float64]bool
}

func newFrontierSweep() *frontierSweep {
	return &frontierSweep{best: map[float64]float64{1: 0, 5: 0, 10: 0}, failed: map[float64]bool{}}
}

// rate adds one rate's outcome.
func (f *frontierSweep) rate(rate int, addedP99 float64, errors int, directP99 float64) {
	for lim := range f.best {
		if f.failed[lim] {
			continue
		}
		if errors == 0 && addedP99 <= lim && directP99 <= directP99Limit {
			f.best[lim] = float64(rate)
		} else {
			f.failed[lim] = true
		}
	}
}
