package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/vigilhq/vigil/client"
	"github.com/vigilhq/vigil/ingest"
	"github.com/vigilhq/vigil/internal/tracegen"
	"github.com/vigilhq/vigil/ledger"
)

// pushBatch returns a push request of n traces × m events, shaped like an
// agent run (user, assistant with a tool call, tool output, ...).
func pushBatch(dataset string, n, m int) client.PushRequest {
	req := client.PushRequest{Dataset: dataset}
	for _, tr := range tracegen.AgentRuns(n, m) {
		req.Messages = append(req.Messages, tr)
	}
	return req
}

// benchmarkPush measures ingest through the push API: batches of 100
// traces × 20 events, the body encoded once, sent by `clients` concurrent
// HTTP clients; reports events/s.
func benchmarkPush(b *testing.B, ts *testServer, clients int) {
	body, err := json.Marshal(pushBatch("bench", 100, 20))
	if err != nil {
		b.Fatal(err)
	}
	// Keep one connection per client alive (the default keeps 2 idle).
	tr := ts.Client().Transport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = clients
	hc := &http.Client{Transport: tr}
	defer tr.CloseIdleConnections()
	send := func() {
		req, _ := http.NewRequest("POST", ts.URL+"/api/v1/push/trace", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+adminKey)
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
	send() // warm up: creates the dataset
	b.SetBytes(int64(len(body)))
	b.ResetTimer()
	cpu := processCPU()
	var next atomic.Int64
	var wg sync.WaitGroup
	for c := 0; c < clients; c++ {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				send()
			}
		})
	}
	wg.Wait()
	events := float64(b.N * 100 * 20)
	b.ReportMetric(events/b.Elapsed().Seconds(), "events/s")
	// CPU time per event (server and client share the process; the client
	// side is small) is steadier than events/s on a shared machine.
	if used := processCPU() - cpu; used > 0 {
		b.ReportMetric(float64(used.Nanoseconds())/1e3/events, "cpu-µs/event")
	}
}

func BenchmarkPushSQLite(b *testing.B) {
	for _, c := range []int{1, 4} {
		b.Run(fmt.Sprintf("clients=%d", c), func(b *testing.B) {
			benchmarkPush(b, newTestServer(b, openSQLite(b)), c)
		})
	}
}

func BenchmarkPushPostgres(b *testing.B) {
	if openPostgresTest == nil || os.Getenv("VIGIL_TEST_POSTGRES") == "" {
		b.Skip("store/postgres not available or VIGIL_TEST_POSTGRES unset")
	}
	for _, c := range []int{1, 4} {
		b.Run(fmt.Sprintf("clients=%d", c), func(b *testing.B) {
			benchmarkPush(b, newTestServer(b, openPostgresTest(b)), c)
		})
	}
}

// BenchmarkDecodePush measures the push decoder plus the ingest
// normaliser (no store, no signing) on a batch of 100 traces × 20 events.
func BenchmarkDecodePush(b *testing.B) {
	body, _ := json.Marshal(pushBatch("bench", 100, 20))
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		req, err := parsePush(body)
		if err != nil {
			b.Fatal(err)
		}
		var warn warnings
		for i, raw := range req.messages {
			if _, err := ingest.Prepare(raw, ingest.TraceOptions{TraceIdx: i}, &warn); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.N*2000)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkSealEvents measures making one signed receipt per event (the
// proof-on-ingest cost), single-threaded.
func BenchmarkSealEvents(b *testing.B) {
	in := ingest.New(nil, mustKey(&testing.T{}), ingest.Config{})
	body, _ := json.Marshal(pushBatch("bench", 1, 20))
	req, _ := parsePush(body)
	pe, err := ingest.Prepare(req.messages[0], ingest.TraceOptions{}, new(warnings))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := in.MakeReceipts("s", "r", "a", ledger.Tail{}, 0, pe.Messages); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*20)/b.Elapsed().Seconds(), "events/s")
}
