package web

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// traceByIndex serves /u/{user}/{dataset}/t/{index}.
func (h *Handler) traceByIndex(q *request) error {
	d, ref, err := q.datasetFromPath()
	if err != nil {
		return err
	}
	idx, err := strconv.ParseInt(q.r.PathValue("index"), 10, 64)
	if err != nil || idx < 0 {
		return notFound()
	}
	var res apiSearch
	target := "/api/v1/search?limit=1&highlights=false&dataset=" + url.QueryEscape(d.ID) + "&q=" + url.QueryEscape("index:"+strconv.FormatInt(idx, 10))
	if err := q.api("GET", target, nil, &res); err != nil {
		return err
	}
	if len(res.Traces) == 0 {
		return notFound()
	}
	return h.renderTrace(q, res.Traces[0].ID, ref)
}

// traceByID serves /trace/{id}.
func (h *Handler) traceByID(q *request) error {
	return h.renderTrace(q, q.r.PathValue("id"), nil)
}

func (h *Handler) renderTrace(q *request, id string, ref *DatasetRef) error {
	page, _ := strconv.Atoi(q.r.URL.Query().Get("page"))
	t, err := h.traceWindow(q, id, max(0, page))
	if err != nil {
		if ae := asAPIError(err); ae != nil && (ae.Status == 404 || ae.Status == 403 || ae.Status == 401) {
			if q.caller == nil {
				return q.needLogin()
			}
			return notFound()
		}
		return err
	}
	v := &traceView{Layout: q.layout("Trace"), T: t, Query: q.r.URL.Query().Get("q")}
	v.Section = "traces"
	if t.Name != nil && *t.Name != "" {
		v.Name = *t.Name
	} else {
		v.Name = "Trace " + strconv.FormatInt(t.Index, 10)
	}
	v.Title = v.Name
	if ref == nil && t.Dataset != nil && t.DatasetName != nil {
		ref = &DatasetRef{ID: *t.Dataset, User: t.User, Name: *t.DatasetName}
	}
	if ref != nil {
		ref.Owner = q.caller != nil && (q.caller.User.ID == t.UserID || q.caller.IsAdmin())
	}
	v.Dataset = ref
	if h.asker != nil {
		v.Ask = &askBox{TraceID: t.ID, Scope: "this trace", Back: q.r.URL.RequestURI()}
	}
	v.CanComment = q.caller != nil && q.caller.CanWrite()
	v.CanDelete = q.caller != nil && q.caller.CanWrite() && (q.caller.User.ID == t.UserID || q.caller.IsAdmin())
	v.Metadata = pretty(t.ExtraMetadata)
	v.Created = shortTime(t.TimeCreated)
	v.Source = traceSource(t)
	v.Proof = h.proofBadge(q, t.ID)
	if v.CanDelete && h.srv.SharingEnabled() {
		var sh struct {
			Shared bool `json:"shared"`
		}
		if q.api("GET", "/api/v1/trace/"+url.PathEscape(t.ID)+"/shared", nil, &sh) == nil {
			v.Sharing, v.Shared = true, sh.Shared
		}
	}

	// Search hits of the query the list was opened with.
	hits := map[string]apiHighlight{}
	if strings.TrimSpace(v.Query) != "" {
		var res apiSearch
		target := "/api/v1/search?limit=1&q=" + url.QueryEscape("id:"+t.ID+" ("+v.Query+")")
		if q.api("GET", target, nil, &res) == nil && len(res.Traces) == 1 {
			hits = res.Traces[0].Highlights
		}
	}
	ms := newMarks()
	for _, a := range t.Annotations {
		var md annMeta
		_ = json.Unmarshal(a.ExtraMetadata, &md)
		title := a.Content
		if md.Guardrail != nil && md.Guardrail.Name != "" {
			title = md.Guardrail.Name + ": " + a.Content
		} else if md.Source == "" || md.Source == "user" {
			if a.User != nil {
				title = a.User.Username + ": " + a.Content
			}
		}
		ms.add(a.Address, sourceName(md.Source), severityOf(md.Severity), title)
		if md.Source == "" || md.Source == "user" {
			cv := commentView{ID: a.ID, Content: a.Content, Time: shortTime(a.TimeCreated), Address: a.Address, Href: fragment(a.Address)}
			if a.User != nil {
				cv.Author = a.User.Username
				cv.Mine = q.caller != nil && q.caller.CanWrite() && (a.User.ID == q.caller.User.ID || q.caller.IsAdmin())
			}
			v.Comments = append(v.Comments, cv)
		}
	}
	for addr, hl := range hits {
		ms.add(addr, "search", "", "search: "+hl.Content)
	}
	// ?hl= marks violations a backtest found (not stored) on the page.
	var extra []apiAnnotation
	for _, addr := range q.r.URL.Query()["hl"] {
		if _, ok := parseAddress(addr); ok && len(extra) < 100 {
			ms.add(addr, "violation", "", "backtest violation")
			extra = append(extra, apiAnnotation{Content: "backtest violation", Address: addr, ExtraMetadata: json.RawMessage(`{"source":"violation"}`)})
		}
	}

	// Pages of 500 events; the navigator covers them all.
	n := len(t.Messages)
	pages := max(1, (n+eventsPerPage-1)/eventsPerPage)
	v.Page, _ = strconv.Atoi(q.r.URL.Query().Get("page"))
	v.Page = max(0, min(v.Page, pages-1))
	self := q.r.URL.Path + "?"
	if v.Query != "" {
		self += "q=" + url.QueryEscape(v.Query) + "&"
	}
	v.SelfURL = self
	if pages > 1 {
		for p := range pages {
			v.Pages = append(v.Pages, pageLink{N: p, From: p * eventsPerPage, To: min(n, (p+1)*eventsPerPage) - 1,
				URL: self + "page=" + strconv.Itoa(p), Current: p == v.Page})
		}
	}
	pageOf := func(addr string) int {
		a, ok := parseAddress(addr)
		if !ok {
			return v.Page
		}
		i, ok := eventOf(a.Path)
		if !ok {
			return v.Page
		}
		return min(i/eventsPerPage, pages-1)
	}
	v.Nav = navigator(append(extra, t.Annotations...), hits, self, pageOf, v.Page)
	from, to := v.Page*eventsPerPage, min(n, (v.Page+1)*eventsPerPage)
	v.Events = buildEvents(t.Messages, from, to, ms)
	return q.render("trace", v)
}

