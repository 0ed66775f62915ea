package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/vigilhq/vigil/store"
)

func init() {
	register("AppendMany", testAppendMany)
	register("AppendManyAllOrNothing", testAppendManyAllOrNothing)
	register("AppendManyText", testAppendManyText)
}

// testAppendMany appends to several traces in one call: events, receipts
// and monitor jobs as AppendEvents makes them, names and metadata merged,
// a metadata-only request, and a missing and a finished trace reported
// per request without failing the others.
func testAppendMany(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	u := newUser(t, s, "u")
	res := push(t, s, u.ID, "d", 4, 2)
	addGuardrail(t, s, u.ID, "d", true)
	claimAll(t, s) // the push's jobs were queued before the guardrail: none
	tr := res.Traces
	_, err := s.FinishRun(ctx, tr[3].ID, store.RunCompleted, time.Now(), nil)
	must(t, err)
	name := "renamed"
	at := time.Now().Add(time.Minute).Truncate(time.Millisecond)
	reqs := []store.AppendRequest{
		{TraceID: tr[2].ID, Messages: []store.Message{event("x0", "user", "Capybara")}, Seal: chainSeal, Time: at},
		{TraceID: tr[0].ID, Messages: []store.Message{event("y0", "user", "Axolotl"), event("y1", "assistant", "hi")}, Seal: chainSeal,
			Name: &name, MetadataMerge: json.RawMessage(`{"model":"m1","usage":{"input_tokens":3}}`), Time: at,
			Annotations: []*store.Annotation{annotation("note", `{}`)}},
		{TraceID: "no-such-trace", Messages: []store.Message{event("z0", "user", "lost")}, Seal: chainSeal, OTLPSpanIDs: []string{"s3"}},
		{TraceID: tr[1].ID, MetadataMerge: json.RawMessage(`{"k":"v"}`), OTLPSpanIDs: []string{"s1", "s2"}},
		{TraceID: tr[3].ID, Messages: []store.Message{event("w0", "user", "late")}, Seal: chainSeal},
	}
	out, err := s.AppendMany(ctx, reqs)
	must(t, err)
	if len(out) != len(reqs) {
		t.Fatalf("AppendMany returned %d outcomes for %d requests", len(out), len(reqs))
	}
	if !errors.Is(out[2].Err, store.ErrNotFound) || !errors.Is(out[4].Err, store.ErrFinished) {
		t.Errorf("outcomes of a missing and a finished trace: %v, %v", out[2].Err, out[4].Err)
	}
	for _, i := range []int{0, 1, 3} {
		if out[i].Err != nil || out[i].AppendResult == nil {
			t.Fatalf("outcome %d: %+v", i, out[i])
		}
	}
	if got := out[1].Messages; len(got) != 2 || got[0].Index != 2 || got[1].Index != 3 || len(out[1].Receipts) != 2 {
		t.Errorf("appended to trace 0: messages %+v, %d receipts", got, len(out[1].Receipts))
	}
	for _, c := range []struct {
		id, name, meta string
		count          int
		pushed         bool
	}{
		{tr[0].ID, "renamed", `{"model":"m1","usage":{"input_tokens":3}}`, 4, true},
		{tr[1].ID, "t1", `{"k":"v"}`, 2, false},
		{tr[2].ID, "t2", `{}`, 3, true},
		{tr[3].ID, "t3", `{}`, 2, false},
	} {
		got, err := s.GetTrace(ctx, c.id, true)
		must(t, err)
		if got.Name != c.name || got.MessageCount != c.count || len(got.Messages) != c.count {
			t.Errorf("trace %s: name %q, %d messages (count %d), want %q, %d", c.id, got.Name, len(got.Messages), got.MessageCount, c.name, c.count)
		}
		assertJSON(t, got.Metadata, c.meta)
		if c.pushed != got.TimeLastPushed.Equal(at) {
			t.Errorf("trace %s: last pushed %v, appended at %v: %v", c.id, got.TimeLastPushed, at, c.pushed)
		}
	}
	// The span ids of written requests are recorded, those of a request
	// not written are not.
	seen, err := s.SeenOTLPSpans(ctx, u.ID, []string{"s1", "s2", "s3"})
	must(t, err)
	if !seen["s1"] || !seen["s2"] || seen["s3"] {
		t.Errorf("OTLP span ids recorded: %v, want s1 and s2", seen)
	}
	// The receipts continue each trace's chain.
	recs, err := s.ListReceipts(ctx, tr[0].SessionID, 0, 0)
	must(t, err)
	if len(recs) != 4 {
		t.Errorf("trace 0 has %d receipts, want 4", len(recs))
	}
	anns, err := s.ListAnnotations(ctx, tr[0].ID, nil)
	must(t, err)
	if len(anns) != 1 || anns[0].Content != "note" {
		t.Errorf("annotations of trace 0: %+v", anns)
	}
	// One monitor job per trace that got events, with their range.
	jobs := claimAll(t, s)
	slices.SortFunc(jobs, func(a, b *store.MonitorJob) int { return a.From - b.From })
	want := fmt.Sprintf("%s:2-3 %s:2-4", tr[2].ID, tr[0].ID)
	if got := jobString(jobs); got != want && got != fmt.Sprintf("%s:2-4 %s:2-3", tr[0].ID, tr[2].ID) {
		t.Errorf("monitor jobs = %s, want %s", got, want)
	}
	// Searches see the new text and the new name.
	for q, want := range map[string][]string{"axolotl": {"renamed"}, "capybara": {"t2"}, "late": nil} {
		got, err := searchNames(t, s, store.SearchRequest{Query: q, OwnerID: u.ID})
		must(t, err)
		if !slices.Equal(got, want) {
			t.Errorf("search %q = %q, want %q", q, got, want)
		}
	}
}

