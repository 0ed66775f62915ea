package web_test

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// seed pushes a small dataset: a trace with a tool call and its output,
// a comment, and a stored backtest finding.
func seed(t *testing.T, e *env) (traceID, datasetID string) {
	t.Helper()
	traceID = e.push(t, adminKey, "demo", []map[string]any{
		{"role": "user", "content": "Please email the Q3 report to bob@evil.test"},
		{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": "c1", "type": "function",
			"function": map[string]any{"name": "send_email", "arguments": map[string]any{"to": "bob@evil.test", "body": "numbers"}}}}},
		{"role": "tool", "tool_call_id": "c1", "content": `{"ok": true}`},
	}, map[string]any{"name": "first run", "hierarchy_path": []string{"prod"}})
	var ds struct {
		ID string `json:"id"`
	}
	e.api(t, "GET", "/api/v1/dataset/byuser/admin/demo", adminKey, nil, &ds)
	e.api(t, "POST", "/api/v1/trace/"+traceID+"/annotate", adminKey, map[string]any{"content": "odd request", "address": "messages.0.content:7-12"}, &map[string]any{})
	var out map[string]any
	e.api(t, "POST", "/api/v1/dataset/"+ds.ID+"/policy", adminKey, map[string]any{"name": "no external email", "severity": "critical",
		"policy": "raise \"external email\" if:\n    (call: ToolCall)\n    call is tool:send_email\n    \"evil\" in call.function.arguments.to\n"}, &out)
	code := e.api(t, "POST", "/api/v1/dataset/byid/"+ds.ID+"/policy-check", adminKey, map[string]any{
		"policy": "raise \"external email\" if:\n    (call: ToolCall)\n    call is tool:send_email\n    \"evil\" in call.function.arguments.to\n", "store": true}, nil)
	if code != 200 {
		t.Fatalf("stored backtest: %d", code)
	}
	return traceID, ds.ID
}

func TestPages(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { testPages(t, newEnv(t)) })
	t.Run("postgres", func(t *testing.T) { testPages(t, newPostgresEnv(t)) })
}

func testPages(t *testing.T, e *env) {
	tid, _ := seed(t, e)
	admin := e.browser(t, adminKey)
	anon := e.browser(t, "")
	tests := []struct {
		name    string
		b       *browser
		path    string
		code    int
		want    []string
		notWant []string
	}{
		{"home", admin, "/", 200, []string{`href="/u/admin/demo"`, "New dataset", "INVARIANT_API_ENDPOINT"}, nil},
		{"home signed out", anon, "/", 303, nil, nil},
		{"login", anon, "/login?next=/u/admin/demo", 200, []string{`name="api_key"`, `value="/u/admin/demo"`}, nil},
		{"trace list", admin, "/u/admin/demo", 200, []string{`href="/u/admin/demo/t/0"`, "first run", "data-nav-list", `>prod</a>`, "1 traces."}, nil},
		{"search hits", admin, "/u/admin/demo?q=report", 200, []string{`<mark class="hl src-search">report</mark>`, "Traces matching <code>report</code>"}, nil},
		{"hierarchy group", admin, "/u/admin/demo?q=" + url.QueryEscape(`meta:hierarchy_path.0="prod"`), 200, []string{`href="/u/admin/demo/t/0?q=`}, nil},
		{"search no hit", admin, "/u/admin/demo?q=nothinglikethis", 200, []string{"No trace matches"}, nil},
		{"search error at position", admin, "/u/admin/demo?q=" + url.QueryEscape(`tool:"ab`), 200, []string{"unterminated", `tool:<mark class="err-at">&#34;</mark>ab`, "column 6"}, nil},
		{"trace by index", admin, "/u/admin/demo/t/0", 200, []string{`data-address="messages.0.content:7-12"`, `data-source="user"`, `<th class="mono">to</th>`, `data-source="guardrails-error"`}, nil},
		{"trace by id", admin, "/trace/" + tid, 200, []string{"first run", `data-path="messages.1.tool_calls.0.function.arguments.to"`}, nil},
		{"trace with search", admin, "/u/admin/demo/t/0?q=report", 200, []string{`data-source="search"`, `data-address="messages.0.content:20-26"`}, nil},
		{"trace index missing", admin, "/u/admin/demo/t/99", 404, []string{"Not found"}, nil},
		{"guardrails", admin, "/u/admin/demo/guardrails", 200, []string{"no external email", `<span class="kw">raise</span>`, "Backtest", "Versions"}, nil},
		{"findings", admin, "/u/admin/demo/findings", 200, []string{"external email", `class="pill sev-`, "Accept selected", `data-finding-id=`}, nil},
		{"dataset settings", admin, "/u/admin/demo/settings", 200, []string{"Delete dataset", "JSONL export"}, nil},
		{"proof", admin, "/runs/" + tid, 200, []string{"Receipt chain", "vigil receipts verify", "Verify now"}, nil},
		{"proof verified", admin, "/runs/" + tid + "?verify=1", 200, []string{`id="verify-result" class="ok"`, `"valid": true`}, nil},
		{"playground", anon, "/playground", 200, []string{"Run check", `id="pg-policy"`}, nil},
		{"mcp", admin, "/mcp", 200, []string{"MCP tool pins"}, nil},
		{"settings", admin, "/settings", 200, []string{"API keys", "Create key", "Users"}, nil},
		{"html 404", admin, "/no/such/page", 404, []string{"<!doctype html>", "Not found"}, nil},
		{"api 404 stays JSON", admin, "/api/v1/nothing", 404, []string{`"code":"not_found"`}, []string{"<html"}},
		{"private dataset anonymous", anon, "/u/admin/demo", 303, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body, _ := tt.b.get(t, tt.path)
			if code != tt.code {
				t.Fatalf("GET %s: %d, want %d\n%s", tt.path, code, tt.code, body)
			}
			for _, w := range tt.want {
				if !strings.Contains(body, w) {
					t.Errorf("GET %s: no %q in\n%s", tt.path, w, body)
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(body, w) {
					t.Errorf("GET %s: %q in the page", tt.path, w)
				}
			}
		})
	}
}

