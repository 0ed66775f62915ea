package web

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// apiHit is one trace of the search API's answer (explorer-api §7.1).
type apiHit struct {
	ID             string                     `json:"id"`
	Index          int64                      `json:"index"`
	Name           *string                    `json:"name"`
	HierarchyPath  []string                   `json:"hierarchy_path"`
	TimeCreated    string                     `json:"time_created"`
	TimeLastPushed string                     `json:"time_last_pushed"`
	MessageCount   int                        `json:"message_count"`
	BySource       map[string]int             `json:"annotations_by_source"`
	MaxSeverity    *string                    `json:"max_severity"`
	Highlights     map[string]apiHighlight    `json:"highlights"`
	Dataset        *struct{ ID, Name string } `json:"dataset"`
}

type apiHighlight struct {
	Content string `json:"content"`
	Source  string `json:"source"`
}

type apiSearch struct {
	Total           int      `json:"total"`
	TotalIsEstimate bool     `json:"total_is_estimate"`
	Parsed          string   `json:"parsed"`
	Traces          []apiHit `json:"traces"`
	NextCursor      *string  `json:"next_cursor"`
}

type tracesView struct {
	Layout
	DS         *apiDataset
	Query      string
	Sort       string
	Sorts      []string
	QueryError *queryErrorView
	Total      int // -1: not counted (a query)
	Rows       []traceRow
	Next       string // URL of the next page ("" = last)
	Chips      []chip
	Groups     []group
	Sources    []countRow
	Severities []countRow
	Ask        *askBox // nil: no asker
	// FacetsURL, when set, is where the script loads the sidebar counts
	// from; FacetsInline the page with them computed (without script).
	FacetsURL, FacetsInline string
}

type queryErrorView struct {
	Message string
	Before  string // the query up to the error position
	At      string // the character at the position ("" at the end)
	After   string
	Column  int
}

type traceRow struct {
	Index    int64
	Name     string
	URL      string
	Time     string
	Events   int
	Severity string
	Sources  []countRow
	Snippets []string // matched terms
}

type chip struct {
	Label     string
	URL       string
	Active    bool
	Count     *int
	DeleteURL string // a saved query its owner may delete
}

type group struct {
	Name  string
	Count int
	URL   string
}

type countRow struct {
	Name  string
	Count int
}

var traceSorts = []string{"index", "-index", "time_created", "-time_created", "time_last_pushed", "-time_last_pushed"}

// datasetFromPath loads /u/{user}/{dataset} with the API's read rules
// (404 when the caller cannot read it; signed out, the login page).
func (q *request) datasetFromPath() (*apiDataset, *DatasetRef, error) {
	ctx := q.r.Context()
	sd, err := q.h.srv.DatasetForRead(q.r, q.caller, q.r.PathValue("user"), q.r.PathValue("dataset"))
	if err != nil {
		if ae := asAPIError(err); ae != nil && ae.Status == 403 {
			return nil, nil, errNoRead(q)
		}
		if ae := asAPIError(err); ae != nil && ae.Status == 404 {
			if q.caller == nil {
				return nil, nil, q.needLogin()
			}
			return nil, nil, notFound()
		}
		return nil, nil, err
	}
	d := &apiDataset{ID: sd.ID, Name: sd.Name, ExtraMetadata: sd.Metadata, IsPublic: sd.IsPublic, UserID: sd.OwnerID}
	if len(d.ExtraMetadata) == 0 {
		d.ExtraMetadata = json.RawMessage("{}")
	}
	n := sd.NumTraces
	d.NumTraces = &n
	if sd.LatestTraceTime != nil {
		lt := sd.LatestTraceTime.UTC().Format(time.RFC3339)
		d.LatestTraceTime = &lt
	}
	owner := q.r.PathValue("user")
	d.User = &struct {
		Username string `json:"username"`
	}{owner}
	for _, b := range []struct{ name, query string }{{"All", ""}, {"Annotated", "is:annotated"}, {"Unannotated", "not:annotated"}, {"Flagged", "is:flagged"}} {
		sq := savedQueryView{Name: b.name, Query: b.query}
		if b.query == "" {
			sq.Count = &n
		}
		d.Queries = append(d.Queries, sq)
	}
	if saved, err := q.store().ListSavedQueries(ctx, sd.ID); err == nil {
		for _, x := range saved {
			d.Queries = append(d.Queries, savedQueryView{ID: x.ID, Name: x.Name, Query: x.Query, Deletable: true})
		}
	}
	ref := &DatasetRef{ID: d.ID, User: owner, Name: d.Name, Owner: q.caller != nil && q.h.srv.CanWrite(q.caller, d.UserID)}
	return d, ref, nil
}

