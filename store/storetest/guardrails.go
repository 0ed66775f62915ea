package storetest

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sync"
	"testing"

	"github.com/vigilhq/vigil/store"
)

func init() {
	register("Guardrails", testGuardrails)
	register("GuardrailHistory", testGuardrailHistory)
	register("GuardrailFeed", testGuardrailFeed)
}

func testGuardrails(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	u := newUser(t, s, "u")
	d := &store.Dataset{OwnerID: u.ID, Name: "g"}
	must(t, s.CreateDataset(ctx, d))
	g := &store.Guardrail{DatasetID: d.ID, Name: "no-email", Content: "raise \"x\" if:\n  (call: ToolCall)", Enabled: true, Action: "block",
		Scope: json.RawMessage(`{"kinds":["mcp"]}`), UpdatedBy: u.ID}
	must(t, s.CreateGuardrail(ctx, g, store.GuardrailCreated, "first"))
	if g.ID == "" || g.Version != 1 || g.Severity != "warn" || g.OwnerID != u.ID || g.TimeCreated.IsZero() {
		t.Fatalf("CreateGuardrail filled %+v", g)
	}
	if err := s.CreateGuardrail(ctx, &store.Guardrail{DatasetID: d.ID, Name: "x"}, store.GuardrailUpdated, ""); err == nil {
		t.Error("create with change updated accepted")
	}
	wantErr(t, s.CreateGuardrail(ctx, &store.Guardrail{DatasetID: store.NewID(), Name: "x"}, store.GuardrailCreated, ""), store.ErrNotFound)
	g2 := &store.Guardrail{DatasetID: d.ID, Name: "log-only", Content: "raise \"y\" if: false", UpdatedBy: u.ID}
	must(t, s.CreateGuardrail(ctx, g2, store.GuardrailImported, ""))

	got, err := s.GetGuardrail(ctx, g.ID)
	must(t, err)
	if got.Name != "no-email" || got.Content != g.Content || !got.Enabled || got.Action != "block" || got.Version != 1 || got.UpdatedBy != u.ID {
		t.Errorf("GetGuardrail = %+v", got)
	}
	assertJSON(t, got.Scope, `{"kinds":["mcp"]}`)
	assertJSON(t, got.ExtraMetadata, `{}`)
	g2got, _ := s.GetGuardrail(ctx, g2.ID)
	if g2got.Action != "log" || g2got.Scope != nil || g2got.Enabled {
		t.Errorf("defaults: %+v", g2got)
	}
	ds, _ := s.GetDataset(ctx, d.ID)
	if ds.RulesetVersion != 2 {
		t.Errorf("RulesetVersion = %d after two creates", ds.RulesetVersion)
	}

	off, name := false, "renamed"
	up, err := s.UpdateGuardrail(ctx, g.ID, store.GuardrailUpdate{Enabled: &off, Name: &name, BaseVersion: 1, AuthorID: "v", Comment: "off",
		ExtraMetadata: json.RawMessage(`{"stream_check":"final"}`)})
	must(t, err)
	if up.Version != 2 || up.Enabled || up.Name != "renamed" || up.UpdatedBy != "v" || up.Content != g.Content {
		t.Errorf("UpdateGuardrail = %+v", up)
	}
	_, err = s.UpdateGuardrail(ctx, g.ID, store.GuardrailUpdate{Name: &name, BaseVersion: 1})
	wantErr(t, err, store.ErrConflict)
	var null json.RawMessage
	up, err = s.UpdateGuardrail(ctx, g.ID, store.GuardrailUpdate{Scope: &null})
	must(t, err)
	if up.Scope != nil || up.Version != 3 {
		t.Errorf("scope not cleared: %+v", up)
	}
	_, err = s.UpdateGuardrail(ctx, store.NewID(), store.GuardrailUpdate{Name: &name})
	wantErr(t, err, store.ErrNotFound)

	list, err := s.ListGuardrails(ctx, d.ID)
	must(t, err)
	if len(list) != 2 || list[0].ID != g.ID || list[1].ID != g2.ID {
		t.Errorf("ListGuardrails = %d", len(list))
	}
	must(t, s.DeleteGuardrail(ctx, g2.ID, u.ID, "gone"))
	wantErr(t, s.DeleteGuardrail(ctx, g2.ID, u.ID, ""), store.ErrNotFound)
	_, err = s.GetGuardrail(ctx, g2.ID)
	wantErr(t, err, store.ErrNotFound)
	_, err = s.UpdateGuardrail(ctx, g2.ID, store.GuardrailUpdate{Name: &name})
	wantErr(t, err, store.ErrNotFound)
	list, _ = s.ListGuardrails(ctx, d.ID)
	if len(list) != 1 {
		t.Errorf("deleted guardrail still listed")
	}
	ds, _ = s.GetDataset(ctx, d.ID)
	if ds.RulesetVersion != 5 {
		t.Errorf("RulesetVersion = %d, want 5", ds.RulesetVersion)
	}
	// Deleting the dataset deletes guardrails and history.
	must(t, s.DeleteDataset(ctx, d.ID, nil))
	_, err = s.GetGuardrail(ctx, g.ID)
	wantErr(t, err, store.ErrNotFound)
	_, err = s.ListGuardrailVersions(ctx, g.ID)
	wantErr(t, err, store.ErrNotFound)
}

