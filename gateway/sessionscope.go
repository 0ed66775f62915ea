package gateway

import (
	"context"
	"time"

	"github.com/vigilhq/vigil/ledger"
)

// This file is session_guardrail_scope: session (spec §6.7): the input
// check of a call in a header session evaluates the session's recorded
// events that are not in the request's prefix (other sub-agents'
// branches, say) first, then the request's prefix, with the new request
// events pending, so that flow rules see the whole session.

// inputCheck runs the blocking rules over the request (events from k on
// pending), in session scope when it applies.
func (c *call) inputCheck(ctx context.Context, k int) *verdict {
	p := c.plan
	if c.g.opts.SessionScope != "session" || p == nil || p.isNew || p.s.keySource != "header" || len(p.stored) == 0 {
		return c.evaluateOn(ctx, c.rules.block, k, nil)
	}
	start := time.Now()
	others, othersAt, prefixAt := sessionContext(p.stored, c.in.events[:k])
	past := append(append(make([]event, 0, len(others)+k), others...), c.in.events[:k]...)
	v := c.g.evaluate(ctx, c.rules.block, past, c.in.events[k:], c.rules.params, true)
	no, base := len(others), p.base
	v.index = func(i int) int {
		switch {
		case i < no:
			return othersAt[i]
		case i < no+k:
			return prefixAt[i-no]
		}
		return base + i - no - k
	}
	v.elapsed = time.Since(start)
	return v
}

// sessionContext splits the stored events of a session into those the
// request prefix re-sends (matched by canonical form, in order) and the
// others. It returns the others with their stored positions, and the
// stored position of each prefix event (its own index when none
// matches).
func sessionContext(stored, prefix []event) (others []event, othersAt, prefixAt []int) {
	queue := map[string][]int{} // canonical form → stored positions of the prefix's matches
	want := map[string]int{}
	canon := make([]string, len(prefix))
	for i, e := range prefix {
		b, _ := ledger.Marshal(canonical(e))
		canon[i] = string(b)
		want[canon[i]]++
	}
	for j, e := range stored {
		b, _ := ledger.Marshal(canonical(e))
		cs := string(b)
		if want[cs] > 0 {
			want[cs]--
			queue[cs] = append(queue[cs], j)
			continue
		}
		others = append(others, e)
		othersAt = append(othersAt, j)
	}
	prefixAt = make([]int, len(prefix))
	for i, cs := range canon {
		if q := queue[cs]; len(q) > 0 {
			prefixAt[i], queue[cs] = q[0], q[1:]
		} else {
			prefixAt[i] = i
		}
	}
	return others, othersAt, prefixAt
}
