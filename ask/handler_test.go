package ask_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/vigilhq/vigil/ask"
	"github.com/vigilhq/vigil/server"
	"github.com/vigilhq/vigil/store"
)

// post sends body to POST /api/v1/ask with key ("" = none).
func (e *env) post(t *testing.T, key, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, e.hs.URL+"/api/v1/ask", strings.NewReader(body))
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("body %q: %v", b, err)
	}
	return resp.StatusCode, out
}

// TestHandlerBadInput: every bad request is a 4xx with the API's error
// shape naming what is wrong; the server keeps serving.
func TestHandlerBadInput(t *testing.T) {
	e := newEnv(t, ask.Config{})
	e.seed(t, e.admin, "agents")
	q := func(s string) string { b, _ := json.Marshal(map[string]string{"question": s}); return string(b) }
	big := strings.Repeat("which runs sent e-mail? ", 100*1024/24)
	tests := []struct {
		name, key, body string
		status          int
		code, detail    string
	}{
		{"empty question", adminKey, `{"question": ""}`, 400, "invalid_request", "must not be empty"},
		{"blank question", adminKey, `{"question": " \n\t "}`, 400, "invalid_request", "must not be empty"},
		{"no question", adminKey, `{}`, 400, "invalid_request", "must not be empty"},
		{"100 KB question", adminKey, q(big), 413, "too_large", "at most 4096"},
		{"5 KB question", adminKey, q(strings.Repeat("x", 5000)), 400, "invalid_request", "5000 bytes; at most 4096"},
		{"not JSON", adminKey, `question=hi`, 400, "invalid_json", "invalid JSON"},
		{"unknown field", adminKey, `{"question": "hi", "qestion": "x"}`, 400, "invalid_json", "qestion"},
		{"wrong type", adminKey, `{"question": 5}`, 400, "invalid_json", "question"},
		{"bad since", adminKey, `{"question": "hi", "since": "last tuesday"}`, 400, "invalid_request", "since"},
		{"unterminated quote", adminKey, `{"question": "who said \"hello"}`, 400, "invalid_request", "unterminated quote at position 9"},
		{"bad filter in question", adminKey, `{"question": "runs after:-3x"}`, 400, "invalid_request", "after"},
		{"unknown dataset", adminKey, `{"question": "hi", "dataset": "nope"}`, 404, "not_found", "nope"},
		{"unknown trace", adminKey, `{"question": "hi", "trace_id": "01900000-0000-7000-8000-000000000000"}`, 404, "not_found", "Trace not found"},
		{"model without one", adminKey, `{"question": "hi", "model": "gpt-4o"}`, 400, "invalid_request", "ask.base_url"},
		{"bad key", "vgl-nope-nope-nope-nope-nope", `{"question": "hi"}`, 401, "unauthenticated", "Invalid API key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := e.post(t, tt.key, tt.body)
			detail, _ := body["detail"].(string)
			if status != tt.status || body["code"] != tt.code || !strings.Contains(detail, tt.detail) {
				t.Errorf("%d %v, want %d %s with %q", status, body, tt.status, tt.code, tt.detail)
			}
		})
	}
	// Still serving.
	if status, body := e.post(t, adminKey, q("refund")); status != 200 || body["mode"] != "evidence" {
		t.Fatalf("after bad input: %d %v", status, body)
	}
}