func (h *Handler) tracesPage(q *request) error {
	d, ref, err := q.datasetFromPath()
	if err != nil {
		return err
	}
	qs := q.r.URL.Query()
	v := &tracesView{Layout: q.layout(d.Name), DS: d, Query: qs.Get("q"), Sort: qs.Get("sort"), Sorts: traceSorts}
	v.Dataset, v.Section = ref, "traces"
	if h.asker != nil {
		v.Ask = &askBox{Dataset: d.ID, Scope: ref.User + "/" + d.Name, Back: q.r.URL.RequestURI()}
	}
	if v.Sort != "" && !contains(traceSorts, v.Sort) {
		v.Sort = ""
	}
	var res apiSearch
	body, err := h.srv.SearchPage(q.r, q.caller, d.ID, v.Query, v.Sort, qs.Get("cursor"), 50)
	if err == nil {
		err = json.Unmarshal(body, &res)
	}
	if err != nil {
		ae := asAPIError(err)
		if ae == nil || ae.Status != 400 {
			return err
		}
		v.QueryError = queryErrorOf(v.Query, ae.Detail, ae.Extra["position"])
	}
	v.Total = res.Total
	if v.Query == "" && d.NumTraces != nil {
		v.Total = *d.NumTraces
	}
	base := ref.URL()
	for _, t := range res.Traces {
		row := traceRow{Index: t.Index, URL: base + "/t/" + strconv.FormatInt(t.Index, 10), Time: shortTime(t.TimeCreated), Events: t.MessageCount}
		if v.Query != "" {
			row.URL += "?q=" + url.QueryEscape(v.Query)
		}
		if t.Name != nil {
			row.Name = *t.Name
		}
		if t.MaxSeverity != nil {
			row.Severity = *t.MaxSeverity
		}
		row.Sources = sortedCounts(t.BySource)
		seen := map[string]bool{}
		for _, hl := range t.Highlights {
			if !seen[hl.Content] && len(row.Snippets) < 3 {
				seen[hl.Content] = true
				row.Snippets = append(row.Snippets, hl.Content)
			}
		}
		sort.Strings(row.Snippets)
		v.Rows = append(v.Rows, row)
	}
	if res.NextCursor != nil {
		nq := url.Values{"cursor": {*res.NextCursor}}
		if v.Query != "" {
			nq.Set("q", v.Query)
		}
		if v.Sort != "" {
			nq.Set("sort", v.Sort)
		}
		v.Next = base + "?" + nq.Encode()
	}
	// The sidebar counts cover every trace the query matches, not the
	// page: inline for small datasets (or when asked), else the page's
	// script loads them from /facets after the list is shown.
	if v.QueryError == nil {
		fq := url.Values{}
		if v.Query != "" {
			fq.Set("q", v.Query)
		}
		if d.NumTraces != nil && *d.NumTraces > inlineFacetsMax && qs.Get("facets") == "" {
			v.FacetsURL = base + "/facets?" + fq.Encode()
			fq.Set("facets", "1")
			v.FacetsInline = base + "?" + fq.Encode()
		} else {
			h.facets(q, v, d.ID, base)
		}
	}
	for _, sq := range d.Queries {
		c := chip{Label: sq.Name, URL: base + "?q=" + url.QueryEscape(sq.Query), Active: sq.Query == v.Query, Count: sq.Count}
		if sq.Deletable && ref.Owner {
			c.DeleteURL = base + "/queries/" + url.PathEscape(sq.ID) + "/delete"
		}
		v.Chips = append(v.Chips, c)
	}
	for _, f := range []string{"is:flagged", "severity:critical", "severity:>=warn", "source:user", "is:blocked", "is:gateway"} {
		nq := strings.TrimSpace(v.Query + " " + f)
		active := strings.Contains(" "+v.Query+" ", " "+f+" ")
		if active {
			nq = strings.TrimSpace(strings.Join(strings.Fields(strings.Replace(" "+v.Query+" ", " "+f+" ", " ", 1)), " "))
		}
		v.Chips = append(v.Chips, chip{Label: f, URL: base + "?q=" + url.QueryEscape(nq), Active: active})
	}
	return q.render("traces", v)
}

