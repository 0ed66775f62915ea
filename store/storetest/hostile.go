package storetest

import (
	"testing"

	"github.com/vigilhq/vigil/store"
)

// Hostile input at the store: what one backend refuses, the other refuses
// the same way.

func init() {
	register("InvalidText", testInvalidText)
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
