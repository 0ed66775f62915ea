package storetest

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/vigilhq/vigil/store"
)

func init() {
	register("Annotations", testAnnotations)
	register("ReplaceAnnotations", testReplaceAnnotations)
}

func testAnnotations(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	u, v := newUser(t, s, "u"), newUser(t, s, "v")
	res := push(t, s, u.ID, "ann", 2, 3)
	tr := res.Traces[0]
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a1 := &store.Annotation{TraceID: tr.ID, UserID: v.ID, Content: "late", Address: ".content:0-4", AnchorIndex: intp(2), Resolved: true,
		TimeCreated: t0.Add(time.Minute), ExtraMetadata: json.RawMessage(`{"source":"guardrails-error","severity":"warn"}`)}
	a2 := &store.Annotation{TraceID: tr.ID, UserID: u.ID, Content: ":feedback:thumbs-up", Address: "<root>", TimeCreated: t0}
	a3 := &store.Annotation{TraceID: tr.ID, UserID: u.ID, Content: "explicit user", Address: "<root>", TimeCreated: t0.Add(2 * time.Minute),
		ExtraMetadata: json.RawMessage(`{"source":"user"}`)}
	for _, a := range []*store.Annotation{a1, a2, a3} {
		must(t, s.CreateAnnotation(ctx, a))
	}
	if a1.ID == "" || a1.MessageID != "m0-2" || a1.AnchorIndex != nil || a1.OwnerID != u.ID || a1.Source != "guardrails-error" {
		t.Errorf("CreateAnnotation filled %+v", a1)
	}
	wantErr(t, s.CreateAnnotation(ctx, &store.Annotation{TraceID: store.NewID(), Content: "x", Address: "<root>"}), store.ErrNotFound)

	got, err := s.GetAnnotation(ctx, a1.ID)
	must(t, err)
	if got.Content != "late" || got.MessageID != "m0-2" || got.Address != ".content:0-4" || !got.Resolved || got.UserID != v.ID ||
		!got.TimeCreated.Equal(a1.TimeCreated) || got.TraceID != tr.ID {
		t.Errorf("GetAnnotation = %+v", got)
	}
	assertJSON(t, got.ExtraMetadata, `{"source":"guardrails-error","severity":"warn"}`)
	g2, _ := s.GetAnnotation(ctx, a2.ID)
	if g2.ExtraMetadata != nil || g2.MessageID != "" {
		t.Errorf("annotation without metadata: %+v", g2)
	}
	_, err = s.GetAnnotation(ctx, store.NewID())
	wantErr(t, err, store.ErrNotFound)

	contents := func(as []*store.Annotation) []string {
		out := []string{}
		for _, a := range as {
			out = append(out, a.Content)
		}
		return out
	}
	for _, tc := range []struct {
		sources []string
		want    []string
	}{
		{nil, []string{":feedback:thumbs-up", "late", "explicit user"}},
		{[]string{"guardrails-error"}, []string{"late"}},
		{[]string{"user"}, []string{":feedback:thumbs-up", "explicit user"}},
		{[]string{""}, []string{":feedback:thumbs-up", "explicit user"}},
		{[]string{"analyzer"}, []string{}},
	} {
		as, err := s.ListAnnotations(ctx, tr.ID, tc.sources)
		must(t, err)
		if !reflect.DeepEqual(contents(as), tc.want) {
			t.Errorf("ListAnnotations(%q) = %q, want %q", tc.sources, contents(as), tc.want)
		}
	}

	text := "edited"
	up, err := s.UpdateAnnotation(ctx, a1.ID, store.AnnotationUpdate{Content: &text,
		MetadataMerge: map[string]json.RawMessage{"status": json.RawMessage(`"accepted"`), "severity": json.RawMessage(`null`)}})
	must(t, err)
	if up.Content != "edited" {
		t.Errorf("UpdateAnnotation content %q", up.Content)
	}
	assertJSON(t, up.ExtraMetadata, `{"source":"guardrails-error","severity":null,"status":"accepted"}`)
	up, err = s.UpdateAnnotation(ctx, a2.ID, store.AnnotationUpdate{MetadataMerge: map[string]json.RawMessage{"source": json.RawMessage(`"analyzer"`)}})
	must(t, err)
	if up.Source != "analyzer" {
		t.Errorf("source after merge = %q", up.Source)
	}
	_, err = s.UpdateAnnotation(ctx, store.NewID(), store.AnnotationUpdate{Content: &text})
	wantErr(t, err, store.ErrNotFound)

	counts, err := s.CountAnnotationsBySource(ctx, []string{tr.ID, res.Traces[1].ID})
	must(t, err)
	if !reflect.DeepEqual(counts, map[string]map[string]int{tr.ID: {"guardrails-error": 1, "analyzer": 1, "user": 1}}) {
		t.Errorf("CountAnnotationsBySource = %v", counts)
	}

	must(t, s.DeleteAnnotation(ctx, a3.ID))
	wantErr(t, s.DeleteAnnotation(ctx, a3.ID), store.ErrNotFound)
	_, err = s.GetAnnotation(ctx, a3.ID)
	wantErr(t, err, store.ErrNotFound)
}

