package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/vigilhq/vigil/store"
)

// access is the minimum credential an endpoint needs (explorer-api §1.3).
type access int

const (
	accessNone   access = iota // no credential needed, none checked beyond a bad header
	accessPublic               // anonymous or any key
	accessAnon                 // anonymous (public data) or a key with read scope
	accessAny                  // any valid key, any scope
	accessRead                 // read, full or admin
	accessIngest               // ingest, full or admin
	accessFull                 // full or admin
	accessAdmin                // admin
)

// principal is an authenticated caller. A nil *principal is anonymous.
type principal struct {
	User *store.User
	Key  *store.APIKey
}

func (p *principal) scope() string {
	if p == nil || p.Key == nil {
		return ""
	}
	return p.Key.Scope
}

// isAdmin is the one admin check (explorer-api §1.3): an admin-scope key
// whose user is an admin now. authenticate reloads the user of an
// admin-scope key on every request, so a demotion takes effect at once on
// every process, not when the principal cache expires.
func (p *principal) isAdmin() bool {
	return p != nil && p.Key != nil && p.User != nil && p.Key.Scope == store.ScopeAdmin && p.User.Role == store.RoleAdmin
}

// allows reports whether p's scope grants a.
func (p *principal) allows(a access) bool {
	switch a {
	case accessNone, accessPublic:
		return true
	case accessAnon:
		return p == nil || p.allows(accessRead)
	}
	if p == nil {
		return false
	}
	sc := p.scope()
	switch a {
	case accessAny:
		return true
	case accessRead:
		return sc == store.ScopeRead || sc == store.ScopeFull || sc == store.ScopeAdmin
	case accessIngest:
		return sc == store.ScopeIngest || sc == store.ScopeFull || sc == store.ScopeAdmin
	case accessFull:
		return sc == store.ScopeFull || sc == store.ScopeAdmin
	case accessAdmin:
		return p.isAdmin()
	}
	return false
}

var accessNames = map[access]string{accessAnon: "read", accessRead: "read", accessIngest: "ingest", accessFull: "full", accessAdmin: "admin"}

// authCacheTTL bounds how long a resolved key stays cached
// (explorer-api §1.3: at most 60 s; revocation evicts at once).
const authCacheTTL = 60 * time.Second

type cachedPrincipal struct {
	p         *principal
	expires   time.Time
	lastTouch time.Time
}

var errInvalidKey = &Error{Status: http.StatusUnauthorized, Code: CodeUnauthenticated, Detail: "Invalid API key"}

// authenticate resolves the request's credential. No Authorization header
// gives (nil, nil); an unknown, revoked or expired key, or one whose user
// is disabled, gives errInvalidKey.
func (s *Server) authenticate(r *http.Request) (*principal, error) {
	return s.authenticateFor(r, true)
}

// authenticateFor is authenticate; with fresh false a cached admin-scope
// principal is returned without reloading its user. That is for routes
// whose handler reads nothing of the caller (the check API): the access
// check of every level but admin looks at the key's scope only, and a
// disabled user's key then lapses with the cache (at most authCacheTTL),
// as every other key does. It saves a store query per request.
func (s *Server) authenticateFor(r *http.Request, fresh bool) (*principal, error) {
	if ip, ok := r.Context().Value(inProcessKey{}).(inProcessCall); ok {
		return ip.p, nil // an in-process call (webapi.go) carries its caller
	}
	h := r.Header.Get("Authorization")
	if h == "" {
		return s.authenticateSession(r) // the browser session cookie (sessions.go)
	}
	scheme, key, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(key) == "" {
		return nil, errInvalidKey
	}
	return s.authenticateKey(r.Context(), strings.TrimSpace(key), fresh)
}

