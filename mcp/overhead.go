package mcp

import (
	"io"
	"net/http"
	"strconv"
	"time"
)

// timing measures one proxied request for the response headers of
// spec/gateway.md §3.5: Vigil-Overhead-Ms is the time from the request's
// arrival to the first byte sent to the client, less the upstream's own
// time (request written → answer read; for an event stream → the event
// being sent completely read); Vigil-Upstream-Ms is that upstream time;
// Vigil-Guardrails-Ms is the time spent on the messages on the critical
// path (guardrail checks and pin verdicts of intercepted requests and
// their answers).
type timing struct {
	t0      time.Time // request arrived
	upStart time.Time // upstream request written
	upEnd   time.Time // upstream answer (or its latest event) read
	guard   time.Duration
}

// set writes the timing headers for a first byte sent now.
func (t *timing) set(h http.Header) {
	now := time.Now()
	var up time.Duration
	if !t.upStart.IsZero() && t.upEnd.After(t.upStart) {
		up = t.upEnd.Sub(t.upStart)
	}
	over := max(now.Sub(t.t0)-up, 0)
	h.Set("Vigil-Overhead-Ms", fmtMs(over))
	h.Set("Vigil-Upstream-Ms", fmtMs(up))
	h.Set("Vigil-Guardrails-Ms", fmtMs(t.guard))
}

func fmtMs(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 3, 64)
}

// timedReader notes, in t.upEnd, when the upstream body last yielded
// bytes: when an event is relayed, the read that completed it.
type timedReader struct {
	r io.Reader
	t *timing
}

func (tr timedReader) Read(p []byte) (int, error) {
	n, err := tr.r.Read(p)
	if n > 0 {
		tr.t.upEnd = time.Now()
	}
	return n, err
}

// lazyHeader defers the status line and headers of an event stream to
// its first byte, so that they carry the timings of the first event.
type lazyHeader struct {
	http.ResponseWriter
	status int
	t      *timing
	wrote  bool
}

func (lw *lazyHeader) writeHeader() {
	if !lw.wrote {
		lw.wrote = true
		lw.t.set(lw.ResponseWriter.Header())
		lw.ResponseWriter.WriteHeader(lw.status)
	}
}

func (lw *lazyHeader) Write(p []byte) (int, error) {
	lw.writeHeader()
	return lw.ResponseWriter.Write(p)
}

// Flush implements http.Flusher.
func (lw *lazyHeader) Flush() {
	lw.writeHeader()
	if fl, ok := lw.ResponseWriter.(http.Flusher); ok {
		fl.Flush()
	}
}
