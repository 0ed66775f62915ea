package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// This file is admission control (explorer-api §1.2, §1.5): what one
// client can make the server hold, in time and in memory.
//   - Every request body has an idle timeout: a read that delivers nothing
//     for Config.BodyIdleTimeout fails, and the request gets 408. A long
//     upload that keeps delivering is never cut.
//   - JSON bodies are buffered against one budget shared by all requests
//     (Config.MaxInflightBodyBytes), charged as the buffer grows and
//     released when the request ends. A request that would go over it gets
//     429 overloaded with Retry-After, instead of the heap growing.
//   - Server.Listener caps open connections (Config.MaxConnections); one
//     over the cap is answered 429 with Retry-After and closed.

// Default admission limits.
const (
	DefaultBodyIdleTimeout      = 10 * time.Second
	DefaultMaxConnections       = 1024
	DefaultMaxInflightBodyBytes = 256 << 20
)

// retryAfterSeconds is the Retry-After of an overloaded answer.
const retryAfterSeconds = 1

// CodeRequestTimeout is the 408 of a request body that stalled past the
// body idle timeout.
const CodeRequestTimeout = "request_timeout"

// errBodyIdle is the read error of a body that stalled.
var errBodyIdle = errors.New("request body idle")

// idleBody cuts off a request body that delivers nothing for idle: each
// Read moves the connection's read deadline to now+idle, so the limit is
// per read, not on the whole body.
type idleBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	idle time.Duration
	err  error // the deadline could not be set: read without one
	eof  bool  // read to the end
}

func (b *idleBody) Read(p []byte) (int, error) {
	if b.err == nil {
		b.err = b.rc.SetReadDeadline(time.Now().Add(b.idle))
	}
	n, err := b.ReadCloser.Read(p)
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		return n, fmt.Errorf("%w: no byte for %s", errBodyIdle, b.idle)
	}
	if err == io.EOF {
		b.eof = true
		if b.err == nil {
			// Done: the next request on the connection gets
			// http.Server's own header deadline.
			_ = b.rc.SetReadDeadline(time.Time{})
		}
	}
	return n, err
}

// bodyBudget is the in-flight body memory shared by all requests.
type bodyBudget struct {
	limit int64
	used  atomic.Int64
}

// take reserves n bytes; it reports false (and reserves nothing) when
// that would go over the limit.
func (b *bodyBudget) take(n int64) bool {
	for {
		u := b.used.Load()
		if u+n > b.limit {
			return false
		}
		if b.used.CompareAndSwap(u, u+n) {
			return true
		}
	}
}

func (b *bodyBudget) give(n int64) { b.used.Add(-n) }

// bodyCharge is one request's share of the budget, released when the
// request ends (its buffers live until then).
type bodyCharge struct {
	budget *bodyBudget
	n      int64
}

type chargeKey struct{}

// charge reserves n more bytes for r, or returns 429 overloaded.
func (s *Server) charge(w http.ResponseWriter, r *http.Request, n int64) error {
	c, _ := r.Context().Value(chargeKey{}).(*bodyCharge)
	if c == nil {
		return nil // not behind admitMiddleware (a handler test)
	}
	if !c.budget.take(n) {
		s.metrics.Add("vigil_http_rejected_total", 1, "body_memory")
		return overloaded(w, "server is busy: request bodies in flight use the memory budget (%d bytes); retry later", c.budget.limit)
	}
	c.n += n
	return nil
}

func overloaded(w http.ResponseWriter, format string, args ...any) error {
	w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds))
	return apiErr(http.StatusTooManyRequests, CodeOverloaded, format, args...)
}

// admitMiddleware puts the idle timeout on request bodies and gives each
// request its budget charge.
func (s *Server) admitMiddleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ib *idleBody
		if r.Body != nil && r.Body != http.NoBody && s.bodyIdle > 0 {
			ib = &idleBody{ReadCloser: r.Body, rc: http.NewResponseController(w), idle: s.bodyIdle}
			r.Body = ib
		}
		c := &bodyCharge{budget: &s.budget}
		r = r.WithContext(context.WithValue(r.Context(), chargeKey{}, c))
		defer func() { c.budget.give(c.n) }()
		next.ServeHTTP(w, r)
		if ib != nil && !ib.eof && ib.err == nil {
			// The handler answered without reading the whole body (413,
			// 429, 408, …). http.Server would now read up to 256 KiB of it
			// before sending the answer, with no deadline: a client that
			// stalls would hold the connection for ever. Fail that read at
			// once; the answer goes out and the connection is closed.
			_ = ib.rc.SetReadDeadline(time.Now())
		}
	})
}

