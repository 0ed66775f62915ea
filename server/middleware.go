package server

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/vigilhq/vigil/store"
)

// handlerFunc is an API handler. p is the authenticated caller (nil for
// anonymous). A returned error is written in the one error shape.
type handlerFunc func(w http.ResponseWriter, r *http.Request, p *principal) error

// statusWriter records the status a handler wrote.
type statusWriter struct {
	http.ResponseWriter
	status  int
	written bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.written {
		w.status, w.written = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if !w.written {
		w.status, w.written = http.StatusOK, true
	}
	return w.ResponseWriter.Write(b)
}

// Flush lets streaming handlers flush through the wrapper.
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// handle registers h for pattern behind auth, metrics and error writing.
func (s *Server) handle(mux *http.ServeMux, pattern string, a access, h handlerFunc) {
	route := pattern
	if _, path, ok := strings.Cut(pattern, " "); ok {
		route = path
	}
	method, _, _ := strings.Cut(pattern, " ")
	// The admin reload of the caller's user is needed by admin routes and
	// by handlers that read the caller; callerUnused lists the others.
	fresh := a == accessAdmin || !callerUnused[pattern]
	// The route's 200 counter and its duration histogram, looked up on the
	// first request (a cell shows in /metrics once created) and kept.
	var ok200 atomic.Pointer[atomic.Uint64]
	type histCell struct {
		h       *histogram
		buckets []float64
	}
	var durations atomic.Pointer[histCell]
	mux.Handle(pattern, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			code := sw.status
			if !sw.written {
				code = http.StatusOK
			}
			if code == http.StatusOK {
				c := ok200.Load()
				if c == nil {
					c = s.metrics.counterCell("vigil_http_requests_total", route, method, "200")
					ok200.Store(c)
				}
				c.Add(1)
			} else {
				s.metrics.Add("vigil_http_requests_total", 1, route, method, strconv.Itoa(code))
			}
			d := durations.Load()
			if d == nil {
				d = &histCell{}
				d.h, d.buckets = s.metrics.histCell("vigil_http_request_duration_seconds", route)
				durations.Store(d)
			}
			d.h.observe(d.buckets, time.Since(start).Seconds())
		}()
		err := s.serveAuthed(sw, r, a, fresh, h)
		if err != nil {
			if sw.written {
				// Too late for an error body (a stream broke). Returning
				// would end the response cleanly (a final empty chunk), so
				// a truncated export would pass for a complete one: abort
				// the connection so the client's read fails instead.
				s.log.Warn("request failed after response started", "route", route, "err", err)
				panic(http.ErrAbortHandler)
			}
			writeError(sw, r, s.log, err)
		}
	}))
}

// serveAuthed authenticates r, checks that the caller may make it and
// calls h; fresh is authenticateFor's.
func (s *Server) serveAuthed(w http.ResponseWriter, r *http.Request, a access, fresh bool, h handlerFunc) error {
	if a == accessNone {
		return h(w, r, nil)
	}
	p, err := s.authenticateFor(r, fresh)
	if err != nil {
		return err
	}
	noteKey(r, p)
	if !p.allows(a) {
		if p == nil {
			return &Error{Status: http.StatusUnauthorized, Code: CodeUnauthenticated, Detail: "Missing API key"}
		}
		if a == accessAdmin && p.scope() == store.ScopeAdmin && p.User != nil {
			// An admin-scope key whose user was demoted: the scope is not
			// what is missing.
			return apiErr(http.StatusForbidden, CodeForbidden, "user %s is a %s now: admin routes need an admin-scope key of an admin user", p.User.Username, p.User.Role)
		}
		return apiErr(http.StatusForbidden, CodeForbidden, "API key scope %q does not allow this request (needs %s)", p.scope(), accessNames[a])
	}
	return h(w, r, p)
}

