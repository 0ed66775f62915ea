package server

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
)

func TestMount(t *testing.T) {
	ts := newTestServer(t, openSQLite(t))
	// Without a root handler, a non-API path is the API's JSON 404.
	if code, body := ts.do(t, "GET", "/somewhere", "", nil); code != 404 || !strings.Contains(string(body), "no such endpoint") {
		t.Fatalf("before Mount: %d %s", code, body)
	}
	ts.srv.Mount("GET /extra/{x}", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := ts.srv.Authenticate(r)
		if err != nil {
			ts.srv.WriteError(w, r, err)
			return
		}
		w.Write([]byte("extra " + r.PathValue("x") + " " + c.Scope()))
	}))
	ts.srv.Mount("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(404)
		w.Write([]byte("<html>root " + r.URL.Path))
	}))
	tests := []struct {
		path, key string
		code      int
		want      string
	}{
		{"/extra/a", adminKey, 200, "extra a admin"},
		{"/extra/a", "vgl_bogus", 401, "Invalid API key"},
		{"/somewhere", "", 404, "<html>root /somewhere"},
		{"/api/v1/nothing", "", 404, "no such endpoint"}, // /api/ stays the API's
		{"/api/v1/version", "", 200, "version"},
	}
	for _, tt := range tests {
		code, body := ts.do(t, "GET", tt.path, tt.key, nil)
		if code != tt.code || !strings.Contains(string(body), tt.want) {
			t.Errorf("GET %s: %d %s, want %d with %q", tt.path, code, body, tt.code, tt.want)
		}
	}
}

func TestAuthenticateKey(t *testing.T) {
	ts := newTestServer(t, openSQLite(t))
	ctx := context.Background()
	c, err := ts.srv.AuthenticateKey(ctx, adminKey)
	if err != nil || !c.IsAdmin() || !c.CanWrite() || !c.CanIngest() || !c.CanRead() {
		t.Fatalf("admin key: %+v, %v", c, err)
	}
	if _, err := ts.srv.AuthenticateKey(ctx, "vgl_nope"); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("bad key: %v, want ErrInvalidKey", err)
	}
	var none *Caller
	if none.CanRead() || none.Scope() != "" || none.IsAdmin() {
		t.Fatal("a nil Caller may do nothing")
	}
}
