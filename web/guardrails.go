package web

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// apiGuardrail is the API's guardrail object (explorer-api §2.6).
type apiGuardrail struct {
	ID              string `json:"id"`
	Name            string `json:"name"`
	Content         string `json:"content"`
	Enabled         bool   `json:"enabled"`
	Action          string `json:"action"`
	LastUpdatedTime string `json:"last_updated_time"`
	Version         int    `json:"version"`
	Severity        string `json:"severity"`
	UpdatedBy       string `json:"updated_by"`
}

type apiVersion struct {
	Version     int    `json:"version"`
	Name        string `json:"name"`
	Content     string `json:"content"`
	Enabled     bool   `json:"enabled"`
	Action      string `json:"action"`
	Severity    string `json:"severity"`
	Change      string `json:"change"`
	Comment     string `json:"comment"`
	TimeCreated string `json:"time_created"`
	Author      struct {
		Username string `json:"username"`
	} `json:"author"`
}

type guardrailsView struct {
	Layout
	DS        *apiDataset
	CanWrite  bool
	Owner     bool
	List      []apiGuardrail
	Edit      editorView
	Versions  []apiVersion
	Diff      []diffLine
	DiffA     int
	DiffB     int
	DiffError string
}

type editorView struct {
	ID       string
	Name     string
	Content  string
	Action   string
	Severity string
	Enabled  bool
	Version  int
	Lines    []codeLine
	Errors   []string
	Saved    string
}

func (h *Handler) guardrailsPage(q *request) error {
	return h.renderGuardrails(q, nil)
}

func (h *Handler) renderGuardrails(q *request, edit *editorView) error {
	d, ref, err := q.datasetFromPath()
	if err != nil {
		return err
	}
	v := &guardrailsView{Layout: q.layout("Guardrails · " + d.Name), DS: d, Owner: ref.Owner}
	v.Dataset, v.Section = ref, "guardrails"
	v.CanWrite = ref.Owner && q.caller != nil && q.caller.CanWrite()
	if ref.Owner { // the API shows a dataset's guardrails to its owner and admins (§2.5)
		gs, err := q.store().ListGuardrails(q.r.Context(), d.ID)
		if err != nil {
			return err
		}
		for _, g := range gs {
			v.List = append(v.List, apiGuardrail{ID: g.ID, Name: g.Name, Content: g.Content, Enabled: g.Enabled, Action: g.Action,
				Version: g.Version, Severity: g.Severity, LastUpdatedTime: g.TimeUpdated.UTC().Format("2006-01-02 15:04:05")})
		}
	}
	qs := q.r.URL.Query()
	sel := qs.Get("g")
	if edit != nil {
		v.Edit = *edit
		sel = edit.ID
	} else {
		v.Edit = editorView{Action: "log", Severity: "warn", Enabled: true,
			Content: "raise \"the agent sent an email\" if:\n    (call: ToolCall)\n    call is tool:send_email\n"}
		if qs.Get("new") == "" {
			for _, g := range v.List {
				if g.ID == sel || sel == "" {
					v.Edit = editorView{ID: g.ID, Name: g.Name, Content: g.Content, Action: g.Action, Severity: g.Severity, Enabled: g.Enabled, Version: g.Version}
					sel = g.ID
					break
				}
			}
		}
	}
	if v.Edit.Lines == nil {
		v.Edit.Lines = colourRule(v.Edit.Content)
	}
	if sel != "" && v.Edit.ID != "" {
		var vs struct {
			Versions []apiVersion `json:"versions"`
		}
		if err := q.api("GET", "/api/v1/dataset/"+url.PathEscape(d.ID)+"/policy/"+url.PathEscape(sel)+"/versions", nil, &vs); err == nil {
			v.Versions = vs.Versions
		}
		a, _ := strconv.Atoi(qs.Get("a"))
		b, _ := strconv.Atoi(qs.Get("b"))
		if a > 0 && b > 0 {
			var va, vb *apiVersion
			for i := range v.Versions {
				switch v.Versions[i].Version {
				case a:
					va = &v.Versions[i]
				case b:
					vb = &v.Versions[i]
				}
			}
			if va != nil && vb != nil {
				v.Diff, v.DiffA, v.DiffB = lineDiff(va.Content, vb.Content), a, b
			} else {
				v.DiffError = fmt.Sprintf("No versions %d and %d to compare.", a, b)
			}
		}
	}
	return q.render("guardrails", v)
}

