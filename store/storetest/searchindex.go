package storetest

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/vigilhq/vigil/store"
)

// The search index is built off the write path (store.SearchIndex): these
// cases check that writes list what to index, that IndexPending drains the
// list, that a search first indexes what its datasets have pending, and
// that two stores on one database index each trace once.

func init() {
	register("SearchReadYourWrites", testSearchReadYourWrites)
	register("SearchIndexPending", testSearchIndexPending)
	register("SearchReusedTraceID", testSearchReusedTraceID)
}

// drain calls IndexPending until nothing is pending and returns the total.
func drain(t testing.TB, s store.Store) int {
	t.Helper()
	total := 0
	for {
		n, err := s.IndexPending(ctxT(t), 0)
		must(t, err)
		if n == 0 {
			return total
		}
		total += n
	}
}

// testSearchReadYourWrites checks that a search right after a write sees
// it, with no indexer running, whether it reads every dataset or one, and
// that the search indexed what it needed (nothing of its datasets is left
// pending).
func testSearchReadYourWrites(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	u := newUser(t, s, "u")
	a := push(t, s, u.ID, "a", 2, 2)
	b := push(t, s, u.ID, "b", 1, 1)
	find := func(q string, datasets []string) []string {
		t.Helper()
		got, err := searchNames(t, s, store.SearchRequest{Query: q, OwnerID: u.ID, DatasetIDs: datasets})
		must(t, err)
		return got
	}
	// Dataset a only: b's trace stays pending for the indexer.
	if got := find("message 1 of m1", []string{a.Dataset.ID}); !slices.Equal(got, []string{"t1"}) {
		t.Errorf("search of dataset a right after the push = %q", got)
	}
	if n := drain(t, s); n != 1 {
		t.Errorf("IndexPending after a search of dataset a indexed %d traces, want 1 (dataset b's)", n)
	}
	for _, step := range []struct {
		write func()
		query string
		want  []string
	}{
		{func() {
			_, err := s.AppendEvents(ctx, store.AppendRequest{TraceID: a.Traces[0].ID, Messages: []store.Message{event("z1", "user", "an Okapi")}})
			must(t, err)
		}, "okapi", []string{"t0"}},
		{func() {
			name := "Renamed narwhal"
			_, err := s.UpdateTrace(ctx, b.Traces[0].ID, store.TraceUpdate{Name: &name})
			must(t, err)
		}, "narwhal", []string{"Renamed narwhal"}},
		{func() { must(t, s.DeleteTrace(ctx, a.Traces[0].ID, nil)) }, "okapi", nil},
		{func() { must(t, s.DeleteDataset(ctx, b.Dataset.ID, nil)) }, "narwhal", nil},
	} {
		step.write()
		if got := find(step.query, nil); !slices.Equal(got, step.want) {
			t.Errorf("search %q right after the write = %q, want %q", step.query, got, step.want)
		}
	}
	if n := drain(t, s); n != 0 {
		t.Errorf("IndexPending after searches of every dataset indexed %d traces, want 0", n)
	}
}

// testSearchIndexPending checks what each write lists and that
// IndexPending takes at most max traces and drains the list.
func testSearchIndexPending(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	u := newUser(t, s, "u")
	res := push(t, s, u.ID, "d", 5, 2)
	n, err := s.IndexPending(ctx, 2)
	must(t, err)
	if n != 2 {
		t.Errorf("IndexPending(2) after a push of 5 = %d", n)
	}
	if n := drain(t, s); n != 3 {
		t.Errorf("the rest of the backlog = %d traces, want 3", n)
	}
	// Two appends to one trace and a rename of it list it once.
	for i := range 2 {
		_, err := s.AppendEvents(ctx, store.AppendRequest{TraceID: res.Traces[0].ID, Messages: []store.Message{event(fmt.Sprintf("x%d", i), "user", "Quokka")}})
		must(t, err)
	}
	name := "Quokka run"
	_, err = s.UpdateTrace(ctx, res.Traces[0].ID, store.TraceUpdate{Name: &name})
	must(t, err)
	if n := drain(t, s); n != 1 {
		t.Errorf("after two appends and a rename of one trace IndexPending took %d, want 1", n)
	}
	// The index was built by IndexPending: the search has nothing left.
	got, err := searchNames(t, s, store.SearchRequest{Query: "quokka", OwnerID: u.ID})
	must(t, err)
	if !slices.Equal(got, []string{"Quokka run"}) {
		t.Errorf("search after IndexPending = %q", got)
	}
	must(t, s.DeleteDataset(ctx, res.Dataset.ID, nil))
	if n := drain(t, s); n != 5 {
		t.Errorf("after deleting a dataset of 5 traces IndexPending took %d, want 5", n)
	}
}

