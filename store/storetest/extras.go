package storetest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/vigilhq/vigil/store"
)

func init() {
	register("Blobs", testBlobs)
	register("SavedQueries", testSavedQueries)
	register("Idempotency", testIdempotency)
}

func testBlobs(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	data := []byte("\x89PNG\r\n\x1a\n\x00\x00binary\xff")
	sum := sha256.Sum256(data)
	h := hex.EncodeToString(sum[:])
	b := &store.Blob{OwnerID: "o1", SHA256: h, ContentType: "image/png", Data: data}
	must(t, s.PutBlob(ctx, b))
	// Same hash again: the first is kept.
	must(t, s.PutBlob(ctx, &store.Blob{OwnerID: "o1", SHA256: h, ContentType: "image/other", Data: data}))
	if err := s.PutBlob(ctx, &store.Blob{OwnerID: "o1", SHA256: h, Data: []byte("other bytes")}); err == nil {
		t.Error("blob whose data does not match its hash accepted")
	}
	got, err := s.GetBlob(ctx, "o1", h)
	must(t, err)
	if !bytes.Equal(got.Data, data) || got.ContentType != "image/png" || got.Size != int64(len(data)) || got.CreatedAt.IsZero() {
		t.Errorf("GetBlob = %+v", got)
	}
	_, err = s.GetBlob(ctx, "o2", h) // per owner
	wantErr(t, err, store.ErrNotFound)
	must(t, s.DeleteBlob(ctx, "o1", h))
	wantErr(t, s.DeleteBlob(ctx, "o1", h), store.ErrNotFound)
	_, err = s.GetBlob(ctx, "o1", h)
	wantErr(t, err, store.ErrNotFound)
}

