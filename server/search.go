package server

// Search (explorer-api §7): GET /api/v1/search, the Invariant-compatible
// GET …/s?query=, saved queries (PUT …/s, DELETE /api/v1/dataset/query/{id})
// and the counts of a dataset's queries. The grammar is package search;
// the stores run it (store.Searcher).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/vigilhq/vigil/search"
	"github.com/vigilhq/vigil/store"
)

// searchTimeout bounds the database time of one search request; a query
// that needs longer (many short terms over a large store) gets 503.
const searchTimeout = 10 * time.Second

// runSearch runs one store search under searchTimeout.
func (s *Server) runSearch(ctx context.Context, req store.SearchRequest) (*store.SearchResult, error) {
	ctx, cancel := context.WithTimeout(ctx, searchTimeout)
	defer cancel()
	res, err := s.st.Search(ctx, req)
	if err != nil && ctx.Err() == context.DeadlineExceeded {
		return nil, &Error{Status: http.StatusServiceUnavailable, Code: CodeOverloaded,
			Detail: fmt.Sprintf("search did not finish within %v; narrow the query (longer terms, a dataset, filters)", searchTimeout), Err: err}
	}
	return res, err
}

// CodeQueryInvalid is the error code of a query that does not parse; the
// body adds "position" (a code-point offset).
const CodeQueryInvalid = "query_invalid"

// parseQuery parses q, or returns the 400 query_invalid error.
func parseQuery(q string) (*search.Query, error) {
	parsed, err := search.Parse(q)
	if err != nil {
		return nil, queryError(err)
	}
	return parsed, nil
}

// queryError maps a search.Error (also inside a store error) to 400
// query_invalid with its position; other errors pass through.
func queryError(err error) error {
	var se *search.Error
	if !errors.As(err, &se) {
		return err
	}
	return &Error{Status: http.StatusBadRequest, Code: CodeQueryInvalid, Detail: "invalid query: " + se.Error(),
		Extra: map[string]any{"position": se.Pos}}
}

// searchAccess fills in what p may read.
func (s *Server) searchAccess(p *principal, req *store.SearchRequest) {
	switch {
	case p != nil && p.isAdmin():
		req.AllOwners, req.CallerID = true, p.User.ID
	case p != nil:
		req.OwnerID, req.CallerID, req.Public = p.User.ID, p.User.ID, true
	default:
		req.Public = s.cfg.AnonymousReadPublic
	}
}

var searchSorts = map[string]store.TraceOrder{
	"index": store.OrderIndex, "-index": store.OrderIndexDesc,
	"time_created": store.OrderTimeCreated, "-time_created": store.OrderTimeCreatedDesc,
	"time_last_pushed": store.OrderTimeLastPushed, "-time_last_pushed": store.OrderTimeLastPushedDesc,
}

// searchDataset resolves a dataset= value: an id, user/name, or a name in
// the caller's namespace; one the caller cannot read is 404.
func (s *Server) searchDataset(r *http.Request, p *principal, ref string) (*store.Dataset, error) {
	ctx := r.Context()
	var d *store.Dataset
	var err error
	if user, name, ok := strings.Cut(ref, "/"); ok {
		var u *store.User
		if u, err = s.st.GetUserByName(ctx, user); err == nil {
			d, err = s.st.GetDatasetByName(ctx, u.ID, name)
		}
	} else {
		d, err = s.st.GetDataset(ctx, ref)
		if errors.Is(err, store.ErrNotFound) && p != nil {
			d, err = s.st.GetDatasetByName(ctx, p.User.ID, ref)
		}
	}
	if errors.Is(err, store.ErrNotFound) || err == nil && !s.canReadDataset(p, d) {
		return nil, notFound("Dataset not found: %s", ref)
	}
	return d, err
}

// searchHit is one trace of a search response.
type searchHit struct {
	ID                  string                   `json:"id"`
	Index               int64                    `json:"index"`
	Dataset             *searchHitDataset        `json:"dataset"`
	Name                *string                  `json:"name"`
	HierarchyPath       []string                 `json:"hierarchy_path"`
	TimeCreated         string                   `json:"time_created"`
	TimeLastPushed      string                   `json:"time_last_pushed"`
	MessageCount        int                      `json:"message_count"`
	AnnotationsBySource map[string]int           `json:"annotations_by_source"`
	MaxSeverity         *string                  `json:"max_severity"`
	Highlights          map[string]highlightJSON `json:"highlights,omitempty"`
}

