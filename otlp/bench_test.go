package otlp_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/http"
	"runtime/debug"
	"sync"
	"syscall"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/vigilhq/vigil/otlp"
)

// The ingest benchmark: OTLP/HTTP protobuf requests of chat spans of 10
// messages each (current GenAI conventions, gen_ai.input.messages of 9
// plus one output message, ~120 bytes of text each) sent by concurrent
// exporters to a real server over loopback. Two workloads:
//
//   - conversations: each span is the next turn of a conversation whose
//     history window (the last 8 messages, then the new user message)
//     was sent before, so history de-duplication appends 2 events per
//     span (the first turn appends 10);
//   - fresh: every span is a new conversation (10 new events per span);
//   - batched: as conversations, but each request carries 10 consecutive
//     turns of 10 conversations (what a batching exporter sends for a
//     few busy agents), so a request appends to 10 traces, not 100.
//
// Reported as spans/s and events/s. Run with
//
//	go test ./otlp -run XXX -bench Ingest -benchtime 200x -count 1
//
// (VIGIL_TEST_POSTGRES set for the PostgreSQL cases).

const (
	benchSpansPerReq = 100
	benchSenders     = 4
)

type workload int

const (
	conversations workload = iota
	fresh
	batched
)

func BenchmarkIngestSQLiteConversations(b *testing.B)   { benchIngest(b, sqliteStore, conversations) }
func BenchmarkIngestSQLiteFresh(b *testing.B)           { benchIngest(b, sqliteStore, fresh) }
func BenchmarkIngestSQLiteBatched(b *testing.B)         { benchIngest(b, sqliteStore, batched) }
func BenchmarkIngestPostgresConversations(b *testing.B) { benchIngest(b, postgresStore, conversations) }
func BenchmarkIngestPostgresFresh(b *testing.B)         { benchIngest(b, postgresStore, fresh) }
func BenchmarkIngestPostgresBatched(b *testing.B)       { benchIngest(b, postgresStore, batched) }

func benchText(conv, i int) string {
	return fmt.Sprintf("conversation %d message %d: the quick brown fox jumps over the lazy dog, then checks the weather in Paris and Rome.", conv, i)
}

// turnRef is one span of a benchmark request: conversation c's turn t.
type turnRef struct{ c, turn int }

// benchRequest builds a request of the given turns; with fresh, every
// span is its own OTel trace (a new conversation).
func benchRequest(turns []turnRef, fresh bool) []byte {
	spans := make([]*tracepb.Span, 0, len(turns))
	for _, tr := range turns {
		c, turn := tr.c, tr.turn
		base := uint64(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()) + uint64(turn)*1e9
		// Messages of turn t: the window 2t-8 … 2t (inputs), 2t+1 (output).
		var in bytes.Buffer
		in.WriteByte('[')
		for i := 2*turn - 8; i <= 2*turn; i++ {
			if in.Len() > 1 {
				in.WriteByte(',')
			}
			role := "user"
			if i%2 != 0 {
				role = "assistant"
			}
			fmt.Fprintf(&in, `{"role":%q,"parts":[{"type":"text","content":%q}]}`, role, benchText(c, i))
		}
		in.WriteByte(']')
		out := fmt.Sprintf(`[{"role":"assistant","parts":[{"type":"text","content":%q}],"finish_reason":"stop"}]`, benchText(c, 2*turn+1))
		tid := make([]byte, 16)
		binary.BigEndian.PutUint64(tid[:8], uint64(c)+1)
		if fresh {
			binary.BigEndian.PutUint64(tid[8:], uint64(turn)+1)
		}
		sid := make([]byte, 8)
		binary.BigEndian.PutUint32(sid[:4], uint32(c)+1)
		binary.BigEndian.PutUint32(sid[4:], uint32(turn)+1)
		spans = append(spans, &tracepb.Span{TraceId: tid, SpanId: sid, Name: "chat gpt-4o",
			StartTimeUnixNano: base, EndTimeUnixNano: base + 5e8,
			Attributes: []*commonpb.KeyValue{kv("gen_ai.operation.name", "chat"), kv("gen_ai.provider.name", "openai"),
				kv("gen_ai.request.model", "gpt-4o"), kv("gen_ai.input.messages", in.String()), kv("gen_ai.output.messages", out),
				{Key: "gen_ai.usage.input_tokens", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: 300}}},
				{Key: "gen_ai.usage.output_tokens", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: 30}}}}})
	}
	req := &coltracepb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{
		Resource:   &resourcepb.Resource{Attributes: []*commonpb.KeyValue{kv("service.name", "bench")}},
		ScopeSpans: []*tracepb.ScopeSpans{{Spans: spans}},
	}}}
	body, _ := proto.Marshal(req)
	return body
}

func benchIngest(b *testing.B, kind storeKind, wl workload) {
	defer debug.SetGCPercent(debug.SetGCPercent(400)) // vigil serve's default
	be := newBackend(b, kind, otlp.Config{})
	// Sender s sends the requests of its own conversation groups in turn
	// order: request k of sender s is turn k/groups of group k%groups.
	const groups = 4
	bodies := make([][][]byte, benchSenders)
	for s := range benchSenders {
		for k := 0; k < (b.N+benchSenders-1)/benchSenders; k++ {
			g := s*groups + k%groups
			var turns []turnRef
			switch wl {
			case conversations: // turn k/groups of 100 conversations; the first has a full window
				for c := g * benchSpansPerReq; c < (g+1)*benchSpansPerReq; c++ {
					turns = append(turns, turnRef{c, 4 + k/groups})
				}
			case fresh:
				for c := g * benchSpansPerReq; c < (g+1)*benchSpansPerReq; c++ {
					turns = append(turns, turnRef{c, 4 + k})
				}
			case batched: // 10 turns each of 10 conversations
				for c := g * 10; c < (g+1)*10; c++ {
					for t := range 10 {
						turns = append(turns, turnRef{c, 4 + (k/groups)*10 + t})
					}
				}
			}
			bodies[s] = append(bodies[s], benchRequest(turns, wl == fresh))
		}
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: benchSenders}}
	send := func(body []byte) {
		for {
			req, _ := http.NewRequest("POST", be.url+"/v1/traces", bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/x-protobuf")
			req.Header.Set("Authorization", "Bearer "+be.key)
			resp, err := hc.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode == http.StatusTooManyRequests {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			if resp.StatusCode != 200 {
				b.Errorf("status %d", resp.StatusCode)
			}
			return
		}
	}
	b.ResetTimer()
	cpu0 := cpuTime()
	start := time.Now()
	var wg sync.WaitGroup
	sent := 0
	for s := range benchSenders {
		n := len(bodies[s])
		if sent+n > b.N {
			n = b.N - sent
		}
		sent += n
		wg.Add(1)
		go func(list [][]byte) {
			defer wg.Done()
			for _, body := range list {
				send(body)
			}
		}(bodies[s][:n])
	}
	wg.Wait()
	el := time.Since(start)
	cpu := cpuTime() - cpu0
	b.StopTimer()
	spans := float64(b.N * benchSpansPerReq)
	b.ReportMetric(spans/el.Seconds(), "spans/s")
	// CPU time of the whole process (server, store driver and the
	// senders) per span: the wall rate depends on what else the machine
	// runs; 2 cores / this is the rate the process could reach alone.
	b.ReportMetric(float64(cpu.Microseconds())/spans, "cpu-µs/span")
	b.ReportMetric(0, "ns/op")
}

// cpuTime is the process's user+system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
