package sqlstore

import (
	"strings"
	"testing"

	"github.com/vigilhq/vigil/store"
)

func recentMsgs(ids ...string) []store.Message {
	out := make([]store.Message, len(ids))
	for i, id := range ids {
		out[i] = store.Message{ID: id, Data: []byte(`{"x":"` + id + `"}`)}
	}
	return out
}

func recentIDs(ms []store.Message) string {
	var ids []string
	for _, m := range ms {
		ids = append(ids, m.ID)
	}
	return strings.Join(ids, ",")
}

// TestRecentWrites: pushes start an entry, appends in order extend it, an
// append out of order drops it, an append to an unknown trace adds
// nothing, and the byte budget evicts the least recent entries.
func TestRecentWrites(t *testing.T) {
	c := newRecentWrites(1 << 20)
	c.put("t", 0, recentMsgs("a", "b"))
	c.put("t", 2, recentMsgs("c"))
	if got, ok := c.get("t", 3); !ok || recentIDs(got) != "a,b,c" {
		t.Fatalf("after push and append: %s %v", recentIDs(got), ok)
	}
	if got, ok := c.get("t", 2); !ok || recentIDs(got) != "a,b" {
		t.Fatalf("prefix: %s %v", recentIDs(got), ok)
	}
	if _, ok := c.get("t", 4); ok {
		t.Fatal("more events than cached")
	}
	c.put("t", 5, recentMsgs("f")) // the append of events 3-4 has not been recorded yet
	if _, ok := c.get("t", 0); ok {
		t.Fatal("an out-of-order append kept the entry")
	}
	c.put("u", 4, recentMsgs("x"))
	if _, ok := c.get("u", 0); ok {
		t.Fatal("an append created an entry")
	}

	small := newRecentWrites(3 * (len(`{"x":"a"}`) + 64))
	small.put("1", 0, recentMsgs("a"))
	small.put("2", 0, recentMsgs("b"))
	small.put("3", 0, recentMsgs("c"))
	small.get("1", 1)
	small.put("4", 0, recentMsgs("d"))
	if _, ok := small.get("1", 1); ok {
		t.Fatal("the oldest entry was kept past the budget")
	}
	if _, ok := small.get("4", 1); !ok || small.bytes > small.max {
		t.Fatalf("newest entry missing or budget exceeded: %d > %d", small.bytes, small.max)
	}
}
