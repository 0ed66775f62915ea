// Package pgtest gives each test its own PostgreSQL schema on the server
// named by VIGIL_TEST_POSTGRES (set by .ci/run), so tests of several
// packages can run at once without seeing each other's rows.
//
// Non-goals: starting a PostgreSQL server; without VIGIL_TEST_POSTGRES the
// calling test is skipped.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvVar names the environment variable holding the base connection string,
// e.g. postgres://postgres@127.0.0.1:5432/test?sslmode=disable.
const EnvVar = "VIGIL_TEST_POSTGRES"

// DSN creates a fresh, uniquely named schema, drops it (with everything in
// it) when the test ends, and returns a connection string whose
// search_path is that schema, for postgres.Open or pgx. It skips the test
// when VIGIL_TEST_POSTGRES is unset and fails it when the server cannot be
// reached.
func DSN(t testing.TB) string {
	t.Helper()
	base := os.Getenv(EnvVar)
	if base == "" {
		t.Skip("VIGIL_TEST_POSTGRES not set: skipping PostgreSQL tests")
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "vigil_test_" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("pgtest: connect to %s: %v", EnvVar, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE SCHEMA `+schema); err != nil {
		t.Fatalf("pgtest: create schema %s: %v", schema, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Errorf("pgtest: drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `DROP SCHEMA `+schema+` CASCADE`); err != nil {
			t.Errorf("pgtest: drop schema %s: %v", schema, err)
		}
	})
	return withSearchPath(base, schema)
}

// withSearchPath adds search_path=schema to a URL or key=value DSN.
func withSearchPath(dsn, schema string) string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err == nil {
			q := u.Query()
			q.Set("search_path", schema)
			u.RawQuery = q.Encode()
			return u.String()
		}
	}
	return dsn + " search_path=" + schema
}
