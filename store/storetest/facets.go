package storetest

import (
	"encoding/json"
	"maps"
	"testing"

	"github.com/vigilhq/vigil/store"
)

func init() {
	register("SearchFacets", testSearchFacets)
	register("CountEvents", testCountEvents)
}

// testSearchFacets counts hierarchy roots, annotation sources and
// highest severities over whole search results, findings included.
func testSearchFacets(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	u, v := newUser(t, s, "u"), newUser(t, s, "v")
	ev := func(id, text string) []store.Message {
		return []store.Message{rawEvent(id, `{"role":"user","content":"`+text+`"}`)}
	}
	res, err := s.PushTraces(ctx, store.PushRequest{OwnerID: u.ID, DatasetName: "fx", CreateIfMissing: true, Traces: []store.NewTrace{
		{Name: "a", HierarchyPath: []string{"prod", "eu"}, Messages: ev("a0", "alpha one"),
			Annotations: []*store.Annotation{annotation("bad", `{"source":"guardrails-error","severity":"critical"}`),
				annotation("hm", `{"severity":0.5}`), annotation("note", `{}`)}},
		{Name: "b", HierarchyPath: []string{"prod"}, Messages: ev("b0", "alpha two"),
			Annotations: []*store.Annotation{annotation("low", `{"source":"analyzer","severity":0.1}`)}},
		{Name: "c", HierarchyPath: []string{"dev"}, Messages: ev("c0", "beta")},
		{Name: "d", Messages: ev("d0", "alpha three")},
		{Name: "e", HierarchyPath: []string{}, Messages: ev("e0", "gamma"),
			Annotations: []*store.Annotation{annotation("odd", `{"source":"analyzer","severity":"bogus"}`)}},
	}})
	must(t, err)
	ids := map[string]string{}
	for _, tr := range res.Traces {
		ids[tr.Name] = tr.ID
	}
	// Findings: c gets a warn finding with two citations, d an mcp-pin
	// one without citations (served at <root>: counted once).
	for _, f := range []*store.Finding{
		{RunID: ids["c"], OwnerID: u.ID, MonitorID: "g1", Monitor: "m", Key: "k1", Title: "x", Severity: "warn",
			Citations: json.RawMessage(`[{"nodeId":null,"address":"messages.0.content"},{"nodeId":null,"address":"messages.0"}]`)},
		{RunID: ids["d"], OwnerID: u.ID, MonitorID: "mcp-pin", Monitor: "mcp-pin", Key: "k2", Title: "y", Severity: "info",
			Citations: json.RawMessage(`[]`)},
		{RunID: ids["a"], OwnerID: u.ID, MonitorID: "g1", Monitor: "m", Key: "k3", Title: "z", Severity: "info",
			Citations: json.RawMessage(`[{"nodeId":null,"address":"messages.0"}]`)},
	} {
		_, _, err := s.UpsertFinding(ctx, f)
		must(t, err)
	}
	// Another owner's trace, never counted for u.
	_, err = s.PushTraces(ctx, store.PushRequest{OwnerID: v.ID, DatasetName: "fx", CreateIfMissing: true, Traces: []store.NewTrace{
		{Name: "v", HierarchyPath: []string{"prod"}, Messages: ev("v0", "alpha"),
			Annotations: []*store.Annotation{annotation("v", `{"source":"guardrails-error","severity":"critical"}`)}}}})
	must(t, err)

	tests := []struct {
		name  string
		query string
		want  store.SearchFacets
	}{
		{"all", "", store.SearchFacets{
			Hierarchy:  map[string]int{"prod": 2, "dev": 1, "": 2},
			Sources:    map[string]int{"guardrails-error": 4, "user": 2, "analyzer": 2, "mcp-pin": 1},
			Severities: map[string]int{"critical": 1, "warn": 1, "info": 2},
		}},
		{"text", "alpha", store.SearchFacets{
			Hierarchy:  map[string]int{"prod": 2, "": 1},
			Sources:    map[string]int{"guardrails-error": 2, "user": 2, "analyzer": 1, "mcp-pin": 1},
			Severities: map[string]int{"critical": 1, "info": 2},
		}},
		{"one trace", `beta`, store.SearchFacets{
			Hierarchy:  map[string]int{"dev": 1},
			Sources:    map[string]int{"guardrails-error": 2},
			Severities: map[string]int{"warn": 1},
		}},
		{"none", "nothing-matches-this", store.SearchFacets{Hierarchy: map[string]int{}, Sources: map[string]int{}, Severities: map[string]int{}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.SearchFacets(ctx, store.SearchRequest{Query: tc.query, OwnerID: u.ID, Limit: 1})
			must(t, err)
			if !maps.Equal(got.Hierarchy, tc.want.Hierarchy) {
				t.Errorf("Hierarchy = %v, want %v", got.Hierarchy, tc.want.Hierarchy)
			}
			if !maps.Equal(got.Sources, tc.want.Sources) {
				t.Errorf("Sources = %v, want %v", got.Sources, tc.want.Sources)
			}
			if !maps.Equal(got.Severities, tc.want.Severities) {
				t.Errorf("Severities = %v, want %v", got.Severities, tc.want.Severities)
			}
		})
	}
	if _, err := s.SearchFacets(ctx, store.SearchRequest{Query: `hello (world`, OwnerID: u.ID}); err == nil {
		t.Error("a query that does not parse gave no error")
	}
}

func testCountEvents(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	u := newUser(t, s, "u")
	var dsIDs []string
	for _, d := range []struct {
		name   string
		traces [][]string
	}{{"one", [][]string{{"a", "b", "c"}, {"d"}}}, {"two", [][]string{{"e", "f"}}}} {
		var nt []store.NewTrace
		for _, tr := range d.traces {
			var msgs []store.Message
			for _, id := range tr {
				msgs = append(msgs, event(id, "user", "x"))
			}
			nt = append(nt, store.NewTrace{Messages: msgs})
		}
		res, err := s.PushTraces(ctx, store.PushRequest{OwnerID: u.ID, DatasetName: d.name, CreateIfMissing: true, Traces: nt})
		must(t, err)
		dsIDs = append(dsIDs, res.Dataset.ID)
	}
	got, err := s.CountEvents(ctx, append(dsIDs, "no-such-dataset"))
	must(t, err)
	want := map[string]int64{dsIDs[0]: 4, dsIDs[1]: 2}
	if !maps.Equal(got, want) {
		t.Fatalf("CountEvents = %v, want %v", got, want)
	}
	if got, err := s.CountEvents(ctx, nil); err != nil || len(got) != 0 {
		t.Fatalf("CountEvents(nil) = %v, %v", got, err)
	}
}
