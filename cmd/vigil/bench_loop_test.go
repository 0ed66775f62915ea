package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// loadTarget is a load client for url (stream or not).
func loadTarget(t *testing.T, url string, stream bool) *loadClient {
	t.Helper()
	c, err := newLoadClient(benchTarget{name: "direct", url: url, header: http.Header{"Content-Type": {"application/json"}}}, benchBody("small", stream), stream)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.closeAll)
	return c
}

// rawServer answers each connection with serve, on loopback.
func rawServer(t *testing.T, serve func(c net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); serve(c) }()
		}
	}()
	return "http://" + ln.Addr().String() + "/v1/chat/completions"
}

// readRequests reads requests from c and calls answer after each.
func readRequests(c net.Conn, answer func(n int) bool) {
	br := bufio.NewReader(c)
	for n := 0; ; n++ {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		io.Copy(io.Discard, req.Body)
		if !answer(n) {
			return
		}
	}
}

func TestLoadEngineCountsErrors(t *testing.T) {
	var served atomic.Int64
	tests := []struct {
		name   string
		url    func(t *testing.T) string
		errors bool
	}{
		{"200", func(t *testing.T) string {
			return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { served.Add(1); io.WriteString(w, `{"ok":true}`) })).URL + "/v1"
		}, false},
		{"500", func(t *testing.T) string {
			return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.Error(w, "boom", 500) })).URL + "/v1"
		}, true},
		{"429 chunked", func(t *testing.T) string {
			return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(429)
				w.(http.Flusher).Flush()
				io.WriteString(w, "slow down")
			})).URL + "/v1"
		}, true},
		{"closes without answering", func(t *testing.T) string {
			return rawServer(t, func(c net.Conn) { readRequests(c, func(int) bool { return false }) })
		}, true},
		{"closes mid-body", func(t *testing.T) string {
			return rawServer(t, func(c net.Conn) {
				readRequests(c, func(int) bool {
					io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"partial")
					return false
				})
			})
		}, true},
		{"garbage", func(t *testing.T) string {
			return rawServer(t, func(c net.Conn) {
				readRequests(c, func(int) bool { io.WriteString(c, "SMTP ready\r\n\r\n"); return true })
			})
		}, true},
		{"refused", func(t *testing.T) string {
			ln, _ := net.Listen("tcp", "127.0.0.1:0")
			ln.Close()
			return "http://" + ln.Addr().String() + "/v1"
		}, true},
		{"Connection: close after each answer", func(t *testing.T) string {
			return rawServer(t, func(c net.Conn) {
				readRequests(c, func(int) bool {
					io.WriteString(c, "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}")
					return false
				})
			})
		}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := loadTarget(t, tc.url(t), false)
			for _, run := range []struct {
				name string
				do   func() []sample
			}{
				{"open", func() []sample { return openLoopRun(context.Background(), c, 400, 100*time.Millisecond, 8) }},
				{"closed", func() []sample { ss, _ := closedLoopRun(context.Background(), c, 4, 40); return ss }},
			} {
				ss := run.do()
				want := map[bool]int{false: 0, true: len(ss)}[tc.errors]
				if len(ss) != 40 || errs(ss) != want {
					t.Errorf("%s loop: %d samples, %d errors; want 40, %d", run.name, len(ss), errs(ss), want)
				}
				for i, s := range ss {
					if s.total <= 0 && !tc.errors {
						t.Errorf("%s loop: sample %d has no latency", run.name, i)
					}
				}
			}
		})
	}
	if served.Load() != 80 {
		t.Errorf("the 200 server served %d requests, want 80", served.Load())
	}
}

// A reused connection the server closed while idle is not an error:
// the request goes again on a new connection.
func TestLoadEngineRetriesIdleClose(t *testing.T) {
	url := rawServer(t, func(c net.Conn) {
		readRequests(c, func(int) bool {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
			return false // close after one answer, without saying so
		})
	})
	c := loadTarget(t, url, false)
	ss, _ := closedLoopRun(context.Background(), c, 1, 10)
	if errs(ss) != 0 {
		t.Fatalf("%d errors, want 0", errs(ss))
	}
}

