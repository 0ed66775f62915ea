package storetest

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/vigilhq/vigil/store"
)

func init() {
	register("Datasets", testDatasets)
	register("DatasetList", testDatasetList)
	register("DatasetMetadata", testDatasetMetadata)
	register("DatasetDeleteCascades", testDatasetDelete)
	register("ToolRegistry", testTools)
}

func testDatasets(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	u, v := newUser(t, s, "u"), newUser(t, s, "v")
	d := &store.Dataset{OwnerID: u.ID, Name: "runs", Metadata: json.RawMessage(`{"created_on":"2026-01-01 00:00:00"}`)}
	must(t, s.CreateDataset(ctx, d))
	if d.ID == "" || d.TimeCreated.IsZero() {
		t.Fatalf("CreateDataset did not fill ID/TimeCreated")
	}
	wantErr(t, s.CreateDataset(ctx, &store.Dataset{OwnerID: u.ID, Name: "runs"}), store.ErrConflict)
	must(t, s.CreateDataset(ctx, &store.Dataset{OwnerID: v.ID, Name: "runs"})) // unique per owner only
	must(t, s.CreateDataset(ctx, &store.Dataset{OwnerID: u.ID, Name: "Runs"})) // case-sensitive

	got, err := s.GetDataset(ctx, d.ID)
	must(t, err)
	if got.Name != "runs" || got.OwnerID != u.ID || got.IsPublic || got.NumTraces != 0 || got.NextIndex != 0 || got.LatestTraceTime != nil {
		t.Errorf("GetDataset = %+v", got)
	}
	assertJSON(t, got.Metadata, `{"created_on":"2026-01-01 00:00:00"}`)
	got, err = s.GetDatasetByName(ctx, u.ID, "runs")
	must(t, err)
	if got.ID != d.ID {
		t.Errorf("GetDatasetByName = %s, want %s", got.ID, d.ID)
	}
	_, err = s.GetDatasetByName(ctx, u.ID, "nope")
	wantErr(t, err, store.ErrNotFound)
	_, err = s.GetDataset(ctx, store.NewID())
	wantErr(t, err, store.ErrNotFound)

	empty := &store.Dataset{OwnerID: u.ID, Name: "empty-md"}
	must(t, s.CreateDataset(ctx, empty))
	got, _ = s.GetDataset(ctx, empty.ID)
	assertJSON(t, got.Metadata, `{}`)

	yes, name := true, "renamed"
	up, err := s.UpdateDataset(ctx, d.ID, store.DatasetUpdate{IsPublic: &yes, Name: &name})
	must(t, err)
	if !up.IsPublic || up.Name != "renamed" {
		t.Errorf("UpdateDataset = %+v", up)
	}
	taken := "Runs"
	_, err = s.UpdateDataset(ctx, d.ID, store.DatasetUpdate{Name: &taken})
	wantErr(t, err, store.ErrConflict)
	_, err = s.UpdateDataset(ctx, store.NewID(), store.DatasetUpdate{IsPublic: &yes})
	wantErr(t, err, store.ErrNotFound)
	got, _ = s.GetDatasetByName(ctx, u.ID, "renamed")
	if got == nil || !got.IsPublic {
		t.Errorf("after rename: %+v", got)
	}
}