func testSavedQueries(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	u := newUser(t, s, "u")
	d := &store.Dataset{OwnerID: u.ID, Name: "q"}
	must(t, s.CreateDataset(ctx, d))
	q1 := &store.SavedQuery{DatasetID: d.ID, Name: "errors", Query: "is:flagged", TimeCreated: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	q2 := &store.SavedQuery{DatasetID: d.ID, Name: "email", Query: `tool:send_email meta:env="prod"`, TimeCreated: q1.TimeCreated.Add(time.Second)}
	must(t, s.CreateSavedQuery(ctx, q2))
	must(t, s.CreateSavedQuery(ctx, q1))
	if q1.ID == "" || q1.OwnerID != u.ID {
		t.Errorf("CreateSavedQuery filled %+v", q1)
	}
	wantErr(t, s.CreateSavedQuery(ctx, &store.SavedQuery{DatasetID: store.NewID(), Name: "x"}), store.ErrNotFound)
	list, err := s.ListSavedQueries(ctx, d.ID)
	must(t, err)
	if len(list) != 2 || list[0].ID != q1.ID || list[1].Query != `tool:send_email meta:env="prod"` {
		t.Errorf("ListSavedQueries = %+v", list)
	}
	got, err := s.GetSavedQuery(ctx, q2.ID)
	must(t, err)
	if got.Name != "email" || got.DatasetID != d.ID {
		t.Errorf("GetSavedQuery = %+v", got)
	}
	must(t, s.DeleteSavedQuery(ctx, q2.ID))
	wantErr(t, s.DeleteSavedQuery(ctx, q2.ID), store.ErrNotFound)
	_, err = s.GetSavedQuery(ctx, q2.ID)
	wantErr(t, err, store.ErrNotFound)
	must(t, s.DeleteDataset(ctx, d.ID, nil))
	_, err = s.GetSavedQuery(ctx, q1.ID)
	wantErr(t, err, store.ErrNotFound)
}

func testIdempotency(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	rec := &store.IdempotencyRecord{Principal: "key-1", Key: "abc", RequestHash: "h1", CreatedAt: t0}
	got, created, err := s.ReserveIdempotencyKey(ctx, rec, t0.Add(-day))
	must(t, err)
	if !created || got.Status != 0 {
		t.Fatalf("first reserve: created %v, %+v", created, got)
	}
	// In flight: the second request sees the pending reservation.
	got, created, err = s.ReserveIdempotencyKey(ctx, &store.IdempotencyRecord{Principal: "key-1", Key: "abc", RequestHash: "h2", CreatedAt: t0.Add(time.Minute)}, t0.Add(-day))
	must(t, err)
	if created || got.Status != 0 || got.RequestHash != "h1" {
		t.Fatalf("second reserve: created %v, %+v", created, got)
	}
	body := []byte(`{"id":["x"]}`)
	must(t, s.CompleteIdempotencyKey(ctx, "key-1", "abc", 200, "application/json", body))
	wantErr(t, s.CompleteIdempotencyKey(ctx, "key-1", "nope", 200, "", nil), store.ErrNotFound)
	got, created, err = s.ReserveIdempotencyKey(ctx, &store.IdempotencyRecord{Principal: "key-1", Key: "abc", RequestHash: "h1", CreatedAt: t0.Add(time.Hour)}, t0.Add(time.Hour-day))
	must(t, err)
	if created || got.Status != 200 || !bytes.Equal(got.Body, body) || got.ContentType != "application/json" || !got.CreatedAt.Equal(t0) {
		t.Fatalf("replay: created %v, %+v", created, got)
	}
	// Another principal has its own key space.
	_, created, err = s.ReserveIdempotencyKey(ctx, &store.IdempotencyRecord{Principal: "key-2", Key: "abc", RequestHash: "h1"}, t0.Add(-day))
	must(t, err)
	if !created {
		t.Error("key of another principal collided")
	}
	// Releasing keeps completed records and drops pending ones.
	must(t, s.ReleaseIdempotencyKey(ctx, "key-1", "abc"))
	must(t, s.ReleaseIdempotencyKey(ctx, "key-2", "abc"))
	if _, created, _ := s.ReserveIdempotencyKey(ctx, &store.IdempotencyRecord{Principal: "key-1", Key: "abc"}, t0.Add(-day)); created {
		t.Error("release dropped a completed record")
	}
	if _, created, _ := s.ReserveIdempotencyKey(ctx, &store.IdempotencyRecord{Principal: "key-2", Key: "abc", CreatedAt: t0}, t0.Add(-day)); !created {
		t.Error("released reservation still blocks")
	}
	// After 24 h the key is free again.
	_, created, err = s.ReserveIdempotencyKey(ctx, &store.IdempotencyRecord{Principal: "key-1", Key: "abc", RequestHash: "h9", CreatedAt: t0.Add(25 * time.Hour)}, t0.Add(time.Hour))
	must(t, err)
	if !created {
		t.Error("expired record still replayed")
	}
	n, err := s.PurgeIdempotencyKeys(ctx, t0.Add(time.Hour))
	must(t, err)
	if n != 1 { // key-2's, created at t0
		t.Errorf("PurgeIdempotencyKeys = %d, want 1", n)
	}
}

func init() { register("Instance", testInstance) }

// testInstance: the first value stored under a name wins, also when
// processes race (the ledger key of a PostgreSQL deployment).
func testInstance(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	got, err := s.InitInstanceValue(ctx, "ledger.key", "first")
	must(t, err)
	if got != "first" {
		t.Fatalf("InitInstanceValue on an empty store = %q, want first", got)
	}
	got, err = s.InitInstanceValue(ctx, "ledger.key", "second")
	must(t, err)
	if got != "first" {
		t.Fatalf("second InitInstanceValue = %q, want the first value kept", got)
	}
	got, err = s.InitInstanceValue(ctx, "other", "x")
	must(t, err)
	if got != "x" {
		t.Fatalf("another name = %q, want x", got)
	}
	// Racing writers all see one value.
	const n = 8
	vals := make(chan string, n)
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		go func() {
			v, err := s.InitInstanceValue(ctx, "race", fmt.Sprint(i))
			vals <- v
			errs <- err
		}()
	}
	first := ""
	for i := 0; i < n; i++ {
		must(t, <-errs)
		v := <-vals
		if first == "" {
			first = v
		}
		if v != first {
			t.Fatalf("racing InitInstanceValue returned %q and %q", first, v)
		}
	}
}
