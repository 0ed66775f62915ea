package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vigilhq/vigil/internal/pgtest"
	"github.com/vigilhq/vigil/internal/tracegen"
)

// pushBody is one push request of n traces × m events shaped like an agent
// run (user, assistant with a tool call, tool output, ...), encoded once.
func pushBody(n, m int) []byte {
	body, _ := json.Marshal(map[string]any{"messages": tracegen.AgentRuns(n, m), "dataset": "bench"})
	return body
}

// procCPU returns the CPU time (user+system) process pid has used.
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command (which may hold spaces) start after ')'.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * (time.Second / 100) // USER_HZ is 100 on Linux
}

// BenchmarkServePush is issue 6's ingest measure from outside: `vigil
// serve` as a subprocess, batches of 100 traces × 20 events through the
// push API, the body encoded once, 4 clients on kept-alive connections.
// It reports events/s and the server process's CPU µs per event (steadier
// on a shared machine; a PostgreSQL server's own CPU is not in it), then
// the same until everything pushed is searchable: one search at the end
// indexes what the background search indexer has not (catchup-ms). SQLite
// always; PostgreSQL when VIGIL_TEST_POSTGRES is set.
func BenchmarkServePush(b *testing.B) {
	dir := b.TempDir()
	bin := buildVigil(b, dir)
	body := pushBody(100, 20)
	for _, backend := range []string{"sqlite", "postgres"} {
		b.Run(backend, func(b *testing.B) {
			p, _, _ := startBackend(b, bin, backend)
			const clients = 4
			tr := &http.Transport{MaxIdleConnsPerHost: clients}
			defer tr.CloseIdleConnections()
			hc := &http.Client{Transport: tr}
			send := pushSender(b, hc, p.url, body)
			send() // creates the dataset
			b.SetBytes(int64(len(body)))
			b.ResetTimer()
			cpu := procCPU(p.cmd.Process.Pid)
			var next atomic.Int64
			var wg sync.WaitGroup
			for range clients {
				wg.Go(func() {
					for next.Add(1) <= int64(b.N) {
						send()
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			events := float64(b.N * 100 * 20)
			b.ReportMetric(events/b.Elapsed().Seconds(), "events/s")
			b.ReportMetric(float64((procCPU(p.cmd.Process.Pid)-cpu).Nanoseconds())/1e3/events, "server-cpu-µs/event")
			// The search index is built off the push path: a search indexes
			// whatever the background indexer has not yet, so the time and
			// CPU until everything pushed is searchable include it.
			t0 := time.Now()
			req, _ := http.NewRequest("GET", p.url+"/api/v1/search?query=summarise&limit=1", nil)
			req.Header.Set("Authorization", "Bearer "+benchKey)
			resp, err := hc.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				b.Fatalf("search: %d", resp.StatusCode)
			}
			b.ReportMetric(float64(time.Since(t0).Microseconds())/1e3, "catchup-ms")
			b.ReportMetric(events/(b.Elapsed().Seconds()+time.Since(t0).Seconds()), "searchable-events/s")
			b.ReportMetric(float64((procCPU(p.cmd.Process.Pid)-cpu).Nanoseconds())/1e3/events, "searchable-cpu-µs/event")
		})
	}
}

// startBackend starts the built binary on a fresh data directory, on
// SQLite or, for "postgres", on a fresh schema of VIGIL_TEST_POSTGRES
// (skipping when it is unset). It returns the process, the data directory
// and the PostgreSQL DSN ("" for SQLite).
func startBackend(b *testing.B, bin, backend string) (*serveProc, string, string) {
	b.Helper()
	var extra []string
	dsn := ""
	if backend == "postgres" {
		if os.Getenv("VIGIL_TEST_POSTGRES") == "" {
			b.Skip("VIGIL_TEST_POSTGRES unset")
		}
		dsn = pgtest.DSN(b)
		extra = append(extra, "--db", dsn)
	}
	data := filepath.Join(b.TempDir(), "data")
	return startServe(b, bin, data, extra...), data, dsn
}

// pushSender returns a function that pushes body to url with hc and fails
// the benchmark on an error or a status other than 200.
func pushSender(b *testing.B, hc *http.Client, url string, body []byte) func() {
	return func() {
		req, _ := http.NewRequest("POST", url+"/api/v1/push/trace", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+benchKey)
		resp, err := hc.Do(req)
		if err != nil {
			b.Error(err)
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Errorf("push: %d", resp.StatusCode)
		}
	}
}