// Latency counts from the scheduled start: with one connection and a
// server taking 10 ms per request, requests scheduled every 5 ms queue,
// and request i cannot end before 10 ms × (i+1) after the start, that
// is 10 + 5i ms after its scheduled start. Counted from the write, each
// would be about 10 ms.
func TestLoadEngineLatencyFromScheduledStart(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(10 * time.Millisecond)
		io.WriteString(w, "{}")
	}))
	defer ts.Close()
	c := loadTarget(t, ts.URL+"/v1", false)
	ss := openLoopRun(context.Background(), c, 200, 100*time.Millisecond, 1)
	if len(ss) != 20 || errs(ss) != 0 {
		t.Fatalf("%d samples, %d errors", len(ss), errs(ss))
	}
	for i, s := range ss {
		if low := time.Duration(10+5*i) * time.Millisecond; s.total < low {
			t.Errorf("request %d: %v, at least %v counted from its scheduled start", i, s.total, low)
		}
	}
	if n := c.openConns(); n != 1 {
		t.Errorf("%d connections open, want 1", n)
	}
}

// Streams: the time to the first data: line and the gaps between them,
// through chunks that split lines and the "data:" prefix itself.
func TestLoadEngineStream(t *testing.T) {
	events := []string{"data: {\"a\":1}\n\n", "event: x\ndata: {\"b\":2}\n\n", ": comment data:\n\n", "data: [DONE]\n\n"}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Vigil-Overhead-Ms", "0.25")
		for _, e := range events {
			for _, part := range []string{e[:3], e[3:]} { // "dat" | "a: …"
				io.WriteString(w, part)
				w.(http.Flusher).Flush()
				time.Sleep(time.Millisecond)
			}
		}
	}))
	defer ts.Close()
	c := loadTarget(t, ts.URL+"/v1", true)
	ss, _ := closedLoopRun(context.Background(), c, 2, 6)
	if len(ss) != 6 || errs(ss) != 0 {
		t.Fatalf("%d samples, %d errors", len(ss), errs(ss))
	}
	for i, s := range ss {
		if s.ttfb <= 0 || s.ttfb > s.total || len(s.gaps) != 2 || s.overhead != 0.25 {
			t.Errorf("sample %d: ttfb %v total %v gaps %v overhead %v; want 2 gaps (3 data lines) and overhead 0.25", i, s.ttfb, s.total, s.gaps, s.overhead)
		}
		for _, g := range s.gaps {
			if g < 2*time.Millisecond { // two writes, 1 ms apart, per event
				t.Errorf("sample %d: gap %v shorter than the server's pacing", i, g)
			}
		}
	}
}

