package web_test

import (
	"bytes"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

func TestPlayground(t *testing.T) {
	e := newEnv(t)
	b := e.browser(t, adminKey)
	trace := `[{"role":"user","content":"mail bob"},{"role":"assistant","content":null,"tool_calls":[{"id":"1","type":"function","function":{"name":"send_email","arguments":{"to":"bob@evil.test"}}}]}]`
	policy := "raise \"external\" if:\n    (call: ToolCall)\n    call is tool:send_email\n    \"evil\" in call.function.arguments.to\n"
	code, body, _ := b.post(t, "/playground", url.Values{"policy": {policy}, "trace": {trace}})
	if code != 200 || !strings.Contains(body, "<strong>external</strong>") || !strings.Contains(body, `data-source="violation"`) {
		t.Fatalf("playground: %d\n%s", code, body)
	}
	if _, body, _ = b.post(t, "/playground", url.Values{"policy": {"raise if"}, "trace": {trace}}); !strings.Contains(body, `class="error"`) {
		t.Error("a bad rule shows no error")
	}
	if _, body, _ = b.post(t, "/playground", url.Values{"policy": {policy}, "trace": {"{not json"}}); !strings.Contains(body, "must be a JSON array") {
		t.Error("a bad trace shows no error")
	}
	// Signed out, the default server asks for a key to run checks.
	anon := e.browser(t, "")
	if _, body, _ = anon.post(t, "/playground", url.Values{"policy": {policy}, "trace": {trace}}); !strings.Contains(body, "sign in") {
		t.Error("anonymous playground run does not ask to sign in")
	}
}

func TestTraceActions(t *testing.T) {
	e := newEnv(t)
	tid, _ := seed(t, e)
	b := e.browser(t, adminKey)
	if code, _, _ := b.post(t, "/trace/"+tid+"/share", url.Values{"shared": {"on"}}); code != 303 {
		t.Fatalf("share: %d", code)
	}
	var sh struct{ Shared bool }
	e.api(t, "GET", "/api/v1/trace/"+tid+"/shared", adminKey, nil, &sh)
	if !sh.Shared {
		t.Fatal("not shared")
	}
	if _, body, _ := b.get(t, "/trace/"+tid); !strings.Contains(body, "Stop sharing") {
		t.Error("the header does not offer to stop sharing")
	}
	if code, _, h := b.post(t, "/trace/"+tid+"/delete", nil); code != 303 || h.Get("Location") != "/u/admin/demo" {
		t.Fatalf("delete: %d %v", code, h)
	}
	if code := e.api(t, "GET", "/api/v1/trace/"+tid, adminKey, nil, nil); code != 404 {
		t.Fatalf("after delete: %d", code)
	}
	// Saved queries.
	if code, _, _ := b.post(t, "/u/admin/demo/queries", url.Values{"q": {"tool:send_email"}, "name": {"emails"}}); code != 303 {
		t.Fatalf("save query: %d", code)
	}
	_, body, _ := b.get(t, "/u/admin/demo")
	if !strings.Contains(body, `>emails</a>`) {
		t.Fatal("saved query not among the chips")
	}
	del := regexp.MustCompile(`action="(/u/admin/demo/queries/[^"]+/delete)"`).FindStringSubmatch(body)
	if del == nil {
		t.Fatal("no delete form for the saved query")
	}
	if code, _, _ := b.post(t, del[1], nil); code != 303 {
		t.Fatalf("delete query: %d", code)
	}
	if _, body, _ := b.get(t, "/u/admin/demo"); strings.Contains(body, `>emails</a>`) {
		t.Error("saved query still listed")
	}
}

func TestSettingsForms(t *testing.T) {
	e := newEnv(t)
	seed(t, e)
	b := e.browser(t, adminKey)
	// Users and keys.
	if code, _, _ := b.post(t, "/settings/users", url.Values{"username": {"carol"}, "role": {"member"}}); code != 303 {
		t.Fatalf("create user: %d", code)
	}
	code, body, _ := b.post(t, "/settings/keys", url.Values{"name": {"ci"}, "scope": {"read"}, "user": {"carol"}})
	key := regexp.MustCompile(`id="new-key">(vgl-[0-9a-f]{64})<`).FindStringSubmatch(body)
	if code != 200 || key == nil {
		t.Fatalf("create key: %d\n%s", code, body)
	}
	carol := e.browser(t, key[1])
	if code, body, _ := carol.get(t, "/settings"); code != 200 || !strings.Contains(body, "cannot manage keys") {
		t.Errorf("carol's read key settings: %d", code)
	}
	_, body, _ = b.get(t, "/settings")
	uid := regexp.MustCompile(`action="/settings/users/([^"]+)" class="inline"><input type="hidden" name="disabled"`).FindStringSubmatch(body)
	if uid == nil {
		t.Fatal("no disable form")
	}
	if code, _, _ := b.post(t, "/settings/users/"+uid[1], url.Values{"disabled": {"on"}}); code != 303 {
		t.Fatalf("disable: %d", code)
	}
	if code, _, h := carol.get(t, "/"); code != 303 || !strings.HasPrefix(h.Get("Location"), "/login") {
		t.Errorf("a disabled user's session still works: %d", code)
	}
	// Browser sessions: this one is marked, another one can be ended.
	other := e.browser(t, adminKey)
	_, body, _ = b.get(t, "/settings")
	if !strings.Contains(body, "this browser") {
		t.Error("the current session is not marked")
	}
	ends := regexp.MustCompile(`action="(/settings/sessions/[0-9a-f]+/end)"`).FindAllStringSubmatch(body, -1)
	if len(ends) == 0 {
		t.Fatal("no other session to end")
	}
	for _, m := range ends {
		if code, _, _ := b.post(t, m[1], nil); code != 303 {
			t.Fatalf("end session: %d", code)
		}
	}
	if code, _, _ := other.get(t, "/"); code != 303 {
		t.Errorf("an ended session still works: %d", code)
	}
	if code, _, _ := b.get(t, "/"); code != 200 {
		t.Errorf("the current session ended too: %d", code)
	}
	// Revoke a key from the list.
	ids := regexp.MustCompile(`action="/settings/keys/([^"]+)/revoke"`).FindAllStringSubmatch(body, -1)
	if len(ids) == 0 {
		t.Fatal("no revoke form")
	}

	// Dataset settings: visibility, metadata, typed delete.
	if code, _, _ := b.post(t, "/u/admin/demo/settings", url.Values{"action": {"visibility"}, "is_public": {"on"}}); code != 303 {
		t.Fatalf("visibility: %d", code)
	}
	var ds struct {
		IsPublic bool `json:"is_public"`
	}
	e.api(t, "GET", "/api/v1/dataset/byuser/admin/demo", adminKey, nil, &ds)
	if !ds.IsPublic {
		t.Error("not public")
	}
	if code, body, _ := b.post(t, "/u/admin/demo/settings", url.Values{"action": {"metadata"}, "metadata": {"[1]"}}); code != 400 || !strings.Contains(body, "JSON object") {
		t.Errorf("bad metadata: %d", code)
	}
	if code, _, _ := b.post(t, "/u/admin/demo/settings", url.Values{"action": {"metadata"}, "metadata": {`{"team": "<agents>"}`}}); code != 303 {
		t.Fatalf("metadata: %d", code)
	}
	if _, body, _ := b.get(t, "/u/admin/demo/settings"); !strings.Contains(body, "&#34;team&#34;: &#34;&lt;agents&gt;&#34;") {
		t.Error("metadata not shown")
	}
	if code, _, _ := b.post(t, "/u/admin/demo/settings", url.Values{"action": {"delete"}, "confirm": {"dem"}}); code != 400 {
		t.Errorf("delete with a wrong name: %d", code)
	}
	if code, _, _ := b.post(t, "/u/admin/demo/settings", url.Values{"action": {"delete"}, "confirm": {"demo"}}); code != 303 {
		t.Errorf("delete: %d", code)
	}
	if code, _, _ := b.get(t, "/u/admin/demo"); code != 404 {
		t.Errorf("deleted dataset page: %d", code)
	}
}

// The new-dataset form, without JavaScript: empty, and with a JSONL file.
func TestNewDatasetForm(t *testing.T) {
	e := newEnv(t)
	b := e.browser(t, adminKey)
	if code, _, h := b.post(t, "/datasets/new", url.Values{"name": {"empty-one"}}); code != 303 || h.Get("Location") != "/u/admin/empty-one" {
		t.Fatalf("create: %d %v", code, h)
	}
	if code, body, _ := b.post(t, "/datasets/new", url.Values{"name": {"bad name!"}}); code != 400 || !strings.Contains(body, `class="error"`) {
		t.Errorf("bad name: %d", code)
	}
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	mw.WriteField("name", "uploaded")
	fw, _ := mw.CreateFormFile("file", "d.jsonl")
	io.WriteString(fw, `{"messages":[{"role":"user","content":"one"}]}`+"\n"+`{"messages":[{"role":"user","content":"two"}]}`+"\n")
	mw.Close()
	req, _ := http.NewRequest("POST", e.URL+"/datasets/new", &buf)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Origin", e.URL)
	resp, err := b.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 303 {
		t.Fatalf("upload: %d", resp.StatusCode)
	}
	if _, body, _ := b.get(t, "/u/admin/uploaded"); !strings.Contains(body, "2 traces.") {
		t.Error("uploaded dataset does not hold 2 traces")
	}
}