func testDatasetList(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	u, v := newUser(t, s, "u"), newUser(t, s, "v")
	mk := func(owner, name string, public bool, md string) *store.Dataset {
		d := &store.Dataset{OwnerID: owner, Name: name, IsPublic: public, Metadata: json.RawMessage(md)}
		must(t, s.CreateDataset(ctx, d))
		return d
	}
	a := mk(u.ID, "alpha_100%", false, `{}`)
	b := mk(u.ID, "Beta", true, `{"benchmark":"swe","accuracy":0.5}`)
	c := mk(v.ID, "gamma", true, `{"benchmark":"swe","accuracy":0.9,"odd \"key\\":"q","a.b":"d"}`)
	dd := mk(v.ID, "delta", false, `{"benchmark":7}`)
	// Pushing into alpha makes it the most recent.
	time.Sleep(2 * time.Millisecond)
	push(t, s, u.ID, "alpha_100%", 1, 1)

	ids := func(ds []*store.Dataset) []string {
		var out []string
		for _, d := range ds {
			out = append(out, d.Name)
		}
		return out
	}
	for _, tc := range []struct {
		name string
		f    store.DatasetFilter
		want []string
	}{
		{"all newest first", store.DatasetFilter{}, []string{a.Name, dd.Name, c.Name, b.Name}},
		{"owner", store.DatasetFilter{OwnerID: u.ID}, []string{a.Name, b.Name}},
		{"visible to u", store.DatasetFilter{VisibleTo: u.ID}, []string{a.Name, c.Name, b.Name}},
		{"public", store.DatasetFilter{PublicOnly: true}, []string{c.Name, b.Name}},
		{"name case-insensitive", store.DatasetFilter{NameContains: "BET"}, []string{b.Name}},
		{"name with like metachars", store.DatasetFilter{NameContains: "0%"}, []string{a.Name}},
		{"underscore is literal", store.DatasetFilter{NameContains: "a_1"}, []string{a.Name}},
		{"percent alone", store.DatasetFilter{NameContains: "%"}, []string{a.Name}},
		{"metadata string", store.DatasetFilter{MetadataKey: "benchmark", MetadataValue: "swe", PublicOnly: true}, []string{c.Name, b.Name}},
		{"metadata number is not a string", store.DatasetFilter{MetadataKey: "benchmark", MetadataValue: "7"}, nil},
		{"metadata key with quote and backslash", store.DatasetFilter{MetadataKey: `odd "key\`, MetadataValue: "q"}, []string{c.Name}},
		{"metadata key with a dot", store.DatasetFilter{MetadataKey: "a.b", MetadataValue: "d"}, []string{c.Name}},
		{"metadata key is not a path", store.DatasetFilter{MetadataKey: "a", MetadataValue: "d"}, nil},
		{"limit", store.DatasetFilter{Limit: 2}, []string{a.Name, dd.Name}},
		{"offset", store.DatasetFilter{Offset: 3}, []string{b.Name}},
		{"limit offset", store.DatasetFilter{Limit: 1, Offset: 1}, []string{dd.Name}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.ListDatasets(ctx, tc.f)
			must(t, err)
			if !reflect.DeepEqual(ids(got), tc.want) {
				t.Errorf("ListDatasets = %q, want %q", ids(got), tc.want)
			}
		})
	}
	got, err := s.ListDatasets(ctx, store.DatasetFilter{OwnerID: u.ID, Limit: 1})
	must(t, err)
	if len(got) != 1 || got[0].NumTraces != 1 || got[0].LatestTraceTime == nil || got[0].NextIndex != 1 {
		t.Errorf("listed dataset = %+v, want 1 trace", got[0])
	}
}

func testDatasetMetadata(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	u := newUser(t, s, "u")
	raw := func(s string) json.RawMessage { return json.RawMessage(s) }
	for _, tc := range []struct {
		name       string
		start      string
		patch      map[string]json.RawMessage
		replaceAll bool
		want       string
	}{
		{"merge sets", `{"created_on":"x","a":1}`, map[string]json.RawMessage{"b": raw(`"two"`)}, false, `{"created_on":"x","a":1,"b":"two"}`},
		{"merge overwrites", `{"a":1}`, map[string]json.RawMessage{"a": raw(`{"n":[1,2]}`)}, false, `{"a":{"n":[1,2]}}`},
		{"merge ignores null", `{"a":1}`, map[string]json.RawMessage{"a": raw(`null`), "b": raw(`null`)}, false, `{"a":1}`},
		{"replace deletes missing", `{"created_on":"x","a":1,"b":2}`, map[string]json.RawMessage{"b": raw(`3`)}, true, `{"created_on":"x","b":3}`},
		{"replace deletes null", `{"a":1,"b":2}`, map[string]json.RawMessage{"a": raw(`null`), "b": raw(`2`)}, true, `{"b":2}`},
		{"replace keeps system keys", `{"created_on":"x"}`, map[string]json.RawMessage{"created_on": raw(`"y"`)}, true, `{"created_on":"x"}`},
		{"replace with nothing", `{"created_on":"x","a":1}`, nil, true, `{"created_on":"x"}`},
		{"unicode kept", `{}`, map[string]json.RawMessage{"ключ": raw(`"😀 \u0000"`)}, false, `{"ключ":"😀 \u0000"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &store.Dataset{OwnerID: u.ID, Name: "md-" + store.NewID()[30:], Metadata: raw(tc.start)}
			must(t, s.CreateDataset(ctx, d))
			got, err := s.PutDatasetMetadata(ctx, d.ID, tc.patch, tc.replaceAll)
			must(t, err)
			assertJSON(t, got, tc.want)
			stored, err := s.GetDataset(ctx, d.ID)
			must(t, err)
			assertJSON(t, stored.Metadata, tc.want)
		})
	}
	_, err := s.PutDatasetMetadata(ctx, store.NewID(), nil, false)
	wantErr(t, err, store.ErrNotFound)
}

func testDatasetDelete(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	u := newUser(t, s, "u")
	res := push(t, s, u.ID, "doomed", 3, 2)
	keep := push(t, s, u.ID, "kept", 1, 2)
	tr := res.Traces[0]
	must(t, s.CreateAnnotation(ctx, &store.Annotation{TraceID: tr.ID, UserID: u.ID, Content: "note", Address: "<root>"}))
	must(t, s.DeleteDataset(ctx, res.Dataset.ID, closeSeal))
	_, err := s.GetDataset(ctx, res.Dataset.ID)
	wantErr(t, err, store.ErrNotFound)
	for _, tr := range res.Traces {
		_, err := s.GetTrace(ctx, tr.ID, true)
		wantErr(t, err, store.ErrNotFound)
		anns, err := s.ListAnnotations(ctx, tr.ID, nil)
		must(t, err)
		if len(anns) != 0 {
			t.Errorf("trace %s: %d annotations survive the dataset", tr.ID, len(anns))
		}
		// Ledger records are kept, and the session is closed.
		sess, err := s.GetSession(ctx, tr.SessionID)
		must(t, err)
		if sess.ClosedAt == nil || sess.CloseHash != sess.Tail.LastHash {
			t.Errorf("session %s after delete: closed %v, close hash %q, tail %q", sess.ID, sess.ClosedAt, sess.CloseHash, sess.Tail.LastHash)
		}
		checkChain(t, s, tr.SessionID, 2)
	}
	tools, err := s.ListTools(ctx, res.Dataset.ID)
	must(t, err)
	if len(tools) != 0 {
		t.Errorf("%d tools survive", len(tools))
	}
	if _, err := s.GetTrace(ctx, keep.Traces[0].ID, true); err != nil {
		t.Errorf("trace of another dataset: %v", err)
	}
	wantErr(t, s.DeleteDataset(ctx, res.Dataset.ID, nil), store.ErrNotFound)
	// The name is free again, and indices restart.
	again := push(t, s, u.ID, "doomed", 1, 1)
	if again.Traces[0].Index != 0 || !again.DatasetCreated {
		t.Errorf("recreated dataset: index %d created %v", again.Traces[0].Index, again.DatasetCreated)
	}
}

func testTools(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	u := newUser(t, s, "u")
	res, err := s.PushTraces(ctx, store.PushRequest{OwnerID: u.ID, DatasetName: "tools", CreateIfMissing: true,
		Traces: []store.NewTrace{{Messages: events("a", 1)}},
		Tools: []store.ToolUse{
			{Name: "send_email", Count: 2, ArgumentKeys: []string{"to", "body"}},
			{Name: "search", Count: 1, ArgumentKeys: []string{"q"}},
			{Name: "send_email", Count: 1, ArgumentKeys: []string{"cc"}},
		}})
	must(t, err)
	_, err = s.AppendEvents(ctx, store.AppendRequest{TraceID: res.Traces[0].ID, Messages: events("b", 1),
		Tools: []store.ToolUse{{Name: "send_email", Count: 1, ArgumentKeys: []string{"to", "subject"}}}})
	must(t, err)
	tools, err := s.ListTools(ctx, res.Dataset.ID)
	must(t, err)
	if len(tools) != 2 {
		t.Fatalf("ListTools = %d tools, want 2", len(tools))
	}
	if tools[0].Name != "search" || tools[0].Count != 1 || !reflect.DeepEqual(tools[0].ArgumentKeys, []string{"q"}) {
		t.Errorf("tools[0] = %+v", tools[0])
	}
	if tools[1].Name != "send_email" || tools[1].Count != 4 || !reflect.DeepEqual(tools[1].ArgumentKeys, []string{"body", "cc", "subject", "to"}) ||
		tools[1].LastSeen.IsZero() {
		t.Errorf("tools[1] = %+v", tools[1])
	}
}

// assertJSON compares JSON values semantically.
func assertJSON(t testing.TB, got json.RawMessage, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("stored JSON %q: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("want JSON %q: %v", want, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("JSON = %s, want %s", got, want)
	}
}
