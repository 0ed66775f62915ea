package storetest

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vigilhq/vigil/internal/tracegen"
	"github.com/vigilhq/vigil/search"
	"github.com/vigilhq/vigil/store"
)

// Bench runs the shared benchmarks as sub-benchmarks of b. open returns a
// fresh store (closed by b.Cleanup).
//
//   - Push: one PushTraces of 100 traces × 20 events (about 200 bytes
//     each) with a receipt per event from a SHA-256 test sealer, the API's
//     target batch; reports events/s.
//   - PushNoReceipts: the same without receipts (the store's own cost).
//   - PushParallel: Push from 2×GOMAXPROCS goroutines into one dataset.
//   - Append: one AppendEvents of 5 events with receipts to a growing trace.
//   - AppendMany: one AppendMany of 2 events with receipts and a metadata
//     merge to each of 100 growing traces (an OTLP request of 100
//     conversation turns), then IndexPending of those traces (the
//     incremental search index); reports µs per turn.
//   - GetTrace: a 20-event trace with messages.
//   - Iter: streaming 1,000 traces × 20 events in index order.
//   - IndexPending: the search index of 500 pushed agent runs × 20 events
//     built by one IndexPending (the background indexer's work).
//   - IndexPendingIdle: IndexPending with nothing pending (what the
//     background indexer costs a store that records nothing, five times
//     a second).
//
// BenchSearch, separate because of its set-up time, measures search.
func Bench(b *testing.B, open func(b *testing.B) store.Store) {
	b.Run("Push", func(b *testing.B) { BenchPush(b, open) })
	b.Run("PushNoReceipts", func(b *testing.B) { benchPush(b, open(b), nil) })
	b.Run("PushParallel", func(b *testing.B) { benchPushParallel(b, open(b)) })
	b.Run("Append", func(b *testing.B) { benchAppend(b, open(b)) })
	b.Run("AppendMany", func(b *testing.B) { benchAppendMany(b, open(b)) })
	b.Run("GetTrace", func(b *testing.B) { benchGet(b, open(b)) })
	b.Run("Iter", func(b *testing.B) { benchIter(b, open(b)) })
	b.Run("IndexPending", func(b *testing.B) { benchIndexPending(b, open(b)) })
	b.Run("IndexPendingIdle", func(b *testing.B) { benchIndexPendingIdle(b, open(b)) })
}

// benchIndexPendingIdle times IndexPending on a store with traces but
// nothing pending.
func benchIndexPendingIdle(b *testing.B, s store.Store) {
	ctx := b.Context()
	u := &store.User{Username: "bench"}
	must(b, s.CreateUser(ctx, u))
	req := store.PushRequest{OwnerID: u.ID, DatasetName: "bench", CreateIfMissing: true}
	for j := range 10 {
		data, err := json.Marshal(tracegen.AgentRun(j, 4)[0])
		must(b, err)
		req.Traces = append(req.Traces, store.NewTrace{Messages: []store.Message{{ID: fmt.Sprint("m", j), NodeIDs: []string{}, Data: data}}})
	}
	_, err := s.PushTraces(ctx, req)
	must(b, err)
	for {
		n, err := s.IndexPending(ctx, 0)
		must(b, err)
		if n == 0 {
			break
		}
	}
	for b.Loop() {
		if n, err := s.IndexPending(ctx, 0); err != nil || n != 0 {
			b.Fatalf("IndexPending with nothing pending = %d, %v", n, err)
		}
	}
}

// benchIndexPending times IndexPending of 500 freshly pushed agent runs of
// 20 events (the pushes are not timed); reports µs per indexed event.
func benchIndexPending(b *testing.B, s store.Store) {
	ctx := b.Context()
	u := &store.User{Username: "bench"}
	must(b, s.CreateUser(ctx, u))
	const traces, per = 500, 20
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		req := store.PushRequest{OwnerID: u.ID, DatasetName: "bench", CreateIfMissing: true}
		for j := range traces {
			evs := tracegen.AgentRun(i*traces+j, per)
			msgs := make([]store.Message, len(evs))
			for k, ev := range evs {
				data, err := json.Marshal(ev)
				must(b, err)
				msgs[k] = store.Message{ID: fmt.Sprintf("m%d-%d-%d", i, j, k), NodeIDs: []string{}, Data: data}
			}
			req.Traces = append(req.Traces, store.NewTrace{Messages: msgs})
		}
		_, err := s.PushTraces(ctx, req)
		must(b, err)
		b.StartTimer()
		n, err := s.IndexPending(ctx, traces)
		must(b, err)
		if n != traces {
			b.Fatalf("IndexPending took %d traces, want %d", n, traces)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*traces*per), "µs/event")
}

func benchEvents(prefix string, n int) []store.Message {
	out := make([]store.Message, n)
	for i := range out {
		id := fmt.Sprintf("%s-%d", prefix, i)
		out[i] = store.Message{ID: id, NodeIDs: []string{"N" + id}, Data: fmt.Appendf(nil,
			`{"role":"assistant","content":"step %d: the agent looked at the ticket and decided to call the refund tool with the order id","tool_calls":[],"message_id":%q}`, i, id)}
	}
	return out
}

