package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vigilhq/vigil/search"
	"github.com/vigilhq/vigil/store"
)

func init() {
	register("SearchFilters", testSearchFilters)
	register("SearchPages", testSearchPages)
	register("SearchIndexMaintained", testSearchIndexMaintained)
}

// rawEvent is an event from JSON text (with a message id added).
func rawEvent(id, js string) store.Message {
	var m map[string]any
	if err := json.Unmarshal([]byte(js), &m); err != nil {
		panic(fmt.Sprintf("rawEvent %s: %v", id, err))
	}
	m["message_id"] = id
	data, _ := json.Marshal(m)
	return store.Message{ID: id, NodeIDs: []string{"N" + id}, Data: data}
}

func annotation(content, extra string) *store.Annotation {
	zero := 0
	return &store.Annotation{Content: content, Address: ".content:0-1", AnchorIndex: &zero, ExtraMetadata: json.RawMessage(extra)}
}

// searchCorpus stores the traces the search table runs over: dataset
// "alpha" (t0 to t4, indices 0 to 4) and a snippet s0 of user u; a
// private dataset (v0) and a public one (v1) of user v. It returns u, v
// and the ids by name.
func searchCorpus(t *testing.T, s store.Store) (u, v *store.User, ids map[string]string) {
	ctx := ctxT(t)
	u, v = newUser(t, s, "u"), newUser(t, s, "v")
	old := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	res, err := s.PushTraces(ctx, store.PushRequest{OwnerID: u.ID, DatasetName: "alpha", CreateIfMissing: true, Traces: []store.NewTrace{
		{Name: "t0", Metadata: json.RawMessage(`{"env":"prod","n":5,"score":"12.5","flag":true,"tags":["a","b"],"a.b":"lit","vigil":{"blocked_calls":2},"via_gateway":true}`),
			Messages: []store.Message{
				rawEvent("a0", `{"role":"user","content":"Hello World, please send an email"}`),
				rawEvent("a1", `{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"send_email","arguments":{"to":"bob@example.com","body":"Héllo ÉCOLE <b>"}}}]}`),
				rawEvent("a2", `{"role":"tool","tool_call_id":"c1","content":"sent ok"}`),
			},
			Annotations: []*store.Annotation{annotation("Email blocked", `{"source":"guardrails-error","severity":"critical","guardrail":{"name":"No-Email","id":"g-1"}}`)}},
		{Name: "t1", Metadata: json.RawMessage(`{"env":"dev","n":12,"a":{"b":"nested"},"source":"mcp","session_id":"sess-9"}`),
			Messages: []store.Message{
				rawEvent("b0", `{"role":"user","content":"Straße München"}`),
				rawEvent("b1", `{"role":"user","content":[{"type":"text","text":"part one"},{"type":"image_url","image_url":{"url":"local://x"}},{"type":"text","text":"part two"}]}`),
			},
			Annotations: []*store.Annotation{annotation("Looks GOOD", `{"severity":0.5}`)}},
		{Name: "t2", SessionKey: "h:run-42", Metadata: json.RawMessage(`{"env":"prod","n":"7","score":3,"nul":null}`),
			Messages: []store.Message{
				rawEvent("c0", `{"role":"assistant","content":"","tool_calls":[{"id":"c9","type":"function","function":{"name":"read_file","arguments":"{\"path\": \"/etc/passwd\"}"}}]}`),
				rawEvent("c1", `{"role":"tool","tool_call_id":"c9","content":"","error":"Permission denied"}`),
			},
			Annotations: []*store.Annotation{annotation("suspicious", `{"source":"analyzer","severity":0.9}`)}},
		{Name: "t3", TimeCreated: old, Messages: []store.Message{rawEvent("d0", `{"role":"user","content":"xy zz"}`)}},
		{Name: "Quarterly report", SessionKey: "otel:abc", Metadata: json.RawMessage(`{"n":-3.5e1}`),
			Messages:    []store.Message{rawEvent("e0", `{"role":"user","content":"nothing special"}`)},
			Annotations: []*store.Annotation{annotation("pin changed", `{"source":"mcp-pin","severity":"warn"}`)}},
	}})
	must(t, err)
	ids = map[string]string{}
	for _, tr := range res.Traces {
		ids[tr.Name] = tr.ID
	}
	ids["t4"] = ids["Quarterly report"]
	shared := true
	_, err = s.UpdateTrace(ctx, ids["t3"], store.TraceUpdate{Shared: &shared})
	must(t, err)
	res, err = s.PushTraces(ctx, store.PushRequest{OwnerID: u.ID, Traces: []store.NewTrace{
		{Name: "s0", Messages: []store.Message{rawEvent("f0", `{"role":"user","content":"hello snippet"}`)}}}})
	must(t, err)
	ids["s0"] = res.Traces[0].ID
	for _, ds := range []struct{ name, trace, text string }{{"beta", "v0", "hello world"}, {"gamma", "v1", "hello public"}} {
		res, err := s.PushTraces(ctx, store.PushRequest{OwnerID: v.ID, DatasetName: ds.name, CreateIfMissing: true, Traces: []store.NewTrace{
			{Name: ds.trace, Messages: []store.Message{rawEvent(ds.trace+"m", `{"role":"user","content":"`+ds.text+`"}`)}}}})
		must(t, err)
		ids[ds.trace] = res.Traces[0].ID
		if ds.name == "gamma" {
			pub := true
			_, err := s.UpdateDataset(ctx, res.Dataset.ID, store.DatasetUpdate{IsPublic: &pub})
			must(t, err)
		}
	}
	return u, v, ids
}

