package ingest_test

import (
	"cmp"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vigilhq/vigil/ingest"
	"github.com/vigilhq/vigil/store"
)

// TestAppendMany appends to two traces and updates a third's metadata in
// one call: events are sorted by timestamp and sealed in each trace's own
// signed chain, tools are recorded, and a deleted trace is reported in
// its outcome without failing the others.
func TestAppendMany(t *testing.T) {
	ctx := context.Background()
	in, st, owner, pub := newIngester(t)
	var traces []store.NewTrace
	for _, id := range []string{store.NewID(), store.NewID(), store.NewID(), store.NewID()} {
		pe := prepare(t, `[{"role":"user","content":"hi"}]`, id)
		traces = append(traces, store.NewTrace{ID: id, Messages: pe.Messages})
	}
	res, err := in.Push(ctx, ingest.PushRequest{PushRequest: store.PushRequest{OwnerID: owner, DatasetName: "ds", CreateIfMissing: true, Traces: traces}})
	if err != nil {
		t.Fatal(err)
	}
	tr := res.Traces
	if err := st.DeleteTrace(ctx, tr[3].ID, nil); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	appendOf := func(tr *store.Trace, events string) ingest.AppendRequest {
		var warn ingest.Warnings
		pe, err := ingest.PrepareAppend(tr, []byte(events), now, "events", &warn)
		if err != nil {
			t.Fatal(err)
		}
		return ingest.AppendRequest{Trace: tr, Events: pe, Time: now}
	}
	name := "named"
	reqs := []ingest.AppendRequest{
		appendOf(tr[0], `[{"role":"user","content":"late","timestamp":"2026-01-02T00:00:02Z"},{"role":"user","content":"early","timestamp":"2026-01-02T00:00:01Z"}]`),
		appendOf(tr[1], `[{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"lookup","arguments":{"q":"x"}}}]}]`),
		{Trace: tr[2], MetadataMerge: json.RawMessage(`{"model":"m"}`), Name: &name},
		appendOf(tr[3], `[{"role":"user","content":"gone"}]`),
	}
	outs, err := in.AppendMany(ctx, reqs)
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(outs[3].Err, store.ErrNotFound) {
		t.Errorf("append to a deleted trace: %v, want ErrNotFound", outs[3].Err)
	}
	var contents []string
	for _, m := range outs[0].Messages {
		var v struct{ Content string }
		_ = json.Unmarshal(m.Data, &v)
		contents = append(contents, v.Content)
	}
	if got := strings.Join(contents, " "); got != "early late" {
		t.Errorf("appended to trace 0: %q, want early late", got)
	}
	for i, want := range []int{3, 2, 1} {
		if n := verifySession(t, st, tr[i].SessionID, pub); n != want {
			t.Errorf("trace %d has %d receipts, want %d", i, n, want)
		}
	}
	got, err := st.GetTrace(ctx, tr[2].ID, false)
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "named" || string(got.Metadata) != `{"model":"m"}` {
		t.Errorf("trace 2: name %q, metadata %s", got.Name, got.Metadata)
	}
	tools, err := st.ListTools(ctx, res.Dataset.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(tools) != 1 || tools[0].Name != "lookup" {
		t.Errorf("tools %+v", tools)
	}
}

// TestAppendManyConcurrent appends from many goroutines at once, batches
// overlapping in traces, so that calls share transactions (group
// commit): every append lands once, each trace's chain verifies, and a
// batch the store refuses (a trace twice) fails alone.
func TestAppendManyConcurrent(t *testing.T) {
	ctx := context.Background()
	in, st, owner, pub := newIngester(t)
	const ntraces, workers, rounds = 6, 12, 8
	var traces []store.NewTrace
	for range ntraces {
		id := store.NewID()
		traces = append(traces, store.NewTrace{ID: id, Messages: prepare(t, `[{"role":"user","content":"hi"}]`, id).Messages})
	}
	res, err := in.Push(ctx, ingest.PushRequest{PushRequest: store.PushRequest{OwnerID: owner, DatasetName: "ds", CreateIfMissing: true, Traces: traces}})
	if err != nil {
		t.Fatal(err)
	}
	tr := res.Traces
	appendOf := func(i int, text string) ingest.AppendRequest {
		return ingest.AppendRequest{Trace: tr[i], Events: prepare(t, `[{"role":"user","content":"`+text+`"}]`, tr[i].ID), Time: time.Now()}
	}
	var wg sync.WaitGroup
	errs := make(chan error, workers*rounds)
	for w := range workers {
		wg.Go(func() {
			for r := range rounds {
				a, b := w%ntraces, (w+1)%ntraces
				outs, err := in.AppendMany(ctx, []ingest.AppendRequest{appendOf(a, "x"), appendOf(b, "y")})
				if err == nil {
					for _, o := range outs {
						err = cmp.Or(err, o.Err)
					}
				}
				if err != nil {
					errs <- fmt.Errorf("worker %d round %d: %w", w, r, err)
				}
			}
		})
	}
	// A batch naming one trace twice fails with ErrConflict, alone.
	wg.Go(func() {
		if _, err := in.AppendMany(ctx, []ingest.AppendRequest{appendOf(0, "z"), appendOf(0, "z")}); !errors.Is(err, store.ErrConflict) {
			errs <- fmt.Errorf("a trace twice: %v, want ErrConflict", err)
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// Trace i is appended to by workers i and i-1 (mod ntraces), each
	// worker twice per trace index it covers.
	for i := range ntraces {
		want := 1 + 2*rounds*workers/ntraces
		if n := verifySession(t, st, tr[i].SessionID, pub); n != want {
			t.Errorf("trace %d has %d receipts, want %d", i, n, want)
		}
		got, err := st.GetTrace(ctx, tr[i].ID, false)
		if err != nil {
			t.Fatal(err)
		}
		if got.MessageCount != want {
			t.Errorf("trace %d has %d events, want %d", i, got.MessageCount, want)
		}
	}
}

// panicOnce is the real store whose first AppendMany panics, as a driver
// bug would.
type panicOnce struct {
	store.Store
	fired atomic.Bool
}

func (p *panicOnce) AppendMany(ctx context.Context, reqs []store.AppendRequest) ([]store.AppendOutcome, error) {
	if p.fired.CompareAndSwap(false, true) {
		panic("driver bug")
	}
	return p.Store.AppendMany(ctx, reqs)
}

// A panic inside a combined write fails that round's callers with an
// error instead of leaving them (and every later append) waiting.
func TestAppendManyGroupPanic(t *testing.T) {
	ctx := context.Background()
	_, st, owner, _ := newIngester(t)
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ps := &panicOnce{Store: st}
	in := ingest.New(ps, key, ingest.Config{})
	var traces []store.NewTrace
	for range 8 {
		id := store.NewID()
		traces = append(traces, store.NewTrace{ID: id, Messages: prepare(t, `[{"role":"user","content":"hi"}]`, id).Messages})
	}
	res, err := in.Push(ctx, ingest.PushRequest{PushRequest: store.PushRequest{OwnerID: owner, DatasetName: "ds", CreateIfMissing: true, Traces: traces}})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var failed atomic.Int32
	for i := range 8 {
		wg.Go(func() {
			tr := res.Traces[i]
			_, err := in.AppendMany(ctx, []ingest.AppendRequest{{Trace: tr, Events: prepare(t, `[{"role":"user","content":"x"}]`, tr.ID), Time: time.Now()}})
			if err != nil {
				if !strings.Contains(err.Error(), "driver bug") {
					t.Errorf("append %d: %v", i, err)
				}
				failed.Add(1)
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("appends still waiting 30 s after a panic in the store")
	}
	// Later appends still go through.
	tr := res.Traces[0]
	if _, err := in.AppendMany(ctx, []ingest.AppendRequest{{Trace: tr, Events: prepare(t, `[{"role":"user","content":"after"}]`, tr.ID), Time: time.Now()}}); err != nil {
		t.Fatalf("append after the panic: %v", err)
	}
	// The round that panicked failed its callers (one, or several when
	// their writes were combined); the others were written.
	if n := failed.Load(); n < 1 {
		t.Errorf("%d appends failed, want at least the one whose write panicked", n)
	}
}
