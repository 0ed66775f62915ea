package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/vigilhq/vigil/detect" // the rules call secrets(); loading them checks it is registered
	"github.com/vigilhq/vigil/internal/tracegen"
	"github.com/vigilhq/vigil/policy"
	"github.com/vigilhq/vigil/store"
	"github.com/vigilhq/vigil/store/postgres"
	"github.com/vigilhq/vigil/store/sqlite"
)

// guardrailRules splits tracegen.GuardrailPolicy into its five rules, each
// a policy of its own with the shared import and helper: the five enabled
// guardrails of the monitor benchmarks.
func guardrailRules(t testing.TB) []string {
	t.Helper()
	parts := strings.Split(tracegen.GuardrailPolicy, "\nraise ")
	head, rules := parts[0], parts[1:]
	out := make([]string, len(rules))
	for i, r := range rules {
		out[i] = head + "\nraise " + r
		if _, err := policy.Load(out[i], policy.Options{}); err != nil {
			t.Fatalf("rule %d: %v", i, err)
		}
	}
	if len(out) != 5 {
		t.Fatalf("%d rules, want 5", len(out))
	}
	return out
}

// monitorStore opens the server's store from the benchmark process (a
// second SQLite connection to its file, or the same PostgreSQL schema).
func monitorStore(t testing.TB, dataDir, dsn string) store.Store {
	t.Helper()
	var st store.Store
	var err error
	if dsn != "" {
		st, err = postgres.Open(context.Background(), dsn, nil)
	} else {
		st, err = sqlite.Open(context.Background(), filepath.Join(dataDir, "vigil.db"), nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// addGuardrails gives the admin's dataset ds the five benchmark rules as
// enabled guardrails.
func addGuardrails(t testing.TB, st store.Store, ds string) {
	t.Helper()
	ctx := context.Background()
	admin, err := st.GetUserByName(ctx, "admin")
	if err != nil {
		t.Fatal(err)
	}
	d, err := st.GetDatasetByName(ctx, admin.ID, ds)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range guardrailRules(t) {
		g := &store.Guardrail{DatasetID: d.ID, Name: fmt.Sprintf("rule-%d", i), Content: r, Enabled: true, Action: "log", UpdatedBy: admin.ID}
		if err := st.CreateGuardrail(ctx, g, store.GuardrailCreated, ""); err != nil {
			t.Fatal(err)
		}
	}
}

// BenchmarkServePushMonitored is BenchmarkServePush (4 clients, batches of
// 100 traces × 20 events) against a dataset without guardrails ("plain")
// and one with the five benchmark rules as enabled guardrails
// ("guardrails5"), in the same run. events/s is the acknowledged push
// rate; evaluated-events/s counts until the monitor queue is empty, i.e.
// every pushed event was checked by all five rules. SQLite always;
// PostgreSQL when VIGIL_TEST_POSTGRES is set.
func BenchmarkServePushMonitored(b *testing.B) {
	dir := b.TempDir()
	bin := buildVigil(b, dir)
	for _, backend := range []string{"sqlite", "postgres"} {
		for _, mode := range []string{"plain", "guardrails5"} {
			b.Run(backend+"/"+mode, func(b *testing.B) {
				p, data, dsn := startBackend(b, bin, backend)
				body := pushBody(100, 20)
				hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
				send := pushSender(b, hc, p.url, body)
				send() // creates the dataset
				st := monitorStore(b, data, dsn)
				if mode == "guardrails5" {
					addGuardrails(b, st, "bench")
				}
				b.SetBytes(int64(len(body)))
				b.ResetTimer()
				start := time.Now()
				cpu := procCPU(p.cmd.Process.Pid)
				var next atomic.Int64
				var wg sync.WaitGroup
				for range 4 {
					wg.Go(func() {
						for next.Add(1) <= int64(b.N) {
							send()
						}
					})
				}
				wg.Wait()
				acked := time.Since(start)
				for {
					n, err := st.CountMonitorJobs(context.Background())
					if err != nil {
						b.Fatal(err)
					}
					if n == 0 {
						break
					}
					time.Sleep(5 * time.Millisecond)
				}
				drained := time.Since(start)
				b.StopTimer()
				events := float64(b.N * 100 * 20)
				b.ReportMetric(events/acked.Seconds(), "events/s")
				b.ReportMetric(events/drained.Seconds(), "evaluated-events/s")
				b.ReportMetric(float64((procCPU(p.cmd.Process.Pid)-cpu).Nanoseconds())/1e3/events, "server-cpu-µs/event")
			})
		}
	}
}

// BenchmarkMonitorLatency measures how long after a push's 200 its
// finding is readable: one trace of 20 events with one mail outside the
// company per push, five guardrails enabled, one client; the store is
// polled every millisecond from the benchmark process. It reports the
// p50, p99 and maximum latency.
func BenchmarkMonitorLatency(b *testing.B) {
	dir := b.TempDir()
	bin := buildVigil(b, dir)
	for _, backend := range []string{"sqlite", "postgres"} {
		b.Run(backend, func(b *testing.B) {
			p, data, dsn := startBackend(b, bin, backend)
			run := tracegen.GuardrailRun(19)
			run = append(run, map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": "x", "type": "function",
				"function": map[string]any{"name": "send_email", "arguments": map[string]any{"to": "someone@evil.example", "body": "hi"}}}}})
			body, _ := json.Marshal(map[string]any{"messages": []any{run}, "dataset": "latency"})
			push := func() string {
				req, _ := http.NewRequest("POST", p.url+"/api/v1/push/trace", bytes.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+benchKey)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				defer resp.Body.Close()
				var res struct{ ID []string }
				if err := json.NewDecoder(resp.Body).Decode(&res); err != nil || resp.StatusCode != 200 || len(res.ID) != 1 {
					b.Fatalf("push: %d %v", resp.StatusCode, err)
				}
				return res.ID[0]
			}
			push()
			st := monitorStore(b, data, dsn)
			addGuardrails(b, st, "latency")
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				id := push()
				acked := time.Now()
				for {
					fs, err := st.ListFindings(context.Background(), store.FindingFilter{RunID: id})
					if err != nil {
						b.Fatal(err)
					}
					if len(fs) > 0 {
						break
					}
					if time.Since(acked) > 30*time.Second {
						b.Fatalf("no finding on trace %s after 30 s", id)
					}
					time.Sleep(time.Millisecond)
				}
				lat = append(lat, time.Since(acked))
			}
			b.StopTimer()
			slices.Sort(lat)
			pct := func(q float64) float64 {
				return float64(lat[min(len(lat)-1, int(q*float64(len(lat))))].Microseconds()) / 1e3
			}
			b.ReportMetric(pct(0.5), "p50-ms")
			b.ReportMetric(pct(0.99), "p99-ms")
			b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1e3, "max-ms")
		})
	}
}