// inlineFacetsMax is the largest dataset whose trace list computes its
// sidebar counts while rendering.
var inlineFacetsMax = 5000

// facets fills the sidebar counts of v: every trace of dataset id that
// v.Query matches.
func (h *Handler) facets(q *request, v *tracesView, id, base string) {
	f, err := h.srv.SearchFacets(q.r, q.caller, id, v.Query)
	if err != nil {
		h.log.Error("trace list facets", "dataset", id, "err", err)
		return
	}
	for _, g := range sortedCounts(f.Hierarchy) {
		gq := `meta:hierarchy_path.0=` + strconv.Quote(g.Name)
		if g.Name == "" {
			gq = `-meta:hierarchy_path.0`
		}
		v.Groups = append(v.Groups, group{Name: g.Name, Count: g.Count, URL: base + "?q=" + url.QueryEscape(gq)})
	}
	v.Sources, v.Severities = sortedCounts(f.Sources), sortedCounts(f.Severities)
}

// facetsFragment serves /u/{user}/{dataset}/facets?q=: the sidebar
// counts alone, which the trace list's script puts in place.
func (h *Handler) facetsFragment(q *request) error {
	d, ref, err := q.datasetFromPath()
	if err != nil {
		return err
	}
	v := &tracesView{Query: q.r.URL.Query().Get("q")}
	h.facets(q, v, d.ID, ref.URL())
	var b bytes.Buffer
	if err := h.pages["traces"].ExecuteTemplate(&b, "facets", v); err != nil {
		return fmt.Errorf("render facets: %w", err)
	}
	q.w.Header().Set("Content-Type", "text/html; charset=utf-8")
	q.w.Header().Set("Cache-Control", "no-store")
	_, err = q.w.Write(b.Bytes())
	return err
}

// queryErrorOf places a query error at its code-point position.
func queryErrorOf(query, msg string, pos any) *queryErrorView {
	e := &queryErrorView{Message: msg}
	p, ok := pos.(int)
	if !ok {
		if f, okf := pos.(float64); okf {
			p, ok = int(f), true
		}
	}
	if !ok {
		return e
	}
	r := []rune(query)
	p = max(0, min(p, len(r)))
	e.Before, e.Column = string(r[:p]), p+1
	if p < len(r) {
		_, n := utf8.DecodeRuneInString(string(r[p:]))
		e.At, e.After = string(r[p:])[:n], string(r[p+1:])
	}
	return e
}

func sortedCounts(m map[string]int) []countRow {
	out := make([]countRow, 0, len(m))
	for k, n := range m {
		out = append(out, countRow{k, n})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Count != out[j].Count {
			return out[i].Count > out[j].Count
		}
		return out[i].Name < out[j].Name
	})
	return out
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// querySave saves the current query of a dataset's trace list
// (PUT /api/v1/dataset/byuser/{u}/{d}/s).
func (h *Handler) querySave(q *request) error {
	if err := q.needLogin(); err != nil {
		return err
	}
	_, ref, err := q.datasetFromPath()
	if err != nil {
		return err
	}
	name, query := strings.TrimSpace(q.form("name")), q.form("q")
	if name == "" {
		name = query
	}
	target := "/api/v1/dataset/byuser/" + url.PathEscape(ref.User) + "/" + url.PathEscape(ref.Name) + "/s"
	if err := q.api("PUT", target, map[string]any{"name": name, "query": query}, &map[string]any{}); err != nil {
		return err
	}
	return redirect(ref.URL() + "?q=" + url.QueryEscape(query))
}

// errNoRead is the page for a key whose scope reads nothing (ingest).
func errNoRead(q *request) error {
	return &httpError{http.StatusForbidden, "This session's key has scope \"" + q.caller.Scope() + "\", which cannot read traces. Sign in with a read or full key."}
}

// queryDelete deletes a saved query (DELETE /api/v1/dataset/query/{id}).
func (h *Handler) queryDelete(q *request) error {
	if err := q.needLogin(); err != nil {
		return err
	}
	_, ref, err := q.datasetFromPath()
	if err != nil {
		return err
	}
	if err := q.api("DELETE", "/api/v1/dataset/query/"+url.PathEscape(q.r.PathValue("id")), nil, nil); err != nil {
		return err
	}
	return redirect(ref.URL())
}