// searchNames runs req and returns the trace names found, sorted.
func searchNames(t *testing.T, s store.Store, req store.SearchRequest) ([]string, error) {
	t.Helper()
	req.Limit = 100
	res, err := s.Search(ctxT(t), req)
	if err != nil {
		return nil, err
	}
	names := []string{}
	for _, tr := range res.Traces {
		names = append(names, tr.Name)
	}
	slices.Sort(names)
	if res.Total != len(names) {
		t.Errorf("Search(%q): Total %d, %d traces", req.Query, res.Total, len(names))
	}
	return names, nil
}

// testSearchFilters runs every filter and operator of explorer-api §7.2
// over one corpus; every backend must give exactly these results.
func testSearchFilters(t *testing.T, s store.Store) {
	u, _, ids := searchCorpus(t, s)
	all := []string{"Quarterly report", "s0", "t0", "t1", "t2", "t3"}
	cases := []struct {
		query  string
		want   []string
		public bool
	}{
		{"", all, false},
		// Free text: case-insensitive substrings of one field each.
		{"hello", []string{"s0", "t0"}, false},
		{"HELLO", []string{"s0", "t0"}, false},
		{`"hello world"`, []string{"t0"}, false},
		{"hello world", []string{"t0"}, false},
		{"hello AND world", []string{"t0"}, false},
		{"hello OR straße", []string{"s0", "t0", "t1"}, false},
		{"MÜNCHEN", []string{"t1"}, false},
		{"STRAẞE", []string{"t1"}, false},
		{"-hello", []string{"Quarterly report", "t1", "t2", "t3"}, false},
		{"école", []string{"t0"}, false},
		{"<b>", []string{"t0"}, false},
		{`"bob@example.com"`, []string{"t0"}, false},
		{"part", []string{"t1"}, false},
		{`"one part"`, []string{}, false},
		{`"sent ok" OR "world, please"`, []string{"t0"}, false},
		{"send_email", []string{"t0"}, false},
		{"passwd", []string{"t2"}, false},
		{"denied", []string{"t2"}, false},
		{"quarterly", []string{"Quarterly report"}, false},
		{"zz", []string{"t3"}, false},
		{"xy OR zz", []string{"t3"}, false},
		{"-zz", []string{"Quarterly report", "s0", "t0", "t1", "t2"}, false},
		{"env", []string{}, false}, // metadata is not free text
		{"hello", []string{"s0", "t0", "v1"}, true},
		// is: / not:
		{"is:annotated", []string{"Quarterly report", "t0", "t1", "t2"}, false},
		{"not:annotated", []string{"s0", "t3"}, false},
		{"is:flagged", []string{"Quarterly report", "t0"}, false},
		{"is:blocked", []string{"t0"}, false},
		{"not:blocked", []string{"Quarterly report", "s0", "t1", "t2", "t3"}, false},
		{"is:shared", []string{"t3"}, false},
		{"is:snippet", []string{"s0"}, false},
		{"not:snippet", []string{"Quarterly report", "t0", "t1", "t2", "t3"}, false},
		{"is:gateway", []string{"t0"}, false},
		{"is:mcp", []string{"t1"}, false},
		{"is:otel", []string{"Quarterly report"}, false},
		{"-is:otel", []string{"s0", "t0", "t1", "t2", "t3"}, false},
		// meta:
		{"meta:env", []string{"t0", "t1", "t2"}, false},
		{"meta:env=prod", []string{"t0", "t2"}, false},
		{"meta:env==prod", []string{"t0", "t2"}, false},
		{"meta:env!=prod", []string{"t1"}, false},
		{"meta:env>dev", []string{"t0", "t2"}, false},
		{"meta:env<=dev", []string{"t1"}, false},
		{"meta:env%PRO", []string{"t0", "t2"}, false},
		{"meta:n>6", []string{"t1", "t2"}, false},
		{"meta:n<=5", []string{"Quarterly report", "t0"}, false},
		{"meta:n<-34", []string{"Quarterly report"}, false},
		{"meta:n>1e1", []string{"t1"}, false},
		{"meta:n=7", []string{"t2"}, false},
		{`meta:n="7"`, []string{"t2"}, false},
		{"meta:n=abc", []string{}, false},
		{"meta:score>=12.5", []string{"t0"}, false},
		{"meta:score<12.5", []string{"t2"}, false},
		{"meta:flag=true", []string{"t0"}, false},
		{"meta:flag!=false", []string{"t0"}, false},
		{"meta:flag<true", []string{}, false},
		{"meta:nul=null", []string{"t2"}, false},
		{"meta:nul", []string{}, false},
		{"meta:a.b=lit", []string{"t0"}, false},
		{"meta:a.b=nested", []string{"t1"}, false},
		{"meta:a.b", []string{"t0", "t1"}, false},
		{`meta:"a.b"`, []string{"t0"}, false},
		{`meta:a."b"`, []string{"t1"}, false},
		{"meta:tags.1=b", []string{"t0"}, false},
		{"meta:tags.-1=b", []string{"t0"}, false},
		{"meta:tags.5", []string{}, false},
		{"meta:vigil.blocked_calls>=2", []string{"t0"}, false},
		{"-meta:env=prod", []string{"Quarterly report", "s0", "t1", "t3"}, false},
		// Annotations.
		{"source:user", []string{"t1"}, false},
		{"source:analyzer", []string{"t2"}, false},
		{"source:guardrails-error", []string{"t0"}, false},
		{"guardrail:no-email", []string{"t0"}, false},
		{"guardrail:NO*", []string{"t0"}, false},
		{"guardrail:g-1", []string{"t0"}, false},
		{"guardrail:G-1", []string{}, false},
		{"guardrail:x*", []string{}, false},
		{"severity:critical", []string{"t0", "t2"}, false},
		{"severity:=warn", []string{"Quarterly report", "t1"}, false},
		{"severity:>=warn", []string{"Quarterly report", "t0", "t1", "t2"}, false},
		{"severity:>warn", []string{"t0", "t2"}, false},
		{"severity:<warn", []string{}, false},
		{"severity:<=info", []string{}, false},
		{"annotation:good", []string{"t1"}, false},
		{"annotation:EMAIL", []string{"t0"}, false},
		// Tools, sessions, datasets.
		{"tool:send_email", []string{"t0"}, false},
		{"tool:read*", []string{"t2"}, false},
		{"tool:*_*", []string{"t0", "t2"}, false},
		{"tool:send", []string{}, false},
		{"session:h:run-42", []string{"t2"}, false},
		{"session:sess-9", []string{"t1"}, false},
		{"-session:h:run-42", []string{"Quarterly report", "s0", "t0", "t1", "t3"}, false},
		{"dataset:alpha", []string{"Quarterly report", "t0", "t1", "t2", "t3"}, false},
		{"dataset:u/alpha", []string{"Quarterly report", "t0", "t1", "t2", "t3"}, false},
		{"-dataset:alpha", []string{"s0"}, false},
		{"dataset:v/gamma", []string{"v1"}, true},
		{"dataset:gamma", []string{}, true}, // a bare name is the caller's
		// Times, ids, indices.
		{"before:2025-01-01", []string{"t3"}, false},
		{"after:2025-01-01T00:00:00Z", []string{"Quarterly report", "s0", "t0", "t1", "t2"}, false},
		{"after:-1d", []string{"Quarterly report", "s0", "t0", "t1", "t2"}, false},
		{"updated-after:-1d", []string{"Quarterly report", "s0", "t0", "t1", "t2"}, false}, // t3 was pushed with an old time
		{"updated-before:-1d", []string{"t3"}, false},
		{"id:" + ids["t0"] + "," + strings.ToUpper(ids["t2"]), []string{"t0", "t2"}, false},
		{"index:0,2..3", []string{"t0", "t2", "t3"}, false},
		{"-index:0..3", []string{"Quarterly report", "s0"}, false},
		// Operators together.
		{"hello -is:snippet", []string{"t0"}, false},
		{"(hello OR denied) meta:env=prod", []string{"t0", "t2"}, false},
		{"-(is:annotated OR is:snippet)", []string{"t3"}, false},
		{"meta:env=prod OR is:shared", []string{"t0", "t2", "t3"}, false},
		{"is:annotated AND -severity:critical", []string{"Quarterly report", "t1"}, false},
		{"(zz)", []string{"t3"}, false},
		// Compat whole-query forms.
		{"filter:My title:0,4", []string{"Quarterly report", "t0"}, false},
		{"idfilter:x:" + ids["t1"], []string{"t1"}, false},
	}
	for _, c := range cases {
		req := store.SearchRequest{Query: c.query, OwnerID: u.ID, CallerID: u.ID, Public: c.public}
		got, err := searchNames(t, s, req)
		if err != nil {
			t.Errorf("Search(%q): %v", c.query, err)
			continue
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("Search(%q, public=%v) = %q, want %q", c.query, c.public, got, c.want)
		}
	}
	// An admin reads everyone's traces; DatasetIDs restricts.
	got, err := searchNames(t, s, store.SearchRequest{Query: "hello", AllOwners: true})
	must(t, err)
	if want := []string{"s0", "t0", "v0", "v1"}; !slices.Equal(got, want) {
		t.Errorf("admin search = %q, want %q", got, want)
	}
	ds, err := s.GetDatasetByName(ctxT(t), u.ID, "alpha")
	must(t, err)
	got, err = searchNames(t, s, store.SearchRequest{Query: "hello", OwnerID: u.ID, DatasetIDs: []string{ds.ID}})
	must(t, err)
	if want := []string{"t0"}; !slices.Equal(got, want) {
		t.Errorf("search in alpha = %q, want %q", got, want)
	}
	// Errors carry the parser's position.
	_, err = s.Search(ctxT(t), store.SearchRequest{Query: "hello (world", OwnerID: u.ID})
	var se *search.Error
	if !errors.As(err, &se) || se.Pos != 6 {
		t.Errorf("Search(bad query) err = %v, want a *search.Error at 6", err)
	}
	_, err = s.Search(ctxT(t), store.SearchRequest{OwnerID: u.ID, Cursor: "!!"})
	wantErr(t, err, store.ErrInvalidCursor)

	// Queries at the parser's limits compile to SQL both databases run:
	// the most terms, the deepest nesting, the longest lists and paths.
	var ranges []string
	for i := 0; len(strings.Join(ranges, ",")) < search.MaxLength-20; i++ {
		ranges = append(ranges, fmt.Sprintf("%d..%d", i, i+1))
	}
	for _, q := range []string{
		strings.TrimSpace(strings.Repeat("x OR ", search.MaxShortTerms-1) + "x"),
		strings.TrimSpace(strings.Repeat("xyz OR ", search.MaxTerms-1) + "xyz"),
		strings.Repeat("(-", search.MaxDepth/2) + "zz" + strings.Repeat(")", search.MaxDepth/2),
		"index:" + strings.Join(ranges, ","),
		"meta:" + strings.TrimSuffix(strings.Repeat("a.", search.MaxMetaPath), ".") + ">=1",
		strings.TrimSpace(strings.Repeat(`"%_\\" `, search.MaxTerms)),
		strings.TrimSpace(strings.Repeat("tool:*%_* annotation:%_ guardrail:_%* ", search.MaxTerms/3)),
	} {
		if _, err := search.Parse(q); err != nil {
			t.Fatalf("limit query %.60q does not parse: %v", q, err)
		}
		if _, err := s.Search(ctxT(t), store.SearchRequest{Query: q, OwnerID: u.ID}); err != nil {
			t.Errorf("Search(%.60q…): %v", q, err)
		}
	}
}

