package server

import (
	"testing"

	"github.com/vigilhq/vigil/internal/pgtest"
	"github.com/vigilhq/vigil/store"
	"github.com/vigilhq/vigil/store/postgres"
)

func init() {
	openPostgresTest = func(t testing.TB) store.Store {
		t.Helper()
		st, err := postgres.Open(t.Context(), pgtest.DSN(t), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
}
