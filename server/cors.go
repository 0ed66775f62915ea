package server

import (
	"net/http"
	"slices"
	"strings"
)

// CORS for browser clients on other origins (configuration key
// cors_origins). A request whose Origin is listed (or any origin with
// "*") gets Access-Control-Allow-Origin; a preflight (OPTIONS with
// Access-Control-Request-Method) from such an origin is answered 204 with
// the methods and headers the API uses. Credentials (cookies) are never
// allowed cross-origin: browser clients send Authorization: Bearer.

// corsAllowHeaders are the request headers API clients send.
const corsAllowHeaders = "Authorization, Content-Type, Content-Encoding, Idempotency-Key, If-Match, If-None-Match"

// corsExposeHeaders are the response headers a script may read.
const corsExposeHeaders = "ETag, Retry-After, Content-Disposition"

// cors wraps next with CORS headers for Config.CORSOrigins; with none it
// returns next unchanged.
func (s *Server) cors(next http.Handler) http.Handler {
	origins := s.cfg.CORSOrigins
	if len(origins) == 0 {
		return next
	}
	anyOrigin := slices.Contains(origins, "*")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if origin == "" {
			next.ServeHTTP(w, r)
			return
		}
		h := w.Header()
		h.Add("Vary", "Origin")
		if !anyOrigin && !slices.ContainsFunc(origins, func(o string) bool { return strings.EqualFold(strings.TrimSuffix(o, "/"), origin) }) {
			next.ServeHTTP(w, r)
			return
		}
		if anyOrigin {
			h.Set("Access-Control-Allow-Origin", "*")
		} else {
			h.Set("Access-Control-Allow-Origin", origin)
		}
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			h.Set("Access-Control-Allow-Methods", "GET, HEAD, POST, PUT, PATCH, DELETE")
			h.Set("Access-Control-Allow-Headers", corsAllowHeaders)
			h.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		h.Set("Access-Control-Expose-Headers", corsExposeHeaders)
		next.ServeHTTP(w, r)
	})
}