func testGuardrailHistory(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	u := newUser(t, s, "u")
	d := &store.Dataset{OwnerID: u.ID, Name: "h"}
	must(t, s.CreateDataset(ctx, d))
	a := &store.Guardrail{DatasetID: d.ID, Name: "a", Content: "v1", Enabled: true, UpdatedBy: u.ID}
	must(t, s.CreateGuardrail(ctx, a, store.GuardrailCreated, "")) // rv 1
	b := &store.Guardrail{DatasetID: d.ID, Name: "b", Content: "b1", Enabled: true, UpdatedBy: u.ID}
	must(t, s.CreateGuardrail(ctx, b, store.GuardrailCreated, "")) // rv 2
	v2 := "v2"
	_, err := s.UpdateGuardrail(ctx, a.ID, store.GuardrailUpdate{Content: &v2, AuthorID: u.ID}) // rv 3
	must(t, err)
	must(t, s.DeleteGuardrail(ctx, b.ID, u.ID, ""))          // rv 4
	r, err := s.RestoreGuardrail(ctx, a.ID, 1, u.ID, "back") // rv 5
	must(t, err)
	if r.Content != "v1" || r.Version != 3 {
		t.Errorf("RestoreGuardrail = %+v", r)
	}
	rb, err := s.RestoreGuardrail(ctx, b.ID, 1, u.ID, "undelete") // rv 6
	must(t, err)
	if rb.Version != 3 || rb.Content != "b1" {
		t.Errorf("restore of deleted = %+v", rb)
	}
	if _, err := s.GetGuardrail(ctx, b.ID); err != nil {
		t.Errorf("restored guardrail: %v", err)
	}
	_, err = s.RestoreGuardrail(ctx, a.ID, 9, u.ID, "")
	wantErr(t, err, store.ErrNotFound)

	vs, err := s.ListGuardrailVersions(ctx, a.ID)
	must(t, err)
	changes := []string{}
	for _, v := range vs {
		changes = append(changes, fmt.Sprintf("%d:%s:%s:rv%d", v.Version, v.Change, v.Content, v.RulesetVersion))
	}
	if want := []string{"3:restored:v1:rv5", "2:updated:v2:rv3", "1:created:v1:rv1"}; !reflect.DeepEqual(changes, want) {
		t.Errorf("versions = %v, want %v", changes, want)
	}
	v, err := s.GetGuardrailVersion(ctx, a.ID, 2)
	must(t, err)
	if v.Content != "v2" || v.AuthorID != u.ID {
		t.Errorf("GetGuardrailVersion = %+v", v)
	}
	_, err = s.GetGuardrailVersion(ctx, a.ID, 7)
	wantErr(t, err, store.ErrNotFound)
	hist, err := s.ListPolicyHistory(ctx, d.ID, 0, 0)
	must(t, err)
	if len(hist) != 6 || hist[0].RulesetVersion != 6 || hist[5].RulesetVersion != 1 {
		t.Errorf("ListPolicyHistory = %d rows", len(hist))
	}
	page, _ := s.ListPolicyHistory(ctx, d.ID, 2, 1)
	if len(page) != 2 || page[0].RulesetVersion != 5 {
		t.Errorf("history page = %+v", page)
	}
	// Rulesets as of each version.
	for _, tc := range []struct {
		rv   int64
		want []string
	}{
		{0, []string{}},
		{1, []string{"a:v1"}},
		{2, []string{"a:v1", "b:b1"}},
		{3, []string{"a:v2", "b:b1"}},
		{4, []string{"a:v2"}},
		{5, []string{"a:v1"}},
		{6, []string{"a:v1", "b:b1"}},
	} {
		gs, err := s.RulesetAt(ctx, d.ID, tc.rv)
		must(t, err)
		got := []string{}
		for _, g := range gs {
			got = append(got, g.Name+":"+g.Content)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("RulesetAt(%d) = %v, want %v", tc.rv, got, tc.want)
		}
	}
	_, err = s.RulesetAt(ctx, d.ID, 7)
	wantErr(t, err, store.ErrNotFound)
}

