package server

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/vigilhq/vigil/store"
)

// handleIdentity serves GET /api/v1/user/identity (explorer-api §12.1).
func (s *Server) handleIdentity(w http.ResponseWriter, r *http.Request, p *principal) error {
	writeJSON(w, http.StatusOK, map[string]string{
		"username": p.User.Username, "id": p.User.ID, "role": p.User.Role, "key_id": p.Key.ID, "scope": p.Key.Scope,
	})
	return nil
}

// handleUserInfo serves GET /api/v1/user/info.
func (s *Server) handleUserInfo(w http.ResponseWriter, r *http.Request, p *principal) error {
	if p == nil {
		writeJSON(w, http.StatusOK, map[string]any{"id": nil, "username": nil, "signedUp": false})
		return nil
	}
	ref := newUserRef(p.User)
	var email any
	if p.User.Email != "" {
		email = p.User.Email
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"id": p.User.ID, "username": p.User.Username, "image_url_hash": ref.ImageURLHash,
		"signedUp": true, "name": p.User.Username, "email": email,
	})
	return nil
}

// handleKeyCreate serves POST /api/v1/keys/create.
func (s *Server) handleKeyCreate(w http.ResponseWriter, r *http.Request, p *principal) error {
	var in struct {
		Name      string  `json:"name"`
		Scope     string  `json:"scope"`
		ExpiresAt *string `json:"expires_at"`
		User      string  `json:"user"`
	}
	if err := s.decodeJSON(w, r, &in, true); err != nil {
		return err
	}
	if err := checkLength("name", in.Name, maxKeyName); err != nil {
		return err
	}
	switch in.Scope {
	case "":
		in.Scope = store.ScopeFull
	case store.ScopeRead, store.ScopeIngest, store.ScopeFull:
	case store.ScopeAdmin:
		if !p.isAdmin() {
			return apiErr(http.StatusForbidden, CodeForbidden, "only an admin key can create an admin key")
		}
	default:
		return badRequest("scope must be read, ingest, full or admin, got %q", in.Scope)
	}
	owner := p.User
	if in.User != "" && in.User != p.User.Username {
		if !p.isAdmin() {
			return apiErr(http.StatusForbidden, CodeForbidden, "only an admin can create keys for another user")
		}
		u, err := s.st.GetUserByName(r.Context(), in.User)
		if errors.Is(err, store.ErrNotFound) {
			return badRequest("unknown user %q", in.User)
		}
		if err != nil {
			return err
		}
		owner = u
	}
	if in.Scope == store.ScopeAdmin && owner.Role != store.RoleAdmin {
		return badRequest("admin keys can only belong to admin users")
	}
	plain, err := generateKey()
	if err != nil {
		return err
	}
	k := newKeyRow(plain, in.Name, in.Scope, owner.ID)
	if in.ExpiresAt != nil && *in.ExpiresAt != "" {
		t, ok := parseInputTime(*in.ExpiresAt)
		if !ok {
			return badRequest("expires_at must be an RFC 3339 time, got %q", *in.ExpiresAt)
		}
		if !t.After(s.now()) {
			return badRequest("expires_at %s is not in the future (a key that never works)", *in.ExpiresAt)
		}
		k.ExpiresAt = &t
	}
	if err := s.st.CreateAPIKey(r.Context(), k); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"id": k.ID, "key": plain, "name": k.Name, "scope": k.Scope, "prefix": k.Prefix, "expires_at": optTime(k.ExpiresAt),
	})
	return nil
}

// Length limits of caller-chosen names and ids (explorer-api §12.1,
// ledger.md §10), in bytes: generous for real use, small enough that a
// stored row and every listing stay small.
const (
	maxKeyName      = 256
	maxSDKSessionID = 256
)

// checkLength is a 400 naming field when v is longer than limit bytes or
// holds a NUL, which no database text column keeps (the store's error for
// it cannot say which field).
func checkLength(field, v string, limit int) error {
	if len(v) > limit {
		return badRequest("%s is %d bytes long; the limit is %d", field, len(v), limit)
	}
	if i := strings.IndexByte(v, 0); i >= 0 {
		return badRequest("%s holds a NUL character (\\u0000) at byte %d, which cannot be stored", field, i)
	}
	return nil
}

func optTime(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := formatTime(*t)
	return &s
}

// handleKeyList serves GET /api/v1/keys/list: the caller's keys.
func (s *Server) handleKeyList(w http.ResponseWriter, r *http.Request, p *principal) error {
	keys, err := s.st.ListAPIKeys(r.Context(), p.User.ID)
	if err != nil {
		return err
	}
	now := s.now()
	type keyJSON struct {
		ID          string  `json:"id"`
		TimeCreated string  `json:"time_created"`
		Expired     bool    `json:"expired"`
		HashedKey   string  `json:"hashed_key"`
		Name        string  `json:"name"`
		Scope       string  `json:"scope"`
		Prefix      string  `json:"prefix"`
		LastUsedAt  *string `json:"last_used_at"`
		ExpiresAt   *string `json:"expires_at"`
		RevokedAt   *string `json:"revoked_at"`
	}
	out := make([]keyJSON, len(keys))
	for i, k := range keys {
		out[i] = keyJSON{
			ID: k.ID, TimeCreated: formatTime(k.TimeCreated), HashedKey: k.Last4, Name: k.Name, Scope: k.Scope,
			Prefix: k.Prefix, LastUsedAt: optTime(k.LastUsedAt), ExpiresAt: optTime(k.ExpiresAt), RevokedAt: optTime(k.RevokedAt),
			Expired: k.RevokedAt != nil || (k.ExpiresAt != nil && !now.Before(*k.ExpiresAt)),
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"userid": p.User.ID, "keys": out})
	return nil
}

// handleKeyRevoke serves DELETE /api/v1/keys/{id}: own keys, or any key
// for an admin. The principal cache forgets the key at once.
func (s *Server) handleKeyRevoke(w http.ResponseWriter, r *http.Request, p *principal) error {
	k, err := s.st.GetAPIKey(r.Context(), r.PathValue("id"))
	if errors.Is(err, store.ErrNotFound) || (err == nil && k.OwnerID != p.User.ID && !p.isAdmin()) {
		return notFound("API key not found")
	}
	if err != nil {
		return err
	}
	if err := s.st.RevokeAPIKey(r.Context(), k.ID, s.now()); err != nil {
		return err
	}
	s.forgetKey(k.Hash)
	writeJSON(w, http.StatusOK, map[string]bool{"success": true})
	return nil
}
