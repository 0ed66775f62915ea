package sqlstore

import (
	"container/list"
	"sync"

	"github.com/vigilhq/vigil/store"
)

// recentWrites keeps the events of recently written dataset traces in
// memory, so that a monitor worker in the same process evaluates a write
// without reading its events back (MonitorTrace). It is filled after a
// push or append commits; events are immutable once stored, so an entry
// is a prefix of the stored trace and never stale, except that the trace
// may since have been deleted or grown, which MonitorTrace checks against
// the traces row. Bounded by the bytes of event data it holds.
type recentWrites struct {
	mu    sync.Mutex
	max   int
	bytes int
	ll    *list.List // of *recentTrace, most recent first
	m     map[string]*list.Element
}

type recentTrace struct {
	id    string
	msgs  []store.Message
	bytes int
}

// recentWritesBytes bounds the event data the cache holds: enough for the
// writes workers have not reached yet, small beside an upload's budget.
const recentWritesBytes = 8 << 20

func newRecentWrites(max int) *recentWrites {
	return &recentWrites{max: max, ll: list.New(), m: map[string]*list.Element{}}
}

// put records the events of trace id: all of them after a push (from 0),
// or those an append added at position from, which extend an entry only
// when it holds exactly the from events before them (appends may finish
// out of order; then the entry is dropped).
func (c *recentWrites) put(id string, from int, msgs []store.Message) {
	n := 0
	for i := range msgs {
		n += len(msgs[i].Data) + 64
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.m[id]
	var e *recentTrace
	switch {
	case ok:
		e = el.Value.(*recentTrace)
		if len(e.msgs) != from {
			c.remove(el)
			return
		}
		e.msgs = append(e.msgs[:len(e.msgs):len(e.msgs)], msgs...) // a new array: readers keep theirs
		e.bytes += n
		c.bytes += n
		c.ll.MoveToFront(el)
	case from == 0:
		e = &recentTrace{id: id, msgs: msgs, bytes: n}
		c.m[id] = c.ll.PushFront(e)
		c.bytes += n
	default:
		return
	}
	for c.bytes > c.max && c.ll.Len() > 0 {
		c.remove(c.ll.Back())
	}
}

func (c *recentWrites) remove(el *list.Element) {
	e := el.Value.(*recentTrace)
	c.ll.Remove(el)
	delete(c.m, e.id)
	c.bytes -= e.bytes
}

// get returns the first n cached events of trace id, or false when fewer
// are cached.
func (c *recentWrites) get(id string, n int) ([]store.Message, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.m[id]
	if !ok {
		return nil, false
	}
	e := el.Value.(*recentTrace)
	if len(e.msgs) < n {
		return nil, false
	}
	return e.msgs[:n:n], true
}