type searchHitDataset struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	User string `json:"user"`
}

type highlightJSON struct {
	Content string `json:"content"`
	Source  string `json:"source"`
}

// SearchResponse is the body of GET /api/v1/search.
type searchResponse struct {
	Total           int         `json:"total"`
	TotalIsEstimate bool        `json:"total_is_estimate"`
	Parsed          string      `json:"parsed"`
	Traces          []searchHit `json:"traces"`
	NextCursor      *string     `json:"next_cursor"`
}

// handleSearch serves GET /api/v1/search.
func (s *Server) handleSearch(w http.ResponseWriter, r *http.Request, p *principal) error {
	q := r.URL.Query()
	parsed, err := parseQuery(q.Get("q"))
	if err != nil {
		return err
	}
	req := store.SearchRequest{Query: q.Get("q"), Cursor: q.Get("cursor")}
	s.searchAccess(p, &req)
	if refs := q["dataset"]; len(refs) > 0 {
		req.DatasetIDs = []string{}
		for _, ref := range refs {
			d, err := s.searchDataset(r, p, ref)
			if err != nil {
				return err
			}
			req.DatasetIDs = append(req.DatasetIDs, d.ID)
		}
	}
	req.Order = store.OrderTimeCreatedDesc
	if len(req.DatasetIDs) == 1 {
		req.Order = store.OrderIndex
	}
	if v := q.Get("sort"); v != "" {
		o, ok := searchSorts[v]
		if !ok {
			return badRequest("sort must be one of index, -index, time_created, -time_created, time_last_pushed, -time_last_pushed; got %q", v)
		}
		req.Order = o
	}
	req.Limit = 50
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			return badRequest("limit must be an integer from 1 to 1000, got %q", v)
		}
		req.Limit = n
	}
	highlights := true
	if v := q.Get("highlights"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return badRequest("highlights must be true or false, got %q", v)
		}
		highlights = b
	}
	req.WithMessages = highlights && len(parsed.Terms()) > 0
	res, err := s.runSearch(r.Context(), req)
	if errors.Is(err, store.ErrInvalidCursor) {
		return badRequest("invalid cursor %q", req.Cursor)
	}
	if err != nil {
		return queryError(err)
	}
	out := searchResponse{Total: res.Total, TotalIsEstimate: res.TotalIsEstimate, Parsed: parsed.String(), Traces: []searchHit{}}
	if res.NextCursor != "" {
		out.NextCursor = &res.NextCursor
	}
	hits, err := s.searchHits(r, res.Traces, parsed, req.WithMessages)
	if err != nil {
		return err
	}
	out.Traces = hits
	writeJSON(w, http.StatusOK, out)
	return nil
}

// searchHits renders traces with their datasets, annotation counts,
// highest severity and (withHighlights) highlights.
func (s *Server) searchHits(r *http.Request, ts []*store.Trace, q *search.Query, withHighlights bool) ([]searchHit, error) {
	ctx := r.Context()
	ids := make([]string, len(ts))
	for i, t := range ts {
		ids[i] = t.ID
	}
	counts, err := s.st.CountAnnotationsBySource(ctx, ids)
	if err == nil {
		counts, err = s.addFindingCounts(ctx, counts, ids)
	}
	if err != nil {
		return nil, err
	}
	datasets := map[string]*searchHitDataset{}
	out := make([]searchHit, len(ts))
	for i, t := range ts {
		h := searchHit{ID: t.ID, Index: t.Index, Name: nullString(t.Name), HierarchyPath: nonNilStrings(t.HierarchyPath),
			TimeCreated: formatTime(t.TimeCreated), TimeLastPushed: formatTime(t.TimeLastPushed), MessageCount: t.MessageCount,
			AnnotationsBySource: counts[t.ID]}
		if h.AnnotationsBySource == nil {
			h.AnnotationsBySource = map[string]int{}
		}
		if t.DatasetID != "" {
			ds, ok := datasets[t.DatasetID]
			if !ok {
				d, err := s.st.GetDataset(ctx, t.DatasetID)
				if err != nil {
					return nil, err
				}
				ds = &searchHitDataset{ID: d.ID, Name: d.Name}
				if u, err := s.st.GetUser(ctx, d.OwnerID); err == nil {
					ds.User = u.Username
				}
				datasets[t.DatasetID] = ds
			}
			h.Dataset = ds
		}
		if len(h.AnnotationsBySource) > 0 {
			anns, err := s.st.ListAnnotations(ctx, t.ID, nil)
			if err == nil {
				anns, err = s.withFindings(ctx, t, anns, nil)
			}
			if err != nil {
				return nil, err
			}
			h.MaxSeverity = maxSeverity(anns)
		}
		if withHighlights {
			h.Highlights = highlightsOf(t, q)
		}
		out[i] = h
	}
	return out, nil
}

