package storetest

import (
	"fmt"
	"sync"
	"testing"

	"github.com/vigilhq/vigil/store"
)

// RunShared runs the suite for two stores opened on the same database, as
// two `vigil serve` processes would be (spec/ledger.md §12: concurrent
// appends from two processes). open returns both, fresh and empty, and
// arranges for them to be closed.
func RunShared(t *testing.T, open func(t *testing.T) (store.Store, store.Store)) {
	t.Helper()
	t.Run("Push", func(t *testing.T) {
		t.Parallel()
		a, b := open(t)
		testSharedPush(t, a, b)
	})
	t.Run("AppendChain", func(t *testing.T) {
		t.Parallel()
		a, b := open(t)
		testSharedAppend(t, a, b)
	})
	t.Run("SearchIndex", func(t *testing.T) {
		t.Parallel()
		a, b := open(t)
		testSharedSearchIndex(t, a, b)
	})
}

func testSharedPush(t *testing.T, a, b store.Store) {
	ctx := ctxT(t)
	u := newUser(t, a, "u")
	const pushers, perPush = 20, 2
	var wg sync.WaitGroup
	errs := make(chan error, pushers)
	for p := range pushers {
		s := a
		if p%2 == 1 {
			s = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := store.PushRequest{OwnerID: u.ID, DatasetName: "shared", CreateIfMissing: true, Seal: chainSeal}
			for i := range perPush {
				req.Traces = append(req.Traces, store.NewTrace{Messages: events(fmt.Sprintf("p%d-%d", p, i), 1)})
			}
			if _, err := s.PushTraces(ctx, req); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	ds, err := b.GetDatasetByName(ctx, u.ID, "shared")
	must(t, err)
	all, err := b.ListTraces(ctx, store.TraceFilter{DatasetID: ds.ID})
	must(t, err)
	if len(all) != pushers*perPush {
		t.Fatalf("%d traces, want %d", len(all), pushers*perPush)
	}
	for i, tr := range all {
		if tr.Index != int64(i) {
			t.Fatalf("trace %d has index %d", i, tr.Index)
		}
	}
}

func testSharedAppend(t *testing.T, a, b store.Store) {
	ctx := ctxT(t)
	u := newUser(t, a, "u")
	res := push(t, a, u.ID, "chain", 1, 1)
	tr := res.Traces[0]
	const writers, each = 6, 4
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		s := a
		if w%2 == 1 {
			s = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if _, err := s.AppendEvents(ctx, store.AppendRequest{TraceID: tr.ID, Messages: events(fmt.Sprintf("w%d-%d", w, i), 2), Seal: chainSeal}); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	checkChain(t, b, tr.SessionID, 1+writers*each*2)
	checkChain(t, a, tr.SessionID, 1+writers*each*2)
}