// testSearchReusedTraceID checks that a trace pushed with the id of a
// deleted trace is found by its own text only: deleting a dataset used to
// leave its traces' index rows behind (the batches that delete the traces
// skipped them), and a new trace with the same id then matched them.
func testSearchReusedTraceID(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	u := newUser(t, s, "u")
	for _, word := range []string{"Wombat", "Lemur"} {
		res, err := s.PushTraces(ctx, store.PushRequest{OwnerID: u.ID, DatasetName: "d", CreateIfMissing: true, Traces: []store.NewTrace{
			{ID: "fixed-trace-id", Name: "run", Session: &store.Session{ID: "session-" + word},
				Messages: []store.Message{event("e1", "user", word+" sighting")}}}})
		must(t, err)
		got, err := searchNames(t, s, store.SearchRequest{Query: word, OwnerID: u.ID})
		must(t, err)
		if !slices.Equal(got, []string{"run"}) {
			t.Errorf("search %q = %q", word, got)
		}
		must(t, s.DeleteDataset(ctx, res.Dataset.ID, nil))
	}
	for _, word := range []string{"wombat", "lemur"} {
		got, err := searchNames(t, s, store.SearchRequest{Query: word, OwnerID: u.ID})
		must(t, err)
		if len(got) != 0 {
			t.Errorf("search %q after both datasets were deleted = %q", word, got)
		}
	}
	if _, err := s.PushTraces(ctx, store.PushRequest{OwnerID: u.ID, DatasetName: "d", CreateIfMissing: true, Traces: []store.NewTrace{
		{ID: "fixed-trace-id", Name: "run", Session: &store.Session{ID: "session-again"},
			Messages: []store.Message{event("e1", "user", "Lemur again")}}}}); err != nil {
		t.Fatal(err)
	}
	got, err := searchNames(t, s, store.SearchRequest{Query: "wombat", OwnerID: u.ID})
	must(t, err)
	if len(got) != 0 {
		t.Errorf("search wombat matched the new trace with a deleted trace's id: %q", got)
	}
}

// testSharedSearchIndex pushes from both stores while both index and
// search (nothing may fail or deadlock), then pushes again and checks that
// two IndexPending loops on each store together take each pending trace
// exactly once, and that both stores find every trace.
func testSharedSearchIndex(t *testing.T, a, b store.Store) {
	ctx := ctxT(t)
	u := newUser(t, a, "u")
	const pushers, perPush = 8, 25
	pushAll := func(round string, during func(s store.Store)) {
		var wg sync.WaitGroup
		for p := range pushers {
			s := []store.Store{a, b}[p%2]
			wg.Go(func() {
				req := store.PushRequest{OwnerID: u.ID, DatasetName: "shared", CreateIfMissing: true}
				for i := range perPush {
					id := fmt.Sprintf("%s%d-%d", round, p, i)
					req.Traces = append(req.Traces, store.NewTrace{Name: id, Messages: events(id, 2)})
				}
				if _, err := s.PushTraces(ctx, req); err != nil {
					t.Error(err)
				}
				during(s)
			})
		}
		wg.Wait()
	}
	pushAll("a", func(s store.Store) {
		if _, err := s.IndexPending(ctx, 10); err != nil {
			t.Error(err)
		}
		if _, err := s.Search(ctx, store.SearchRequest{Query: "message", OwnerID: u.ID, NoTotal: true}); err != nil {
			t.Error(err)
		}
	})
	drain(t, a)
	pushAll("b", func(store.Store) {})
	var total atomic.Int64
	var wg sync.WaitGroup
	for _, s := range []store.Store{a, b, a, b} {
		wg.Go(func() {
			for {
				n, err := s.IndexPending(ctx, 7)
				if err != nil {
					t.Error(err)
					return
				}
				if n == 0 {
					return
				}
				total.Add(int64(n))
			}
		})
	}
	wg.Wait()
	if n := drain(t, a) + drain(t, b); n != 0 {
		t.Errorf("%d traces left pending after the indexers stopped", n)
	}
	if total.Load() != pushers*perPush {
		t.Errorf("the indexers took %d traces, want the %d pushed, each once", total.Load(), pushers*perPush)
	}
	for _, s := range []store.Store{a, b} {
		res, err := s.Search(ctx, store.SearchRequest{Query: "message 1 of", OwnerID: u.ID})
		must(t, err)
		if res.Total != 2*pushers*perPush {
			t.Errorf("%s store finds %d of %d traces", s.Kind(), res.Total, 2*pushers*perPush)
		}
	}
}

// SearchPendingDurable checks that the list of traces to index survives a
// store closed without indexing it (as after kill -9): open opens the
// same database each time it is called.
func SearchPendingDurable(t *testing.T, open func(t *testing.T) store.Store) {
	s := open(t)
	u := newUser(t, s, "u")
	push(t, s, u.ID, "d", 3, 1)
	must(t, s.Close())
	s = open(t)
	if n := drain(t, s); n != 3 {
		t.Errorf("IndexPending after reopening took %d traces, want the 3 pushed", n)
	}
	got, err := searchNames(t, s, store.SearchRequest{Query: "message 0 of", OwnerID: u.ID})
	must(t, err)
	if !slices.Equal(got, []string{"t0", "t1", "t2"}) {
		t.Errorf("search after reopening = %q", got)
	}
}
