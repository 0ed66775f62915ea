package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"time"

	"github.com/vigilhq/vigil/store"
)

// This file implements Idempotency-Key replay (explorer-api §1.6) on top of
// store.Idempotency: routes.go wraps the write endpoints the spec names in
// idempotent. A request with a key reserves it (principal, key, hash of
// method, path, query and body) before the handler runs:
//   - new key: the handler runs; a response below 500 is stored and the
//     reservation completed; an error (nothing written, as handlers write
//     in one transaction) releases the key so a retry runs again;
//   - same key, same request, completed: the stored status, content type
//     and body are replayed (with Idempotent-Replayed: true), nothing runs;
//   - same key, different request: 409 idempotency_mismatch;
//   - same key, still running: 429 overloaded with Retry-After, so clients
//     that retry (the Go client retries keyed requests) get the replay.
//
// Keys live idempotencyTTL. A reservation left pending longer than
// idempotencyStale (the server died mid-request) is taken over by the next
// retry.

// CodeIdempotencyMismatch is the 409 for a reused Idempotency-Key with a
// different request (explorer-api §1.5).
const CodeIdempotencyMismatch = "idempotency_mismatch"

const (
	maxIdempotencyKeyLen = 128
	idempotencyTTL       = 24 * time.Hour
	idempotencyStale     = time.Hour
	// idempotencyMemBody is the largest keyed request body hashed in
	// memory; a larger one (an upload) is spooled to a temporary file.
	idempotencyMemBody = 1 << 20
	// idempotencyPurgeOdds: one reservation in this many also purges the
	// expired records.
	idempotencyPurgeOdds = 256
)

// idempotent wraps h, an endpoint that accepts Idempotency-Key. limit is
// the endpoint's body limit (the body is read, hashed and handed to h
// unchanged). Requests without the header, or anonymous ones, go straight
// to h.
func (s *Server) idempotent(limit int64, h handlerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, p *principal) error {
		key := r.Header.Get("Idempotency-Key")
		if key == "" || p == nil || p.User == nil {
			return h(w, r, p)
		}
		if len(key) > maxIdempotencyKeyLen {
			return badRequest("Idempotency-Key is longer than %d characters", maxIdempotencyKeyLen)
		}
		hash, cleanup, err := hashRequest(w, r, limit)
		if err != nil {
			return err
		}
		defer cleanup()
		who := idempotencyPrincipal(p)
		rec, err := s.reserveIdempotencyKey(r.Context(), who, key, hash)
		if err != nil {
			return err
		}
		if rec != nil { // the key was used before
			switch {
			case rec.RequestHash != hash:
				return apiErr(http.StatusConflict, CodeIdempotencyMismatch,
					"Idempotency-Key %q was already used with a different request", key)
			case rec.Status == 0:
				w.Header().Set("Retry-After", "1")
				return apiErr(http.StatusTooManyRequests, CodeOverloaded,
					"a request with Idempotency-Key %q is still in progress", key)
			}
			if rec.ContentType != "" {
				w.Header().Set("Content-Type", rec.ContentType)
			}
			w.Header().Set("Idempotent-Replayed", "true")
			w.WriteHeader(rec.Status)
			_, _ = w.Write(rec.Body)
			return nil
		}
		rw := &recordingWriter{ResponseWriter: w}
		herr := h(rw, r, p)
		ctx := context.WithoutCancel(r.Context())
		status := rw.status
		if !rw.written {
			status = http.StatusOK
		}
		if herr == nil && status < 500 {
			if err := s.st.CompleteIdempotencyKey(ctx, who, key, status, rw.Header().Get("Content-Type"), rw.body.Bytes()); err != nil {
				s.log.Error("idempotency key not completed: a retry will run again", "key", key, "err", err)
			}
			return nil
		}
		if err := s.st.ReleaseIdempotencyKey(ctx, who, key); err != nil {
			s.log.Error("idempotency key not released", "key", key, "err", err)
		}
		return herr
	}
}

