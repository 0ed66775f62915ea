package postgres_test

import (
	"testing"

	"github.com/vigilhq/vigil/internal/pgtest"
	"github.com/vigilhq/vigil/store"
	"github.com/vigilhq/vigil/store/postgres"
	"github.com/vigilhq/vigil/store/storetest"
)

func openTemp(t testing.TB) store.Store {
	t.Helper()
	s, err := postgres.Open(t.Context(), pgtest.DSN(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return openTemp(t) })
}

func BenchmarkStore(b *testing.B) {
	storetest.Bench(b, func(b *testing.B) store.Store { return openTemp(b) })
}
