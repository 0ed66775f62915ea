package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/vigilhq/vigil/client"
	"github.com/vigilhq/vigil/internal/pgtest"
	"github.com/vigilhq/vigil/ledger"
	"github.com/vigilhq/vigil/server"
	"github.com/vigilhq/vigil/store"
	"github.com/vigilhq/vigil/store/postgres"
	"github.com/vigilhq/vigil/store/sqlite"
)

// serveDir starts the real server in-process on a loopback port over the
// SQLite store in dir (fresh key cache each time) and returns its URL.
func serveDir(t *testing.T, dir string) string {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(dir, "vigil.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	key, _ := ledger.GenerateKey()
	srv, err := server.New(server.Config{Store: st, LedgerKey: key})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { hs.Close(); srv.Close(); st.Close() })
	return hs.URL
}

// newStoreDir returns a data directory holding a new, empty SQLite store,
// as a server leaves it whose first start failed before the bootstrap.
func newStoreDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	st, err := sqlite.Open(context.Background(), filepath.Join(dir, "vigil.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	return dir
}

// TestKeysRecovery: with the admin key lost, `vigil keys` creates, lists
// and revokes keys in the store a server uses, with no server or key.
func TestKeysRecovery(t *testing.T) {
	t.Setenv("VIGIL_AUTH_ADMIN_USERNAME", "")
	dir := newStoreDir(t)
	keyRx := regexp.MustCompile(`^vgl-[0-9a-f]{64}\n$`)

	// A data directory without a store is an error, not a new store.
	missing := t.TempDir()
	code, out, errs := runVigil(t, "", "keys", "create", "--data-dir", missing)
	if code != 2 || out != "" || !strings.Contains(errs, "no Vigil store in "+missing) || !strings.Contains(errs, "--data-dir or --db that vigil serve uses") {
		t.Fatalf("keys create on a directory without a store: %d %q %q", code, out, errs)
	}
	if entries, _ := os.ReadDir(missing); len(entries) != 0 {
		t.Fatalf("keys create wrote %v into a directory without a store", entries)
	}

	// On an empty store the admin user is created first.
	code, admin, errs := runVigil(t, "", "keys", "create", "--data-dir", dir)
	if code != 0 || !keyRx.MatchString(admin) || !strings.Contains(errs, "created admin key") || !strings.Contains(errs, "for user admin") {
		t.Fatalf("keys create: %d %q %q", code, admin, errs)
	}
	code, full, errs := runVigil(t, "", "keys", "create", "--data-dir", dir, "--scope", "full", "--name", "ci")
	if code != 0 || !keyRx.MatchString(full) {
		t.Fatalf("keys create --scope full: %d %q %q", code, full, errs)
	}
	admin, full = strings.TrimSpace(admin), strings.TrimSpace(full)

	url := serveDir(t, dir)
	for _, tt := range []struct{ key, scope string }{{admin, store.ScopeAdmin}, {full, store.ScopeFull}} {
		id, err := client.New(url, tt.key).Identity(context.Background())
		if err != nil || id.Username != "admin" || id.Scope != tt.scope {
			t.Fatalf("identity with created %s key: %v %+v", tt.scope, err, id)
		}
	}

	code, list, errs := runVigil(t, "", "keys", "list", "--data-dir", dir)
	rows := strings.Split(strings.TrimSpace(list), "\n")
	if code != 0 || len(rows) != 3 || !strings.HasPrefix(rows[0], "ID ") {
		t.Fatalf("keys list: %d %q %q", code, list, errs)
	}
	if strings.Contains(list, admin[8:len(admin)-4]) {
		t.Fatalf("keys list shows a whole key:\n%s", list)
	}
	var adminID string
	for _, r := range rows[1:] {
		f := strings.Fields(r)
		if f[1] != "admin" || f[len(f)-1] != "active" {
			t.Errorf("keys list row %q: want user admin, active", r)
		}
		if f[3] == store.ScopeAdmin {
			adminID = f[0]
		}
	}

	code, out, errs = runVigil(t, "", "keys", "revoke", adminID, "--data-dir", dir)
	if code != 0 || !strings.Contains(out, "revoked key "+adminID) {
		t.Fatalf("keys revoke: %d %q %q", code, out, errs)
	}
	if _, list, _ = runVigil(t, "", "keys", "list", "--data-dir", dir, "--user", "admin"); !strings.Contains(list, "revoked") {
		t.Fatalf("keys list after revoke:\n%s", list)
	}
	var ae *client.APIError
	if _, err := client.New(serveDir(t, dir), admin).Identity(context.Background()); !errors.As(err, &ae) || ae.StatusCode != http.StatusUnauthorized {
		t.Fatalf("revoked key: %v, want 401", err)
	}

	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown user", []string{"create", "--user", "nobody"}, `no user "nobody"`},
		{"bad scope", []string{"create", "--scope", "root"}, `scope must be read, ingest, full or admin, got "root"`},
		{"unknown key", []string{"revoke", "nope"}, `no API key with id "nope"`},
		{"revoke without id", []string{"revoke"}, "want exactly one key ID"},
		{"unknown subcommand", []string{"rotate"}, `unknown subcommand "rotate"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errs := runVigil(t, "", append(append([]string{"keys"}, tt.args...), "--data-dir", dir)...)
			if code != 2 || !strings.Contains(errs, tt.want) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", code, errs, tt.want)
			}
		})
	}
}

// TestServeBusyPort: a port already in use fails before the store is
// touched, so no admin key is created (and lost), and the error names the
// address and says what to do.
func TestServeBusyPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	t.Setenv("VIGIL_API_KEY", "")
	dir := t.TempDir()
	code, _, errs := runVigil(t, "", "serve", "--listen", ln.Addr().String(), "--data-dir", dir)
	if code != 2 {
		t.Fatalf("exit %d, want 2; stderr %q", code, errs)
	}
	for _, want := range []string{"cannot listen on " + ln.Addr().String(), "already in use", "--listen"} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr %q does not contain %q", errs, want)
		}
	}
	if strings.Contains(errs, "API key") {
		t.Errorf("a key was printed by a server that did not start: %q", errs)
	}
	if _, err := os.Stat(filepath.Join(dir, "vigil.db")); err == nil {
		st, err := sqlite.Open(context.Background(), filepath.Join(dir, "vigil.db"), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		if n, _ := st.CountUsers(context.Background()); n != 0 {
			t.Errorf("the failed start created %d user(s) and their key", n)
		}
	}
}

// TestKeysPostgres: --db reaches the same PostgreSQL store a server uses.
func TestKeysPostgres(t *testing.T) {
	dsn := pgtest.DSN(t)
	t.Setenv("VIGIL_AUTH_ADMIN_USERNAME", "")
	code, key, errs := runVigil(t, "", "keys", "create", "--db", dsn, "--data-dir", t.TempDir())
	if code != 0 || !strings.HasPrefix(key, "vgl-") {
		t.Fatalf("keys create --db: %d %q %q", code, key, errs)
	}
	ctx := context.Background()
	st, err := postgres.Open(ctx, dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	lk, _ := ledger.GenerateKey()
	srv, err := server.New(server.Config{Store: st, LedgerKey: lk})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	hs := httptest.NewServer(srv)
	defer hs.Close()
	id, err := client.New(hs.URL, strings.TrimSpace(key)).Identity(ctx)
	if err != nil || id.Username != "admin" || id.Scope != store.ScopeAdmin {
		t.Fatalf("identity with the key made on PostgreSQL: %v %+v", err, id)
	}
	if code, list, _ := runVigil(t, "", "keys", "list", "--db", dsn, "--data-dir", t.TempDir()); code != 0 || !strings.Contains(list, "active") {
		t.Fatalf("keys list --db: %d %s", code, list)
	}
}

// TestKeysAdminUsername: on an empty store keys create makes the admin
// user under the name serve would use (VIGIL_AUTH_ADMIN_USERNAME or
// auth.admin_username), and later finds that user again.
func TestKeysAdminUsername(t *testing.T) {
	dir := newStoreDir(t)
	t.Setenv("VIGIL_AUTH_ADMIN_USERNAME", "root")
	for i := 0; i < 2; i++ {
		code, key, errs := runVigil(t, "", "keys", "create", "--data-dir", dir)
		if code != 0 || !strings.HasPrefix(key, "vgl-") || !strings.Contains(errs, "for user root") {
			t.Fatalf("keys create %d: %d %q %q", i, code, key, errs)
		}
	}
	t.Setenv("VIGIL_AUTH_ADMIN_USERNAME", "")
	cfg := filepath.Join(dir, "vigil.yaml")
	os.WriteFile(cfg, []byte("auth:\n  admin_username: boss\n"), 0o600)
	code, _, errs := runVigil(t, "", "keys", "create", "--data-dir", newStoreDir(t), "--config", cfg)
	if code != 0 || !strings.Contains(errs, "for user boss") {
		t.Fatalf("keys create with auth.admin_username: %d %q", code, errs)
	}
}
