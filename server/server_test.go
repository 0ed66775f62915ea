package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vigilhq/vigil/client"
	"github.com/vigilhq/vigil/ledger"
	"github.com/vigilhq/vigil/store"
	"github.com/vigilhq/vigil/store/sqlite"
)

// adminKey is the VIGIL_API_KEY-style key every test server registers.
const adminKey = "test-admin-key-0123456789"

// backend is a store the end-to-end tests run on.
type backend struct {
	name string
	open func(t testing.TB) store.Store
}

func openSQLite(t testing.TB) store.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "vigil.db"), &sqlite.Options{Synchronous: "NORMAL"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// backends returns SQLite, plus PostgreSQL when the pgtest hook is
// available and VIGIL_TEST_POSTGRES is set.
func backends() []backend {
	bs := []backend{{"sqlite", openSQLite}}
	if openPostgresTest != nil && os.Getenv("VIGIL_TEST_POSTGRES") != "" {
		bs = append(bs, backend{"postgres", openPostgresTest})
	}
	return bs
}

// openPostgresTest is set by postgres_test.go when store/postgres exists.
var openPostgresTest func(t testing.TB) store.Store

// testServer is a real server on a loopback port.
type testServer struct {
	*httptest.Server
	srv *Server
	st  store.Store
	c   *client.Client // admin client
	key ledgerKey
}

type ledgerKey struct{ pub string }

func newTestServer(t testing.TB, st store.Store, mod ...func(*Config)) *testServer {
	t.Helper()
	ctx := context.Background()
	if _, err := Bootstrap(ctx, st, BootstrapOptions{EnvKey: adminKey}); err != nil {
		t.Fatal(err)
	}
	key, err := ledger.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Store: st, LedgerKey: key, Logger: discardLogger()}
	for _, m := range mod {
		m(&cfg)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return &testServer{Server: hs, srv: srv, st: st, c: client.New(hs.URL, adminKey, client.WithRetries(0)),
		key: ledgerKey{pub: ledger.PublicKeyHex(ledger.PublicOf(key))}}
}

// do sends a raw request and returns status and body.
func (ts *testServer) do(t testing.TB, method, path, key string, body any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	case io.Reader: // sent chunked: its length is unknown
		rd = b
	default:
		j, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, ts.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// decode unmarshals b into a generic value, failing the test on error.
func decode(t testing.TB, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("response is not JSON: %v: %s", err, b)
	}
	return v
}

// forEachBackend runs f as a subtest per backend, each with a fresh server.
func forEachBackend(t *testing.T, f func(t *testing.T, ts *testServer)) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			f(t, newTestServer(t, b.open(t)))
		})
	}
}