// BenchPush is the Push benchmark alone (each backend's BenchmarkPush).
func BenchPush(b *testing.B, open func(b *testing.B) store.Store) {
	benchPush(b, open(b), chainSeal)
}

func benchPush(b *testing.B, s store.Store, seal store.SealFunc) {
	ctx := b.Context()
	u := &store.User{Username: "bench"}
	must(b, s.CreateUser(ctx, u))
	const traces, per = 100, 20
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		req := store.PushRequest{OwnerID: u.ID, DatasetName: "bench", CreateIfMissing: true, Seal: seal}
		for i := range traces {
			req.Traces = append(req.Traces, store.NewTrace{Name: "t", Messages: benchEvents(fmt.Sprintf("b%d-%d", n, i), per)})
		}
		if _, err := s.PushTraces(ctx, req); err != nil {
			b.Fatal(err)
		}
		n++
	}
	b.ReportMetric(float64(n*traces*per)/b.Elapsed().Seconds(), "events/s")
}

func benchPushParallel(b *testing.B, s store.Store) {
	ctx := b.Context()
	u := &store.User{Username: "bench"}
	must(b, s.CreateUser(ctx, u))
	const traces, per = 100, 20
	var seq atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(2)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			n := seq.Add(1)
			req := store.PushRequest{OwnerID: u.ID, DatasetName: "bench", CreateIfMissing: true, Seal: chainSeal}
			for i := range traces {
				req.Traces = append(req.Traces, store.NewTrace{Name: "t", Messages: benchEvents(fmt.Sprintf("b%d-%d", n, i), per)})
			}
			if _, err := s.PushTraces(ctx, req); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(seq.Load()*traces*per)/b.Elapsed().Seconds(), "events/s")
}

func benchAppend(b *testing.B, s store.Store) {
	ctx := b.Context()
	u := &store.User{Username: "bench"}
	must(b, s.CreateUser(ctx, u))
	res, err := s.PushTraces(ctx, store.PushRequest{OwnerID: u.ID, DatasetName: "bench", CreateIfMissing: true,
		Traces: []store.NewTrace{{Messages: benchEvents("first", 1)}}, Seal: chainSeal})
	must(b, err)
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		if _, err := s.AppendEvents(ctx, store.AppendRequest{TraceID: res.Traces[0].ID, Messages: benchEvents(fmt.Sprintf("a%d", n), 5), Seal: chainSeal}); err != nil {
			b.Fatal(err)
		}
		n++
	}
	b.ReportMetric(float64(n*5)/b.Elapsed().Seconds(), "events/s")
}

func benchGet(b *testing.B, s store.Store) {
	ctx := b.Context()
	u := &store.User{Username: "bench"}
	must(b, s.CreateUser(ctx, u))
	res, err := s.PushTraces(ctx, store.PushRequest{OwnerID: u.ID, DatasetName: "bench", CreateIfMissing: true,
		Traces: []store.NewTrace{{Messages: benchEvents("g", 20)}}})
	must(b, err)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.GetTrace(ctx, res.Traces[0].ID, true); err != nil {
			b.Fatal(err)
		}
	}
}

