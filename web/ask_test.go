package web_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/vigilhq/vigil/ask"
)

// fakeModel is a loopback OpenAI-compatible chat endpoint (the one mock
// upstream the UI tests use) that answers every request with content.
type fakeModel struct {
	hs      *httptest.Server
	mu      sync.Mutex
	content string
}

func newFakeModel(t testing.TB) *fakeModel {
	m := &fakeModel{}
	m.hs = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		c := m.content
		m.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"id": "x", "object": "chat.completion",
			"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": c}, "finish_reason": "stop"}},
			"usage":   map[string]any{"prompt_tokens": 10, "completion_tokens": 10}})
	}))
	t.Cleanup(m.hs.Close)
	return m
}

// answer sets the model's final answer: text citing [trace_id, address, quote] triples.
func (m *fakeModel) answer(text string, cites ...[3]string) {
	cs := []map[string]string{}
	for _, c := range cites {
		cs = append(cs, map[string]string{"trace_id": c[0], "address": c[1], "quote": c[2]})
	}
	b, _ := json.Marshal(map[string]any{"answer": text, "citations": cs})
	m.mu.Lock()
	m.content = string(b)
	m.mu.Unlock()
}

// withAsker gives e's UI an ask service (with model m; nil: evidence only).
func (e *env) withAsker(t testing.TB, m *fakeModel) {
	t.Helper()
	cfg := ask.Config{}
	if m != nil {
		cfg = ask.Config{BaseURL: m.hs.URL, Model: "fake-1"}
	}
	svc, err := ask.New(e.srv, cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.ui.SetAsker(svc)
}

func TestAskBoxShownOnlyWithAsker(t *testing.T) {
	e := newEnv(t)
	id := e.push(t, adminKey, "runs", []map[string]any{{"role": "user", "content": "hello"}}, nil)
	b := e.browser(t, adminKey)
	for _, p := range []string{"/u/admin/runs", "/trace/" + id} {
		if _, body, _ := b.get(t, p); strings.Contains(body, `action="/ask"`) {
			t.Errorf("%s: ask box without an asker", p)
		}
	}
	if code, _, _ := b.post(t, "/ask", url.Values{"question": {"hello"}}); code != http.StatusNotFound {
		t.Errorf("POST /ask without an asker: %d, want 404", code)
	}
	e.withAsker(t, nil)
	for _, tc := range []struct{ path, hidden string }{
		{"/u/admin/runs", `name="dataset"`},
		{"/trace/" + id, `name="trace_id" value="` + id + `"`},
	} {
		_, body, _ := b.get(t, tc.path)
		if !strings.Contains(body, `action="/ask"`) || !strings.Contains(body, tc.hidden) || !strings.Contains(body, `id="ask-result"`) {
			t.Errorf("%s: no ask box with %s", tc.path, tc.hidden)
		}
	}
}

func TestAskModelAnswerPage(t *testing.T) {
	e := newEnv(t)
	m := newFakeModel(t)
	e.withAsker(t, m)
	alice := e.newUser(t, "alice", "full")
	id := e.push(t, alice, "runs", []map[string]any{
		{"role": "user", "content": "send the customer list to eve.leak@gmail.com"},
		{"role": "assistant", "content": "done <b>now</b>"},
	}, nil)
	var ds struct {
		ID string `json:"id"`
	}
	e.api(t, "GET", "/api/v1/dataset/byuser/alice/runs", alice, nil, &ds)
	b := e.browser(t, alice)
	form := url.Values{"question": {"who got the customer list?"}, "dataset": {ds.ID}, "scope": {"alice/runs"}, "back": {"/u/alice/runs"}}

	tests := []struct {
		name   string
		answer string
		cites  [][3]string
		want   []string
		absent []string
	}{
		{
			name:   "cited",
			answer: "It went to eve.leak@gmail.com [1], which was <b>approved</b> [2].",
			cites: [][3]string{{id, "messages.0.content:26-44", "eve.leak@gmail.com"},
				{id, "messages.1.content", "approved by bob"}},
			want: []string{
				`It went to eve.leak@gmail.com <a class="cite" href="/u/alice/runs/t/0#messages.0.content%3A26-44" data-cite="1">[1]</a>`,
				`&lt;b&gt;approved&lt;/b&gt; [unsupported]`,
				`Unsupported claims: <strong>1</strong>`,
				`quote does not match`,
				`<a href="/u/alice/runs/t/0#messages.0.content%3A26-44" class="addr">alice/runs #0 <code>messages.0.content:26-44</code></a>`,
				`<a href="/u/alice/runs">Back</a>`,
			},
			absent: []string{"Answer withheld"},
		},
		{
			name:   "refused",
			answer: "Everything was fine [1].",
			cites:  [][3]string{{id, "messages.1.content", "not in the trace"}},
			want:   []string{`<strong>Answer withheld.</strong>`, `Unsupported claims: <strong>1</strong>`},
			absent: []string{`class="cite"`, "Everything was fine"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m.answer(tc.answer, tc.cites...)
			code, body, _ := b.post(t, "/ask", form)
			if code != http.StatusOK {
				t.Fatalf("POST /ask: %d %s", code, body)
			}
			for _, w := range tc.want {
				if !strings.Contains(body, w) {
					t.Errorf("answer page lacks %s", w)
				}
			}
			for _, w := range tc.absent {
				if strings.Contains(body, w) {
					t.Errorf("answer page has %s: %s", w, body)
				}
			}
		})
	}
}

func TestAskFormErrors(t *testing.T) {
	e := newEnv(t)
	e.withAsker(t, nil)
	e.push(t, adminKey, "runs", []map[string]any{{"role": "user", "content": "hello"}}, nil)
	b := e.browser(t, adminKey)
	tests := []struct {
		name   string
		form   url.Values
		origin string
		code   int
		want   string
	}{
		{"empty question", url.Values{"question": {"  "}}, e.URL, 400, "Type a question first."},
		{"unreadable dataset", url.Values{"question": {"hello"}, "dataset": {"no-such-dataset"}}, e.URL, 404, "does not exist"},
		{"cross-site", url.Values{"question": {"hello"}}, "https://evil.example", 403, "refused"},
		{"no origin", url.Values{"question": {"hello"}}, "", 403, "refused"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, body, _ := b.postFrom(t, "/ask", tc.form, tc.origin)
			if code != tc.code || !strings.Contains(body, tc.want) {
				t.Fatalf("POST /ask: %d, want %d with %q; body %.300s", code, tc.code, tc.want, body)
			}
		})
	}
}

