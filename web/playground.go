package web

import (
	"encoding/json"
	"strings"
)

type playgroundView struct {
	Layout
	Policy     string
	Trace      string
	Ran        bool
	Error      string
	Violations []violation
	Events     []*eventView
	Lines      []codeLine
}

type violation struct {
	Message string
	Links   []violationLink
}

type violationLink struct{ Range, Href string }

const playgroundPolicy = `raise "the agent emailed someone outside the company" if:
    (call: ToolCall)
    call is tool:send_email
    not call.function.arguments.to.endswith("@example.com")
`

const playgroundTrace = `[
  {"role": "user", "content": "Send the report to bob@evil.test"},
  {"role": "assistant", "content": null, "tool_calls": [
    {"id": "1", "type": "function", "function": {"name": "send_email",
      "arguments": {"to": "bob@evil.test", "body": "Q3 numbers attached"}}}
  ]}
]`

// playgroundPage runs a policy on a trace with the check API (explorer-api
// §10) and shows the violations highlighted in the trace. It stores
// nothing; the script keeps both texts in the URL fragment.
func (h *Handler) playgroundPage(q *request) error {
	v := &playgroundView{Layout: q.layout("Playground"), Policy: playgroundPolicy, Trace: playgroundTrace}
	v.Section = "playground"
	if q.r.Method == "POST" {
		v.Policy, v.Trace, v.Ran = strings.ReplaceAll(q.form("policy"), "\r\n", "\n"), q.form("trace"), true
		h.runPlayground(q, v)
	}
	v.Lines = colourRule(v.Policy)
	return q.render("playground", v)
}

func (h *Handler) runPlayground(q *request, v *playgroundView) {
	var msgs []json.RawMessage
	if err := json.Unmarshal([]byte(v.Trace), &msgs); err != nil {
		var obj struct {
			Messages []json.RawMessage `json:"messages"`
		}
		if err2 := json.Unmarshal([]byte(v.Trace), &obj); err2 != nil || obj.Messages == nil {
			v.Error = "The trace must be a JSON array of events (or an object with \"messages\"): " + err.Error()
			return
		}
		msgs = obj.Messages
	}
	var res struct {
		Errors []struct {
			Args   []json.RawMessage `json:"args"`
			Ranges []string          `json:"ranges"`
		} `json:"errors"`
	}
	if err := q.api("POST", "/api/v1/policy/check", map[string]any{"messages": msgs, "policy": v.Policy}, &res); err != nil {
		if ae := asAPIError(err); ae != nil {
			v.Error = ae.Detail
			if ae.Status == 401 || ae.Status == 403 {
				v.Error = "This server asks for a key to run checks: sign in with an ingest or full key. (" + ae.Detail + ")"
			}
			return
		}
		if _, ok := err.(redirect); ok {
			v.Error = "This server asks for a key to run checks: sign in with an ingest or full key."
			return
		}
		v.Error = err.Error()
		return
	}
	ms := newMarks()
	for _, e := range res.Errors {
		msg := ""
		if len(e.Args) > 0 {
			if s, ok := str(e.Args[0]); ok {
				msg = s
			} else {
				msg = string(e.Args[0])
			}
		}
		vi := violation{Message: msg}
		for _, r := range e.Ranges {
			ms.add(r, "violation", "", msg)
			vi.Links = append(vi.Links, violationLink{r, fragment(r)})
		}
		v.Violations = append(v.Violations, vi)
	}
	v.Events = buildEvents(msgs, 0, len(msgs), ms)
}
