package web_test

import (
	"database/sql"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

func TestTraceViewer(t *testing.T) {
	e := newEnv(t)
	long := strings.Repeat("x", 12000) + "TAIL"
	const png = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
	events := []map[string]any{
		{"role": "user", "content": []any{map[string]any{"type": "text", "text": "look at this"}, map[string]any{"type": "image_url", "image_url": map[string]any{"url": png}}}},
		{"role": "assistant", "content": long},
	}
	for i := 0; i < 1200; i++ {
		events = append(events, map[string]any{"role": "user", "content": "event " + strings.Repeat("y", i%7)})
	}
	tid := e.push(t, adminKey, "big", events, map[string]any{"name": "big one"})
	e.api(t, "POST", "/api/v1/trace/"+tid+"/annotate", adminKey, map[string]any{"content": "late", "address": "messages.1100.content:0-5"}, &map[string]any{})
	e.api(t, "POST", "/api/v1/trace/"+tid+"/annotate", adminKey, map[string]any{"content": "box", "address": "messages.0.content.1.image_url.url:bbox-0.1,0.1,0.5,0.5"}, &map[string]any{})
	e.api(t, "POST", "/api/v1/trace/"+tid+"/annotate", adminKey, map[string]any{"content": "in the tail", "address": "messages.1.content:12000-12004"}, &map[string]any{})
	b := e.browser(t, adminKey)
	_, body, _ := b.get(t, "/u/admin/big/t/0")
	if n := strings.Count(body, `<li class="event`); n != 500 {
		t.Errorf("page 0 shows %d events, want 500", n)
	}
	for _, w := range []string{
		`aria-label="Event pages"`, `?page=2`, // the pager
		`href="/u/admin/big/t/0?page=2#messages.1100.content%3A0-5"`, // the navigator covers every page
		"… 2004 more characters",                                     // long strings fold
		`<mark class="hl src-user" data-address="messages.1.content:12000-12004" data-source="user" title="admin: in the tail">TAIL</mark>`,
		`<img src="/api/v1/trace/image/`, `<rect class="src-user" x="0.1000" y="0.1000" width="0.4000" height="0.4000"`,
	} {
		if !strings.Contains(body, w) {
			t.Errorf("page 0: no %q", w)
		}
	}
	img := regexp.MustCompile(`<img src="(/api/v1/trace/image/[^"]+)"`).FindStringSubmatch(body)
	if img == nil {
		t.Fatal("no stored image")
	}
	if code, _, h := b.get(t, img[1]); code != 200 || !strings.HasPrefix(h.Get("Content-Type"), "image/png") {
		t.Errorf("image by session cookie: %d %v", code, h)
	}
	_, body, _ = b.get(t, "/u/admin/big/t/0?page=2")
	if !strings.Contains(body, `data-address="messages.1100.content:0-5"`) || !strings.Contains(body, `id="messages.1199"`) || strings.Contains(body, `id="messages.999"`) {
		t.Error("page 2 does not hold events 1000–1201 with the late highlight")
	}

	// Tool outputs sit under their call, with a link back.
	tid2 := e.push(t, adminKey, "tools", []map[string]any{
		{"role": "assistant", "content": "", "tool_calls": []any{map[string]any{"id": "c7", "type": "function", "function": map[string]any{"name": "search", "arguments": map[string]any{"q": "weather", "n": 3}}}}},
		{"role": "tool", "tool_call_id": "c7", "content": `{"temp": 21, "sky": "clear"}`},
	}, nil)
	_, body, _ = b.get(t, "/trace/"+tid2)
	call := strings.Index(body, `id="messages.0.tool_calls.0"`)
	out := strings.Index(body, `id="messages.1"`)
	if call < 0 || out < call || !strings.Contains(body[call:], `<ol class="outputs">`) {
		t.Error("the tool output is not under its call")
	}
	for _, w := range []string{`href="#messages.0.tool_calls.0"`, `<th class="mono">q</th>`, `<th class="mono">n</th>`, "{\n  &#34;temp&#34;: 21,"} {
		if !strings.Contains(body, w) {
			t.Errorf("tools trace: no %q", w)
		}
	}
}

func TestComments(t *testing.T) {
	e := newEnv(t)
	tid, _ := seed(t, e)
	b := e.browser(t, adminKey)
	code, _, h := b.post(t, "/trace/"+tid+"/comments", url.Values{"content": {"why <b>this</b>?"}, "address": {"messages.0.content:0-6"}, "back": {"/trace/" + tid + "?page=0"}})
	if code != 303 || h.Get("Location") != "/trace/"+tid+"?page=0#messages.0.content%3A0-6" {
		t.Fatalf("add comment: %d %v", code, h)
	}
	_, body, _ := b.get(t, "/trace/"+tid)
	if !strings.Contains(body, "why &lt;b&gt;this&lt;/b&gt;?") || !strings.Contains(body, `data-address="messages.0.content:0-6"`) {
		t.Fatal("comment not shown")
	}
	aid := regexp.MustCompile(`action="/trace/[^/]+/comments/([^/"]+)/delete"`).FindAllStringSubmatch(body, -1)
	if len(aid) != 2 {
		t.Fatalf("%d deletable comments, want 2", len(aid))
	}
	for _, m := range aid {
		if code, _, _ := b.post(t, "/trace/"+tid+"/comments/"+m[1]+"/delete", url.Values{"back": {"/trace/" + tid}}); code != 303 {
			t.Fatalf("delete: %d", code)
		}
	}
	_, body, _ = b.get(t, "/trace/"+tid)
	if strings.Contains(body, "why &lt;b&gt;") || !strings.Contains(body, "No comments.") {
		t.Error("comments not deleted")
	}
}

func TestGuardrailEditor(t *testing.T) {
	e := newEnv(t)
	seed(t, e)
	b := e.browser(t, adminKey)
	bad := url.Values{"name": {"broken"}, "action": {"log"}, "severity": {"warn"}, "enabled": {"on"},
		"policy": {"raise \"x\" if:\n    (call: ToolCall)\n    call is tool:send_email and and\n"}}
	code, body, _ := b.post(t, "/u/admin/demo/guardrails", bad)
	if code != 400 || !strings.Contains(body, "nothing was saved") || !regexp.MustCompile(`line 3, column \d+: `).MatchString(body) || !strings.Contains(body, `<span class="ln bad">`) {
		t.Fatalf("bad rule: %d\n%s", code, body)
	}
	good := url.Values{"name": {"new rule"}, "action": {"block"}, "severity": {"critical"}, "enabled": {"on"},
		"policy": {"raise \"x\" if:\n    (call: ToolCall)\n    call is tool:send_email\n"}, "comment": {"first"}}
	code, _, h := b.post(t, "/u/admin/demo/guardrails", good)
	if code != 303 {
		t.Fatalf("good rule: %d", code)
	}
	gid := regexp.MustCompile(`g=([^&]+)`).FindStringSubmatch(h.Get("Location"))[1]
	good.Set("id", gid)
	good.Set("policy", "raise \"y\" if:\n    (call: ToolCall)\n    call is tool:send_email\n")
	if code, _, _ := b.post(t, "/u/admin/demo/guardrails", good); code != 303 {
		t.Fatalf("update: %d", code)
	}
	_, body, _ = b.get(t, "/u/admin/demo/guardrails?g="+gid+"&a=1&b=2")
	for _, w := range []string{`<span class="ln del"><span class="mk">-</span>raise &#34;x&#34; if:</span>`, `<span class="ln add"><span class="mk">+</span>raise &#34;y&#34; if:</span>`, "created", "updated"} {
		if !strings.Contains(body, w) {
			t.Errorf("versions: no %q", w)
		}
	}
	if code, _, _ := b.post(t, "/u/admin/demo/guardrails/"+gid+"/restore/1", nil); code != 303 {
		t.Fatalf("restore: %d", code)
	}
	_, body, _ = b.get(t, "/u/admin/demo/guardrails?g="+gid)
	if !strings.Contains(body, "restored") || !strings.Contains(body, "version 3") {
		t.Error("restore not recorded")
	}
}

func TestFindingsTriage(t *testing.T) {
	e := newEnv(t)
	seed(t, e)
	b := e.browser(t, adminKey)
	_, body, _ := b.get(t, "/u/admin/demo/findings")
	ids := regexp.MustCompile(`data-finding-id="([^"]+)"`).FindAllStringSubmatch(body, -1)
	if len(ids) == 0 {
		t.Fatal("no finding in the queue")
	}
	code, _, h := b.post(t, "/u/admin/demo/findings", url.Values{"id": {ids[0][1]}, "action": {"accept"}, "note": {"expected"}})
	if code != 303 || !strings.Contains(h.Get("Location"), "done=") {
		t.Fatalf("triage: %d %v", code, h)
	}
	var f struct {
		Status  string
		History []struct{ By, To, Note string }
	}
	e.api(t, "GET", "/api/v1/findings/"+ids[0][1], adminKey, nil, &f)
	if f.Status != "accepted" || len(f.History) == 0 || f.History[len(f.History)-1].Note != "expected" {
		t.Fatalf("finding after triage: %+v", f)
	}
	_, body, _ = b.get(t, "/u/admin/demo/findings")
	if strings.Contains(body, ids[0][1]) {
		t.Error("an accepted finding is still in the open queue")
	}
	// A read key sees the queue but cannot triage.
	r := e.browser(t, e.newKey(t, "admin", "read"))
	if _, body, _ := r.get(t, "/u/admin/demo/findings?status=all"); strings.Contains(body, "Accept selected") {
		t.Error("a read key is offered triage")
	}
}

func TestProofTampered(t *testing.T) {
	e := newEnv(t)
	tid, _ := seed(t, e)
	db, err := sql.Open("sqlite", e.dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`UPDATE messages SET data = replace(data, 'numbers', 'NUMBERS') WHERE trace_id = ? AND idx = 1`, tid); err != nil {
		t.Fatal(err)
	}
	b := e.browser(t, adminKey)
	_, body, _ := b.get(t, "/runs/"+tid+"?verify=1")
	if !strings.Contains(body, `id="verify-result" class="error"`) || !strings.Contains(body, `class="bad" id="broken"`) || !strings.Contains(body, `"valid": false, "brokenAt": 1`) {
		t.Fatalf("tampered run:\n%s", body)
	}
	if _, body, _ := b.get(t, "/trace/"+tid); !strings.Contains(body, "proof-tampered") {
		t.Error("the trace header does not show the tampered badge")
	}
}