func TestReadResponse(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		stream   bool
		keep     bool
		err      bool // parse error
		status   bool // counted as an error status
		dataRows int  // data: lines seen (stream)
		overhead float64
		rest     string // bytes left for the next response
	}{
		{name: "content-length", in: "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloNEXT", keep: true, overhead: -1, rest: "NEXT"},
		{name: "chunked with extension and trailer", in: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n0\r\nX-T: 1\r\n\r\nNEXT", keep: true, overhead: -1, rest: "NEXT"},
		{name: "chunked stream", in: "HTTP/1.1 200 OK\r\ntransfer-encoding: Chunked\r\n\r\n8\r\ndata: 1\n\r\n9\r\n\ndata: 2\n\r\n2\r\nda\r\n6\r\nta: 3\n\r\n0\r\n\r\n", stream: true, keep: true, dataRows: 3, overhead: -1},
		{name: "content-length stream", in: "HTTP/1.1 200 OK\r\nContent-Length: 23\r\n\r\ndata: a\n\nxdata: b\ndata:", stream: true, keep: true, dataRows: 2, overhead: -1},
		{name: "until close", in: "HTTP/1.1 200 OK\r\n\r\nall of it", overhead: -1},
		{name: "http/1.0", in: "HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", overhead: -1},
		{name: "http/1.0 keep-alive", in: "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n", keep: true, overhead: -1},
		{name: "connection close", in: "HTTP/1.1 200 OK\r\nConnection: Close\r\nContent-Length: 2\r\n\r\n{}", overhead: -1},
		{name: "500", in: "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 4\r\n\r\nboomNEXT", keep: true, status: true, overhead: -1, rest: "NEXT"},
		{name: "100 continue first", in: "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", keep: true, overhead: -1},
		{name: "204 no body", in: "HTTP/1.1 204 No Content\r\n\r\nNEXT", keep: true, status: true, overhead: -1, rest: "NEXT"},
		{name: "overhead header", in: "HTTP/1.1 200 OK\r\nVigil-Overhead-Ms: 0.125\r\nContent-Length: 0\r\n\r\n", keep: true, overhead: 0.125},
		{name: "bare LF lines", in: "HTTP/1.1 200 OK\nContent-Length: 1\n\nx", keep: true, overhead: -1},
		{name: "long header line", in: "HTTP/1.1 200 OK\r\nX-Big: " + strings.Repeat("b", 10000) + "\r\nContent-Length: 1\r\n\r\nx", keep: true, overhead: -1},
		{name: "short body", in: "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", err: true, overhead: -1},
		{name: "bad length", in: "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", err: true, overhead: -1},
		{name: "bad chunk size", in: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", err: true, overhead: -1},
		{name: "no CRLF after chunk", in: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\naXX\r\n0\r\n\r\n", err: true, overhead: -1},
		{name: "not HTTP", in: "HELLO\r\n\r\n", err: true, overhead: -1},
		{name: "bad status", in: "HTTP/1.1 2x0 OK\r\n\r\n", err: true, overhead: -1},
		{name: "header without colon", in: "HTTP/1.1 200 OK\r\nbroken\r\n\r\n", err: true, overhead: -1},
		{name: "empty", in: "", err: true, overhead: -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			br := bufio.NewReaderSize(strings.NewReader(tc.in), 4096)
			s := sample{overhead: -1}
			keep, err := readResponse(br, tc.stream, time.Now(), &s)
			if (err != nil) != tc.err {
				t.Fatalf("err %v, want error %v", err, tc.err)
			}
			if err != nil {
				return
			}
			rest, _ := io.ReadAll(br)
			rows := len(s.gaps)
			if s.ttfb > 0 {
				rows++
			}
			if keep != tc.keep || s.err != tc.status || rows != tc.dataRows || s.overhead != tc.overhead || string(rest) != tc.rest {
				t.Errorf("keep %v status error %v data lines %d overhead %v rest %q; want %v %v %d %v %q",
					keep, s.err, rows, s.overhead, rest, tc.keep, tc.status, tc.dataRows, tc.overhead, tc.rest)
			}
		})
	}
}

// FuzzReadResponse: any input ends in an error or a parse that took
// bytes (no panic, no loop), and a response net/http reads whole with
// status 200 is read without error here too.
func FuzzReadResponse(f *testing.F) {
	f.Add([]byte("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"), false)
	f.Add([]byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n8\r\ndata: 1\n\r\n0\r\n\r\n"), true)
	f.Add([]byte("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 500 x\r\nConnection: close\r\n\r\nrest"), true)
	f.Add([]byte("HTTP/1.0 200 OK\r\nVigil-Overhead-Ms: 1e3\r\n\r\ndata:data:\n"), true)
	f.Add([]byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\n"), false)
	f.Fuzz(func(t *testing.T, in []byte, stream bool) {
		br := bufio.NewReaderSize(bytes.NewReader(in), 256)
		for left := len(in) + 1; ; {
			s := sample{overhead: -1}
			_, err := readResponse(br, stream, time.Now(), &s)
			if err != nil {
				break
			}
			left--
			if left < 0 {
				t.Fatal("parsed more responses than there are bytes")
			}
		}
		resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(in)), nil)
		if err != nil || resp.StatusCode != 200 || resp.ProtoMajor != 1 || len(resp.TransferEncoding) > 0 && resp.TransferEncoding[0] != "chunked" {
			return
		}
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			return
		}
		s := sample{overhead: -1}
		if _, err := readResponse(bufio.NewReaderSize(bytes.NewReader(in), 256), stream, time.Now(), &s); err != nil || s.err {
			t.Fatalf("net/http reads %q whole (status 200); here: %v (status error %v)", in, err, s.err)
		}
	})
}