// traceWindow reads trace id with the events of event page `page` only
// (the others are null; a long trace is never read whole), or of its
// last page when page is past it.
func (h *Handler) traceWindow(q *request, id string, page int) (*apiTrace, error) {
	read := func(page int) (*apiTrace, error) {
		body, err := h.srv.TraceWindow(q.r, q.caller, id, page*eventsPerPage, (page+1)*eventsPerPage)
		if err != nil {
			return nil, err
		}
		var t apiTrace
		if err := json.Unmarshal(body, &t); err != nil {
			return nil, fmt.Errorf("decode trace %s: %w", id, err)
		}
		return &t, nil
	}
	t, err := read(page)
	if err != nil {
		return nil, err
	}
	if n := len(t.Messages); n > 0 && page*eventsPerPage >= n {
		return read((n - 1) / eventsPerPage)
	}
	return t, nil
}

// traceSource names where a trace came from (web-ui.md §2 header).
func traceSource(t *apiTrace) string {
	md, _ := members(t.ExtraMetadata)
	if s, _ := str(get(md, "source")); s == "mcp" {
		return "MCP"
	}
	if string(get(md, "via_gateway")) == "true" {
		return "gateway"
	}
	if t.SessionKey != nil && strings.HasPrefix(*t.SessionKey, "otel:") {
		return "OTLP"
	}
	if t.Dataset == nil {
		return "snippet"
	}
	return "push or upload"
}