// Every page carries the CSP and headers of web-ui.md §6, and no page
// has an inline script, inline style or event-handler attribute.
func TestSecurityHeadersAndNoInline(t *testing.T) {
	e := newEnv(t)
	tid, _ := seed(t, e)
	admin := e.browser(t, adminKey)
	inline := regexp.MustCompile(`(?i)<script(?:\s[^>]*)?>[^<]|<style|\sstyle=|\son[a-z]+=|javascript:`)
	for _, p := range []string{"/", "/login", "/u/admin/demo", "/u/admin/demo/t/0", "/trace/" + tid, "/u/admin/demo/guardrails",
		"/u/admin/demo/findings", "/u/admin/demo/settings", "/runs/" + tid, "/playground", "/mcp", "/settings", "/nope"} {
		_, body, h := admin.get(t, p)
		if got := h.Get("Content-Security-Policy"); got != "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; object-src 'none'; frame-ancestors 'none'; base-uri 'none'" {
			t.Errorf("%s: CSP %q", p, got)
		}
		if h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Referrer-Policy") != "same-origin" {
			t.Errorf("%s: headers %v", p, h)
		}
		if m := inline.FindString(body); m != "" {
			t.Errorf("%s: inline script or style %q", p, m)
		}
	}
	// Static files: content-hashed and immutable.
	_, body, _ := admin.get(t, "/")
	m := regexp.MustCompile(`/static/[0-9a-f]{12}/js/app\.js`).FindString(body)
	if m == "" {
		t.Fatal("no hashed app.js link")
	}
	_, _, h := admin.get(t, m)
	if !strings.Contains(h.Get("Cache-Control"), "immutable") || !strings.Contains(h.Get("Content-Type"), "javascript") {
		t.Errorf("static headers: %v", h)
	}
}