func benchIter(b *testing.B, s store.Store) {
	ctx := b.Context()
	u := &store.User{Username: "bench"}
	must(b, s.CreateUser(ctx, u))
	var ds string
	for p := range 10 {
		req := store.PushRequest{OwnerID: u.ID, DatasetName: "bench", CreateIfMissing: true}
		for i := range 100 {
			req.Traces = append(req.Traces, store.NewTrace{Messages: benchEvents(fmt.Sprintf("i%d-%d", p, i), 20)})
		}
		res, err := s.PushTraces(ctx, req)
		must(b, err)
		ds = res.Dataset.ID
	}
	b.ReportAllocs()
	for b.Loop() {
		n := 0
		for _, err := range s.IterTraces(ctx, ds, store.IterOptions{}) {
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
		if n != 1000 {
			b.Fatalf("iterated %d traces", n)
		}
	}
}

// BenchSearch measures Store.Search as the API runs it (count plus one
// page of 50) over traces × 20 events shaped by tracegen.AgentRun, with
// metadata {"tier": gold|silver|bronze, "n": i}. The query is a 2-term
// text query plus a meta: filter,
//
//	"order <n>" summarise meta:tier=gold
//
// with <n> varying per iteration: a selective phrase, a term every trace
// contains, and a metadata comparison. traces is 2,500 unless
// VIGIL_BENCH_SEARCH_TRACES says otherwise (50000 gives the 1,000,000
// events of the target; building that takes minutes).
// ShortTermsWorstCase runs the costliest query the parser admits. Both
// report the median latency (p50-ms) and the 90th percentile (p90-ms).
func BenchSearch(b *testing.B, open func(b *testing.B) store.Store) {
	traces := 2500
	if v := os.Getenv("VIGIL_BENCH_SEARCH_TRACES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 100 {
			b.Fatalf("VIGIL_BENCH_SEARCH_TRACES=%q: want an integer >= 100", v)
		}
		traces = n
	}
	s := open(b)
	ctx := b.Context()
	u := &store.User{Username: "bench"}
	must(b, s.CreateUser(ctx, u))
	const per, batch = 20, 250
	tiers := []string{"gold", "silver", "bronze"}
	start := time.Now()
	for i := 0; i < traces; i += batch {
		req := store.PushRequest{OwnerID: u.ID, DatasetName: "bench", CreateIfMissing: true}
		for j := i; j < min(i+batch, traces); j++ {
			evs := tracegen.AgentRun(j, per)
			msgs := make([]store.Message, len(evs))
			for k, ev := range evs {
				m := ev.(map[string]any)
				m["message_id"] = fmt.Sprintf("m%d-%d", j, k)
				data, err := json.Marshal(m)
				must(b, err)
				msgs[k] = store.Message{ID: m["message_id"].(string), NodeIDs: []string{}, Data: data}
			}
			req.Traces = append(req.Traces, store.NewTrace{Name: fmt.Sprintf("run %d", j), Messages: msgs,
				Metadata: fmt.Appendf(nil, `{"tier":%q,"n":%d}`, tiers[j%3], j)})
		}
		_, err := s.PushTraces(ctx, req)
		must(b, err)
	}
	b.Logf("stored %d traces × %d events in %v", traces, per, time.Since(start).Round(time.Millisecond))
	// Index them as a server's background indexer would: the timed
	// searches then pay only the check for pending traces, not a first
	// search's catch-up of the whole set-up.
	start = time.Now()
	for {
		n, err := s.IndexPending(ctx, 0)
		must(b, err)
		if n == 0 {
			break
		}
	}
	b.Logf("indexed them in %v", time.Since(start).Round(time.Millisecond))
	ds, err := s.GetDatasetByName(ctx, u.ID, "bench")
	must(b, err)
	run := func(b *testing.B, query func(k int) string) {
		var lat []time.Duration
		k := 0
		for b.Loop() {
			q := query(k)
			k++
			t0 := time.Now()
			_, err := s.Search(ctx, store.SearchRequest{Query: q, OwnerID: u.ID, DatasetIDs: []string{ds.ID}, Limit: 50})
			lat = append(lat, time.Since(t0))
			must(b, err)
		}
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(lat[len(lat)*9/10].Microseconds())/1000, "p90-ms")
	}
	b.Run("TwoTermsMeta", func(b *testing.B) {
		run(b, func(k int) string { return fmt.Sprintf(`"order %d" summarise meta:tier=gold`, (k*7919+1234)%traces) })
	})
	// The costliest queries the parser admits: the most terms too short
	// for the trigram index, none matching, so every trace's fields are
	// scanned once per term; the most metadata comparisons.
	b.Run("ShortTermsWorstCase", func(b *testing.B) {
		var terms []string
		for i := range search.MaxShortTerms {
			terms = append(terms, fmt.Sprintf("q%c", 'a'+i))
		}
		run(b, func(int) string { return strings.Join(terms, " OR ") })
	})
	b.Run("MetaWorstCase", func(b *testing.B) {
		var terms []string
		for i := range search.MaxTerms {
			terms = append(terms, fmt.Sprintf("meta:n=%d.5", i))
		}
		run(b, func(int) string { return strings.Join(terms, " OR ") })
	})
}

func benchAppendMany(b *testing.B, s store.Store) {
	ctx := b.Context()
	u := &store.User{Username: "bench"}
	must(b, s.CreateUser(ctx, u))
	const traces = 100
	req := store.PushRequest{OwnerID: u.ID, DatasetName: "bench", CreateIfMissing: true, Seal: chainSeal}
	for i := range traces {
		req.Traces = append(req.Traces, store.NewTrace{Messages: benchEvents(fmt.Sprintf("t%d", i), 10)})
	}
	res, err := s.PushTraces(ctx, req)
	must(b, err)
	_, err = s.IndexPending(ctx, traces)
	must(b, err)
	n := 0
	for b.Loop() {
		reqs := make([]store.AppendRequest, traces)
		for i, t := range res.Traces {
			reqs[i] = store.AppendRequest{TraceID: t.ID, Messages: benchEvents(fmt.Sprintf("t%d-a%d", i, n), 2), Seal: chainSeal,
				MetadataMerge: json.RawMessage(fmt.Sprintf(`{"usage":{"input_tokens":%d}}`, n))}
		}
		if _, err := s.AppendMany(ctx, reqs); err != nil {
			b.Fatal(err)
		}
		if _, err := s.IndexPending(ctx, traces); err != nil {
			b.Fatal(err)
		}
		n++
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(n*traces), "µs/turn")
}