// guardrailSave creates or updates a guardrail; load errors are shown
// at their line and column and nothing is saved (API §9.1).
func (h *Handler) guardrailSave(q *request) error {
	if err := q.needLogin(); err != nil {
		return err
	}
	d, _, err := q.datasetFromPath()
	if err != nil {
		return err
	}
	e := &editorView{ID: q.form("id"), Name: strings.TrimSpace(q.form("name")), Content: strings.ReplaceAll(q.form("policy"), "\r\n", "\n"),
		Action: q.form("action"), Severity: q.form("severity"), Enabled: q.form("enabled") == "on"}
	body := map[string]any{"name": e.Name, "policy": e.Content, "action": e.Action, "severity": e.Severity,
		"enabled": e.Enabled, "comment": q.form("comment")}
	if e.Name == "" {
		e.Errors = []string{"Give the guardrail a name."}
		q.status = 400
		return h.renderGuardrails(q, e)
	}
	target := "/api/v1/dataset/" + url.PathEscape(d.ID) + "/policy"
	method := "POST"
	if e.ID != "" {
		target, method = target+"/"+url.PathEscape(e.ID), "PUT"
	}
	var out struct {
		ExtraMetadata struct {
			Policies []apiGuardrail `json:"policies"`
		} `json:"extra_metadata"`
	}
	if err := q.api(method, target, body, &out); err != nil {
		ae := asAPIError(err)
		if ae == nil || ae.Status != 400 {
			return err
		}
		e.Lines = colourRule(e.Content)
		e.Errors = loadErrors(ae.Detail, ae.Extra["errors"], e.Lines)
		q.status = 400
		return h.renderGuardrails(q, e)
	}
	if e.ID == "" {
		for _, g := range out.ExtraMetadata.Policies {
			if g.Name == e.Name {
				e.ID = g.ID
			}
		}
	}
	return redirect(q.r.URL.Path + "?g=" + url.QueryEscape(e.ID) + "&saved=1")
}

// loadErrors renders the API's load errors and marks their lines.
func loadErrors(detail string, raw any, lines []codeLine) []string {
	b, _ := json.Marshal(raw)
	var errs []struct {
		Line    int    `json:"line"`
		Column  int    `json:"column"`
		Message string `json:"message"`
	}
	_ = json.Unmarshal(b, &errs)
	if len(errs) == 0 {
		return []string{detail}
	}
	var out []string
	for _, e := range errs {
		out = append(out, fmt.Sprintf("line %d, column %d: %s", e.Line, e.Column, e.Message))
		if e.Line >= 1 && e.Line <= len(lines) {
			l := &lines[e.Line-1]
			l.Bad = true
			l.Errs = append(l.Errs, fmt.Sprintf("column %d: %s", e.Column, e.Message))
		}
	}
	return out
}

func (h *Handler) guardrailRestore(q *request) error {
	if err := q.needLogin(); err != nil {
		return err
	}
	d, ref, err := q.datasetFromPath()
	if err != nil {
		return err
	}
	gid, n := q.r.PathValue("gid"), q.r.PathValue("n")
	if _, err := strconv.Atoi(n); err != nil {
		return notFound()
	}
	if err := q.api("POST", "/api/v1/dataset/"+url.PathEscape(d.ID)+"/policy/"+url.PathEscape(gid)+"/versions/"+n+"/restore", map[string]any{}, nil); err != nil {
		return err
	}
	return redirect(ref.URL() + "/guardrails?g=" + url.QueryEscape(gid))
}
