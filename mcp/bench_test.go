package mcp_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/vigilhq/vigil/mcp"
)

// Benchmarks M1 (tools/call through the stdio wrapper) and M2 (through
// the streamable HTTP proxy): each iteration makes one call directly and
// one through Vigil on every session, interleaved, and the benchmark
// reports the percentiles of both and the added latency (Vigil − direct)
// at p50 and p99. Sub-benchmarks c=1 and c=32 (concurrent sessions).
//
//	go test ./mcp -run '^$' -bench 'M[12]' -benchtime 2000x -count 1
//
// BenchmarkM2Floor (httputil.ReverseProxy) and BenchmarkM2RawRelay (a
// TCP relay that only copies bytes) give the floors M2 is read against.

// sessionPair is one direct and one proxied client session.
type sessionPair struct {
	direct, vigil *sdk.ClientSession
}

func benchCall(cs *sdk.ClientSession) (time.Duration, error) {
	start := time.Now()
	_, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "bench"}})
	return time.Since(start), err
}

func runPairs(b *testing.B, pairs []sessionPair) {
	b.Helper()
	// Warm up.
	for _, p := range pairs {
		for range 50 {
			if _, err := benchCall(p.direct); err != nil {
				b.Fatal(err)
			}
			if _, err := benchCall(p.vigil); err != nil {
				b.Fatal(err)
			}
		}
	}
	var mu sync.Mutex
	var direct, vigil []time.Duration
	var errs int
	b.ResetTimer()
	var wg sync.WaitGroup
	per := max(1, b.N/len(pairs))
	for _, p := range pairs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := make([]time.Duration, 0, per)
			v := make([]time.Duration, 0, per)
			e := 0
			for range per {
				t1, err1 := benchCall(p.direct)
				t2, err2 := benchCall(p.vigil)
				if err1 != nil || err2 != nil {
					e++
					continue
				}
				d, v = append(d, t1), append(v, t2)
			}
			mu.Lock()
			direct, vigil, errs = append(direct, d...), append(vigil, v...), errs+e
			mu.Unlock()
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
	b.ReportMetric(pct(direct, 0.99), "direct-p99-µs")
	b.ReportMetric(pct(vigil, 0.5), "vigil-p50-µs")
	b.ReportMetric(pct(vigil, 0.99), "vigil-p99-µs")
	b.ReportMetric(pct(vigil, 0.5)-pct(direct, 0.5), "added-p50-µs")
	b.ReportMetric(pct(vigil, 0.99)-pct(direct, 0.99), "added-p99-µs")
	b.ReportMetric(float64(errs), "errors")
	if errs > 0 {
		b.Errorf("%d calls failed", errs)
	}
}

func connectBench(b *testing.B, t sdk.Transport) *sdk.ClientSession {
	b.Helper()
	c := sdk.NewClient(&sdk.Implementation{Name: "bench", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), t, &sdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cs.Close() })
	return cs
}

func BenchmarkM1Stdio(b *testing.B) {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	for _, conc := range []int{1, 32} {
		b.Run(concName(conc), func(b *testing.B) {
			pairs := make([]sessionPair, conc)
			for i := range pairs {
				cmd := exec.Command(exe, "-test.run=^$")
				cmd.Env = serverEnv()
				pairs[i].direct = connectBench(b, &sdk.CommandTransport{Command: cmd})
				cr, cw := io.Pipe()
				wr, ww := io.Pipe()
				go func() {
					_, _ = mcp.RunStdio(context.Background(), mcp.StdioConfig{Command: []string{exe, "-test.run=^$"}, Stdin: cr, Stdout: ww,
						Stderr: io.Discard, Env: serverEnv(), Grace: time.Second, NoSignals: true})
					ww.Close()
				}()
				pairs[i].vigil = connectBench(b, &sdk.IOTransport{Reader: wr, Writer: cw})
			}
			runPairs(b, pairs)
		})
	}
}

