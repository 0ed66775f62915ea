package mcp

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
	"syscall"
	"time"
)

// upstreamPool sends the proxy's POSTs to plain-HTTP upstreams over
// pooled HTTP/1.1 keep-alive connections, from the handler's own
// goroutine: the request (headers and body) goes out in one write and
// the answer is parsed from the connection as it is read, without the
// reader and writer goroutines of http.Transport and the hand-offs
// between them and the handler (two goroutine wake-ups per round trip).
// Upstreams over https keep going through the proxy's http.Client.
type upstreamPool struct {
	dialer net.Dialer

	mu     sync.Mutex
	idle   map[string][]*upConn // by host:port
	closed bool
}

// upConn is one upstream connection.
type upConn struct {
	c    net.Conn
	br   *bufio.Reader
	wbuf []byte
	addr string
	used time.Time // when it went idle
}

const (
	// upMaxIdle bounds the idle connections kept per upstream address.
	upMaxIdle = 256
	// upIdleTimeout is how long an idle connection may be reused.
	upIdleTimeout = 60 * time.Second
	// upMaxKeptBuf is the largest request buffer a connection keeps.
	upMaxKeptBuf = 256 << 10
)

func newUpstreamPool() *upstreamPool {
	return &upstreamPool{dialer: net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}, idle: map[string][]*upConn{}}
}

// hostPort is the dial address of u (port 80 when none is given).
func hostPort(u *url.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	return net.JoinHostPort(u.Hostname(), "80")
}

// get returns an idle connection to addr, or nil.
func (p *upstreamPool) get(addr string) *upConn {
	p.mu.Lock()
	defer p.mu.Unlock()
	list := p.idle[addr]
	for len(list) > 0 {
		uc := list[len(list)-1]
		list[len(list)-1] = nil
		list = list[:len(list)-1]
		if time.Since(uc.used) < upIdleTimeout {
			p.idle[addr] = list
			return uc
		}
		_ = uc.c.Close()
	}
	p.idle[addr] = list
	return nil
}

