package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/vigilhq/vigil/store"
)

// Hostile input at the store: what one backend refuses, the other refuses
// the same way.

func init() {
	register("InvalidText", testInvalidText)
	register("SDKSessionsPerOwner", testSDKSessionsPerOwner)
	register("DeleteLargeDatasetInterleaves", testDeleteLargeDatasetInterleaves)
	register("AnnotationTextExact", testAnnotationTextExact)
	register("MetadataFilterSurvivesOddJSON", testMetadataFilterSurvivesOddJSON)
}

// testMetadataFilterSurvivesOddJSON: a dataset whose metadata holds JSON
// that PostgreSQL's jsonb refuses (\u0000, a lone surrogate) neither fails
// a metadata-filtered listing (it made the whole query fail, for every
// caller) nor hides the datasets that match.
func testMetadataFilterSurvivesOddJSON(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	u := newUser(t, s, "u")
	for i, md := range []string{`{"team":"a","x":"\u0000"}`, `{"team":"a","x":"\ud800"}`, `{"team":"a","x":"\udc00z"}`,
		`{"team":"a","emoji":"\ud83d\ude00"}`, `{"team":"b"}`} {
		must(t, s.CreateDataset(ctx, &store.Dataset{OwnerID: u.ID, Name: fmt.Sprintf("d%d", i), Metadata: json.RawMessage(md)}))
	}
	ds, err := s.ListDatasets(ctx, store.DatasetFilter{OwnerID: u.ID, MetadataKey: "team", MetadataValue: "a"})
	must(t, err)
	names := map[string]bool{}
	for _, d := range ds {
		names[d.Name] = true
	}
	if !names["d3"] || names["d4"] {
		t.Errorf("datasets with team a: %v, want d3 (escaped surrogate pair) and not d4", names)
	}
}

// testAnnotationTextExact: annotation content is kept byte for byte, even
// a NUL or a lone surrogate (held as WTF-8), which a PostgreSQL text column
// refuses (it was a 400 there; the server rewrote surrogates to U+FFFD).
func testAnnotationTextExact(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	u := newUser(t, s, "u")
	const odd = "nul\x00 lone\xed\xa0\x80 low\xed\xbf\xbf back\\slash \\u0000 é"
	res, err := s.PushTraces(ctx, store.PushRequest{OwnerID: u.ID, DatasetName: "d", CreateIfMissing: true, Seal: chainSeal,
		Traces: []store.NewTrace{{Messages: events("m", 1), Annotations: []*store.Annotation{{UserID: u.ID, Content: odd, Address: "<root>"}}}}})
	must(t, err)
	tr := res.Traces[0]
	a := &store.Annotation{TraceID: tr.ID, UserID: u.ID, Content: "plain", Address: "<root>"}
	must(t, s.CreateAnnotation(ctx, a))
	c := odd + "!"
	_, err = s.UpdateAnnotation(ctx, a.ID, store.AnnotationUpdate{Content: &c})
	must(t, err)
	b := &store.Annotation{TraceID: tr.ID, UserID: u.ID, Content: odd + "?", Address: "<root>"}
	must(t, s.CreateAnnotation(ctx, b))
	anns, err := s.ListAnnotations(ctx, tr.ID, nil)
	must(t, err)
	got := map[string]bool{}
	for _, x := range anns {
		got[x.Content] = true
	}
	for _, want := range []string{odd, odd + "!", odd + "?"} {
		if !got[want] {
			t.Errorf("content %q not kept; have %v", want, got)
		}
	}
	g, err := s.GetAnnotation(ctx, b.ID)
	must(t, err)
	if g.Content != odd+"?" {
		t.Errorf("GetAnnotation content = %q", g.Content)
	}
	// Plain text is stored as is: back to plain after an update.
	plain := `a\u0000b`
	_, err = s.UpdateAnnotation(ctx, b.ID, store.AnnotationUpdate{Content: &plain})
	must(t, err)
	if g, err = s.GetAnnotation(ctx, b.ID); err != nil || g.Content != plain {
		t.Errorf("after update to plain text: %q %v", g.Content, err)
	}
}

// testDeleteLargeDatasetInterleaves: a large dataset is deleted in short
// transactions, so a push made while it is being deleted completes before
// the delete does (on SQLite, one transaction held the only writer and
// blocked every push until the whole dataset was gone). The test asserts
// the order of events, not times: the delete has visibly progressed (the
// dataset shrank) and not finished (traces remain) after a push returned.
func testDeleteLargeDatasetInterleaves(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	u := newUser(t, s, "u")
	const total, chunk = 6000, 500
	var ds *store.Dataset
	for i := 0; i < total; i += chunk {
		req := store.PushRequest{OwnerID: u.ID, DatasetName: "big", CreateIfMissing: true, Seal: chainSeal}
		for j := range chunk {
			req.Traces = append(req.Traces, store.NewTrace{Messages: events(fmt.Sprintf("b%d-", i+j), 2)})
		}
		res, err := s.PushTraces(ctx, req)
		must(t, err)
		ds = res.Dataset
	}
	done := make(chan error, 1)
	go func() { done <- s.DeleteDataset(ctx, ds.ID, closeSeal) }()
	// Wait until the delete has visibly made progress (a batch committed).
	for {
		d, err := s.GetDataset(ctx, ds.ID)
		if errors.Is(err, store.ErrNotFound) {
			t.Fatal("the dataset vanished at once: no batch was ever visible, so the delete ran as one transaction")
		}
		must(t, err)
		if d.NumTraces < total {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("delete finished (%v) before any progress was visible", err)
		default:
		}
		time.Sleep(time.Millisecond)
	}
	// A push now completes while the delete is still under way.
	push(t, s, u.ID, "other", 1, 1)
	d, err := s.GetDataset(ctx, ds.ID)
	if err != nil || d.NumTraces == 0 {
		t.Errorf("the push waited for the whole delete (dataset after the push: %v, err %v)", d, err)
	}
	must(t, <-done)
	_, err = s.GetDataset(ctx, ds.ID)
	wantErr(t, err, store.ErrNotFound)
	n, err := s.ListTraces(ctx, store.TraceFilter{DatasetID: ds.ID})
	must(t, err)
	if len(n) != 0 {
		t.Errorf("%d traces survive their dataset", len(n))
	}
}

