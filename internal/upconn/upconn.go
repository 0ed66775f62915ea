// Package upconn sends HTTP/1.1 requests to plain-http upstreams over
// pooled keep-alive connections, from the caller's own goroutine: the
// request (headers and body) goes out in one write and the answer is
// parsed from the connection as the caller reads it, without the reader
// and writer goroutines of http.Transport and the hand-offs between them
// and the caller (two or three goroutine wake-ups per round trip). The
// MCP proxy and the LLM gateway use it for their http:// upstreams;
// https, proxies and custom transports keep using an http.Client.
//
// An exchange can be split in two: Send writes the request and Receive,
// later and on the same goroutine, reads the answer, so that the caller
// can work (the gateway's input check) while the upstream does.
//
// Goals: one write per request; a connection that the upstream closed
// while idle is replaced once, transparently (the body is in memory);
// cancellation through the context closes the exchange's reads and
// writes; an answer's body not read to its end closes its connection.
// Non-goals: https, HTTP/2, proxies, redirects (an answer is returned as
// it is), compression (no Accept-Encoding is added), Expect: 100-continue.
package upconn

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Pool is a pool of upstream connections, keyed by host:port. It is safe
// for concurrent use; create it with NewPool.
type Pool struct {
	dialer net.Dialer

	mu     sync.Mutex
	idle   map[string][]*conn // by host:port
	closed bool
}

// conn is one upstream connection.
type conn struct {
	c    net.Conn
	br   *bufio.Reader
	wbuf []byte
	addr string
	used time.Time // when it went idle
}

const (
	// maxIdle bounds the idle connections kept per upstream address.
	maxIdle = 256
	// idleTimeout is how long an idle connection may be reused.
	idleTimeout = 60 * time.Second
	// maxKeptBuf is the largest request buffer a connection keeps.
	maxKeptBuf = 256 << 10
)

// NewPool returns a pool whose new connections time out after
// dialTimeout when they cannot be established.
func NewPool(dialTimeout time.Duration) *Pool {
	return &Pool{dialer: net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}, idle: map[string][]*conn{}}
}

// hostPort is the dial address of u (port 80 when none is given).
func hostPort(u *url.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	return net.JoinHostPort(u.Hostname(), "80")
}

// get returns an idle connection to addr, or nil.
func (p *Pool) get(addr string) *conn {
	p.mu.Lock()
	defer p.mu.Unlock()
	list := p.idle[addr]
	for len(list) > 0 {
		uc := list[len(list)-1]
		list[len(list)-1] = nil
		list = list[:len(list)-1]
		if time.Since(uc.used) < idleTimeout {
			p.idle[addr] = list
			return uc
		}
		_ = uc.c.Close()
	}
	p.idle[addr] = list
	return nil
}

// put keeps uc for reuse, or closes it when the pool is full or closed.
func (p *Pool) put(uc *conn) {
	uc.used = time.Now()
	p.mu.Lock()
	if !p.closed && len(p.idle[uc.addr]) < maxIdle {
		p.idle[uc.addr] = append(p.idle[uc.addr], uc)
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	_ = uc.c.Close()
}

// Close closes the idle connections; connections in use are closed when
// their answers end.
func (p *Pool) Close() {
	p.mu.Lock()
	all := p.idle
	p.idle, p.closed = map[string][]*conn{}, true
	p.mu.Unlock()
	for _, list := range all {
		for _, uc := range list {
			_ = uc.c.Close()
		}
	}
}

func (p *Pool) dial(ctx context.Context, addr string) (*conn, error) {
	c, err := p.dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("upstream connection: %w", err)
	}
	return &conn{c: c, br: bufio.NewReaderSize(c, 16<<10), addr: addr}, nil
}

// validHeaderName reports whether k can be written as a header name.
func validHeaderName(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if c <= ' ' || c >= 0x7f || c == ':' || c == '(' || c == ')' || c == '<' || c == '>' || c == '@' || c == ',' || c == ';' ||
			c == '\\' || c == '"' || c == '/' || c == '[' || c == ']' || c == '?' || c == '=' || c == '{' || c == '}' {
			return false
		}
	}
	return true
}

