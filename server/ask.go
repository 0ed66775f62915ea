package server

import (
	"context"
	"errors"
	"net/http"

	"github.com/vigilhq/vigil/store"
)

// This file is what package ask (questions over runs, POST /api/v1/ask)
// and the web UI's Ask box use of the server: the visibility rules of
// explorer-api §1.4 applied to a Caller outside a handler, so that no
// other package re-implements them, and the request and answer types of
// an ask, so that the web package can render an answer without importing
// package ask (which sits above it) or calling the API over loopback.

// SearchScope sets the access fields of req (AllOwners, OwnerID, Public,
// CallerID) to what c may read; a nil c is an anonymous caller.
func (s *Server) SearchScope(c *Caller, req *store.SearchRequest) {
	s.searchAccess(c.principal(), req)
}

// FindingScope restricts f to the findings c may list across runs: its
// user's (every owner's for admins). It reports false for an anonymous
// caller, who may list findings only run by run (f.RunID of a trace that
// TraceFor gave it).
func (s *Server) FindingScope(c *Caller, f *store.FindingFilter) bool {
	p := c.principal()
	switch {
	case p == nil:
		return false
	case !p.isAdmin():
		f.OwnerID = p.User.ID
	}
	return true
}

// TraceFor loads trace id (with its messages when withMessages) when c
// may read it. A trace that does not exist or that c may not read gives
// a 404 *Error that matches store.ErrNotFound.
func (s *Server) TraceFor(ctx context.Context, c *Caller, id string, withMessages bool) (*store.Trace, error) {
	r, err := http.NewRequestWithContext(ctx, http.MethodGet, "/", nil)
	if err != nil {
		return nil, err
	}
	t, err := s.traceForRead(r, c.principal(), id, withMessages)
	return t, markNotFound(err)
}

// DatasetFor resolves ref (a dataset id, "user/name", or a name in c's
// namespace) to a dataset c may read; otherwise a 404 *Error that
// matches store.ErrNotFound.
func (s *Server) DatasetFor(ctx context.Context, c *Caller, ref string) (*store.Dataset, error) {
	r, err := http.NewRequestWithContext(ctx, http.MethodGet, "/", nil)
	if err != nil {
		return nil, err
	}
	d, err := s.searchDataset(r, c.principal(), ref)
	return d, markNotFound(err)
}

// markNotFound makes a 404 *Error match store.ErrNotFound.
func markNotFound(err error) error {
	var e *Error
	if errors.As(err, &e) && e.Status == http.StatusNotFound && e.Err == nil {
		c := *e
		c.Err = store.ErrNotFound
		return &c
	}
	return err
}
