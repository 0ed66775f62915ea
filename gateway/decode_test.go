package gateway_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestRequestBodyDecode: malformed request bodies get the same 400 on
// every route, and bodies encoding/json accepts with repairs (invalid
// UTF-8, lone surrogates) still go through.
func TestRequestBodyDecode(t *testing.T) {
	e := newEnv(t)
	routes := []string{"/openai/chat/completions", "/openai/responses", "/anthropic/v1/messages", "/gemini/v1beta/models/g:generateContent"}
	for _, tc := range []struct {
		body   string
		status int
		want   string
	}{
		{`{"model":"m",`, http.StatusBadRequest, "Request body is not valid JSON"},
		{`{"model":"m"} {}`, http.StatusBadRequest, "Request body is not valid JSON"},
		{`[{"model":"m"}]`, http.StatusBadRequest, "Request body is not valid JSON"},
		{`null`, http.StatusBadRequest, "Request body is not valid JSON"},
		{"\xef\xbb\xbf{}", http.StatusBadRequest, "Request body is not valid JSON"},
		{`{"model":1e400}`, http.StatusBadRequest, "Request body is not valid JSON"},
		{``, http.StatusBadRequest, "Request body is not valid JSON"},
		{`{"messages":"x","input":3,"contents":"y"}`, http.StatusBadRequest, "Invalid request body: "},
	} {
		for _, r := range routes {
			resp, b := e.post(r, tc.body, map[string]string{"Authorization": "Bearer sk", "X-Api-Key": "sk", "X-Goog-Api-Key": "sk"})
			if resp.StatusCode != tc.status || !strings.Contains(string(b), tc.want) {
				t.Errorf("%s %q: %d %s, want %d with %q", r, tc.body, resp.StatusCode, b, tc.status, tc.want)
			}
		}
	}
	for _, body := range []string{
		"{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"bad \xff byte\"}]}",
		`{"model":"m","messages":[{"role":"user","content":"lone \ud800 surrogate"}]}`,
	} {
		resp, b := e.post("/openai/chat/completions", body, map[string]string{"Authorization": "Bearer sk"})
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%q: %d %s", body, resp.StatusCode, b)
		}
	}
}