// authenticateKey resolves a plaintext API key (authenticateFor's work
// after the header is parsed); fresh is authenticateFor's.
func (s *Server) authenticateKey(ctx context.Context, key string, fresh bool) (*principal, error) {
	hash := store.HashKey(key)
	now := s.now()
	if v, ok := s.authCache.Load(hash); ok {
		c := v.(*cachedPrincipal)
		if now.Before(c.expires) && (c.p.Key.ExpiresAt == nil || now.Before(*c.p.Key.ExpiresAt)) {
			if c.p.Key.Scope != store.ScopeAdmin || !fresh {
				return c.p, nil
			}
			return s.refreshAdmin(ctx, hash, c.p)
		}
		s.authCache.Delete(hash)
	}
	k, err := s.st.GetAPIKeyByHash(ctx, hash)
	if errors.Is(err, store.ErrNotFound) {
		return nil, errInvalidKey
	}
	if err != nil {
		return nil, fmt.Errorf("look up API key: %w", err)
	}
	if k.RevokedAt != nil || (k.ExpiresAt != nil && !now.Before(*k.ExpiresAt)) {
		return nil, errInvalidKey
	}
	u, err := s.st.GetUser(ctx, k.OwnerID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, errInvalidKey
	}
	if err != nil {
		return nil, fmt.Errorf("look up key owner: %w", err)
	}
	if u.Disabled {
		return nil, errInvalidKey
	}
	p := &principal{User: u, Key: k}
	c := &cachedPrincipal{p: p, expires: now.Add(authCacheTTL)}
	if k.LastUsedAt == nil || now.Sub(*k.LastUsedAt) >= time.Minute {
		c.lastTouch = now
		// Best effort: a failed touch must not fail the request.
		if err := s.st.TouchAPIKey(context.WithoutCancel(ctx), k.ID, now); err != nil {
			s.log.Warn("touch API key", "key_id", k.ID, "err", err)
		}
	}
	s.authCache.Store(hash, c)
	return p, nil
}

// refreshAdmin reloads the user of a cached admin-scope principal, so that
// admin powers follow the user's current role and disabled flag (a PATCH on
// another process, or straight in the database, is seen by the next request).
// It returns a new principal; the cached one is never mutated, as other
// requests may hold it.
func (s *Server) refreshAdmin(ctx context.Context, hash string, p *principal) (*principal, error) {
	u, err := s.st.GetUser(ctx, p.User.ID)
	if errors.Is(err, store.ErrNotFound) {
		s.authCache.Delete(hash)
		return nil, errInvalidKey
	}
	if err != nil {
		return nil, fmt.Errorf("look up key owner %s: %w", p.User.ID, err)
	}
	if u.Disabled {
		s.authCache.Delete(hash)
		return nil, errInvalidKey
	}
	return &principal{User: u, Key: p.Key}, nil
}

// forgetKey evicts a key from the principal cache (on revocation).
func (s *Server) forgetKey(hash string) { s.authCache.Delete(hash) }

// generateKey returns a new key: "vgl-" + 64 lowercase hex characters.
func generateKey() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("generate API key: %w", err)
	}
	return "vgl-" + hex.EncodeToString(b[:]), nil
}

// validateImportedKey checks a key given from outside (VIGIL_API_KEY): 20
// to 256 printable ASCII characters without whitespace.
func validateImportedKey(k string) error {
	if len(k) < 20 || len(k) > 256 {
		return fmt.Errorf("an API key must be 20 to 256 characters, got %d", len(k))
	}
	for i := 0; i < len(k); i++ {
		if k[i] <= ' ' || k[i] > '~' {
			return fmt.Errorf("an API key must be printable ASCII without whitespace (byte %d)", i)
		}
	}
	return nil
}

// newKeyRow returns the stored form of plaintext key.
func newKeyRow(plain, name, scope, ownerID string) *store.APIKey {
	return &store.APIKey{
		Hash:    store.HashKey(plain),
		Prefix:  plain[:min(8, len(plain))],
		Last4:   plain[max(0, len(plain)-4):],
		Name:    name,
		Scope:   scope,
		OwnerID: ownerID,
	}
}