func BenchmarkM2Streamable(b *testing.B) {
	hs := benchUpstream(b)
	be := newBackend(b)
	p := mcp.NewProxy(mcp.ProxyConfig{Backend: mcp.NewServerBackend(be.srv), Servers: []mcp.ServerConfig{{Name: "bench", URL: hs.URL + "/mcp/"}}})
	defer p.Close(context.Background())
	mountProxy(be, p)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	keyed := &http.Client{Transport: headerTransport{http.Header{"Invariant-Api-Key": {adminKey}}, &http.Transport{MaxIdleConnsPerHost: 256}}}
	for _, conc := range []int{1, 32} {
		// proxy: no key, no dataset; recorded: a key and a dataset, so
		// every call is also pinned, recorded and checked against the
		// dataset's (empty) ruleset.
		for _, mode := range []string{"proxy", "recorded"} {
			b.Run(concName(conc)+"/"+mode, func(b *testing.B) {
				pairs := make([]sessionPair, conc)
				for i := range pairs {
					pairs[i].direct = connectBench(b, &sdk.StreamableClientTransport{Endpoint: hs.URL + "/mcp/", HTTPClient: hc, DisableStandaloneSSE: true})
					if mode == "proxy" {
						pairs[i].vigil = connectBench(b, &sdk.StreamableClientTransport{Endpoint: be.URL + "/api/v1/gateway/mcp/bench", HTTPClient: hc, DisableStandaloneSSE: true})
					} else {
						pairs[i].vigil = connectBench(b, &sdk.StreamableClientTransport{Endpoint: be.URL + "/api/v1/gateway/benchds/mcp/bench", HTTPClient: keyed, DisableStandaloneSSE: true})
					}
				}
				runPairs(b, pairs)
			})
		}
	}
}

// benchUpstream serves the test tools over streamable HTTP at /mcp/ (the
// M2 benchmarks' MCP server, called directly and through each hop).
func benchUpstream(b *testing.B) *httptest.Server {
	up := &upstream{env: map[string]string{}}
	srv := sdk.NewServer(&sdk.Implementation{Name: "benchsrv", Version: "1"}, nil)
	testTools(srv, up.getenv)
	mux := http.NewServeMux()
	mux.Handle("/mcp/", sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil))
	hs := httptest.NewServer(mux)
	b.Cleanup(hs.Close)
	return hs
}

func concName(c int) string {
	if c == 1 {
		return "c=1"
	}
	return "c=32"
}

// BenchmarkM2Floor is the floor under M2: the same calls through a
// plain httputil.ReverseProxy that does nothing, so M2's added latency
// can be read against what any HTTP hop costs on the machine.
func BenchmarkM2Floor(b *testing.B) {
	hs := benchUpstream(b)
	u, _ := url.Parse(hs.URL)
	rp := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(u); r.Out.Host = u.Host }, FlushInterval: -1}
	ps := httptest.NewServer(rp)
	defer ps.Close()
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	pairs := []sessionPair{{
		direct: connectBench(b, &sdk.StreamableClientTransport{Endpoint: hs.URL + "/mcp/", HTTPClient: hc, DisableStandaloneSSE: true}),
		vigil:  connectBench(b, &sdk.StreamableClientTransport{Endpoint: ps.URL + "/mcp/", HTTPClient: hc, DisableStandaloneSSE: true}),
	}}
	runPairs(b, pairs)
}

// BenchmarkM2RawRelay is the hardware floor under M2: the same calls
// through a TCP relay that copies bytes both ways (io.Copy) and does
// nothing else, so no HTTP proxy can add less than it does. Pinned like
// the gateway, `vigil bench relay` measures the same in bench/gateway/run.sh.
func BenchmarkM2RawRelay(b *testing.B) {
	hs := benchUpstream(b)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	upAddr := hs.Listener.Addr().String()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				u, err := net.Dial("tcp", upAddr)
				if err != nil {
					return
				}
				defer u.Close()
				go func() { _, _ = io.Copy(u, c); u.(*net.TCPConn).CloseWrite() }()
				_, _ = io.Copy(c, u)
			}()
		}
	}()
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	pairs := []sessionPair{{
		direct: connectBench(b, &sdk.StreamableClientTransport{Endpoint: hs.URL + "/mcp/", HTTPClient: hc, DisableStandaloneSSE: true}),
		vigil:  connectBench(b, &sdk.StreamableClientTransport{Endpoint: "http://" + ln.Addr().String() + "/mcp/", HTTPClient: hc, DisableStandaloneSSE: true}),
	}}
	runPairs(b, pairs)
}
