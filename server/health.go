package server

import (
	"context"
	"crypto/subtle"
	"net/http"
	"strings"
	"time"

	"github.com/vigilhq/vigil/internal/buildinfo"
)

func (s *Server) handleHealthz(w http.ResponseWriter, r *http.Request, _ *principal) error {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	return nil
}

func (s *Server) handleReadyz(w http.ResponseWriter, r *http.Request, _ *principal) error {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	checks := map[string]string{"store": "ok", "migrations": "ok", "trace_writer": "ok"}
	ok := true
	if err := s.st.Ping(ctx); err != nil {
		checks["store"], ok = err.Error(), false
	}
	if _, err := s.st.SchemaVersion(ctx); err != nil {
		checks["migrations"], ok = err.Error(), false
	}
	// A process whose guardrail change feed is down may serve stale rules
	// (explorer-api §9.1).
	var feedOK bool
	if checks["guardrail_feed"], feedOK = s.feed.status(); !feedOK {
		ok = false
	}
	if !ok {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "not_ready", "checks": checks})
		return nil
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ready", "checks": checks})
	return nil
}

func (s *Server) handleHello(w http.ResponseWriter, r *http.Request, _ *principal) error {
	writeJSON(w, http.StatusOK, map[string]string{"message": "Hello v1"})
	return nil
}

func (s *Server) handleVersion(w http.ResponseWriter, r *http.Request, _ *principal) error {
	sv, err := s.st.SchemaVersion(r.Context())
	if err != nil {
		return err
	}
	bi := buildinfo.Read(s.version) // as `vigil version` reports it
	writeJSON(w, http.StatusOK, map[string]any{
		"version": bi.Version, "commit": bi.Commit, "commit_time": bi.CommitTime, "modified": bi.Modified,
		"go": bi.Go, "platform": bi.Platform, "store": s.st.Kind(), "schema_version": sv,
	})
	return nil
}

// handleMetrics serves the Prometheus text format to the metrics token, an
// admin key, or everyone when metrics are public.
func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request, _ *principal) error {
	if !s.cfg.MetricsPublic {
		tok := strings.TrimSpace(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
		if s.cfg.MetricsToken == "" || subtle.ConstantTimeCompare([]byte(tok), []byte(s.cfg.MetricsToken)) != 1 {
			p, err := s.authenticate(r)
			if err != nil {
				return err
			}
			if !p.isAdmin() {
				return &Error{Status: http.StatusUnauthorized, Code: CodeUnauthenticated, Detail: "metrics need the metrics token or an admin key"}
			}
		}
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	return s.metrics.Write(w)
}
