package postgres_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/vigilhq/vigil/internal/pgtest"
	"github.com/vigilhq/vigil/store"
	"github.com/vigilhq/vigil/store/postgres"
	"github.com/vigilhq/vigil/store/storetest"
)

func open(t testing.TB, dsn string) store.Store {
	t.Helper()
	s, err := postgres.Open(t.Context(), dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return open(t, pgtest.DSN(t)) })
}

// TestTwoProcesses runs the shared-database suite on two pools, as two
// `vigil serve` processes on one PostgreSQL.
func TestTwoProcesses(t *testing.T) {
	storetest.RunShared(t, func(t *testing.T) (store.Store, store.Store) {
		dsn := pgtest.DSN(t)
		return open(t, dsn), open(t, dsn)
	})
}

// TestSearchPendingDurable runs storetest.SearchPendingDurable on one
// database.
func TestSearchPendingDurable(t *testing.T) {
	dsn := pgtest.DSN(t)
	storetest.SearchPendingDurable(t, func(t *testing.T) store.Store { return open(t, dsn) })
}

// TestConcurrentOpen starts several processes' worth of Open on an empty
// schema at once: the advisory lock lets exactly one apply each migration.
func TestConcurrentOpen(t *testing.T) {
	dsn := pgtest.DSN(t)
	const n = 6
	var wg sync.WaitGroup
	stores := make([]store.Store, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stores[i], errs[i] = postgres.Open(t.Context(), dsn, nil)
		}()
	}
	wg.Wait()
	var want int
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("Open %d: %v", i, errs[i])
		}
		defer stores[i].Close()
		v, err := stores[i].SchemaVersion(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			want = v
		}
		if v != want || v < 1 {
			t.Errorf("store %d: schema version %d, want %d", i, v, want)
		}
	}
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var rows int
	if err := conn.QueryRow(t.Context(), `SELECT COUNT(*) FROM schema_migrations`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != want {
		t.Errorf("schema_migrations has %d rows, want %d", rows, want)
	}
}

// TestNotifyAcrossProcesses checks that an invalidation published by one
// pool reaches a subscriber on another.
func TestNotifyAcrossProcesses(t *testing.T) {
	dsn := pgtest.DSN(t)
	a, b := open(t, dsn), open(t, dsn)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ch, err := b.Subscribe(ctx, "rules_changed")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Notify(t.Context(), "rules_changed", "ds-42"); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-ch:
		if got != "ds-42" {
			t.Errorf("payload %q", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no notification across pools within 10s")
	}
	// Close ends subscriptions.
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case _, ok := <-ch:
		for ok {
			_, ok = <-ch
		}
	case <-time.After(10 * time.Second):
		t.Fatal("subscription survived Close")
	}
}

// TestSchemaTooNew checks that a binary refuses a schema migrated further
// than it knows.
func TestSchemaTooNew(t *testing.T) {
	dsn := pgtest.DSN(t)
	s := open(t, dsn)
	v, err := s.SchemaVersion(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), `INSERT INTO schema_migrations (version, applied_at) VALUES ($1, 0)`, v+1); err != nil {
		t.Fatal(err)
	}
	_, err = postgres.Open(t.Context(), dsn, nil)
	if !errors.Is(err, store.ErrSchemaTooNew) {
		t.Fatalf("Open on a newer schema: %v, want ErrSchemaTooNew", err)
	}
}

func TestOpenBadDSN(t *testing.T) {
	for _, dsn := range []string{"postgres://127.0.0.1:1/x?connect_timeout=2", "not a dsn ="} {
		if _, err := postgres.Open(t.Context(), dsn, nil); err == nil {
			t.Errorf("Open(%q) succeeded", dsn)
		}
	}
}

// BenchmarkPush measures PushTraces of 100 traces × 20 events with
// receipts (reported as events/s).
func BenchmarkPush(b *testing.B) {
	storetest.BenchPush(b, func(b *testing.B) store.Store { return open(b, pgtest.DSN(b)) })
}

// BenchmarkStore runs every shared benchmark.
func BenchmarkStore(b *testing.B) {
	storetest.Bench(b, func(b *testing.B) store.Store { return open(b, pgtest.DSN(b)) })
}

// BenchmarkSearch measures a 2-term text query plus a meta: filter
// (storetest.BenchSearch; VIGIL_BENCH_SEARCH_TRACES=50000 for 1M events).
func BenchmarkSearch(b *testing.B) {
	storetest.BenchSearch(b, func(b *testing.B) store.Store { return open(b, pgtest.DSN(b)) })
}