// testAppendManyText: names and metadata with quotes, backslashes,
// non-ASCII and JSON-special characters are stored exactly (AppendMany
// updates the rows of many traces by one statement that carries them as
// JSON on SQLite).
func testAppendManyText(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	u := newUser(t, s, "u")
	tr := push(t, s, u.ID, "d", 3, 1).Traces
	names := []string{`a "quoted" \ name`, "emoji 😀 and \\u2028 \u2028 line sep", "tab\\tand\tnewline\n"}
	var reqs []store.AppendRequest
	for i, x := range tr {
		reqs = append(reqs, store.AppendRequest{TraceID: x.ID, Name: &names[i], Seal: chainSeal,
			MetadataMerge: json.RawMessage(fmt.Sprintf(`{"k":%q}`, names[i])), Messages: []store.Message{event(fmt.Sprintf("n%d", i), "user", "x")}})
	}
	_, err := s.AppendMany(ctx, reqs)
	must(t, err)
	for i, x := range tr {
		got, err := s.GetTrace(ctx, x.ID, false)
		must(t, err)
		want, _ := json.Marshal(map[string]string{"k": names[i]})
		if got.Name != names[i] || got.MessageCount != 2 {
			t.Errorf("trace %d: name %q, %d messages, want %q, 2", i, got.Name, got.MessageCount, names[i])
		}
		assertJSON(t, got.Metadata, string(want))
		recs, err := s.ListReceipts(ctx, x.SessionID, 0, 0)
		must(t, err)
		if len(recs) != 2 {
			t.Errorf("trace %d: %d receipts, want 2", i, len(recs))
		}
	}
}

// testAppendManyAllOrNothing: a trace twice in one call, or a message id
// already in a trace, writes nothing of any request.
func testAppendManyAllOrNothing(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	u := newUser(t, s, "u")
	tr := push(t, s, u.ID, "d", 2, 2).Traces
	_, err := s.AppendMany(ctx, []store.AppendRequest{
		{TraceID: tr[0].ID, Messages: []store.Message{event("a", "user", "a")}},
		{TraceID: tr[0].ID, Messages: []store.Message{event("b", "user", "b")}},
	})
	if !errors.Is(err, store.ErrConflict) {
		t.Errorf("a trace twice: %v, want ErrConflict", err)
	}
	_, err = s.AppendMany(ctx, []store.AppendRequest{
		{TraceID: tr[0].ID, Messages: []store.Message{event("new", "user", "a")}},
		{TraceID: tr[1].ID, Messages: []store.Message{event("m1-0", "user", "taken id")}},
	})
	if !errors.Is(err, store.ErrConflict) {
		t.Errorf("a taken message id: %v, want ErrConflict", err)
	}
	_, err = s.AppendMany(ctx, []store.AppendRequest{
		{TraceID: tr[0].ID, Messages: []store.Message{event("new", "user", "a")}, OTLPSpanIDs: []string{"f1"}},
		{TraceID: tr[1].ID, Messages: []store.Message{event("m1-0", "user", "taken id")}},
	})
	if !errors.Is(err, store.ErrConflict) {
		t.Errorf("a taken message id (with span ids): %v, want ErrConflict", err)
	}
	if seen, err := s.SeenOTLPSpans(ctx, u.ID, []string{"f1"}); err != nil || len(seen) != 0 {
		t.Errorf("span ids of a failed AppendMany recorded: %v, %v", seen, err)
	}
	// A push records its span ids with its traces.
	_, err = s.PushTraces(ctx, store.PushRequest{OwnerID: u.ID, DatasetName: "d", Traces: []store.NewTrace{{Messages: events("p", 1)}},
		OTLPSpanIDs: []string{"p1", "p2"}})
	must(t, err)
	if seen, err := s.SeenOTLPSpans(ctx, u.ID, []string{"p1", "p2"}); err != nil || len(seen) != 2 {
		t.Errorf("span ids of a push: %v, %v", seen, err)
	}
	for _, x := range tr {
		got, err := s.GetTrace(ctx, x.ID, false)
		must(t, err)
		if got.MessageCount != 2 {
			t.Errorf("trace %s has %d messages after failed appends, want 2", x.ID, got.MessageCount)
		}
	}
}