// skipHeader reports whether header k is one the pool writes itself or
// never forwards (hop-by-hop, framing, Expect).
func skipHeader(k string) bool {
	var kb [24]byte
	if len(k) > len(kb) {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		kb[i] = c
	}
	switch string(kb[:len(k)]) {
	case "host", "content-length", "connection", "transfer-encoding", "trailer", "te", "upgrade", "keep-alive", "expect":
		return true
	}
	return false
}

// appendRequest encodes a request with method to u with header h and
// body. A GET or HEAD without a body has no Content-Length.
func appendRequest(b []byte, method string, u *url.URL, h http.Header, body []byte) []byte {
	b = append(b, method...)
	b = append(b, ' ')
	b = append(b, u.RequestURI()...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, u.Host...)
	b = append(b, "\r\n"...)
	for k, vs := range h {
		if skipHeader(k) || !validHeaderName(k) {
			continue
		}
		for _, v := range vs {
			b = append(b, k...)
			b = append(b, ": "...)
			for i := 0; i < len(v); i++ {
				// No line breaks in values (as http.Header.Write), nor
				// other control characters but tab, which servers refuse.
				if c := v[i]; (c < ' ' && c != '\t') || c == 0x7f {
					b = append(b, ' ')
				} else {
					b = append(b, c)
				}
			}
			b = append(b, "\r\n"...)
		}
	}
	if _, ok := h["User-Agent"]; !ok {
		b = append(b, "User-Agent: Go-http-client/1.1\r\n"...)
	}
	if len(body) > 0 || (method != http.MethodGet && method != http.MethodHead) {
		b = append(b, "Content-Length: "...)
		b = strconv.AppendInt(b, int64(len(body)), 10)
		b = append(b, "\r\n"...)
	}
	b = append(b, "\r\n"...)
	return append(b, body...)
}

// ErrStaleConn marks a failure on a reused connection before any byte of
// an answer arrived: the upstream had closed it while it was idle. The
// pool sends the request again once on a new connection, so a caller
// sees it only when that happens twice in a row.
var ErrStaleConn = errors.New("idle upstream connection closed")

// errBodyClosed is what a body read after Close returns.
var errBodyClosed = errors.New("upconn: read on a closed response body")

// Exchange is one request sent by Send whose answer has not been read
// yet. Its methods must be called from one goroutine: Receive once, or
// Abort.
type Exchange struct {
	p      *Pool
	ctx    context.Context
	uc     *conn
	stop   func() bool
	method string
	u      *url.URL
	reused bool
	done   bool
}

// Do sends the request and returns the answer; see Send and Receive.
func (p *Pool) Do(ctx context.Context, method string, u *url.URL, h http.Header, body []byte) (*http.Response, error) {
	x, err := p.Send(ctx, method, u, h, body)
	if err != nil {
		return nil, err
	}
	return x.Receive()
}

// Send writes a request with method to u (scheme http) with header h and
// body, in one write on an idle connection to u's host or a new one. h
// is written as given except the hop-by-hop and framing headers (Host
// and Content-Length are the pool's). ctx bounds the whole exchange, the
// answer's body included: when it ends, reads and writes on the
// connection fail. The caller must call Receive or Abort on the result.
func (p *Pool) Send(ctx context.Context, method string, u *url.URL, h http.Header, body []byte) (*Exchange, error) {
	addr := hostPort(u)
	x := &Exchange{p: p, ctx: ctx, method: method, u: u}
	uc := p.get(addr)
	x.reused = uc != nil
	if uc == nil {
		var err error
		if uc, err = p.dial(ctx, addr); err != nil {
			return nil, x.ctxErr(err)
		}
	}
	uc.wbuf = appendRequest(uc.wbuf[:0], method, u, h, body)
	err := x.start(uc)
	if errors.Is(err, ErrStaleConn) {
		err = x.resend()
	}
	if err != nil {
		return nil, err
	}
	return x, nil
}

// ctxErr is err, or the context's error when ctx has ended (what ended
// the exchange).
func (x *Exchange) ctxErr(err error) error {
	if x.ctx.Err() != nil {
		return fmt.Errorf("upstream request: %w", x.ctx.Err())
	}
	return err
}

