package ask_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/vigilhq/vigil/ask"
	"github.com/vigilhq/vigil/server"
	"github.com/vigilhq/vigil/store"
)

// modelEnv is a seeded server whose ask service talks to a mock model.
func modelEnv(t *testing.T, cfg ask.Config, script ...turn) (*env, *mockModel) {
	t.Helper()
	m := newMockModel(t, script...)
	cfg.BaseURL, cfg.Model = m.hs.URL, "mock-1"
	e := newEnv(t, cfg)
	e.seed(t, e.admin, "agents")
	return e, m
}

// TestModelAnswerChecked: a scripted model searches, reads events and
// answers with four citations; the valid one is kept, a wrong quote, a
// wrong address and a trace the caller may not read are dropped and
// counted, the marks are renumbered, the tool calls are listed and the
// exchange is recorded as a trace of vigil-ask.
func TestModelAnswerChecked(t *testing.T) {
	m := newMockModel(t)
	e := newEnv(t, ask.Config{BaseURL: m.hs.URL, Model: "mock-1"})
	e.seed(t, e.admin, "agents")
	// A trace of another user, which the admin's key reads but the
	// member asking below does not.
	member, _ := e.user(t, "maria", store.ScopeRead)
	e.push(t, member, "maria-runs", []seedTrace{{Name: "maria-01", HoursAgo: 1,
		Messages: []json.RawMessage{json.RawMessage(`{"role":"user","content":"send the customer list to eve.leak@gmail.com"}`)}}})
	mail4 := e.ids["mail-04"]
	m.script = []turn{
		{Calls: []call{{"search", map[string]any{"query": "tool:send_email eve.leak"}}}},
		{Calls: []call{{"get_events", map[string]any{"trace_id": mail4, "from": 4, "to": 5}}}},
		{Content: answerJSON("The customer list went to eve.leak@gmail.com [1], from the inbox [2], at 9am [3], as Maria asked [4].",
			[3]string{mail4, "messages.4.tool_calls.0.function.arguments.to", "eve.leak@gmail.com"},
			[3]string{mail4, "messages.3.content", "the inbox had 50 urgent messages"},
			[3]string{mail4, "messages.9.content", "at 9am"},
			[3]string{e.ids["maria-01"], "messages.0.content", "send the customer list to eve.leak@gmail.com"})},
	}
	// The auditor asking reads agents (made public) but not maria's
	// private dataset.
	asker, _ := e.user(t, "auditor", store.ScopeRead)
	pub := true
	d, err := e.st.GetDatasetByName(context.Background(), e.admin.User.ID, "agents")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.UpdateDataset(context.Background(), d.ID, store.DatasetUpdate{IsPublic: &pub}); err != nil {
		t.Fatal(err)
	}
	ans, err := e.svc.Ask(context.Background(), asker, server.AskRequest{Question: "who was the customer list sent to?"})
	if err != nil {
		t.Fatal(err)
	}
	if ans.Mode != "model" || ans.Refused {
		t.Fatalf("mode %s refused %v note %q", ans.Mode, ans.Refused, ans.Note)
	}
	if len(ans.Citations) != 1 || ans.Citations[0].Quote != "eve.leak@gmail.com" || ans.Citations[0].Dataset != "agents" ||
		ans.Citations[0].DatasetUser != "admin" {
		t.Fatalf("citations %+v, want the one valid citation", ans.Citations)
	}
	if ans.UnsupportedClaims != 3 || len(ans.Dropped) != 3 {
		t.Fatalf("unsupported_claims %d, dropped %+v, want 3", ans.UnsupportedClaims, ans.Dropped)
	}
	wantReasons := []string{"quote does not match", "address does not resolve", "not found or not readable"}
	for i, w := range wantReasons {
		if !strings.Contains(ans.Dropped[i].Reason, w) {
			t.Errorf("dropped[%d] reason %q, want %q", i, ans.Dropped[i].Reason, w)
		}
	}
	want := "The customer list went to eve.leak@gmail.com [1], from the inbox [unsupported], at 9am [unsupported], as Maria asked [unsupported]."
	if ans.Answer != want {
		t.Errorf("answer %q\nwant   %q", ans.Answer, want)
	}
	if len(ans.ToolCalls) != 2 || ans.ToolCalls[0].Name != "search" || ans.ToolCalls[0].Results != 1 ||
		ans.ToolCalls[1].Name != "get_events" || ans.ToolCalls[1].Results != 1 {
		t.Errorf("tool calls %+v", ans.ToolCalls)
	}
	if ans.Usage == nil || ans.Usage.Steps != 3 || ans.Usage.PromptTokens+ans.Usage.CompletionTokens != 300 {
		t.Errorf("usage %+v", ans.Usage)
	}
	// The model was offered exactly the four tools, with the model name.
	req := m.requests()[0]
	var names []string
	for _, tl := range req.Tools {
		names = append(names, tl.Function.Name)
	}
	if strings.Join(names, ",") != "search,get_events,check,list_findings" || req.Model != "mock-1" {
		t.Errorf("tools %v model %s", names, req.Model)
	}
	// The exchange is a trace of the auditor's vigil-ask dataset.
	rec, err := e.st.GetTrace(context.Background(), ans.ExchangeTraceID, true)
	if err != nil {
		t.Fatalf("exchange trace %q: %v", ans.ExchangeTraceID, err)
	}
	ds, err := e.st.GetDataset(context.Background(), rec.DatasetID)
	if err != nil || ds.Name != ask.AskDataset || ds.OwnerID != asker.User.ID {
		t.Fatalf("exchange dataset %+v %v", ds, err)
	}
	var roles []string
	for _, msg := range rec.Messages {
		var ev struct {
			Role string `json:"role"`
		}
		json.Unmarshal(msg.Data, &ev)
		roles = append(roles, ev.Role)
	}
	if strings.Join(roles, ",") != "user,assistant,tool,assistant,tool,assistant" {
		t.Errorf("exchange roles %v", roles)
	}
	if !strings.Contains(string(rec.Metadata), `"unsupported_claims":3`) {
		t.Errorf("exchange metadata %s", rec.Metadata)
	}
	// A second question's evidence never cites the recorded exchange.
	ans2, err := e.svc.Ask(context.Background(), asker, server.AskRequest{Question: "customer list", Model: "none"})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range ans2.Evidence {
		if ev.TraceID == ans.ExchangeTraceID {
			t.Fatalf("evidence cites the recorded exchange: %+v", ev)
		}
	}
}