// testSearchPages pages through results in each order with cursors.
func testSearchPages(t *testing.T, s store.Store) {
	u := newUser(t, s, "u")
	push(t, s, u.ID, "d", 7, 1)
	for _, order := range []store.TraceOrder{store.OrderIndex, store.OrderIndexDesc, store.OrderTimeCreated, store.OrderTimeCreatedDesc, store.OrderTimeLastPushedDesc} {
		var got []int64
		cursor := ""
		for page := 0; ; page++ {
			res, err := s.Search(ctxT(t), store.SearchRequest{Query: "message", OwnerID: u.ID, Order: order, Limit: 3, Cursor: cursor})
			must(t, err)
			if res.Total != 7 || res.TotalIsEstimate {
				t.Errorf("order %d: total %d (estimate %v), want 7", order, res.Total, res.TotalIsEstimate)
			}
			for _, tr := range res.Traces {
				got = append(got, tr.Index)
			}
			if cursor = res.NextCursor; cursor == "" || page > 5 {
				break
			}
		}
		want := []int64{0, 1, 2, 3, 4, 5, 6}
		if order == store.OrderIndexDesc {
			slices.Reverse(want)
		}
		if order == store.OrderIndex || order == store.OrderIndexDesc {
			if !slices.Equal(got, want) {
				t.Errorf("order %d: indices %v, want %v", order, got, want)
			}
			continue
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("order %d: pages gave indices %v, want each of 0-6 once", order, got)
		}
	}
}

