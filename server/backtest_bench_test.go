package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/vigilhq/vigil/client"
	"github.com/vigilhq/vigil/policy"
)

// backtestBenchTraces is the dataset size of the backtest benchmarks:
// traces of 20 events (internal/tracegen) checked with the five-rule
// corpus of testdata/backtest_bench.policy.
const backtestBenchTraces = 5000

// backtestBenchServer returns a SQLite server holding dataset "bench" of
// backtestBenchTraces traces × 20 events, its id and the rule text.
func backtestBenchServer(b *testing.B) (*testServer, string, string) {
	b.Helper()
	src, err := os.ReadFile("testdata/backtest_bench.policy")
	if err != nil {
		b.Fatal(err)
	}
	if _, err := policy.Load(string(src), policy.Options{}); err != nil {
		b.Fatal(err)
	}
	ts := newTestServer(b, openSQLite(b))
	for i := 0; i < backtestBenchTraces; i += 100 {
		if _, err := ts.c.Push(context.Background(), pushBatch("bench", 100, 20)); err != nil {
			b.Fatal(err)
		}
	}
	d, err := ts.c.GetDatasetByName(context.Background(), "admin", "bench")
	if err != nil {
		b.Fatal(err)
	}
	// Index the search backlog of the pushes now, so the background
	// indexer does not run (and bill its CPU) during the measured runs.
	for {
		n, err := ts.st.IndexPending(context.Background(), 0)
		if err != nil {
			b.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	return ts, d.ID, string(src)
}

// discardFlusher is a ResponseWriter that throws the body away.
type discardFlusher struct{ h http.Header }

func (w *discardFlusher) Header() http.Header         { return w.h }
func (w *discardFlusher) Write(p []byte) (int, error) { return len(p), nil }
func (w *discardFlusher) WriteHeader(int)             {}
func (w *discardFlusher) Flush()                      {}

// BenchmarkBacktest measures whole backtests over a SQLite dataset
// (store reads, decoding, five rules per trace, frames) and reports
// traces/s: "handler" calls the server's handler in process, "http"
// streams through a real server on loopback with the Go client.
func BenchmarkBacktest(b *testing.B) {
	ts, ds, src := backtestBenchServer(b)
	body := `{"policy": ` + jsonString(src) + `}`
	report := func(b *testing.B, cpu0 int64) {
		n := float64(b.N * backtestBenchTraces)
		b.ReportMetric(n/b.Elapsed().Seconds(), "traces/s")
		if used := processCPU().Nanoseconds() - cpu0; used > 0 {
			b.ReportMetric(float64(used)/1e3/n, "cpu-µs/trace")
		}
	}
	b.Run("handler", func(b *testing.B) {
		cpu := processCPU().Nanoseconds()
		for b.Loop() {
			req := httptest.NewRequest("POST", "/api/v1/dataset/byid/"+ds+"/policy-check/stream", strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+adminKey)
			w := &discardFlusher{h: http.Header{}}
			ts.srv.ServeHTTP(w, req)
			if w.h.Get("Content-Type") != "text/event-stream" {
				b.Fatalf("not a stream: %v", w.h)
			}
		}
		report(b, cpu)
	})
	b.Run("http", func(b *testing.B) {
		cpu := processCPU().Nanoseconds()
		for b.Loop() {
			sum, err := ts.c.Backtest(context.Background(), ds, client.BacktestRequest{Policy: src}, nil)
			if err != nil {
				b.Fatal(err)
			}
			if sum.NumTraces != backtestBenchTraces || sum.NumErrors != 0 {
				b.Fatalf("summary %+v", sum)
			}
		}
		report(b, cpu)
	})
	b.Run("compare", func(b *testing.B) {
		cpu := processCPU().Nanoseconds()
		for b.Loop() {
			if _, err := ts.c.BacktestCompare(context.Background(), ds, client.BacktestRequest{Policy: src, CompareTo: &client.BacktestRule{Policy: src}}); err != nil {
				b.Fatal(err)
			}
		}
		report(b, cpu)
	})
}