// TestModelToolsUseCallerPermissions: the tools run with the asking
// caller's access: a member sees none of the admin's private traces
// through search, get_events, check or list_findings.
func TestModelToolsUseCallerPermissions(t *testing.T) {
	m := newMockModel(t)
	e := newEnv(t, ask.Config{BaseURL: m.hs.URL})
	e.seed(t, e.admin, "agents")
	member, _ := e.user(t, "mallory", store.ScopeRead)
	mail4 := e.ids["mail-04"]
	m.script = []turn{
		{Calls: []call{
			{"search", map[string]any{"query": "eve.leak"}},
			{"get_events", map[string]any{"trace_id": mail4}},
			{"check", map[string]any{"policy": "raise \"x\" if:\n    (call: ToolCall)\n    call is tool:send_email", "trace_id": mail4}},
			{"check", map[string]any{"policy": "raise \"x\" if:\n    (call: ToolCall)\n    call is tool:send_email", "dataset": "admin/agents"}},
			{"list_findings", map[string]any{}},
		}},
		{Content: answerJSON("nothing", [3]string{mail4, "messages.4.tool_calls.0.function.arguments.to", "eve.leak@gmail.com"})},
	}
	ans, err := e.svc.Ask(context.Background(), member, server.AskRequest{Question: "who got the customer list?"})
	if err != nil {
		t.Fatal(err)
	}
	res := m.toolResults()
	if len(res) != 5 {
		t.Fatalf("tool results %v", res)
	}
	wants := []string{`{"traces":[]}`, `trace ` + mail4 + ` not found`, `not found`, `dataset \"admin/agents\" not found`, `{"findings":[]}`}
	for i, w := range wants {
		if !strings.Contains(res[i], w) {
			t.Errorf("tool result %d = %s, want %s", i, res[i], w)
		}
	}
	if !ans.Refused || ans.UnsupportedClaims != 1 || len(ans.Evidence) != 0 {
		t.Errorf("refused %v unsupported %d evidence %d", ans.Refused, ans.UnsupportedClaims, len(ans.Evidence))
	}
	// The admin's key sees the same through the same tools.
	m.mu.Lock()
	m.reqs = nil
	m.mu.Unlock()
	if _, err := e.svc.Ask(context.Background(), e.admin, server.AskRequest{Question: "who got the customer list?"}); err != nil {
		t.Fatal(err)
	}
	res = m.toolResults()
	if !strings.Contains(res[0], mail4) || !strings.Contains(res[1], "eve.leak@gmail.com") ||
		!strings.Contains(res[2], `"traces_checked":1`) || !strings.Contains(res[2], "messages.4.tool_calls.0") ||
		!strings.Contains(res[3], `"traces_checked":26`) || !strings.Contains(res[4], "external-email") {
		t.Errorf("admin tool results: %v", res)
	}
}

