package server

// The search indexer: a background loop that builds the search index off
// the write path (store.SearchIndex). Writes only list the traces to
// index; this loop drains that list in batches, sleeping briefly when it
// is short so that the next batch is bigger (a batch costs FTS5 and GIN
// far less per trace than single traces do). Searches index what is still
// pending themselves, so the loop only keeps that catch-up small. Several
// servers on one PostgreSQL database may run it at once.

import (
	"context"
	"runtime"
	"time"
)

// Search indexer pacing: searchIndexBatch traces per call; after a short
// batch the loop sleeps searchIndexIdle, after an error searchIndexRetry.
const (
	searchIndexBatch = 1000
	searchIndexIdle  = 200 * time.Millisecond
	searchIndexRetry = 2 * time.Second
)

// searchIndexSlice is the most traces the loop indexes in one call when
// it drains a backlog; it yields the CPU between slices, so that a burst
// of indexing (about 50 µs a trace) never holds a core for more than a
// few milliseconds while requests wait.
const searchIndexSlice = 64

// searchIndexer is the running loop; stop ends it and waits.
type searchIndexer struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// startSearchIndexer starts the loop over s.st.
func (s *Server) startSearchIndexer() {
	s.metrics.counter("vigil_search_indexed_traces_total", "Traces the background search indexer (re)indexed.")
	ctx, cancel := context.WithCancel(context.Background())
	ix := &searchIndexer{cancel: cancel, done: make(chan struct{})}
	s.indexer = ix
	go func() {
		defer close(ix.done)
		for {
			var n int
			var err error
			for n < searchIndexBatch {
				k, e := s.st.IndexPending(ctx, searchIndexSlice)
				n, err = n+k, e
				if e != nil || k < searchIndexSlice || ctx.Err() != nil {
					break
				}
				runtime.Gosched()
			}
			if ctx.Err() != nil {
				return
			}
			s.metrics.Add("vigil_search_indexed_traces_total", uint64(n))
			wait := time.Duration(0)
			switch {
			case err != nil:
				s.log.Warn("search indexer", "err", err)
				wait = searchIndexRetry
			case n < searchIndexBatch:
				wait = searchIndexIdle
			}
			if wait > 0 {
				select {
				case <-ctx.Done():
					return
				case <-time.After(wait):
				}
			}
		}
	}()
}

// stop ends the loop and waits for its current batch.
func (ix *searchIndexer) stop() {
	ix.cancel()
	<-ix.done
}