// put keeps uc for reuse, or closes it when the pool is full or closed.
func (p *upstreamPool) put(uc *upConn) {
	uc.used = time.Now()
	p.mu.Lock()
	if !p.closed && len(p.idle[uc.addr]) < upMaxIdle {
		p.idle[uc.addr] = append(p.idle[uc.addr], uc)
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	_ = uc.c.Close()
}

// close closes the idle connections; connections in use are closed when
// their answers end.
func (p *upstreamPool) close() {
	p.mu.Lock()
	all := p.idle
	p.idle, p.closed = map[string][]*upConn{}, true
	p.mu.Unlock()
	for _, list := range all {
		for _, uc := range list {
			_ = uc.c.Close()
		}
	}
}

func (p *upstreamPool) dial(ctx context.Context, addr string) (*upConn, error) {
	c, err := p.dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return &upConn{c: c, br: bufio.NewReaderSize(c, 16<<10), addr: addr}, nil
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

// appendRequest encodes a POST of body to u with header h.
func appendRequest(b []byte, u *url.URL, h http.Header, body []byte) []byte {
	b = append(b, "POST "...)
	b = append(b, u.RequestURI()...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, u.Host...)
	b = append(b, "\r\n"...)
	var kb [64]byte
	for k, vs := range h {
		switch lowerKey(kb[:0], k) {
		case "host", "content-length", "connection", "transfer-encoding", "trailer", "te", "upgrade", "keep-alive", "expect":
			continue
		}
		if !validHeaderName(k) {
			continue
		}
		for _, v := range vs {
			b = append(b, k...)
			b = append(b, ": "...)
			for i := 0; i < len(v); i++ {
				// As http.Header.Write does: no line breaks in values.
				if c := v[i]; c == '\r' || c == '\n' {
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
	b = append(b, "Content-Length: "...)
	b = strconv.AppendInt(b, int64(len(body)), 10)
	b = append(b, "\r\n\r\n"...)
	return append(b, body...)
}

// errStaleConn marks a failure on a reused connection before any byte of
// an answer arrived: the upstream had closed it while it was idle, and
// the request can be sent again on a new one.
var errStaleConn = errors.New("idle upstream connection closed")

// post sends body to u and returns the answer; its Body must be read to
// the end or closed. ctx bounds the whole exchange, the answer's body
// included.
func (p *upstreamPool) post(ctx context.Context, u *url.URL, h http.Header, body []byte) (*http.Response, error) {
	addr := hostPort(u)
	for attempt := 0; ; attempt++ {
		uc, reused := p.get(addr), true
		if uc == nil || attempt > 0 {
			if uc != nil {
				p.put(uc)
			}
			var err error
			if uc, err = p.dial(ctx, addr); err != nil {
				return nil, err
			}
			reused = false
		}
		resp, err := p.roundTrip(ctx, uc, u, h, body, reused)
		if errors.Is(err, errStaleConn) && attempt == 0 && ctx.Err() == nil {
			continue
		}
		return resp, err
	}
}

func (p *upstreamPool) roundTrip(ctx context.Context, uc *upConn, u *url.URL, h http.Header, body []byte, reused bool) (*http.Response, error) {
	// Cancellation (the client went away, the upstream timeout) breaks
	// the connection's reads and writes.
	stop := context.AfterFunc(ctx, func() { _ = uc.c.SetDeadline(time.Unix(1, 0)) })
	fail := func(err error) (*http.Response, error) {
		stop()
		_ = uc.c.Close()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("upstream request: %w", ctx.Err())
		}
		return nil, err
	}
	uc.wbuf = appendRequest(uc.wbuf[:0], u, h, body)
	_, err := uc.c.Write(uc.wbuf)
	if cap(uc.wbuf) > upMaxKeptBuf {
		uc.wbuf = nil
	}
	if err != nil {
		if reused && (errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET)) {
			return fail(errStaleConn)
		}
		return fail(fmt.Errorf("upstream request: %w", err))
	}
	if _, err := uc.br.Peek(1); err != nil {
		if reused && (err == io.EOF || errors.Is(err, syscall.ECONNRESET)) {
			return fail(errStaleConn)
		}
		return fail(fmt.Errorf("upstream answer: %w", err))
	}
	req := &http.Request{Method: http.MethodPost, URL: u}
	resp, err := http.ReadResponse(uc.br, req)
	// Informational answers (103 Early Hints) precede the real one.
	for err == nil && resp.StatusCode >= 100 && resp.StatusCode < 200 && resp.StatusCode != http.StatusSwitchingProtocols {
		resp, err = http.ReadResponse(uc.br, req)
	}
	if err != nil {
		return fail(fmt.Errorf("upstream answer: %w", err))
	}
	resp.Body = &upBody{rc: resp.Body, uc: uc, pool: p, stop: stop, keep: !resp.Close, empty: resp.ContentLength == 0}
	return resp, nil
}

// upBody is an upstream answer's body; at its end the connection goes
// back to the pool (or is closed when it cannot be reused).
type upBody struct {
	rc    io.ReadCloser
	uc    *upConn
	pool  *upstreamPool
	stop  func() bool
	keep  bool // the upstream allows another request on the connection
	empty bool // Content-Length: 0
	done  bool
}

func (b *upBody) Read(p []byte) (int, error) {
	if b.done {
		return 0, io.EOF
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
func (b *upBody) Close() error {
	b.finish(b.empty)
	return nil
}

func (b *upBody) finish(complete bool) {
	if b.done {
		return
	}
	b.done = true
	// stop reports false when ctx ended: the deadline may have been set.
	if b.stop() && complete && b.keep {
		b.pool.put(b.uc)
		return
	}
	_ = b.uc.c.Close()
}