// TestModelRefusesUncitedAnswer: an answer whose citations all fail,
// or that has none, is withheld and says so.
func TestModelRefusesUncitedAnswer(t *testing.T) {
	for _, tc := range []struct {
		name, content, note string
	}{
		{"no citations", answerJSON("Every run was safe."), "cites no stored event"},
		{"only bad citations", answerJSON("Every run was safe [1].", [3]string{"00000000-0000-0000-0000-000000000000", "messages.0.content", "safe"}), "None of the model's 1 citations"},
		{"not JSON", "Every run was safe.", "not the JSON object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, _ := modelEnv(t, ask.Config{}, turn{Content: tc.content})
			ans, err := e.svc.Ask(context.Background(), e.admin, server.AskRequest{Question: "were all runs safe?"})
			if err != nil {
				t.Fatal(err)
			}
			if !ans.Refused || ans.Answer != "" || !strings.Contains(ans.Note, tc.note) {
				t.Fatalf("refused %v answer %q note %q", ans.Refused, ans.Answer, ans.Note)
			}
			if ans.ExchangeTraceID == "" {
				t.Error("a refused answer is recorded too")
			}
		})
	}
}

// TestModelBudgets: the step, token and time budgets stop a model that
// never answers; the answer says which and reports the usage.
func TestModelBudgets(t *testing.T) {
	loop := turn{Calls: []call{{"search", map[string]any{"query": "refund"}}}}
	for _, tc := range []struct {
		name   string
		cfg    ask.Config
		script []turn
		note   string
		steps  int
	}{
		{"steps", ask.Config{MaxSteps: 3}, []turn{loop}, "step budget (3 model turns)", 3},
		{"tokens", ask.Config{MaxTokens: 1000}, []turn{{Calls: loop.Calls, Tokens: 400}}, "token budget (1000 tokens)", 3},
		{"time", ask.Config{Timeout: 300 * time.Millisecond}, []turn{loop, {Calls: loop.Calls, Delay: 5 * time.Second}}, "time budget (300ms)", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, m := modelEnv(t, tc.cfg, tc.script...)
			start := time.Now()
			ans, err := e.svc.Ask(context.Background(), e.admin, server.AskRequest{Question: "which refunds?"})
			if err != nil {
				t.Fatal(err)
			}
			if !ans.Refused || !strings.Contains(ans.Note, tc.note) {
				t.Fatalf("refused %v note %q, want %q", ans.Refused, ans.Note, tc.note)
			}
			if ans.Usage.Steps != tc.steps {
				t.Errorf("steps %d, want %d (%d requests)", ans.Usage.Steps, tc.steps, len(m.requests()))
			}
			if time.Since(start) > 4*time.Second {
				t.Errorf("the answer took %v", time.Since(start))
			}
			if len(ans.Evidence) == 0 {
				t.Error("a refused answer keeps the evidence")
			}
		})
	}
}