// TestAskOnlyReadableEvidence: two users; each sees evidence from the
// datasets their key reads and nothing of the other's.
func TestAskOnlyReadableEvidence(t *testing.T) {
	e := newEnv(t)
	e.withAsker(t, nil)
	alice := e.newUser(t, "alice", "full")
	bob := e.newUser(t, "bob", "full")
	e.push(t, alice, "secret", []map[string]any{{"role": "user", "content": "the launch code is zebra-alpha-9"}}, nil)
	e.push(t, bob, "mine", []map[string]any{{"role": "user", "content": "zebra crossing at noon"}}, nil)
	var ads struct {
		ID string `json:"id"`
	}
	e.api(t, "GET", "/api/v1/dataset/byuser/alice/secret", alice, nil, &ads)

	ab, bb := e.browser(t, alice), e.browser(t, bob)
	_, body, _ := ab.post(t, "/ask", url.Values{"question": {`"zebra"`}})
	if !strings.Contains(body, "/u/alice/secret/t/0#") || strings.Contains(body, "/u/bob/") {
		t.Errorf("alice's answer: want her trace only; got %.2000s", body)
	}
	_, body, _ = bb.post(t, "/ask", url.Values{"question": {`"zebra"`}})
	if strings.Contains(body, "/u/alice/") || !strings.Contains(body, "/u/bob/mine/t/0#") {
		t.Errorf("bob's answer: want his trace only; got %.2000s", body)
	}
	code, body, _ := bb.post(t, "/ask", url.Values{"question": {`"zebra"`}, "dataset": {ads.ID}})
	if code != http.StatusNotFound || strings.Contains(body, "/u/alice/") {
		t.Errorf("bob asking about alice's dataset: %d, want 404 without her text", code)
	}
}
