package ingest

import (
	"context"
	"fmt"
	"sync"

	"github.com/vigilhq/vigil/store"
)

// Group commit of AppendMany (on SQLite): concurrent callers' appends are
// coalesced into one store transaction. The first caller to find no write in
// flight becomes the leader: it takes every batch queued meanwhile
// (its own first), writes them with one store.AppendMany and hands each
// caller its outcomes; callers arriving during that write queue for the
// next one. On SQLite, whose single writer serialises transactions
// anyway, this turns N commits (N fsyncs, N rewrites of the tables'
// last pages, N rounds of the per-transaction statements) into one
// without adding latency: a batch waits only for the write before it.
//
// Guarantees are unchanged: a caller returns only once its appends are
// committed (or failed), and a batch is never split across
// transactions. When a combined write fails as a whole, each batch is
// written again on its own, so one caller's bad request cannot fail the
// others. A batch naming a trace another batch of the round also names
// waits for the next round (AppendMany takes a trace once).

// maxGroupRequests bounds the append requests (traces) of one combined
// transaction; a round takes whole batches up to it (a single larger
// batch goes alone).
const maxGroupRequests = 2000

// appendBatch is one caller's AppendMany, queued for a leader.
type appendBatch struct {
	ctx  context.Context
	reqs []store.AppendRequest
	out  []store.AppendOutcome
	err  error
	done chan struct{} // closed once out and err are set
	// finished is set with done, by the leader that closes it.
	finished bool
	lead     chan struct{} // the previous leader passes the lead
}

// groupCommit is the queue of batches waiting for the next combined
// write.
type groupCommit struct {
	mu      sync.Mutex
	queue   []*appendBatch
	writing bool // a leader is writing (or passing the lead)
}

// appendGrouped writes reqs, combined with those of concurrent callers.
// It waits for its write even when ctx ends meanwhile (a batch taken into
// a write is written; one whose context ended before is not), so a
// caller never returns while its appends may still commit.
func (in *Ingester) appendGrouped(ctx context.Context, reqs []store.AppendRequest) ([]store.AppendOutcome, error) {
	me := &appendBatch{ctx: ctx, reqs: reqs, done: make(chan struct{}), lead: make(chan struct{}, 1)}
	g := &in.group
	g.mu.Lock()
	g.queue = append(g.queue, me)
	leader := !g.writing
	g.writing = true
	g.mu.Unlock()
	if leader {
		in.lead(me)
	}
	for {
		select {
		case <-me.done:
			return me.out, me.err
		case <-me.lead:
			in.lead(me)
		}
	}
}

// lead writes rounds until me's batch is written, then passes the lead to
// the first batch still queued, or ends the group's write when none is.
// A leader thus writes at most the rounds up to its own.
func (in *Ingester) lead(me *appendBatch) {
	g := &in.group
	for {
		g.mu.Lock()
		round := g.takeRound()
		g.mu.Unlock()
		in.writeRound(round)
		g.mu.Lock()
		if len(g.queue) == 0 {
			g.writing = false
			g.mu.Unlock()
			return
		}
		select {
		case <-me.done:
			next := g.queue[0]
			g.mu.Unlock()
			next.lead <- struct{}{}
			return
		default:
			g.mu.Unlock()
		}
	}
}

// takeRound removes from the queue the batches of the next combined
// write: in arrival order, up to maxGroupRequests requests, skipping
// (leaving queued) a batch that names a trace already in the round. The
// caller holds g.mu.
func (g *groupCommit) takeRound() []*appendBatch {
	var round, rest []*appendBatch
	n := 0
	traces := map[string]bool{}
	for _, b := range g.queue {
		clash := false
		for i := range b.reqs {
			if traces[b.reqs[i].TraceID] {
				clash = true
				break
			}
		}
		if clash || (n > 0 && n+len(b.reqs) > maxGroupRequests) {
			rest = append(rest, b)
			continue
		}
		for i := range b.reqs {
			traces[b.reqs[i].TraceID] = true
		}
		n += len(b.reqs)
		round = append(round, b)
	}
	g.queue = rest
	return round
}

// writeRound writes the batches of a round in one transaction and
// completes each; when the combined write fails, each batch is written
// on its own.
func (in *Ingester) writeRound(round []*appendBatch) {
	finish := func(b *appendBatch, out []store.AppendOutcome, err error) {
		b.out, b.err, b.finished = out, err, true
		close(b.done)
	}
	// A panic in the store must not leave the other callers of the round
	// waiting forever (and the group writing): each gets it as an error.
	defer func() {
		if p := recover(); p != nil {
			for _, b := range round {
				if !b.finished {
					finish(b, nil, fmt.Errorf("append to traces: internal error: %v", p))
				}
			}
		}
	}()
	live := round[:0]
	for _, b := range round {
		if err := b.ctx.Err(); err != nil {
			finish(b, nil, fmt.Errorf("append to traces: %w", err))
			continue
		}
		live = append(live, b)
	}
	round = live
	if len(round) == 0 {
		return
	}
	if len(round) == 1 {
		b := round[0]
		out, err := in.st.AppendMany(b.ctx, b.reqs)
		finish(b, out, err)
		return
	}
	var all []store.AppendRequest
	for _, b := range round {
		all = append(all, b.reqs...)
	}
	// No one caller's cancellation aborts the others' write.
	out, err := in.st.AppendMany(context.WithoutCancel(round[0].ctx), all)
	if err != nil {
		for _, b := range round {
			out, err := in.st.AppendMany(b.ctx, b.reqs)
			finish(b, out, err)
		}
		return
	}
	k := 0
	for _, b := range round {
		finish(b, out[k:k+len(b.reqs):k+len(b.reqs)], nil)
		k += len(b.reqs)
	}
}
