package pgtest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestWithSearchPath(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "postgres://postgres@127.0.0.1:5432/test?search_path=s1&sslmode=disable"},
		{"postgresql://u:p@h/db", "postgresql://u:p@h/db?search_path=s1"},
		{"postgres://h/db?search_path=old", "postgres://h/db?search_path=s1"},
		{"host=h dbname=test", "host=h dbname=test search_path=s1"},
	} {
		if got := withSearchPath(tc.in, "s1"); got != tc.want {
			t.Errorf("withSearchPath(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestDSN checks that each call gets its own empty schema, first on the
// search path (skipped without VIGIL_TEST_POSTGRES).
func TestDSN(t *testing.T) {
	a, b := DSN(t), DSN(t)
	if a == b {
		t.Fatalf("two calls returned the same DSN %q", a)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE TABLE probe (x int)`); err != nil {
		t.Fatal(err)
	}
	var schema string
	if err := conn.QueryRow(ctx, `SELECT table_schema FROM information_schema.tables WHERE table_name = 'probe'`).Scan(&schema); err != nil {
		t.Fatal(err)
	}
	conn2, err := pgx.Connect(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	defer conn2.Close(ctx)
	var n int
	if err := conn2.QueryRow(ctx, `SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = current_schema()`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 || schema == "public" {
		t.Errorf("schema %q holds the probe; the other schema has %d tables", schema, n)
	}
}