func TestBuildRequest(t *testing.T) {
	c, err := newLoadClient(benchTarget{name: "gateway", url: "http://127.0.0.1:1/v1beta/models/m:streamGenerateContent?alt=sse",
		header: http.Header{"Authorization": {"Bearer k"}, "Content-Length": {"9"}}}, []byte(`{"x":1}`), true)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(c.req)))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(req.Body)
	if req.Method != "POST" || req.URL.RequestURI() != "/v1beta/models/m:streamGenerateContent?alt=sse" || req.Host != "127.0.0.1:1" ||
		req.Header.Get("Authorization") != "Bearer k" || string(body) != `{"x":1}` || !c.gateway {
		t.Fatalf("request %s %s host %s header %v body %s", req.Method, req.URL, req.Host, req.Header, body)
	}
	if _, err := newLoadClient(benchTarget{url: "https://example.com/"}, nil, false); err == nil {
		t.Fatal("https accepted")
	}
}

// The fast bench mock answers as the net/http one does, on one
// keep-alive connection mixing cached answers and hand-offs (streams,
// GET, MCP), and the load engine reads both.
func TestBenchMockFast(t *testing.T) {
	fast, plain := startBenchMock(t), startBench(t, "mock", "--plain-http")
	hc := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}}
	do := func(base, method, path, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	small := string(benchBody("small", false))
	tests := []struct{ method, path, body string }{
		{"POST", "/v1/chat/completions", small},
		{"POST", "/v1/chat/completions", small}, // cached
		{"POST", "/v1/chat/completions", `{"model":"m","messages":[]}`},
		{"POST", "/v1/chat/completions", string(benchBody("small", true))}, // stream: handed off
		{"POST", "/v1/messages", `{"model":"m","messages":[]}`},
		{"POST", "/v1beta/models/m:generateContent", `{}`},
		{"GET", "/v1/models", ""},
		{"POST", "/v1/chat/completions", "not json"},
	}
	for i, tc := range tests {
		fs, fb := do(fast, tc.method, tc.path, tc.body)
		ps, pb := do(plain, tc.method, tc.path, tc.body)
		if fs != ps || fb != pb || fs != 200 {
			t.Errorf("%d %s %s: fast %d %.80q, net/http %d %.80q", i, tc.method, tc.path, fs, fb, ps, pb)
		}
	}
	c := loadTarget(t, fast+"/v1/chat/completions", false)
	if ss, _ := closedLoopRun(context.Background(), c, 4, 200); len(ss) != 200 || errs(ss) != 0 {
		t.Fatalf("load engine on the fast mock: %d samples, %d errors", len(ss), errs(ss))
	}
	c = loadTarget(t, fast+"/v1/chat/completions", true)
	ss, _ := closedLoopRun(context.Background(), c, 2, 10)
	for i, s := range ss {
		if s.err || s.ttfb <= 0 || len(s.gaps) < 10 {
			t.Errorf("stream %d: err %v ttfb %v %d gaps", i, s.err, s.ttfb, len(s.gaps))
		}
	}
}