func testReplaceAnnotations(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	u := newUser(t, s, "u")
	res := push(t, s, u.ID, "rep", 1, 2)
	tr := res.Traces[0]
	md := func(s string) json.RawMessage { return json.RawMessage(s) }
	for _, a := range []*store.Annotation{
		{Content: "drop", ExtraMetadata: md(`{"source":"analyzer"}`)},
		{Content: "keep accepted", ExtraMetadata: md(`{"source":"analyzer","status":"accepted"}`)},
		{Content: "keep rejected", ExtraMetadata: md(`{"source":"analyzer","status":"rejected"}`)},
		{Content: "drop proposed", ExtraMetadata: md(`{"source":"analyzer","status":"proposed"}`)},
		{Content: "other source", ExtraMetadata: md(`{"source":"user"}`)},
	} {
		a.TraceID, a.UserID, a.Address = tr.ID, u.ID, "<root>"
		must(t, s.CreateAnnotation(ctx, a))
	}
	del, ins, err := s.ReplaceAnnotations(ctx, tr.ID, "analyzer", []*store.Annotation{
		{UserID: u.ID, Content: "new 1", Address: ".content", AnchorIndex: intp(0), ExtraMetadata: md(`{"source":"analyzer"}`)},
		{UserID: u.ID, Content: "new 2", Address: "<root>", ExtraMetadata: md(`{"source":"analyzer"}`)},
	})
	must(t, err)
	if del != 2 || ins != 2 {
		t.Errorf("ReplaceAnnotations = deleted %d inserted %d, want 2 2", del, ins)
	}
	as, err := s.ListAnnotations(ctx, tr.ID, []string{"analyzer"})
	must(t, err)
	got := map[string]bool{}
	for _, a := range as {
		got[a.Content] = true
		if a.Content == "new 1" && a.MessageID != "m0-0" {
			t.Errorf("replacement not anchored: %+v", a)
		}
	}
	if !reflect.DeepEqual(got, map[string]bool{"keep accepted": true, "keep rejected": true, "new 1": true, "new 2": true}) {
		t.Errorf("after replace: %v", got)
	}
	other, _ := s.ListAnnotations(ctx, tr.ID, []string{"user"})
	if len(other) != 1 {
		t.Errorf("other source touched: %d left", len(other))
	}
	_, _, err = s.ReplaceAnnotations(ctx, store.NewID(), "analyzer", nil)
	wantErr(t, err, store.ErrNotFound)

	// issue_replace_source_in_metadata: Source is extra_metadata.source, so
	// a replacement whose extra_metadata names no (or another) source gets
	// source written there too; otherwise it showed as a user comment and
	// lost its source on the next UpdateAnnotation.
	_, _, err = s.ReplaceAnnotations(ctx, tr.ID, "linter", []*store.Annotation{
		{UserID: u.ID, Content: "bare", Address: "<root>"},
		{UserID: u.ID, Content: "other", Address: "<root>", ExtraMetadata: md(`{"source":"user","k":1}`)},
	})
	must(t, err)
	lint, err := s.ListAnnotations(ctx, tr.ID, []string{"linter"})
	must(t, err)
	if len(lint) != 2 {
		t.Fatalf("linter annotations: %d, want 2", len(lint))
	}
	for _, a := range lint {
		if store.AnnotationSource(a.ExtraMetadata) != "linter" || a.Source != "linter" {
			t.Errorf("replacement %q: Source %q, extra_metadata %s", a.Content, a.Source, a.ExtraMetadata)
		}
		up, err := s.UpdateAnnotation(ctx, a.ID, store.AnnotationUpdate{MetadataMerge: map[string]json.RawMessage{"note": md(`"x"`)}})
		must(t, err)
		if up.Source != "linter" {
			t.Errorf("after an update, %q has Source %q", a.Content, up.Source)
		}
	}
}
