package server

import (
	"net/http"
	"testing"
)

// TestCORS: cors_origins adds CORS headers for the listed origins, and
// answers their preflights; other origins get none (issue 11 item 12:
// the key was ignored).
func TestCORS(t *testing.T) {
	for _, tc := range []struct {
		name        string
		origins     []string
		method      string
		origin      string
		preflight   bool
		wantStatus  int
		wantAllowed string // Access-Control-Allow-Origin; "" = absent
	}{
		{"listed", []string{"https://app.example.com"}, "GET", "https://app.example.com", false, 200, "https://app.example.com"},
		{"listed preflight", []string{"https://app.example.com"}, "OPTIONS", "https://app.example.com", true, 204, "https://app.example.com"},
		{"other origin", []string{"https://app.example.com"}, "GET", "https://evil.example", false, 200, ""},
		{"other origin preflight", []string{"https://app.example.com"}, "OPTIONS", "https://evil.example", true, 404, ""},
		{"wildcard", []string{"*"}, "GET", "https://any.example", false, 200, "*"},
		{"no origin header", []string{"*"}, "GET", "", false, 200, ""},
		{"not configured", nil, "GET", "https://app.example.com", false, 200, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := newTestServer(t, openSQLite(t), func(c *Config) { c.CORSOrigins = tc.origins })
			req, _ := http.NewRequest(tc.method, ts.URL+"/api/v1/version", nil)
			if tc.origin != "" {
				req.Header.Set("Origin", tc.origin)
			}
			if tc.preflight {
				req.Header.Set("Access-Control-Request-Method", "POST")
				req.Header.Set("Access-Control-Request-Headers", "authorization, content-type")
			}
			resp, err := ts.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.wantStatus || resp.Header.Get("Access-Control-Allow-Origin") != tc.wantAllowed {
				t.Errorf("%d, Allow-Origin %q; want %d, %q", resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"), tc.wantStatus, tc.wantAllowed)
			}
			if tc.preflight && tc.wantStatus == 204 && resp.Header.Get("Access-Control-Allow-Headers") == "" {
				t.Error("preflight without Access-Control-Allow-Headers")
			}
		})
	}
}