// testSDKSessionsPerOwner: SDK session ids are unique per owner, not
// across owners (another user's id was "taken", which leaked that it
// existed and blocked the owner's receipts).
func testSDKSessionsPerOwner(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	u, v := newUser(t, s, "u"), newUser(t, s, "v")
	a := &store.Session{ID: "row-a", SDKID: "shared", OwnerID: u.ID, Agent: "x"}
	must(t, s.CreateSession(ctx, a))
	// The same SDK id for another owner, created with its run.
	res, err := s.PushTraces(ctx, store.PushRequest{OwnerID: v.ID, DatasetName: "sessions", CreateIfMissing: true,
		Traces: []store.NewTrace{{Messages: events("m", 1), Session: &store.Session{ID: "row-b", SDKID: "shared", Agent: "x"}}},
		Seal:   chainSeal})
	must(t, err)
	// The same SDK id twice for one owner conflicts, and nothing is stored.
	wantErr(t, s.CreateSession(ctx, &store.Session{ID: "row-c", SDKID: "shared", OwnerID: u.ID}), store.ErrConflict)
	_, err = s.PushTraces(ctx, store.PushRequest{OwnerID: v.ID, DatasetName: "sessions",
		Traces: []store.NewTrace{{Messages: events("n", 1), Session: &store.Session{ID: "row-d", SDKID: "shared", Agent: "x"}}},
		Seal:   chainSeal})
	wantErr(t, err, store.ErrConflict)
	_, err = s.GetSession(ctx, "row-d")
	wantErr(t, err, store.ErrNotFound)
	for _, tc := range []struct {
		owner, row string
	}{{u.ID, "row-a"}, {v.ID, "row-b"}} {
		got, err := s.GetSDKSession(ctx, tc.owner, "shared")
		must(t, err)
		if got.ID != tc.row || got.SDKID != "shared" || got.LedgerID() != "shared" || got.OwnerID != tc.owner {
			t.Errorf("GetSDKSession(%s) = %+v", tc.owner, got)
		}
	}
	got, err := s.GetSession(ctx, "row-b")
	must(t, err)
	if got.SDKID != "shared" || got.RunID != res.Traces[0].ID {
		t.Errorf("GetSession(row-b) = %+v, want SDKID shared and run %s", got, res.Traces[0].ID)
	}
	w := newUser(t, s, "w")
	_, err = s.GetSDKSession(ctx, w.ID, "shared")
	wantErr(t, err, store.ErrNotFound)
	// A server session has no SDK id.
	must(t, s.CreateSession(ctx, &store.Session{ID: "plain", OwnerID: u.ID}))
	_, err = s.GetSDKSession(ctx, u.ID, "plain")
	wantErr(t, err, store.ErrNotFound)
}

// testInvalidText: a NUL character or invalid UTF-8 in a name, id or text
// column is store.ErrInvalidText on every backend (PostgreSQL refuses it in
// a text parameter; SQLite kept it, so the same request was 200 on one
// backend and 400 on the other), and nothing is stored.
func testInvalidText(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	u := newUser(t, s, "u")
	for _, tc := range []struct {
		name, text string
	}{
		{"nul", "a\x00b"},
		{"invalid_utf8", "a\xffb"},
		{"lone_surrogate_wtf8", "a\xed\xa0\x80b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantErr(t, s.CreateDataset(ctx, &store.Dataset{OwnerID: u.ID, Name: tc.text}), store.ErrInvalidText)
			wantErr(t, s.CreateUser(ctx, &store.User{Username: tc.text, Role: store.RoleMember}), store.ErrInvalidText)
			_, err := s.GetDatasetByName(ctx, u.ID, tc.text)
			wantErr(t, err, store.ErrInvalidText)
			_, err = s.PushTraces(ctx, store.PushRequest{OwnerID: u.ID, DatasetName: "d" + tc.text, CreateIfMissing: true,
				Traces: []store.NewTrace{{Name: "t", Messages: events("m", 1)}}})
			wantErr(t, err, store.ErrInvalidText)
		})
	}
	ds, err := s.ListDatasets(ctx, store.DatasetFilter{OwnerID: u.ID})
	must(t, err)
	if len(ds) != 0 {
		t.Errorf("refused names left %d datasets", len(ds))
	}
}
