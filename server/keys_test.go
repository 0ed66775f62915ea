package server

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/vigilhq/vigil/client"
	"github.com/vigilhq/vigil/store"
)

func TestKeysAndScopes(t *testing.T) {
	ts := newTestServer(t, openSQLite(t))
	ctx := context.Background()
	ingest, err := ts.c.CreateKey(ctx, client.KeyCreate{Name: "agent", Scope: "ingest"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(ingest.Key, "vgl-") || len(ingest.Key) != 68 || ingest.Prefix != ingest.Key[:8] {
		t.Fatalf("created key %+v", ingest)
	}
	read, err := ts.c.CreateKey(ctx, client.KeyCreate{Scope: "read"})
	if err != nil {
		t.Fatal(err)
	}
	ic := client.New(ts.URL, ingest.Key, client.WithRetries(0))
	rc := client.New(ts.URL, read.Key, client.WithRetries(0))

	// ingest pushes but cannot read back; read reads but cannot push.
	res, err := ic.Push(ctx, client.PushRequest{Dataset: "d", Messages: [][]any{{map[string]any{"role": "user", "content": "x"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ic.GetTrace(ctx, res.ID[0], false); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("ingest key read a trace: %v", err)
	}
	if _, err := rc.GetTrace(ctx, res.ID[0], false); err != nil {
		t.Errorf("read key: %v", err)
	}
	if _, err := rc.Push(ctx, client.PushRequest{Messages: [][]any{{}}}); err == nil {
		t.Error("read key pushed")
	}
	// Metadata accepts any scope (invariant-sdk calls it with push keys).
	if _, err := ic.GetMetadata(ctx, "d", ""); err != nil {
		t.Errorf("ingest key metadata: %v", err)
	}
	// A full key cannot mint an admin key.
	full, _ := ts.c.CreateKey(ctx, client.KeyCreate{Scope: "full"})
	fc := client.New(ts.URL, full.Key, client.WithRetries(0))
	if _, err := fc.CreateKey(ctx, client.KeyCreate{Scope: "admin"}); err == nil {
		t.Error("full key minted an admin key")
	}

	keys, err := ts.c.ListKeys(ctx)
	if err != nil || len(keys) != 4 {
		t.Fatalf("list keys: %v %d", err, len(keys))
	}
	for _, k := range keys {
		if k.ID == ingest.ID && (k.HashedKey != ingest.Key[len(ingest.Key)-4:] || k.Scope != "ingest" || k.Name != "agent") {
			t.Errorf("listed key %+v", k)
		}
	}
	// Revocation takes effect at once (the principal cache is evicted).
	if err := ts.c.RevokeKey(ctx, ingest.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := ic.Identity(ctx); err == nil || !strings.Contains(err.Error(), "Invalid API key") {
		t.Errorf("revoked key still works: %v", err)
	}
	// A key cannot be created expired (it would never work: 400).
	past := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	if st, body := ts.do(t, "POST", "/api/v1/keys/create", adminKey, map[string]string{"expires_at": past}); st != 400 || !strings.Contains(string(body), "expires_at") {
		t.Errorf("key created expired: %d %s", st, body)
	}
	// Expired keys fail (one that expired since it was created).
	plain, err := generateKey()
	if err != nil {
		t.Fatal(err)
	}
	admin, err := ts.st.GetUserByName(ctx, "admin")
	if err != nil {
		t.Fatal(err)
	}
	row := newKeyRow(plain, "old", store.ScopeFull, admin.ID)
	expired := time.Now().Add(-time.Minute)
	row.ExpiresAt = &expired
	if err := ts.st.CreateAPIKey(ctx, row); err != nil {
		t.Fatal(err)
	}
	if _, err := client.New(ts.URL, plain, client.WithRetries(0)).Identity(ctx); err == nil {
		t.Error("expired key works")
	}
	// A disabled user's keys fail.
	member := &store.User{Username: "bob", Role: store.RoleMember}
	if err := ts.st.CreateUser(ctx, member); err != nil {
		t.Fatal(err)
	}
	bobKey, err := ts.c.CreateKey(ctx, client.KeyCreate{User: "bob", Scope: "full"})
	if err != nil {
		t.Fatal(err)
	}
	bc := client.New(ts.URL, bobKey.Key, client.WithRetries(0))
	// bob cannot see admin's private dataset: 404, not 403.
	if _, err := bc.GetTrace(ctx, res.ID[0], false); !client.IsNotFound(err) {
		t.Errorf("bob reads admin's trace: %v", err)
	}
	if _, err := bc.GetMetadata(ctx, "d", "admin"); err == nil || !strings.Contains(err.Error(), "Not allowed to view metadata") {
		t.Errorf("bob metadata: %v", err)
	}
}

func TestBootstrap(t *testing.T) {
	st := openSQLite(t)
	ctx := context.Background()
	res, err := Bootstrap(ctx, st, BootstrapOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.CreatedUser || !strings.HasPrefix(res.GeneratedKey, "vgl-") {
		t.Fatalf("first bootstrap %+v", res)
	}
	k, err := st.GetAPIKeyByHash(ctx, store.HashKey(res.GeneratedKey))
	if err != nil || k.Scope != store.ScopeAdmin {
		t.Fatalf("generated key stored as %+v, %v", k, err)
	}
	// Second start: nothing new.
	res, err = Bootstrap(ctx, st, BootstrapOptions{})
	if err != nil || res.CreatedUser || res.GeneratedKey != "" {
		t.Fatalf("second bootstrap %+v %v", res, err)
	}
	// An unknown VIGIL_API_KEY is registered (rotation); a revoked one stays revoked.
	res, err = Bootstrap(ctx, st, BootstrapOptions{EnvKey: "rotated-key-0123456789"})
	if err != nil || !res.RegisteredEnvKey {
		t.Fatalf("env key %+v %v", res, err)
	}
	k, _ = st.GetAPIKeyByHash(ctx, store.HashKey("rotated-key-0123456789"))
	st.RevokeAPIKey(ctx, k.ID, time.Now())
	res, err = Bootstrap(ctx, st, BootstrapOptions{EnvKey: "rotated-key-0123456789"})
	if err != nil || res.RegisteredEnvKey || res.Warning == "" {
		t.Fatalf("revoked env key %+v %v", res, err)
	}
	if _, err := Bootstrap(ctx, st, BootstrapOptions{EnvKey: "short"}); err == nil {
		t.Fatal("short VIGIL_API_KEY accepted")
	}
}

func TestHealthAndMetrics(t *testing.T) {
	ts := newTestServer(t, openSQLite(t), func(c *Config) { c.MetricsToken = "metrics-token" })
	for _, tc := range []struct {
		path, key string
		status    int
		want      string
	}{
		{"/healthz", "", 200, `{"status":"ok"}`},
		{"/readyz", "", 200, `"store":"ok"`},
		{"/api/v1/", "", 200, `{"message":"Hello v1"}`},
		{"/api/v1/version", "", 200, `"store":"sqlite"`},
		{"/metrics", "", 401, "unauthenticated"},
		{"/metrics", "metrics-token", 200, "# TYPE vigil_http_requests_total counter"},
		{"/api/v1/metrics", adminKey, 200, `vigil_http_requests_total{route="/healthz",method="GET",code="200"} 1`},
	} {
		status, body := ts.do(t, "GET", tc.path, tc.key, nil)
		if status != tc.status || !strings.Contains(string(body), tc.want) {
			t.Errorf("GET %s: %d %s, want %d containing %s", tc.path, status, body, tc.status, tc.want)
		}
	}
	ts.c.Push(context.Background(), client.PushRequest{Messages: [][]any{{map[string]any{"role": "user"}}, {}}})
	_, body := ts.do(t, "GET", "/metrics", "metrics-token", nil)
	for _, want := range []string{
		`vigil_ingest_traces_total{source="push"} 2`,
		`vigil_ingest_messages_total{source="push"} 1`,
		`vigil_http_request_duration_seconds_bucket{route="/api/v1/push/trace",le="+Inf"} 1`,
		"process_resident_memory_bytes",
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

func TestUsersAdmin(t *testing.T) {
	ts := newTestServer(t, openSQLite(t))
	ctx := context.Background()
	st, body := ts.do(t, "POST", "/api/v1/users", adminKey, `{"username": "carol", "email": "c@example.com"}`)
	if st != 200 || !strings.Contains(string(body), `"role":"member"`) {
		t.Fatalf("create user: %d %s", st, body)
	}
	if st, body = ts.do(t, "POST", "/api/v1/users", adminKey, `{"username": "carol"}`); st != 400 || !strings.Contains(string(body), "taken") {
		t.Fatalf("duplicate user: %d %s", st, body)
	}
	if st, body = ts.do(t, "POST", "/api/v1/users", adminKey, `{"username": "bad name"}`); st != 400 {
		t.Fatalf("bad username: %d %s", st, body)
	}
	carol, _ := ts.st.GetUserByName(ctx, "carol")
	k, err := ts.c.CreateKey(ctx, client.KeyCreate{User: "carol", Scope: "full"})
	if err != nil {
		t.Fatal(err)
	}
	cc := client.New(ts.URL, k.Key, client.WithRetries(0))
	if _, err := cc.Identity(ctx); err != nil {
		t.Fatal(err)
	}
	if st, _ := ts.do(t, "GET", "/api/v1/users", k.Key, nil); st != 403 {
		t.Fatalf("member lists users: %d", st)
	}
	// Disabling a user makes its keys fail at once.
	if st, body = ts.do(t, "PATCH", "/api/v1/users/"+carol.ID, adminKey, `{"disabled": true}`); st != 200 || !strings.Contains(string(body), `"disabled":true`) {
		t.Fatalf("disable: %d %s", st, body)
	}
	if _, err := cc.Identity(ctx); err == nil {
		t.Fatal("disabled user's key still works")
	}
	if st, body = ts.do(t, "GET", "/api/v1/users", adminKey, nil); st != 200 || strings.Count(string(body), `"username"`) != 2 {
		t.Fatalf("list users: %d %s", st, body)
	}
	if st, _ = ts.do(t, "DELETE", "/api/v1/users/"+carol.ID, adminKey, nil); st != 200 {
		t.Fatalf("delete user: %d", st)
	}
}