// proofBadge is the run's proof status from its ledger session, without
// verifying (which reads every receipt; the page must not wait for it):
// "tampered" when a verification already failed, "unsigned" without a
// signature, else "unverified", which app.js turns into "verified" or
// "tampered" by calling GET /api/v1/runs/{id}/verify (without
// JavaScript the badge links to the proof page, which verifies).
func (h *Handler) proofBadge(q *request, id string) string {
	var sess struct {
		Status string `json:"status"`
		Signer string `json:"signer"`
	}
	if err := q.api("GET", "/api/v1/ledger/sessions/"+url.PathEscape(id), nil, &sess); err != nil {
		if ae := asAPIError(err); ae != nil && ae.Status == http.StatusNotFound && q.caller != nil && q.caller.CanRead() {
			return "unsigned" // no session: nothing vouches for this run
		}
		return "proof" // the caller may not read the ledger (a shared link)
	}
	switch {
	case sess.Status == "tampered":
		return "tampered"
	case sess.Signer == "" || sess.Signer == "none":
		return "unsigned"
	}
	return "unverified"
}

// commentAdd adds a user comment at an address (explorer-api §6).
func (h *Handler) commentAdd(q *request) error {
	if err := q.needLogin(); err != nil {
		return err
	}
	id := q.r.PathValue("id")
	content, addr := strings.TrimSpace(q.form("content")), strings.TrimSpace(q.form("address"))
	back := safeNext(q.form("back"))
	if content == "" {
		return &httpError{400, "A comment needs some text."}
	}
	if err := q.api("POST", "/api/v1/trace/"+url.PathEscape(id)+"/annotate", map[string]any{"content": content, "address": addr}, nil); err != nil {
		return err
	}
	return redirect(back + fragment(addr))
}

func (h *Handler) commentEdit(q *request) error {
	if err := q.needLogin(); err != nil {
		return err
	}
	target := "/api/v1/trace/" + url.PathEscape(q.r.PathValue("id")) + "/annotation/" + url.PathEscape(q.r.PathValue("aid"))
	if err := q.api("PUT", target, map[string]any{"content": q.form("content")}, nil); err != nil {
		return err
	}
	return redirect(safeNext(q.form("back")))
}

func (h *Handler) commentDelete(q *request) error {
	if err := q.needLogin(); err != nil {
		return err
	}
	target := "/api/v1/trace/" + url.PathEscape(q.r.PathValue("id")) + "/annotation/" + url.PathEscape(q.r.PathValue("aid"))
	if err := q.api("DELETE", target, nil, nil); err != nil {
		return err
	}
	return redirect(safeNext(q.form("back")))
}

// traceDelete deletes a trace (owner; API §5) and returns to its dataset.
func (h *Handler) traceDelete(q *request) error {
	if err := q.needLogin(); err != nil {
		return err
	}
	id := q.r.PathValue("id")
	var t apiTrace
	if err := q.api("GET", "/api/v1/trace/"+url.PathEscape(id)+"?max_length=1", nil, &t); err != nil {
		return err
	}
	if err := q.api("DELETE", "/api/v1/trace/"+url.PathEscape(id), nil, nil); err != nil {
		return err
	}
	if t.DatasetName != nil {
		return redirect("/u/" + url.PathEscape(t.User) + "/" + url.PathEscape(*t.DatasetName))
	}
	return redirect("/")
}

// traceShare turns link sharing of a trace on or off (API §5).
func (h *Handler) traceShare(q *request) error {
	if err := q.needLogin(); err != nil {
		return err
	}
	id := q.r.PathValue("id")
	method := "DELETE"
	if q.form("shared") == "on" {
		method = "PUT"
	}
	if err := q.api(method, "/api/v1/trace/"+url.PathEscape(id)+"/shared", nil, nil); err != nil {
		return err
	}
	return redirect("/trace/" + url.PathEscape(id))
}