// bodyChunk is the first buffer of a JSON body: a client that declares a
// large Content-Length and stalls holds no more than this.
const bodyChunk = 32 << 10

// readCharged reads all of rd (a body limited to limit bytes) into one
// buffer, charging the budget as the buffer grows. The first buffer is
// small (bodyChunk); once it is full, a body that declared its length gets
// an exact-size buffer and any other one doubles.
func (s *Server) readCharged(w http.ResponseWriter, r *http.Request, rd io.Reader, limit int64) ([]byte, error) {
	if r.ContentLength > limit {
		// The raw body is limited too (Server.body): refuse it unread.
		return nil, readBodyError(&http.MaxBytesError{Limit: limit})
	}
	declared := r.ContentLength
	if declared <= 0 || r.Header.Get("Content-Encoding") != "" {
		declared = -1 // unknown, or the gunzipped size is not the declared one
	}
	size := int64(bodyChunk)
	if declared >= 0 {
		size = min(size, declared+1) // +1: see EOF without growing
	}
	if err := s.charge(w, r, size); err != nil {
		return nil, err
	}
	buf := make([]byte, 0, size)
	for {
		if len(buf) == cap(buf) {
			// A body that declared its length and is really arriving gets
			// its whole buffer at once; any other body doubles.
			next := 2 * int64(cap(buf))
			if declared >= 0 && int64(len(buf)) <= declared {
				next = declared + 1
			}
			next = min(next, limit+1)
			if next <= int64(cap(buf)) {
				next = int64(cap(buf)) + bodyChunk
			}
			if err := s.charge(w, r, next); err != nil {
				return nil, err
			}
			nb := make([]byte, len(buf), next)
			copy(nb, buf)
			buf = nb
		}
		n, err := rd.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, readBodyError(err)
		}
	}
}

// Listener returns ln limited to Config.MaxConnections open connections
// (unlimited when negative). A connection over the limit is answered
// 429 overloaded with Retry-After and closed, without reading its
// request; answering takes at most a second and at most 64 such answers
// run at once (more are closed without one).
func (s *Server) Listener(ln net.Listener) net.Listener {
	if s.maxConns <= 0 {
		return ln
	}
	return &limitListener{Listener: ln, s: s, max: int64(s.maxConns), rejecting: make(chan struct{}, 64)}
}

type limitListener struct {
	net.Listener
	s         *Server
	max       int64
	open      atomic.Int64
	rejecting chan struct{}
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) <= l.max {
			return &limitConn{Conn: c, l: l}, nil
		}
		l.open.Add(-1)
		l.s.metrics.Add("vigil_http_rejected_total", 1, "connections")
		select {
		case l.rejecting <- struct{}{}:
			go func() {
				defer func() { <-l.rejecting }()
				rejectConn(c)
			}()
		default:
			c.Close()
		}
	}
}

// overloadedResponse is the whole answer to a connection over the limit.
var overloadedResponse = func() []byte {
	body := `{"detail":"server is busy: too many open connections; retry later","code":"overloaded"}`
	return []byte("HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\nRetry-After: " +
		strconv.Itoa(retryAfterSeconds) + "\r\nConnection: close\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)
}()

// rejectConn writes overloadedResponse to c and closes it, reading a
// little of what the client sent first so the close does not reset the
// connection before the client reads the answer.
func rejectConn(c net.Conn) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write(overloadedResponse); err != nil {
		return
	}
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	_ = c.SetReadDeadline(time.Now().Add(250 * time.Millisecond))
	_, _ = io.CopyN(io.Discard, c, 64<<10)
}

// limitConn gives its slot back once, on the first Close.
type limitConn struct {
	net.Conn
	l    *limitListener
	once sync.Once
}

func (c *limitConn) Close() error {
	c.once.Do(func() { c.l.open.Add(-1) })
	return c.Conn.Close()
}
