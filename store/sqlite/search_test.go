package sqlite_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/vigilhq/vigil/store"
	"github.com/vigilhq/vigil/store/sqlite"
	"github.com/vigilhq/vigil/store/storetest"
)

// TestSearchReindexOnOpen checks that traces stored before the search
// migration (listed in search_reindex, with no index rows) are indexed
// after the store opens, at the latest by the first search.
func TestSearchReindexOnOpen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "vigil.db")
	s, err := sqlite.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	u := &store.User{Username: "u", Role: store.RoleMember}
	if err := s.CreateUser(ctx, u); err != nil {
		t.Fatal(err)
	}
	_, err = s.PushTraces(ctx, store.PushRequest{OwnerID: u.ID, DatasetName: "d", CreateIfMissing: true, Traces: []store.NewTrace{
		{Name: "old run", Messages: []store.Message{{ID: "m1", NodeIDs: []string{}, Data: []byte(`{"role":"user","content":"Legacy Words"}`)}}}}})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()

	// Make the database look as it did right after the migration ran on
	// traces stored by an older binary.
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`DELETE FROM search_text`, `INSERT OR IGNORE INTO search_reindex (trace_id) SELECT id FROM traces`} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	s = openPath(t, path, nil)
	for _, q := range []string{"legacy", "old run", "words"} {
		res, err := s.Search(ctx, store.SearchRequest{Query: q, OwnerID: u.ID})
		if err != nil || res.Total != 1 {
			t.Errorf("Search(%q) after reopen = %+v, %v", q, res, err)
		}
	}
	var left int
	db, _ = sql.Open("sqlite", path)
	defer db.Close()
	if err := db.QueryRow(`SELECT COUNT(*) FROM search_reindex`).Scan(&left); err != nil || left != 0 {
		t.Errorf("search_reindex keeps %d rows (%v)", left, err)
	}
}

// TestSearchPendingDurable runs storetest.SearchPendingDurable on one file.
func TestSearchPendingDurable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vigil.db")
	storetest.SearchPendingDurable(t, func(t *testing.T) store.Store { return openPath(t, path, nil) })
}
