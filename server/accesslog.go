package server

import (
	"context"
	"log/slog"
	"math"
	"net/http"
	"time"
)

// The access log: one line per request, written by Config.AccessLog (the
// handler decides text or JSON). A line holds the method, the path (never
// the query), the status, the response bytes, the duration, the remote
// address and the id of the API key that authenticated the request —
// never the key itself. The key id reaches the log through the request
// context: accessLog puts an *accessEntry there and serveAuthed fills it
// in once the caller is known (noteKey).

// accessEntry is what handlers learn about a request for its log line.
type accessEntry struct {
	keyID string
}

type accessEntryKey struct{}

// noteKey records the key that authenticated r for its access-log line.
func noteKey(r *http.Request, p *principal) {
	if p == nil || p.Key == nil {
		return
	}
	if e, ok := r.Context().Value(accessEntryKey{}).(*accessEntry); ok {
		e.keyID = p.Key.ID
	}
}

// accessLog wraps next with the access log; without Config.AccessLog it
// returns next unchanged.
func (s *Server) accessLog(next http.Handler) http.Handler {
	log := s.cfg.AccessLog
	if log == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !log.Enabled(r.Context(), slog.LevelInfo) {
			// --log-level above info: no line, so nothing to collect.
			next.ServeHTTP(w, r)
			return
		}
		start := time.Now()
		entry := &accessEntry{}
		cw := &countingWriter{ResponseWriter: w}
		r = r.WithContext(context.WithValue(r.Context(), accessEntryKey{}, entry))
		defer func() {
			// A handler that aborts a started response (a broken export
			// stream) panics with http.ErrAbortHandler: log the request,
			// then let net/http close the connection as before.
			aborted := recover()
			status := cw.status
			if status == 0 {
				status = http.StatusOK
			}
			attrs := []slog.Attr{
				slog.String("method", r.Method),
				slog.String("path", r.URL.Path),
				slog.Int("status", status),
				slog.Int64("bytes", cw.bytes),
				slog.Float64("duration_ms", math.Round(float64(time.Since(start).Microseconds()))/1000),
				slog.String("remote", r.RemoteAddr),
			}
			if entry.keyID != "" {
				attrs = append(attrs, slog.String("key_id", entry.keyID))
			}
			if aborted != nil {
				attrs = append(attrs, slog.Bool("aborted", true))
			}
			log.LogAttrs(r.Context(), slog.LevelInfo, "request", attrs...)
			if aborted != nil {
				panic(aborted)
			}
		}()
		next.ServeHTTP(cw, r)
	})
}

// countingWriter records the status and counts the body bytes written.
type countingWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (w *countingWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *countingWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

// Flush lets streaming handlers flush through the wrapper.
func (w *countingWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *countingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