// highlightsOf is the highlight map of a trace (its messages loaded).
func highlightsOf(t *store.Trace, q *search.Query) map[string]highlightJSON {
	msgs := make([][]byte, len(t.Messages))
	for i, m := range t.Messages {
		msgs[i] = m.Data
	}
	hs := search.Highlights(msgs, q.Terms())
	if len(hs) == 0 {
		return nil
	}
	out := make(map[string]highlightJSON, len(hs))
	for _, h := range hs {
		out[h.Address] = highlightJSON{Content: h.Term, Source: "search"}
	}
	return out
}

// maxSeverity is the highest severity bucket of anns (explorer-api §2.2),
// nil when none has one.
func maxSeverity(anns []*store.Annotation) *string {
	best := -1
	for _, a := range anns {
		var m struct {
			Severity json.RawMessage `json:"severity"`
		}
		if json.Unmarshal(a.ExtraMetadata, &m) != nil || len(m.Severity) == 0 {
			continue
		}
		level := -1
		var word string
		var num float64
		if json.Unmarshal(m.Severity, &word) == nil {
			for i, s := range search.Severities {
				if s == word {
					level = i
				}
			}
		} else if json.Unmarshal(m.Severity, &num) == nil && num >= 0 && num <= 1 {
			level = 2
			if num < 0.45 {
				level = 0
			} else if num < 0.8 {
				level = 1
			}
		}
		best = max(best, level)
	}
	if best < 0 {
		return nil
	}
	return &search.Severities[best]
}

// compatSearchResult is the body of GET …/s?query= (explorer-api §7.1).
type compatSearchResult struct {
	Result   map[string]compatSearchEntry        `json:"result"`
	Mappings map[string]map[string]highlightJSON `json:"mappings"`
}

type compatSearchEntry struct {
	Traces      []int64 `json:"traces"`
	Description string  `json:"description"`
}

// maxCompatMappings bounds how many traces of a compat search get
// highlight mappings (all matching indices are listed regardless).
const maxCompatMappings = 1000

// handleCompatSearch serves GET /api/v1/dataset/byuser/{u}/{d}/s?query=.
func (s *Server) handleCompatSearch(w http.ResponseWriter, r *http.Request, p *principal) error {
	d, err := s.datasetFromPath(r, p)
	if err != nil {
		return err
	}
	query := r.URL.Query().Get("query")
	parsed, err := parseQuery(query)
	if err != nil {
		return err
	}
	title, desc := query, describeQuery(parsed)
	if parsed.Compat != "" {
		title, desc = parsed.Title, "filtered result"
	}
	out := compatSearchResult{Result: map[string]compatSearchEntry{}, Mappings: map[string]map[string]highlightJSON{}}
	entry := compatSearchEntry{Traces: []int64{}, Description: desc}
	terms := len(parsed.Terms()) > 0
	req := store.SearchRequest{Query: query, AllOwners: true, DatasetIDs: []string{d.ID}, Order: store.OrderIndex, Limit: 1000, NoTotal: true}
	for {
		req.WithMessages = terms && len(entry.Traces) < maxCompatMappings
		res, err := s.runSearch(r.Context(), req)
		if err != nil {
			return queryError(err)
		}
		for _, t := range res.Traces {
			if req.WithMessages && len(entry.Traces) < maxCompatMappings {
				if h := highlightsOf(t, parsed); h != nil {
					out.Mappings[strconv.FormatInt(t.Index, 10)] = h
				}
			}
			entry.Traces = append(entry.Traces, t.Index)
		}
		if req.Cursor = res.NextCursor; req.Cursor == "" {
			break
		}
	}
	out.Result[title] = entry
	writeJSON(w, http.StatusOK, out)
	return nil
}

// describeQuery is the compat description: "search result" (free text
// only), "filtered result" (filters only) or "filtered search result".
func describeQuery(q *search.Query) string {
	var text, filter bool
	var walk func(n search.Node)
	walk = func(n search.Node) {
		switch n := n.(type) {
		case nil:
		case *search.And:
			for _, x := range n.X {
				walk(x)
			}
		case *search.Or:
			for _, x := range n.X {
				walk(x)
			}
		case *search.Not:
			walk(n.X)
		case *search.Text:
			text = true
		default:
			filter = true
		}
	}
	walk(q.Root)
	switch {
	case text && filter:
		return "filtered search result"
	case filter:
		return "filtered result"
	}
	return "search result"
}