// TestHandlerVisibility: a caller only ever sees evidence from what its
// key may read: anonymous callers and other members see nothing of a
// private dataset; an ingest-only key may not ask; the owner sees it.
func TestHandlerVisibility(t *testing.T) {
	e := newEnv(t, ask.Config{})
	e.seed(t, e.admin, "agents")
	_, memberKey := e.user(t, "member", store.ScopeFull)
	_, ingestKey := e.user(t, "agent", store.ScopeIngest)
	body := `{"question": "which runs sent e-mail outside example.com?"}`
	for _, tc := range []struct {
		name, key string
		status    int
		evidence  bool
	}{
		{"owner", adminKey, 200, true},
		{"other member", memberKey, 200, false},
		{"anonymous", "", 200, false},
		{"ingest key", ingestKey, 403, false},
	} {
		status, out := e.post(t, tc.key, body)
		ev, _ := out["evidence"].([]any)
		if status != tc.status || (len(ev) > 0) != tc.evidence {
			t.Errorf("%s: %d with %d evidence items, want %d, evidence %v", tc.name, status, len(ev), tc.status, tc.evidence)
		}
	}
	// Findings are evidence only for their readers too.
	status, out := e.post(t, memberKey, `{"question": "which findings were accepted by alice?"}`)
	if ev, _ := out["evidence"].([]any); status != 200 || len(ev) != 0 {
		t.Errorf("member sees findings: %d %v", status, out)
	}
	// A dataset made public is evidence for every authenticated caller.
	pub := true
	d, _ := e.st.GetDatasetByName(context.Background(), e.admin.User.ID, "agents")
	e.st.UpdateDataset(context.Background(), d.ID, store.DatasetUpdate{IsPublic: &pub})
	if status, out := e.post(t, memberKey, body); status != 200 || len(out["evidence"].([]any)) == 0 {
		t.Errorf("public dataset: %d %v", status, out)
	}
}

// TestEvidenceDeterministic: the same question gives the same evidence.
func TestEvidenceDeterministic(t *testing.T) {
	e := newEnv(t, ask.Config{})
	e.seed(t, e.admin, "agents")
	var first []server.AskEvidence
	for i := range 5 {
		ans, err := e.svc.Ask(context.Background(), e.admin, server.AskRequest{Question: "which runs violated a rule, and who approved them?"})
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = ans.Evidence
			continue
		}
		a, _ := json.Marshal(first)
		b, _ := json.Marshal(ans.Evidence)
		if string(a) != string(b) {
			t.Fatalf("run %d differs:\n%s\n%s", i, a, b)
		}
	}
}

// TestEvidenceScope: trace_id, dataset and since narrow the evidence.
func TestEvidenceScope(t *testing.T) {
	e := newEnv(t, ask.Config{})
	e.seed(t, e.admin, "agents")
	ctx := context.Background()
	id := e.ids["mail-04"]
	ans, err := e.svc.Ask(ctx, e.admin, server.AskRequest{Question: "what was sent?", TraceID: id})
	if err != nil {
		t.Fatal(err)
	}
	if len(ans.Evidence) == 0 {
		t.Fatal("no evidence in the trace")
	}
	for _, ev := range ans.Evidence {
		if ev.TraceID != id {
			t.Fatalf("evidence outside the trace: %+v", ev)
		}
	}
	ans, err = e.svc.Ask(ctx, e.admin, server.AskRequest{Question: "which runs sent e-mail?", Since: "2d"})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range ans.Evidence {
		if n := name(e, ev.TraceID); n != "mail-01" && n != "mail-02" {
			t.Errorf("since 2d: evidence of %s", n)
		}
	}
	if !strings.HasPrefix(ans.Query, "after:-2d ") {
		t.Errorf("query %q", ans.Query)
	}
}

// TestHandlerAnonymousPublic: with anonymous reads of public datasets on,
// an anonymous caller gets evidence from public datasets only.
func TestHandlerAnonymousPublic(t *testing.T) {
	e := newEnv(t, ask.Config{}, func(c *server.Config) { c.AnonymousReadPublic = true })
	e.seed(t, e.admin, "agents")
	body := `{"question": "which runs sent e-mail outside example.com?"}`
	if status, out := e.post(t, "", body); status != 200 || len(out["evidence"].([]any)) != 0 {
		t.Fatalf("private dataset: %d %v", status, out)
	}
	pub := true
	d, _ := e.st.GetDatasetByName(context.Background(), e.admin.User.ID, "agents")
	e.st.UpdateDataset(context.Background(), d.ID, store.DatasetUpdate{IsPublic: &pub})
	status, out := e.post(t, "", body)
	if ev, _ := out["evidence"].([]any); status != 200 || len(ev) == 0 {
		t.Fatalf("public dataset: %d %v", status, out)
	}
	if out["exchange_trace_id"] != nil {
		t.Errorf("an anonymous ask is not recorded: %v", out["exchange_trace_id"])
	}
}
