package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/vigilhq/vigil/store"
)

// This file lets the web UI (package web) call the API's handlers
// in-process: the same route table, handler logic and permission rules,
// with no loopback connection and no second implementation, so that a
// page and its API endpoint can never disagree.

type inProcessKey struct{}

// inProcessCall is the caller an in-process request carries (authenticateFor
// returns it instead of reading headers or cookies).
type inProcessCall struct{ p *principal }

// Response is the result of an in-process API call.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// OK reports a 2xx status.
func (r *Response) OK() bool { return r.Status >= 200 && r.Status < 300 }

// Do runs the API request method target (a path with its query, e.g.
// "/api/v1/trace/ID?include_annotations=true") in-process as caller c (nil
// is anonymous), through the API's route table and handlers, and returns
// what the API would have answered. parent gives the context and the host;
// body may be nil. Do is for the web UI: the caller was authenticated by
// the page (session cookie) and its CSRF check already applied.
func (s *Server) Do(parent *http.Request, c *Caller, method, target string, body []byte) *Response {
	ctx := context.WithValue(parent.Context(), inProcessKey{}, inProcessCall{p: c.principal()})
	req, err := http.NewRequestWithContext(ctx, method, target, bytes.NewReader(body))
	if err != nil {
		return &Response{Status: http.StatusBadRequest, Header: http.Header{},
			Body: []byte(`{"detail":"bad in-process request target","code":"invalid_request"}`)}
	}
	req.Host = parent.Host
	req.RemoteAddr = parent.RemoteAddr
	req.TLS = parent.TLS
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	rec := &callRecorder{header: http.Header{}}
	s.mux.ServeHTTP(rec, req)
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	return &Response{Status: rec.status, Header: rec.header, Body: rec.body.Bytes()}
}

// callRecorder is the http.ResponseWriter of an in-process call.
type callRecorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *callRecorder) Header() http.Header { return r.header }

func (r *callRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
}

func (r *callRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.body.Write(b)
}

// Flush is a no-op (streamed endpoints are read whole).
func (r *callRecorder) Flush() {}

// DatasetForRead resolves the dataset named name in username's namespace
// as GET /api/v1/dataset/byuser/{username}/{name} does (the same read
// rules; one the caller cannot read is a 404 *Error), without that
// endpoint's saved-query counts, which a page over a large dataset cannot
// afford on every view.
func (s *Server) DatasetForRead(r *http.Request, c *Caller, username, name string) (*store.Dataset, error) {
	if err := readScope(c); err != nil {
		return nil, err
	}
	r2 := r.Clone(r.Context())
	r2.SetPathValue("id", "")
	r2.SetPathValue("username", username)
	r2.SetPathValue("name", name)
	return s.datasetFromPath(r2, c.principal())
}

// CanWrite reports whether c may write resources of ownerID (the owner or
// an admin; explorer-api §1.4).
func (s *Server) CanWrite(c *Caller, ownerID string) bool { return s.canWrite(c.principal(), ownerID) }

// SearchPage is one page of GET /api/v1/search?dataset=<datasetID> as
// caller c: the same parser, access rules, store search and highlights,
// and the same JSON body, without counting the matches (total is -1):
// the exact count of a broad query over a large dataset costs more than
// the page. An invalid query is the API's 400 query_invalid *Error with
// its position. The dataset must already be readable by c
// (DatasetForRead).
func (s *Server) SearchPage(r *http.Request, c *Caller, datasetID, q, sort, cursor string, limit int) ([]byte, error) {
	if err := readScope(c); err != nil {
		return nil, err
	}
	p := c.principal()
	parsed, err := parseQuery(q)
	if err != nil {
		return nil, err
	}
	req := store.SearchRequest{Query: q, Cursor: cursor, DatasetIDs: []string{datasetID}, Order: store.OrderIndex, Limit: limit, NoTotal: true}
	s.searchAccess(p, &req)
	if sort != "" {
		o, ok := searchSorts[sort]
		if !ok {
			return nil, badRequest("sort must be one of index, -index, time_created, -time_created, time_last_pushed, -time_last_pushed; got %q", sort)
		}
		req.Order = o
	}
	req.WithMessages = len(parsed.Terms()) > 0
	res, err := s.runSearch(r.Context(), req)
	if errors.Is(err, store.ErrInvalidCursor) {
		return nil, badRequest("invalid cursor %q", req.Cursor)
	}
	if err != nil {
		return nil, queryError(err)
	}
	out := searchResponse{Total: -1, Parsed: parsed.String(), Traces: []searchHit{}}
	if res.NextCursor != "" {
		out.NextCursor = &res.NextCursor
	}
	if out.Traces, err = s.searchHits(r, res.Traces, parsed, req.WithMessages); err != nil {
		return nil, err
	}
	return json.Marshal(out)
}

// SharingEnabled reports whether link sharing of traces is on
// (sharing.enabled).
func (s *Server) SharingEnabled() bool { return !s.cfg.SharingDisabled }

// readScope is the route-level check of the API's read endpoints
// (accessAnon): anonymous callers, or keys with read scope or more; an
// ingest key gets the API's 403.
func readScope(c *Caller) error {
	if p := c.principal(); !p.allows(accessAnon) {
		return apiErr(http.StatusForbidden, CodeForbidden, "API key scope %q does not allow this request (needs %s)", p.scope(), accessNames[accessAnon])
	}
	return nil
}