// start writes uc.wbuf on uc, which becomes the exchange's connection.
func (x *Exchange) start(uc *conn) error {
	x.uc = uc
	// Cancellation (the client went away, the upstream timeout) breaks
	// the connection's reads and writes.
	x.stop = context.AfterFunc(x.ctx, func() { _ = uc.c.SetDeadline(time.Unix(1, 0)) })
	_, err := uc.c.Write(uc.wbuf)
	if err == nil {
		return nil
	}
	if x.reused && x.ctx.Err() == nil && (errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET)) {
		return ErrStaleConn
	}
	x.Abort()
	return x.ctxErr(fmt.Errorf("upstream request: %w", err))
}

// resend sends the request again on a new connection, once: the reused
// one was stale.
func (x *Exchange) resend() error {
	old := x.uc
	x.stop()
	_ = old.c.Close()
	uc, err := x.p.dial(x.ctx, old.addr)
	if err != nil {
		x.done = true
		return x.ctxErr(err)
	}
	uc.wbuf, old.wbuf = old.wbuf, nil
	x.reused = false
	return x.start(uc)
}

// Abort ends an exchange whose answer is not wanted: its connection is
// closed, never reused. It does nothing after Receive.
func (x *Exchange) Abort() {
	if x.done {
		return
	}
	x.done = true
	x.stop()
	_ = x.uc.c.Close()
}

// Receive reads the answer's status and headers; its Body reads the rest
// from the connection and must be read to the end or closed (it may be
// closed from another goroutine while one reads it). Informational
// answers (1xx) are skipped. A reused connection that the upstream had
// closed is replaced once and the request sent again.
func (x *Exchange) Receive() (*http.Response, error) {
	if x.done {
		return nil, errors.New("upconn: Receive on an ended exchange")
	}
	_, err := x.uc.br.Peek(1)
	if err != nil && x.reused && x.ctx.Err() == nil && (err == io.EOF || errors.Is(err, syscall.ECONNRESET)) {
		if err = x.resend(); err != nil {
			return nil, err
		}
		_, err = x.uc.br.Peek(1)
	}
	if err != nil {
		x.Abort()
		return nil, x.ctxErr(fmt.Errorf("upstream answer: %w", err))
	}
	req := &http.Request{Method: x.method, URL: x.u}
	resp, err := http.ReadResponse(x.uc.br, req)
	// Informational answers (103 Early Hints) precede the real one.
	for err == nil && resp.StatusCode >= 100 && resp.StatusCode < 200 && resp.StatusCode != http.StatusSwitchingProtocols {
		resp, err = http.ReadResponse(x.uc.br, req)
	}
	if err != nil {
		x.Abort()
		return nil, x.ctxErr(fmt.Errorf("upstream answer: %w", err))
	}
	x.done = true
	if cap(x.uc.wbuf) > maxKeptBuf {
		x.uc.wbuf = nil
	}
	resp.Body = &body{rc: resp.Body, uc: x.uc, pool: x.p, stop: x.stop, keep: !resp.Close, empty: resp.Body == http.NoBody}
	return resp, nil
}

// body is an upstream answer's body; at its end the connection goes back
// to the pool (or is closed when it cannot be reused).
type body struct {
	rc    io.ReadCloser
	uc    *conn
	pool  *Pool
	stop  func() bool
	keep  bool // the upstream allows another request on the connection
	empty bool // no body (Content-Length: 0, HEAD, 204, 304)
	// state is 0 while open, 1 once read to the end, 2 once closed
	// early; Close may run while another goroutine reads.
	state atomic.Int32
}

func (b *body) Read(p []byte) (int, error) {
	switch b.state.Load() {
	case 1:
		return 0, io.EOF
	case 2:
		return 0, errBodyClosed
	}
	n, err := b.rc.Read(p)
	if err == io.EOF {
		b.finish(true)
	} else if err != nil {
		b.finish(false)
	}
	return n, err
}

// Close ends the body; a body not read to its end closes the connection.
func (b *body) Close() error {
	b.finish(b.empty)
	return nil
}

func (b *body) finish(complete bool) {
	st := int32(2)
	if complete {
		st = 1
	}
	if !b.state.CompareAndSwap(0, st) {
		return
	}
	// stop reports false when ctx ended: the deadline may have been set.
	if b.stop() && complete && b.keep {
		b.pool.put(b.uc)
		return
	}
	_ = b.uc.c.Close()
}