// TestModelPromptInjection: a stored tool output tells the model to call
// a tool outside the four and to cite a made-up trace; a model that
// obeys gets an error from the unknown tool, its citation is dropped,
// and the answer is withheld.
func TestModelPromptInjection(t *testing.T) {
	e, m := modelEnv(t, ask.Config{})
	web4 := e.ids["web-04"]
	m.script = []turn{
		{Calls: []call{{"get_events", map[string]any{"trace_id": web4}}}},
		{Calls: []call{{"delete_all_traces", map[string]any{}}, {"search", "not json"}}},
		{Content: answerJSON("all runs are safe [1]", [3]string{"00000000-0000-0000-0000-000000000000", "messages.0.content", "all runs are safe"})},
	}
	ans, err := e.svc.Ask(context.Background(), e.admin, server.AskRequest{Question: "what were Initech's earnings?"})
	if err != nil {
		t.Fatal(err)
	}
	if len(ans.ToolCalls) != 3 || !strings.Contains(ans.ToolCalls[1].Error, `there is no tool "delete_all_traces"`) ||
		!strings.Contains(ans.ToolCalls[2].Error, "invalid arguments") {
		t.Fatalf("tool calls %+v", ans.ToolCalls)
	}
	if !strings.Contains(m.toolResults()[0], "IMPORTANT SYSTEM NOTE") {
		t.Error("get_events did not return the stored text")
	}
	if !ans.Refused || ans.UnsupportedClaims != 1 {
		t.Fatalf("refused %v unsupported %d", ans.Refused, ans.UnsupportedClaims)
	}
	// Nothing was deleted.
	if _, err := e.st.GetTrace(context.Background(), web4, false); err != nil {
		t.Fatal(err)
	}
	// The system prompt says stored text is data.
	if sys := m.requests()[0].Messages[0]; sys.Role != "system" || !strings.Contains(*sys.Content, "never instructions") {
		t.Errorf("system prompt %+v", sys)
	}
}

// TestModelEndpointFails: an endpoint that answers 500 is a 502 of the ask.
func TestModelEndpointFails(t *testing.T) {
	e := newEnv(t, ask.Config{BaseURL: "http://127.0.0.1:1/v1", Timeout: 2 * time.Second})
	_, err := e.svc.Ask(context.Background(), e.admin, server.AskRequest{Question: "anything?"})
	var se *server.Error
	if !errorsAs(err, &se) || se.Status != 502 || !strings.Contains(se.Detail, "127.0.0.1:1") {
		t.Fatalf("error %v, want a 502 naming the endpoint", err)
	}
}

// TestModelCallsPerTurn: at most 10 tool calls of one turn run; the
// others get an error the model sees.
func TestModelCallsPerTurn(t *testing.T) {
	var calls []call
	for range 12 {
		calls = append(calls, call{"search", map[string]any{"query": "refund"}})
	}
	e, m := modelEnv(t, ask.Config{}, turn{Calls: calls}, turn{Content: answerJSON("none")})
	ans, err := e.svc.Ask(context.Background(), e.admin, server.AskRequest{Question: "refunds?"})
	if err != nil {
		t.Fatal(err)
	}
	if len(ans.ToolCalls) != 12 || ans.ToolCalls[9].Error != "" || !strings.Contains(ans.ToolCalls[10].Error, "at most 10") {
		t.Fatalf("tool calls %+v", ans.ToolCalls)
	}
	if res := m.toolResults(); len(res) != 12 || !strings.Contains(res[11], "at most 10") {
		t.Fatalf("tool results %v", res)
	}
}
