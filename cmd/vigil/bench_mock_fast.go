package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
)

// fastMock serves `vigil bench mock` so that the benchmark's standard
// request costs the shared core little: a non-streaming POST with a
// Content-Length body to a chat completions, Anthropic messages or Gemini
// generateContent path is answered from a cache of whole responses keyed
// by path and body (filled by asking the handler once), with a plain
// HTTP/1.1 loop on the connection instead of net/http's machinery. Any
// other request (streams, GET, MCP, chunked bodies, Expect, HTTP/1.0)
// hands its connection, with the bytes already read, to net/http for
// the rest of its life. Only for handlers whose answer to a request never
// changes (the bench mock's script is fixed and has no latency).
type fastMock struct {
	h    http.Handler
	hs   *http.Server
	slow *chanListener // connections handed to hs

	mu    sync.Mutex
	n     int                          // cached responses
	cache map[string]map[string][]byte // path -> body -> whole response
}

// fastMockCacheMax bounds the cache: the benchmark sends a handful of
// distinct bodies.
const fastMockCacheMax = 256

// serveFastMock serves h on ln as fastMock until ctx ends.
func serveFastMock(ctx context.Context, ln net.Listener, h http.Handler) error {
	f := &fastMock{h: h, slow: newChanListener(ln.Addr()), cache: map[string]map[string][]byte{}}
	f.hs = &http.Server{Handler: h}
	go f.hs.Serve(f.slow)
	errc := make(chan error, 1)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				errc <- err
				return
			}
			go f.serveConn(c)
		}
	}()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		ln.Close()
		f.slow.Close()
		f.hs.Close()
		return nil
	}
}

// fastPath reports whether path is answered from the cache.
func fastPath(path string) bool {
	return strings.HasSuffix(path, "/chat/completions") || strings.HasSuffix(path, "/v1/messages") || strings.HasSuffix(path, ":generateContent")
}

// serveConn answers the requests on c until one needs net/http.
func (f *fastMock) serveConn(c net.Conn) {
	var rw io.ReadWriter = c
	if rs := newRawSocket(c); rs != nil {
		rw = rs
	}
	br := bufio.NewReaderSize(rw, 16<<10)
	var head []byte // the raw request head, replayed on a hand-off
	var body []byte
	for {
		head = head[:0]
		line, err := readRequestLine(br, &head)
		if err != nil {
			c.Close()
			return
		}
		method, rest, _ := bytes.Cut(trimEOL(line), []byte(" "))
		target, proto, _ := bytes.Cut(rest, []byte(" "))
		length, fast, closeAfter := int64(-1), string(proto) == "HTTP/1.1" && string(method) == "POST", false
		for {
			line, err := readRequestLine(br, &head)
			if err != nil {
				c.Close()
				return
			}
			line = trimEOL(line)
			if len(line) == 0 {
				break
			}
			name, value, _ := bytes.Cut(line, []byte(":"))
			value = bytes.TrimSpace(value)
			switch {
			case asciiEqualFold(name, "content-length"):
				n, err := strconv.ParseInt(string(value), 10, 64)
				if err != nil || n < 0 || length >= 0 {
					fast = false
				}
				length = n
			case asciiEqualFold(name, "transfer-encoding"), asciiEqualFold(name, "expect"), asciiEqualFold(name, "upgrade"):
				fast = false
			case asciiEqualFold(name, "connection"):
				closeAfter = containsFold(value, "close")
			}
		}
		path, _, _ := strings.Cut(string(target), "?")
		if !fast || length < 0 || length > 1<<20 || !fastPath(path) {
			f.handOff(c, head, br)
			return
		}
		if int64(cap(body)) < length {
			body = make([]byte, length)
		}
		body = body[:length]
		if _, err := io.ReadFull(br, body); err != nil {
			c.Close()
			return
		}
		resp, ok := f.lookup(path, body)
		if !ok {
			if resp, ok = f.fill(c, string(method), string(target), head, body); !ok {
				f.handOff(c, append(head, body...), br)
				return
			}
		}
		if _, err := rw.Write(resp); err != nil || closeAfter {
			c.Close()
			return
		}
	}
}

// readRequestLine reads one line of a request head, appending it to
// head; lines longer than the buffer are refused.
func readRequestLine(br *bufio.Reader, head *[]byte) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	if err != nil {
		return nil, err
	}
	*head = append(*head, line...)
	return line, nil
}

func (f *fastMock) lookup(path string, body []byte) ([]byte, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.cache[path][string(body)]
	return r, ok
}

// fill asks the handler for the answer to a request not yet cached and
// caches it; false (handler not asked) for a streaming request.
func (f *fastMock) fill(c net.Conn, method, target string, head, body []byte) ([]byte, bool) {
	var in struct {
		Stream any `json:"stream"`
	}
	if json.Unmarshal(body, &in) != nil || in.Stream != nil && in.Stream != false {
		return nil, false
	}
	req, err := http.ReadRequest(bufio.NewReader(io.MultiReader(bytes.NewReader(head), bytes.NewReader(body))))
	if err != nil {
		return nil, false
	}
	req.RemoteAddr = c.RemoteAddr().String()
	rec := httptest.NewRecorder()
	f.h.ServeHTTP(rec, req)
	res := rec.Result()
	out, _ := io.ReadAll(res.Body)
	var b bytes.Buffer
	fmt.Fprintf(&b, "HTTP/1.1 %03d %s\r\n", res.StatusCode, http.StatusText(res.StatusCode))
	res.Header.Del("Content-Length")
	res.Header.Del("Transfer-Encoding")
	res.Header.Write(&b)
	fmt.Fprintf(&b, "Content-Length: %d\r\n\r\n", len(out))
	b.Write(out)
	path, _, _ := strings.Cut(target, "?")
	f.mu.Lock()
	if f.n < fastMockCacheMax {
		if f.cache[path] == nil {
			f.cache[path] = map[string][]byte{}
		}
		f.cache[path][string(body)] = b.Bytes()
		f.n++
	}
	f.mu.Unlock()
	return b.Bytes(), true
}

// handOff gives c to net/http, which first reads the bytes already
// taken from it (read) and then what br still holds.
func (f *fastMock) handOff(c net.Conn, read []byte, br *bufio.Reader) {
	pre := append([]byte(nil), read...)
	f.slow.put(&replayConn{Conn: c, r: io.MultiReader(bytes.NewReader(pre), br)})
}

// replayConn is a connection whose first bytes were already read.
type replayConn struct {
	net.Conn
	r io.Reader
}

func (c *replayConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// chanListener is a net.Listener of handed-off connections.
type chanListener struct {
	addr net.Addr
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

func newChanListener(addr net.Addr) *chanListener {
	return &chanListener{addr: addr, ch: make(chan net.Conn), done: make(chan struct{})}
}

func (l *chanListener) put(c net.Conn) {
	select {
	case l.ch <- c:
	case <-l.done:
		c.Close()
	}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *chanListener) Addr() net.Addr { return l.addr }
