package server

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/vigilhq/vigil/store"
)

// This file holds the browser sessions of explorer-api §12.3: login with
// an API key sets the vigil_session cookie, authenticate accepts that
// cookie when no Authorization header is sent (auth.go calls
// authenticateSession), and a state-changing request authenticated by the
// cookie must come from the same origin (CSRF).

// SessionCookie is the name of the browser session cookie.
const SessionCookie = "vigil_session"

// DefaultSessionTTL is how long a browser session lives without use when
// Config.SessionTTL is zero (auth.session_ttl).
const DefaultSessionTTL = 7 * 24 * time.Hour

// sessionTouchEvery bounds the writes that keep a session alive.
const sessionTouchEvery = time.Minute

func (s *Server) sessionTTL() time.Duration {
	if s.cfg.SessionTTL > 0 {
		return s.cfg.SessionTTL
	}
	return DefaultSessionTTL
}

// sessionRoutes registers the login and logout endpoints (§12.3).
func (s *Server) sessionRoutes(mux *http.ServeMux) {
	s.handle(mux, "POST /api/v1/auth/login", accessNone, s.handleLogin)
	s.handle(mux, "POST /api/v1/auth/logout", accessNone, s.handleLogout)
}

// Login checks key, creates a browser session with the key's scope and
// sets its cookie on w. A bad key gives ErrInvalidKey.
func (s *Server) Login(w http.ResponseWriter, r *http.Request, key string) (*Caller, error) {
	p, err := s.authenticateKey(r.Context(), key, true)
	if err != nil {
		return nil, err
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("generate session token: %w", err)
	}
	token := base64.RawURLEncoding.EncodeToString(b[:])
	now := s.now().UTC()
	ws := &store.WebSession{TokenHash: store.HashKey(token), KeyID: p.Key.ID, UserID: p.User.ID,
		Scope: p.Key.Scope, CreatedAt: now, LastUsedAt: now}
	if err := s.st.CreateWebSession(r.Context(), ws); err != nil {
		return nil, fmt.Errorf("create browser session for user %s: %w", p.User.Username, err)
	}
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: token, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil || s.cfg.SecureCookies,
		MaxAge: int(s.sessionTTL() / time.Second)})
	return callerOf(p), nil
}

// Logout deletes the request's browser session, if any, and clears its
// cookie on w.
func (s *Server) Logout(w http.ResponseWriter, r *http.Request) error {
	if c, err := r.Cookie(SessionCookie); err == nil && c.Value != "" {
		if err := s.st.DeleteWebSession(r.Context(), store.HashKey(c.Value)); err != nil {
			return fmt.Errorf("delete browser session: %w", err)
		}
	}
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: "", Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil || s.cfg.SecureCookies, MaxAge: -1})
	return nil
}

// CheckOrigin is the CSRF check of §12.3: the request's Origin, or else
// its Referer, must name the request's host. It returns a 403 *Error
// otherwise.
func CheckOrigin(r *http.Request) error {
	src := r.Header.Get("Origin")
	if src == "" || src == "null" {
		src = r.Header.Get("Referer")
	}
	if src != "" {
		if u, err := url.Parse(src); err == nil && u.Host != "" && u.Host == r.Host {
			return nil
		}
	}
	return apiErr(http.StatusForbidden, CodeForbidden, "cross-site request refused: a request authenticated by the session cookie must carry an Origin or Referer of %s", r.Host)
}

// safeMethod reports whether m changes nothing (no CSRF check).
func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// authenticateSession resolves the vigil_session cookie. No cookie, or a
// session that is unknown, expired, or whose key was revoked or whose user
// was disabled, is anonymous (nil, nil): the browser is asked to sign in
// again. A state-changing request from another origin gets 403.
func (s *Server) authenticateSession(r *http.Request) (*principal, error) {
	c, err := r.Cookie(SessionCookie)
	if err != nil || c.Value == "" {
		return nil, nil
	}
	p, err := s.sessionPrincipal(r.Context(), c.Value)
	if err != nil || p == nil {
		return nil, err
	}
	if !safeMethod(r.Method) {
		if err := CheckOrigin(r); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func (s *Server) sessionPrincipal(ctx context.Context, token string) (*principal, error) {
	hash := store.HashKey(token)
	ws, err := s.st.GetWebSession(ctx, hash)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("look up browser session: %w", err)
	}
	now := s.now()
	if now.Sub(ws.LastUsedAt) > s.sessionTTL() {
		if err := s.st.DeleteWebSession(context.WithoutCancel(ctx), hash); err != nil {
			s.log.Warn("delete expired browser session", "err", err)
		}
		return nil, nil
	}
	k, err := s.st.GetAPIKey(ctx, ws.KeyID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("look up the key of a browser session: %w", err)
	}
	if k.RevokedAt != nil || (k.ExpiresAt != nil && !now.Before(*k.ExpiresAt)) {
		return nil, nil
	}
	u, err := s.st.GetUser(ctx, ws.UserID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("look up the user of a browser session: %w", err)
	}
	if u.Disabled {
		return nil, nil
	}
	if now.Sub(ws.LastUsedAt) >= sessionTouchEvery {
		if err := s.st.TouchWebSession(context.WithoutCancel(ctx), hash, now.UTC()); err != nil {
			s.log.Warn("touch browser session", "err", err)
		}
	}
	kc := *k
	kc.Scope = ws.Scope
	return &principal{User: u, Key: &kc}, nil
}

func (s *Server) handleLogin(w http.ResponseWriter, r *http.Request, _ *principal) error {
	var in struct {
		APIKey string `json:"api_key"`
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 64<<10))
	if err != nil {
		return badRequest("read login body: %v", err)
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return apiErr(http.StatusBadRequest, CodeInvalidJSON, "login body is not a JSON object {\"api_key\": \"…\"}: %v", err)
	}
	if in.APIKey == "" {
		return badRequest("api_key must be provided and non-empty")
	}
	c, err := s.Login(w, r, in.APIKey)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"username": c.User.Username, "role": c.User.Role, "scope": c.Key.Scope})
	return nil
}

func (s *Server) handleLogout(w http.ResponseWriter, r *http.Request, _ *principal) error {
	if c, err := r.Cookie(SessionCookie); err == nil && c.Value != "" {
		if err := CheckOrigin(r); err != nil {
			return err
		}
	}
	if err := s.Logout(w, r); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]bool{"success": true})
	return nil
}