// testSearchIndexMaintained checks that appends, renames and deletes
// keep the index current.
func testSearchIndexMaintained(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	u := newUser(t, s, "u")
	res := push(t, s, u.ID, "d", 2, 1)
	find := func(q string) []string {
		t.Helper()
		got, err := searchNames(t, s, store.SearchRequest{Query: q, OwnerID: u.ID})
		must(t, err)
		return got
	}
	if got := find("zebra"); len(got) != 0 {
		t.Fatalf("zebra before append: %q", got)
	}
	_, err := s.AppendEvents(ctx, store.AppendRequest{TraceID: res.Traces[0].ID, Messages: []store.Message{event("z1", "user", "a Zebra crossing")}})
	must(t, err)
	if got := find("zebra"); !slices.Equal(got, []string{"t0"}) {
		t.Errorf("zebra after append = %q", got)
	}
	name := "Renamed giraffe"
	_, err = s.UpdateTrace(ctx, res.Traces[1].ID, store.TraceUpdate{Name: &name})
	must(t, err)
	if got := find("giraffe"); !slices.Equal(got, []string{name}) {
		t.Errorf("giraffe after rename = %q", got)
	}
	if got := find("t1"); len(got) != 0 {
		t.Errorf("old name still found: %q", got)
	}
	// Repeated texts are indexed once; a name equal to a message text
	// stays findable through the message after a rename.
	rep, err := s.PushTraces(ctx, store.PushRequest{OwnerID: u.ID, DatasetName: "d", Traces: []store.NewTrace{{Name: "same words",
		Messages: []store.Message{event("r1", "user", "same words"), event("r2", "user", "same words"), event("r3", "tool", "Same Words")}}}})
	must(t, err)
	other := "other"
	_, err = s.UpdateTrace(ctx, rep.Traces[0].ID, store.TraceUpdate{Name: &other})
	must(t, err)
	if got := find("same words"); !slices.Equal(got, []string{"other"}) {
		t.Errorf("repeated text after rename = %q", got)
	}
	must(t, s.DeleteTrace(ctx, rep.Traces[0].ID, nil))
	must(t, s.DeleteTrace(ctx, res.Traces[0].ID, nil))
	if got := find("zebra"); len(got) != 0 {
		t.Errorf("zebra after delete = %q", got)
	}
	must(t, s.DeleteDataset(ctx, res.Dataset.ID, nil))
	if got := find("giraffe"); len(got) != 0 {
		t.Errorf("giraffe after dataset delete = %q", got)
	}
}
