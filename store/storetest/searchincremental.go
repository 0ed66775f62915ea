package storetest

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/vigilhq/vigil/store"
)

func init() { register("SearchIncrementalIndex", testSearchIncrementalIndex) }

// searchIndexDiffer is implemented by stores that can compare a trace's
// search index rows with a full rebuild of them (the SQL stores).
type searchIndexDiffer interface {
	SearchIndexDiff(ctx context.Context, id string) (missing, extra []string, err error)
}

// testSearchIncrementalIndex grows a trace by appends (new texts, repeats
// of earlier texts, events without text, tool outputs), renames it and
// clears its name, indexing between steps (and once after two writes),
// and checks after each that the index equals a full rebuild and that
// searches find exactly what the trace holds.
func testSearchIncrementalIndex(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	u := newUser(t, s, "u")
	res, err := s.PushTraces(ctx, store.PushRequest{OwnerID: u.ID, DatasetName: "d", CreateIfMissing: true, Seal: chainSeal,
		Traces: []store.NewTrace{
			{Name: "Zebu run", Messages: []store.Message{event("a0", "system", "You are terse"), event("a1", "user", "Find the wombat")}},
			{Name: "other", Messages: []store.Message{event("b0", "user", "unrelated platypus")}},
		}})
	must(t, err)
	id := res.Traces[0].ID
	check := func(step string, want map[string]bool) {
		t.Helper()
		drain(t, s)
		d, ok := s.(searchIndexDiffer)
		if !ok {
			t.Fatalf("%s store has no SearchIndexDiff", s.Kind())
		}
		if ok {
			for _, tr := range res.Traces {
				missing, extra, err := d.SearchIndexDiff(ctx, tr.ID)
				must(t, err)
				if len(missing) > 0 || len(extra) > 0 {
					t.Errorf("%s: index of trace %s differs from a rebuild: missing %q, extra %q", step, tr.ID, missing, extra)
				}
			}
		}
		for q, found := range want {
			got, err := searchNames(t, s, store.SearchRequest{Query: q, OwnerID: u.ID})
			must(t, err)
			if hit := len(got) == 1 && got[0] != "other"; hit != found || len(got) > 1 {
				t.Errorf("%s: search %q = %q, want the trace: %v", step, q, got, found)
			}
		}
	}
	appendEvents := func(msgs ...store.Message) {
		t.Helper()
		_, err := s.AppendEvents(ctx, store.AppendRequest{TraceID: id, Messages: msgs, Seal: chainSeal})
		must(t, err)
	}
	check("push", map[string]bool{"zebu": true, "wombat": true, "terse": true, "echidna": false})
	appendEvents(event("a2", "assistant", "An echidna, not a wombat"), event("a3", "system", "You are terse"))
	check("append with a repeat", map[string]bool{"echidna": true, "terse": true})
	// Events without text after the last indexed one, then a repeat only.
	appendEvents(rawEvent("a4", `{"role":"assistant"}`), rawEvent("a5", `{"role":"user","content":""}`))
	check("append without text", map[string]bool{"echidna": true})
	appendEvents(event("a6", "user", "Find the wombat"))
	check("append of a repeat only", map[string]bool{"wombat": true})
	// Two writes before indexing: a tool call and its output, a rename.
	appendEvents(rawEvent("a7", `{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"lookup_koala","arguments":{"q":"koala"}}}]}`),
		rawEvent("a8", `{"role":"tool","tool_call_id":"c1","content":"Koala facts"}`))
	name := "Numbat run"
	_, err = s.UpdateTrace(ctx, id, store.TraceUpdate{Name: &name})
	must(t, err)
	check("tool output and rename", map[string]bool{"koala facts": true, "numbat": true, "zebu": false, "echidna": true})
	for i := range 3 {
		appendEvents(event(fmt.Sprintf("c%d", i), "user", fmt.Sprintf("turn %d about a quoll", i)), event(fmt.Sprintf("r%d", i), "assistant", "You are terse"))
	}
	check("three appends", map[string]bool{"turn 2 about": true, "quoll": true})
	empty := ""
	_, err = s.UpdateTrace(ctx, id, store.TraceUpdate{Name: &empty})
	must(t, err)
	check("name cleared", map[string]bool{"numbat": false, "quoll": true})
	// The other trace was never touched: its rows are as pushed.
	got, err := searchNames(t, s, store.SearchRequest{Query: "platypus", OwnerID: u.ID})
	must(t, err)
	if !slices.Equal(got, []string{"other"}) {
		t.Errorf("search platypus = %q", got)
	}
}
