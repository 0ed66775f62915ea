package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vigilhq/vigil/internal/pgtest"
	"github.com/vigilhq/vigil/ledger"
	"github.com/vigilhq/vigil/server"
	"github.com/vigilhq/vigil/store"
	"github.com/vigilhq/vigil/store/postgres"
	"github.com/vigilhq/vigil/store/sqlite"
	"github.com/vigilhq/vigil/web"
)

const adminKey = "test-admin-key-0123456789"

// env is a real server (SQLite store, the API and the UI on one
// loopback listener), as vigil serve assembles them.
type env struct {
	*httptest.Server
	srv    *server.Server
	ui     *web.Handler
	st     store.Store
	dbPath string
}

func newEnv(t testing.TB) *env {
	t.Helper()
	path := filepath.Join(t.TempDir(), "vigil.db")
	st, err := sqlite.Open(context.Background(), path, &sqlite.Options{Synchronous: "NORMAL"})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnvOn(t, st)
	e.dbPath = path
	return e
}

// newPostgresEnv is newEnv on PostgreSQL (VIGIL_TEST_POSTGRES; skipped
// without it).
func newPostgresEnv(t testing.TB) *env {
	t.Helper()
	st, err := postgres.Open(context.Background(), pgtest.DSN(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	return newEnvOn(t, st)
}

func newEnvOn(t testing.TB, st store.Store) *env {
	t.Helper()
	ctx := context.Background()
	t.Cleanup(func() { st.Close() })
	if _, err := server.Bootstrap(ctx, st, server.BootstrapOptions{EnvKey: adminKey}); err != nil {
		t.Fatal(err)
	}
	key, err := ledger.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Store: st, LedgerKey: key, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	ui, err := web.New(srv)
	if err != nil {
		t.Fatal(err)
	}
	srv.Mount("/", ui)
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return &env{Server: hs, srv: srv, ui: ui, st: st}
}

// api calls the API with a bearer key and decodes the answer into out.
func (e *env) api(t testing.TB, method, path, key string, body, out any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, e.URL+path, rd)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, path, err, b)
		}
	}
	if resp.StatusCode >= 300 && out != nil {
		t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	return resp.StatusCode
}

// push pushes one trace into dataset and returns its id.
func (e *env) push(t testing.TB, key, dataset string, events []map[string]any, md map[string]any) string {
	t.Helper()
	var out struct {
		ID []string `json:"id"`
	}
	if md == nil {
		md = map[string]any{}
	}
	e.api(t, "POST", "/api/v1/push/trace", key, map[string]any{"messages": [][]map[string]any{events}, "dataset": dataset, "metadata": []any{md}}, &out)
	return out.ID[0]
}

// newUser creates a member user with a key of scope and returns the key.
func (e *env) newUser(t testing.TB, name, scope string) string {
	t.Helper()
	e.api(t, "POST", "/api/v1/users", adminKey, map[string]any{"username": name}, &map[string]any{})
	return e.newKey(t, name, scope)
}

func (e *env) newKey(t testing.TB, user, scope string) string {
	t.Helper()
	var k struct {
		Key string `json:"key"`
	}
	e.api(t, "POST", "/api/v1/keys/create", adminKey, map[string]any{"user": user, "scope": scope, "name": user + "-" + scope}, &k)
	return k.Key
}

// browser is an HTTP client with a cookie jar that signs in through the
// login form, as a browser does.
type browser struct {
	e *env
	c *http.Client
}

func (e *env) browser(t testing.TB, key string) *browser {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	b := &browser{e: e, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	if key != "" {
		code, _, _ := b.post(t, "/login", url.Values{"api_key": {key}, "next": {"/"}})
		if code != http.StatusSeeOther {
			t.Fatalf("login: %d", code)
		}
	}
	return b
}

func (b *browser) get(t testing.TB, path string) (int, string, http.Header) {
	t.Helper()
	resp, err := b.c.Get(b.e.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), resp.Header
}

// post sends a form from this site (Origin set as a browser does).
func (b *browser) post(t testing.TB, path string, form url.Values) (int, string, http.Header) {
	t.Helper()
	return b.postFrom(t, path, form, b.e.URL)
}

func (b *browser) postFrom(t testing.TB, path string, form url.Values, origin string) (int, string, http.Header) {
	t.Helper()
	req, _ := http.NewRequest("POST", b.e.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	resp, err := b.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), resp.Header
}

// apiJSON calls the API with the browser's session cookie.
func (b *browser) apiJSON(t testing.TB, method, path, origin string, body any) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		j, _ := json.Marshal(body)
		rd = bytes.NewReader(j)
	}
	req, _ := http.NewRequest(method, b.e.URL+path, rd)
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	resp, err := b.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}