// reserveIdempotencyKey reserves key for who. It returns nil when the
// caller now holds the reservation, or the record stored earlier.
func (s *Server) reserveIdempotencyKey(ctx context.Context, who, key, hash string) (*store.IdempotencyRecord, error) {
	now := s.now()
	if rand.IntN(idempotencyPurgeOdds) == 0 {
		if _, err := s.st.PurgeIdempotencyKeys(ctx, now.Add(-idempotencyTTL)); err != nil {
			s.log.Warn("purge idempotency keys", "err", err)
		}
	}
	for attempt := 0; ; attempt++ {
		rec := &store.IdempotencyRecord{Principal: who, Key: key, RequestHash: hash, CreatedAt: now}
		got, created, err := s.st.ReserveIdempotencyKey(ctx, rec, now.Add(-idempotencyTTL))
		if err != nil {
			return nil, err
		}
		if created {
			return nil, nil
		}
		// A pending reservation this old belongs to a request that will
		// never finish: drop it and reserve again (once).
		if got.Status == 0 && got.RequestHash == hash && got.CreatedAt.Before(now.Add(-idempotencyStale)) && attempt == 0 {
			if err := s.st.ReleaseIdempotencyKey(ctx, who, key); err != nil {
				return nil, err
			}
			continue
		}
		return got, nil
	}
}

// idempotencyPrincipal is who a key belongs to: the API key, or the user
// for a browser session.
func idempotencyPrincipal(p *principal) string {
	if p.Key != nil {
		return "key:" + p.Key.ID
	}
	return "user:" + p.User.ID
}

// hashRequest reads r's body (at most limit bytes, 413 beyond), returns the
// hex SHA-256 of method, path, query and body, and replaces r.Body with an
// identical one. cleanup removes the temporary file a large body is
// spooled to.
func hashRequest(w http.ResponseWriter, r *http.Request, limit int64) (string, func(), error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s %s?%s\n", r.Method, r.URL.Path, r.URL.RawQuery)
	noop := func() {}
	if r.Body == nil || r.Body == http.NoBody {
		return hex.EncodeToString(h.Sum(nil)), noop, nil
	}
	body := http.MaxBytesReader(w, r.Body, limit)
	var mem bytes.Buffer
	n, err := io.CopyN(&mem, body, idempotencyMemBody+1)
	if err != nil && err != io.EOF {
		return "", noop, readBodyError(err)
	}
	h.Write(mem.Bytes())
	if n <= idempotencyMemBody {
		r.Body = io.NopCloser(bytes.NewReader(mem.Bytes()))
		return hex.EncodeToString(h.Sum(nil)), noop, nil
	}
	f, err := os.CreateTemp("", "vigil-request-*")
	if err != nil {
		return "", noop, fmt.Errorf("spool request body: %w", err)
	}
	cleanup := func() {
		f.Close()
		os.Remove(f.Name())
	}
	if _, err := f.Write(mem.Bytes()); err != nil {
		cleanup()
		return "", noop, fmt.Errorf("spool request body: %w", err)
	}
	if _, err := io.Copy(io.MultiWriter(f, h), body); err != nil {
		cleanup()
		var pe *os.PathError
		if errors.As(err, &pe) {
			return "", noop, fmt.Errorf("spool request body: %w", err)
		}
		return "", noop, readBodyError(err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		cleanup()
		return "", noop, fmt.Errorf("spool request body: %w", err)
	}
	r.Body = io.NopCloser(f)
	return hex.EncodeToString(h.Sum(nil)), cleanup, nil
}

// readBodyError maps a failed body read: 413 past the limit, 408 when the
// body stalled past the idle timeout, else 400.
func readBodyError(err error) error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return &Error{Status: http.StatusRequestEntityTooLarge, Code: CodeTooLarge,
			Detail: fmt.Sprintf("request body larger than %d bytes", mbe.Limit)}
	}
	if errors.Is(err, errBodyIdle) {
		return &Error{Status: http.StatusRequestTimeout, Code: CodeRequestTimeout, Detail: fmt.Sprintf("read request body: %v", err)}
	}
	return apiErr(http.StatusBadRequest, CodeInvalidRequest, "read request body: %v", err)
}

// recordingWriter passes a response through and keeps a copy of its
// status and body for replay.
type recordingWriter struct {
	http.ResponseWriter
	status  int
	written bool
	body    bytes.Buffer
}

func (w *recordingWriter) WriteHeader(code int) {
	if !w.written {
		w.status, w.written = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *recordingWriter) Write(b []byte) (int, error) {
	if !w.written {
		w.status, w.written = http.StatusOK, true
	}
	w.body.Write(b)
	return w.ResponseWriter.Write(b)
}

// Flush lets streaming handlers flush through the wrapper.
func (w *recordingWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *recordingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
