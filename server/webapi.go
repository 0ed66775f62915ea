package server

import (
	"bytes"
	"context"
	"net/http"
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
