package sqlite_test

import (
	"path/filepath"
	"testing"

	"github.com/vigilhq/vigil/store"
	"github.com/vigilhq/vigil/store/sqlite"
	"github.com/vigilhq/vigil/store/storetest"
)

func openTemp(t testing.TB) store.Store {
	t.Helper()
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "vigil.db"), nil)
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

// BenchmarkStoreNormal runs the shared benchmarks with synchronous=NORMAL,
// to show what the power-loss guarantee of the default FULL costs.
func BenchmarkStoreNormal(b *testing.B) {
	storetest.Bench(b, func(b *testing.B) store.Store {
		s, err := sqlite.Open(b.Context(), filepath.Join(b.TempDir(), "vigil.db"), &sqlite.Options{Synchronous: "NORMAL"})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		return s
	})
}