// recoverMiddleware turns a panic into a 500 JSON response and a log line;
// the server keeps running.
func (s *Server) recoverMiddleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.Error("panic serving request", "method", r.Method, "path", r.URL.Path, "panic", v, "stack", string(debug.Stack()))
				writeError(w, r, s.log, &Error{Status: http.StatusInternalServerError, Code: CodeInternal,
					Detail: "internal server error", Err: fmt.Errorf("panic: %v", v)})
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// body returns the request body limited to limit bytes (413 beyond),
// gunzipped when Content-Encoding is gzip (the limit then applies to the
// decompressed bytes as well).
func (s *Server) body(w http.ResponseWriter, r *http.Request, limit int64) (io.Reader, error) {
	rd := http.MaxBytesReader(w, r.Body, limit)
	switch strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding"))) {
	case "", "identity":
		return rd, nil
	case "gzip":
		zr, err := gzip.NewReader(rd)
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				return nil, err
			}
			return nil, apiErr(http.StatusBadRequest, CodeInvalidRequest, "invalid gzip body: %v", err)
		}
		return &limitedReader{r: zr, n: limit, limit: limit}, nil
	default:
		return nil, apiErr(http.StatusUnsupportedMediaType, CodeUnsupportedMedia,
			"unsupported Content-Encoding %q (use gzip or none)", r.Header.Get("Content-Encoding"))
	}
}

// limitedReader fails with *http.MaxBytesError{Limit: limit} when r has
// more than limit bytes; n is what is left. Like http.MaxBytesReader, it
// reads one byte past the limit to tell "exactly limit" from "more".
type limitedReader struct {
	r     io.Reader
	n     int64
	limit int64
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if int64(len(p)) > l.n+1 {
		p = p[:l.n+1]
	}
	n, err := l.r.Read(p)
	if int64(n) > l.n {
		n, l.n = int(l.n), 0
		return n, &http.MaxBytesError{Limit: l.limit}
	}
	l.n -= int64(n)
	return n, err
}

// readJSONBody reads the whole (limited) JSON body, charged to the
// in-flight body budget (admission.go).
func (s *Server) readJSONBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	rd, err := s.body(w, r, s.maxJSON)
	if err != nil {
		return nil, err
	}
	return s.readCharged(w, r, rd, s.maxJSON)
}

// decodeJSON reads the body into v. An empty body is an error unless
// allowEmpty.
func (s *Server) decodeJSON(w http.ResponseWriter, r *http.Request, v any, allowEmpty bool) error {
	b, err := s.readJSONBody(w, r)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(b)) == 0 {
		if allowEmpty {
			return nil
		}
		return apiErr(http.StatusBadRequest, CodeInvalidJSON, "request body is empty; expected a JSON object")
	}
	return unmarshalBody(b, v)
}

// unmarshalBody decodes b into v, turning decode errors into 400s that
// name the offset or the field.
func unmarshalBody(b []byte, v any) error {
	if err := checkUTF8(b); err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			line, col := lineCol(b, int(se.Offset))
			return &Error{Status: http.StatusBadRequest, Code: CodeInvalidJSON,
				Detail: fmt.Sprintf("invalid JSON at line %d, column %d: %v", line, col, se),
				Extra:  map[string]any{"line": line, "position": se.Offset}}
		case errors.As(err, &te):
			field := te.Field
			if field == "" {
				return apiErr(http.StatusBadRequest, CodeInvalidRequest, "request body must be a JSON %s, got %s", goKind(te.Type.Kind().String()), te.Value)
			}
			return apiErr(http.StatusBadRequest, CodeInvalidRequest, "%s must be %s, got %s", field, goKind(te.Type.Kind().String()), te.Value)
		case errors.Is(err, io.ErrUnexpectedEOF):
			return apiErr(http.StatusBadRequest, CodeInvalidJSON, "invalid JSON: unexpected end of input")
		}
		return apiErr(http.StatusBadRequest, CodeInvalidJSON, "invalid JSON: %v", err)
	}
	return nil
}

func goKind(k string) string {
	switch k {
	case "map", "struct":
		return "an object"
	case "slice", "array":
		return "a list"
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "int", "int64", "float64", "int32", "uint", "uint64":
		return "a number"
	}
	return k
}

// lineCol returns the 1-based line and column of byte offset off in b.
func lineCol(b []byte, off int) (int, int) {
	if off > len(b) {
		off = len(b)
	}
	line, col := 1, 1
	for _, c := range b[:off] {
		if c == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return line, col
}
