package server

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/vigilhq/vigil/ingest"
	"github.com/vigilhq/vigil/store"
)

// This file is what the packages built on the server use to join it on
// the same listener: the web UI, the embedded LLM and MCP gateways and
// OTLP ingest mount their handlers with Mount, authenticate callers with
// the same keys and cache (Authenticate, AuthenticateKey) and write
// through the server's Ingester, so that monitors, receipts and search
// apply to every source of traces.

// Caller is an authenticated API key and its user.
type Caller struct {
	User *store.User
	Key  *store.APIKey
}

// Scope is the key's scope (store.ScopeRead, ScopeIngest, ScopeFull or
// ScopeAdmin); "" for a nil Caller (no key).
func (c *Caller) Scope() string { return c.principal().scope() }

// IsAdmin reports whether c is an admin-scope key of a user who is an
// admin.
func (c *Caller) IsAdmin() bool { return c.principal().isAdmin() }

// CanRead, CanIngest and CanWrite report whether c's scope allows reading,
// ingesting (push, append, check) and full writes (explorer-api §1.3).
func (c *Caller) CanRead() bool   { return c != nil && c.principal().allows(accessRead) }
func (c *Caller) CanIngest() bool { return c != nil && c.principal().allows(accessIngest) }
func (c *Caller) CanWrite() bool  { return c != nil && c.principal().allows(accessFull) }

func (c *Caller) principal() *principal {
	if c == nil {
		return nil
	}
	return &principal{User: c.User, Key: c.Key}
}

func callerOf(p *principal) *Caller {
	if p == nil {
		return nil
	}
	return &Caller{User: p.User, Key: p.Key}
}

// ErrInvalidKey is the error of an unknown, revoked or expired key, or of
// a key whose user is disabled.
var ErrInvalidKey error = errInvalidKey

// Authenticate resolves the request's credential as the API does (same
// cache, same revocation): the "Authorization: Bearer KEY" header, or
// without one the browser session cookie (sessions.go; a state-changing
// request from another origin gets a 403 *Error). No credential gives
// (nil, nil); a bad key gives ErrInvalidKey.
func (s *Server) Authenticate(r *http.Request) (*Caller, error) {
	p, err := s.authenticate(r)
	return callerOf(p), err
}

// AuthenticateKey resolves a plaintext API key taken from elsewhere than
// the Authorization header (a gateway's own header, an OTLP exporter's
// headers, a browser session). A bad key gives ErrInvalidKey. It serves
// the data plane (gateway, MCP, OTLP), so like the check API it takes the
// cached principal even for an admin-scope key: the owner's role is as of
// the cache (at most a minute old), and no store query runs per call.
// The API's admin routes still re-read the user on every request.
func (s *Server) AuthenticateKey(ctx context.Context, key string) (*Caller, error) {
	p, err := s.authenticateKey(ctx, key, false)
	return callerOf(p), err
}

// Store is the server's store.
func (s *Server) Store() store.Store { return s.st }

// Ingester is the one write path (package ingest) the server's push,
// append and upload use; every other source of traces writes through it.
func (s *Server) Ingester() *ingest.Ingester { return s.ing }

// Rules is the compiled-rule cache shared by the check API and dataset
// guardrails.
func (s *Server) Rules() *RuleCache { return s.rules }

// Logger is the server's logger.
func (s *Server) Logger() *slog.Logger { return s.log }

// Mount serves pattern (a net/http ServeMux pattern) with h, behind the
// server's access log, CORS, admission control and panic recovery. The
// pattern "/" takes every path no other route matches outside /api/
// (the web UI; without it such paths get the API's JSON 404). Mount may
// be called while the server serves; a pattern that conflicts with an
// existing route panics, as ServeMux.Handle does.
func (s *Server) Mount(pattern string, h http.Handler) {
	if pattern == "/" {
		s.root.Store(&h)
		return
	}
	s.mux.Handle(pattern, h)
}

// serveRoot serves the paths no route matches outside /api/.
func (s *Server) serveRoot(w http.ResponseWriter, r *http.Request) {
	if h := s.root.Load(); h != nil {
		(*h).ServeHTTP(w, r)
		return
	}
	if err := s.handleAPINotFound(w, r, nil); err != nil {
		writeError(w, r, s.log, err)
	}
}

// WriteError writes err as the API's JSON error body (explorer-api §1.5):
// an *Error keeps its status and code, anything else is a logged 500.
func (s *Server) WriteError(w http.ResponseWriter, r *http.Request, err error) {
	writeError(w, r, s.log, err)
}