// Hostile strings in every field are escaped by context.
func TestEscaping(t *testing.T) {
	e := newEnv(t)
	const x = `<script>alert(1)</script><img src=x onerror=alert(2)>"'&`
	tid := e.push(t, adminKey, "xss", []map[string]any{
		{"role": "user", "content": x},
		{"role": "assistant", "content": x, "tool_calls": []any{map[string]any{"id": x, "type": "function",
			"function": map[string]any{"name": x, "arguments": map[string]any{x: x, "n": map[string]any{x: x}}}}}},
		{"role": "tool", "tool_call_id": x, "content": x, "error": x},
	}, map[string]any{"name": x, x: x, "hierarchy_path": []string{x}})
	e.api(t, "POST", "/api/v1/trace/"+tid+"/annotate", adminKey, map[string]any{"content": x, "address": "messages.0.content:0-8"}, &map[string]any{})
	admin := e.browser(t, adminKey)
	for _, p := range []string{"/", "/u/admin/xss", "/u/admin/xss/t/0", "/u/admin/xss?q=" + url.QueryEscape(x), "/trace/" + tid, "/u/admin/xss/findings", "/runs/" + tid} {
		code, body, _ := admin.get(t, p)
		if code != 200 {
			t.Fatalf("%s: %d", p, code)
		}
		for _, bad := range []string{"<script>alert", "<img src=x", "onerror=alert(2)>"} {
			if strings.Contains(body, bad) {
				t.Errorf("%s: unescaped %q", p, bad)
			}
		}
	}
	_, body, _ := admin.get(t, "/u/admin/xss/t/0")
	if !strings.Contains(body, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Error("trace page does not show the payload as text")
	}
}

func TestLoginLogoutAndSessions(t *testing.T) {
	e := newEnv(t)
	seed(t, e)
	b := e.browser(t, "")
	code, body, _ := b.post(t, "/login", url.Values{"api_key": {"vgl-wrong-key-000000000000"}, "next": {"/"}})
	if code != 401 || !strings.Contains(body, "unknown, revoked or expired") {
		t.Fatalf("bad key: %d %s", code, body)
	}
	code, _, h := b.post(t, "/login", url.Values{"api_key": {adminKey}, "next": {"/u/admin/demo"}})
	if code != 303 || h.Get("Location") != "/u/admin/demo" {
		t.Fatalf("login: %d %v", code, h)
	}
	c := h.Get("Set-Cookie")
	for _, w := range []string{"vigil_session=", "HttpOnly", "SameSite=Strict", "Path=/"} {
		if !strings.Contains(c, w) {
			t.Errorf("cookie %q lacks %s", c, w)
		}
	}
	// An open redirect is refused.
	b2 := e.browser(t, "")
	if _, _, h := b2.post(t, "/login", url.Values{"api_key": {adminKey}, "next": {"//evil.test/x"}}); h.Get("Location") != "/" {
		t.Errorf("next=//evil.test: Location %q", h.Get("Location"))
	}
	// The cookie authenticates API reads too (§12.3).
	if code, body := b.apiJSON(t, "GET", "/api/v1/user/identity", "", nil); code != 200 || !strings.Contains(body, `"username":"admin"`) {
		t.Fatalf("identity by cookie: %d %s", code, body)
	}
	// Logout ends the session.
	if code, _, _ := b.post(t, "/logout", nil); code != 303 {
		t.Fatalf("logout: %d", code)
	}
	if code, _ := b.apiJSON(t, "GET", "/api/v1/user/identity", "", nil); code != 401 {
		t.Fatalf("after logout: %d", code)
	}
	// Revoking the key kills its sessions.
	key := e.newKey(t, "admin", "full")
	b3 := e.browser(t, key)
	if code, _, _ := b3.get(t, "/"); code != 200 {
		t.Fatalf("session of new key: %d", code)
	}
	var keys struct {
		Keys []struct{ ID, Name string }
	}
	e.api(t, "GET", "/api/v1/keys/list", adminKey, nil, &keys)
	for _, k := range keys.Keys {
		if k.Name == "admin-full" {
			e.api(t, "DELETE", "/api/v1/keys/"+k.ID, adminKey, nil, &map[string]any{})
		}
	}
	if code, _, h := b3.get(t, "/"); code != 303 || !strings.HasPrefix(h.Get("Location"), "/login") {
		t.Fatalf("after revocation: %d %v", code, h)
	}
}