// handleSavedQueryPut serves PUT …/s: saves {name, query}.
func (s *Server) handleSavedQueryPut(w http.ResponseWriter, r *http.Request, p *principal) error {
	d, err := s.datasetForWrite(r, p)
	if err != nil {
		return err
	}
	var in struct {
		Name  *string `json:"name"`
		Query *string `json:"query"`
	}
	if err := s.decodeJSON(w, r, &in, false); err != nil {
		return err
	}
	if in.Name == nil || strings.TrimSpace(*in.Name) == "" {
		return badRequest("name must be provided")
	}
	if in.Query == nil {
		return badRequest("query must be provided")
	}
	if len(*in.Name) > 256 {
		return badRequest("name must be at most 256 characters")
	}
	if _, err := parseQuery(*in.Query); err != nil {
		return err
	}
	sq := &store.SavedQuery{DatasetID: d.ID, OwnerID: d.OwnerID, Name: *in.Name, Query: *in.Query}
	if err := s.st.CreateSavedQuery(r.Context(), sq); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"id": sq.ID, "name": sq.Name, "query": sq.Query})
	return nil
}

// handleSavedQueryDelete serves DELETE /api/v1/dataset/query/{id}.
func (s *Server) handleSavedQueryDelete(w http.ResponseWriter, r *http.Request, p *principal) error {
	ctx := r.Context()
	sq, err := s.st.GetSavedQuery(ctx, r.PathValue("id"))
	if errors.Is(err, store.ErrNotFound) {
		return notFound("Query not found")
	}
	if err != nil {
		return err
	}
	d, err := s.st.GetDataset(ctx, sq.DatasetID)
	if errors.Is(err, store.ErrNotFound) || err == nil && !s.canWrite(p, d.OwnerID) {
		return notFound("Query not found")
	}
	if err != nil {
		return err
	}
	if err := s.st.DeleteSavedQuery(ctx, sq.ID); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"message": "Deleted"})
	return nil
}

// datasetQueries are a dataset's queries with their counts: the built-ins
// (explorer-api §2.5), then the saved ones, oldest first. A saved query
// that no longer parses keeps a null count.
func (s *Server) datasetQueries(r *http.Request, d *store.Dataset) ([]savedQuery, error) {
	saved, err := s.st.ListSavedQueries(r.Context(), d.ID)
	if err != nil {
		return nil, err
	}
	out := builtinQueries(d.NumTraces)
	for _, q := range saved {
		out = append(out, savedQuery{ID: q.ID, Name: q.Name, Query: q.Query, Deletable: true})
	}
	for i := range out {
		if out[i].Count != nil {
			continue
		}
		res, err := s.runSearch(r.Context(), store.SearchRequest{Query: out[i].Query, AllOwners: true, DatasetIDs: []string{d.ID}, Limit: 1})
		if err != nil {
			continue // an unparsable saved query has no count
		}
		n := res.Total
		out[i].Count = &n
	}
	return out, nil
}

// traceListQuery applies ?query= of a dataset's trace list: the ids of
// the matching traces (nil when there is no query).
func (s *Server) traceListQuery(r *http.Request, d *store.Dataset) ([]string, error) {
	return s.datasetQueryIDs(r.Context(), d, r.URL.Query().Get("query"))
}

// datasetQueryIDs returns the ids of dataset d's traces that query (the
// §7 grammar) matches, in index order, or nil for an empty query (no
// filter). An invalid query is a 400 query_invalid with its position.
func (s *Server) datasetQueryIDs(ctx context.Context, d *store.Dataset, query string) ([]string, error) {
	if strings.TrimSpace(query) == "" {
		return nil, nil
	}
	if _, err := parseQuery(query); err != nil {
		return nil, err
	}
	ids := []string{}
	req := store.SearchRequest{Query: query, AllOwners: true, DatasetIDs: []string{d.ID}, Order: store.OrderIndex, Limit: 1000, NoTotal: true}
	for {
		res, err := s.runSearch(ctx, req)
		if err != nil {
			return nil, queryError(err)
		}
		for _, t := range res.Traces {
			ids = append(ids, t.ID)
		}
		if req.Cursor = res.NextCursor; req.Cursor == "" {
			return ids, nil
		}
	}
}