func testGuardrailFeed(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	u := newUser(t, s, "u")
	feed, err := s.ListGuardrailChanges(ctx, 0, 0)
	must(t, err)
	if feed.Latest != 0 || len(feed.Changes) != 0 {
		t.Fatalf("empty feed = %+v", feed)
	}
	var ds []*store.Dataset
	for i := range 3 {
		d := &store.Dataset{OwnerID: u.ID, Name: fmt.Sprintf("f%d", i)}
		must(t, s.CreateDataset(ctx, d))
		ds = append(ds, d)
	}
	// Concurrent writers on several datasets: every change gets one feed
	// entry, seq increasing, each dataset's ruleset versions 1..n in order.
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := ds[w%3]
			for i := range 3 {
				g := &store.Guardrail{DatasetID: d.ID, Name: fmt.Sprintf("w%d-%d", w, i), Content: "x"}
				if err := s.CreateGuardrail(ctx, g, store.GuardrailCreated, ""); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	feed, err = s.ListGuardrailChanges(ctx, 0, 0)
	must(t, err)
	if len(feed.Changes) != 18 || feed.Latest != feed.Changes[17].Seq || feed.Oldest != feed.Changes[0].Seq {
		t.Fatalf("feed = %d changes, latest %d oldest %d", len(feed.Changes), feed.Latest, feed.Oldest)
	}
	last := map[string]int64{}
	for i, c := range feed.Changes {
		if i > 0 && c.Seq <= feed.Changes[i-1].Seq {
			t.Fatalf("seq not increasing at %d", i)
		}
		if c.RulesetVersion != last[c.DatasetID]+1 || c.OwnerID != u.ID {
			t.Fatalf("change %d: dataset %s ruleset %d after %d", i, c.DatasetID, c.RulesetVersion, last[c.DatasetID])
		}
		last[c.DatasetID] = c.RulesetVersion
	}
	page, err := s.ListGuardrailChanges(ctx, feed.Changes[9].Seq, 3)
	must(t, err)
	if len(page.Changes) != 3 || page.Changes[0].Seq != feed.Changes[10].Seq {
		t.Errorf("page after %d = %+v", feed.Changes[9].Seq, page.Changes)
	}
	// Purging keeps the newest entry.
	n, err := s.PurgeGuardrailChanges(ctx, feed.Changes[17].Time.Add(1))
	must(t, err)
	if n != 17 {
		t.Errorf("purged %d, want 17", n)
	}
	after, err := s.ListGuardrailChanges(ctx, 0, 0)
	must(t, err)
	if after.Latest != feed.Latest || after.Oldest != feed.Latest || len(after.Changes) != 1 {
		t.Errorf("after purge: %+v", after)
	}
}
