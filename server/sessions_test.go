package server

import (
	"net/http"
	"strings"
	"testing"
)

// Browser sessions (explorer-api §12.3): login sets the cookie, the
// cookie authenticates API requests, a state-changing one only from the
// same origin, logout ends it.
func TestBrowserSessionAPI(t *testing.T) {
	ts := newTestServer(t, openSQLite(t))
	post := func(path, body, cookie, origin string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest("POST", ts.URL+path, strings.NewReader(body))
		if cookie != "" {
			req.Header.Set("Cookie", SessionCookie+"="+cookie)
		}
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		buf := make([]byte, 4096)
		for {
			n, err := resp.Body.Read(buf)
			b.Write(buf[:n])
			if err != nil {
				break
			}
		}
		return resp, b.String()
	}
	get := func(path, cookie string) int {
		req, _ := http.NewRequest("GET", ts.URL+path, nil)
		req.Header.Set("Cookie", SessionCookie+"="+cookie)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	tests := []struct {
		body, want string
		code       int
	}{
		{`{"api_key": "vgl-not-a-key-0000000000"}`, "Invalid API key", 401},
		{`{}`, "api_key must be provided", 400},
		{`[1]`, "not a JSON object", 400},
	}
	for _, tt := range tests {
		if resp, body := post("/api/v1/auth/login", tt.body, "", ""); resp.StatusCode != tt.code || !strings.Contains(body, tt.want) {
			t.Errorf("login %s: %d %s", tt.body, resp.StatusCode, body)
		}
	}
	resp, body := post("/api/v1/auth/login", `{"api_key": "`+adminKey+`"}`, "", "")
	if resp.StatusCode != 200 || body != `{"role":"admin","scope":"admin","username":"admin"}`+"\n" {
		t.Fatalf("login: %d %q", resp.StatusCode, body)
	}
	var token string
	for _, c := range resp.Cookies() {
		if c.Name == SessionCookie {
			token = c.Value
			if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" || len(c.Value) != 43 {
				t.Errorf("cookie %+v", c)
			}
		}
	}
	if code := get("/api/v1/user/identity", token); code != 200 {
		t.Fatalf("identity by cookie: %d", code)
	}
	if code := get("/api/v1/user/identity", "forged"); code != 401 {
		t.Fatalf("forged cookie: %d, want anonymous (401 on identity)", code)
	}
	if resp, body := post("/api/v1/dataset/create", `{"name":"a"}`, token, "http://evil.example"); resp.StatusCode != 403 || !strings.Contains(body, "cross-site") {
		t.Errorf("cross-site POST: %d %s", resp.StatusCode, body)
	}
	if resp, _ := post("/api/v1/dataset/create", `{"name":"a"}`, token, ts.URL); resp.StatusCode != 200 {
		t.Errorf("same-origin POST: %d", resp.StatusCode)
	}
	if resp, _ := post("/api/v1/auth/logout", "", token, "http://evil.example"); resp.StatusCode != 403 {
		t.Errorf("cross-site logout: %d", resp.StatusCode)
	}
	if resp, _ := post("/api/v1/auth/logout", "", token, ts.URL); resp.StatusCode != 200 {
		t.Errorf("logout: %d", resp.StatusCode)
	}
	if code := get("/api/v1/user/identity", token); code != 401 {
		t.Errorf("after logout: %d", code)
	}
}