func TestCSRF(t *testing.T) {
	e := newEnv(t)
	seed(t, e)
	b := e.browser(t, adminKey)
	tests := []struct {
		name   string
		origin string
		code   int
	}{
		{"same origin", e.URL, 200},
		{"other origin", "http://evil.test", 403},
		{"no origin", "", 403},
	}
	for _, tt := range tests {
		t.Run("api "+tt.name, func(t *testing.T) {
			code, body := b.apiJSON(t, "POST", "/api/v1/dataset/create", tt.origin, map[string]any{"name": "ds" + fmt.Sprint(len(tt.name))})
			if code != tt.code {
				t.Fatalf("POST with cookie, Origin %q: %d %s", tt.origin, code, body)
			}
		})
		t.Run("form "+tt.name, func(t *testing.T) {
			code, _, _ := b.postFrom(t, "/settings/keys", url.Values{"name": {"k"}, "scope": {"read"}}, tt.origin)
			if code != tt.code {
				t.Fatalf("form POST, Origin %q: %d", tt.origin, code)
			}
		})
	}
	// A bearer key needs no Origin (not a browser).
	if code := e.api(t, "POST", "/api/v1/dataset/create", adminKey, map[string]any{"name": "bybearer"}, nil); code != 200 {
		t.Fatalf("bearer: %d", code)
	}
}

// A user sees exactly what the API shows their key.
func TestPermissions(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { testPermissions(t, newEnv(t)) })
	t.Run("postgres", func(t *testing.T) { testPermissions(t, newPostgresEnv(t)) })
}

func testPermissions(t *testing.T, e *env) {
	seed(t, e)
	alice := e.newUser(t, "alice", "full")
	bobKey := e.newUser(t, "bob", "full")
	reader := e.newKey(t, "alice", "read")
	e.push(t, bobKey, "bobs-private", []map[string]any{{"role": "user", "content": "secret"}}, nil)
	e.push(t, bobKey, "bobs-public", []map[string]any{{"role": "user", "content": "open"}}, nil)
	e.api(t, "PUT", "/api/v1/dataset/byuser/bob/bobs-public", bobKey, map[string]any{"is_public": true}, &map[string]any{})
	a := e.browser(t, alice)
	tests := []struct {
		path string
		code int
	}{
		{"/u/bob/bobs-private", 404},
		{"/u/bob/bobs-private/t/0", 404},
		{"/u/bob/bobs-private/guardrails", 404},
		{"/u/bob/bobs-public", 200},
		{"/u/bob/bobs-public/t/0", 200},
		{"/u/bob/bobs-public/settings", 404}, // owner only
		{"/u/admin/demo", 404},
	}
	for _, tt := range tests {
		code, _, _ := a.get(t, tt.path)
		var api int
		switch {
		case strings.HasSuffix(tt.path, "/settings"), strings.HasSuffix(tt.path, "/guardrails"):
			api = tt.code
		default:
			p := strings.TrimPrefix(tt.path, "/u/")
			p = strings.Split(p, "/t/")[0]
			api = e.api(t, "GET", "/api/v1/dataset/byuser/"+p, alice, nil, nil)
		}
		if code != tt.code || api != tt.code {
			t.Errorf("%s: page %d, API %d, want %d", tt.path, code, api, tt.code)
		}
	}
	// The home page lists what the API lists for the same key.
	var list []struct{ Name string }
	e.api(t, "GET", "/api/v1/dataset/list", alice, nil, &list)
	_, body, _ := a.get(t, "/")
	rows := regexp.MustCompile(`data-nav-item data-href="([^"]+)"`).FindAllStringSubmatch(body, -1)
	if len(rows) != len(list) {
		t.Fatalf("home lists %d datasets, API %d", len(rows), len(list))
	}
	// An ingest key reads nothing, as in the API.
	ing := e.browser(t, e.newKey(t, "bob", "ingest"))
	if code, body, _ := ing.get(t, "/"); code != 200 || !strings.Contains(body, "cannot read datasets") {
		t.Errorf("ingest key home: %d", code)
	}
	for _, p := range []string{"/u/bob/bobs-private", "/u/bob/bobs-public", "/u/bob/bobs-private/t/0", "/u/bob/bobs-private/findings"} {
		if code, _, _ := ing.get(t, p); code != 403 && code != 404 {
			t.Errorf("ingest key %s: %d", p, code)
		}
	}
	// A read key reads but cannot comment or triage.
	r := e.browser(t, reader)
	if code, body, _ := r.get(t, "/u/bob/bobs-public/t/0"); code != 200 || strings.Contains(body, "comment-form") {
		t.Errorf("read key trace page: %d, comment form shown: %v", code, strings.Contains(body, "comment-form"))
	}
}
