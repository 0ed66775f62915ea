package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// The load engine of `vigil bench run` under load (closed loop at
// --concurrency, open loop at --rates): a plain HTTP/1.1 client built to
// cost the shared core as little as possible, so that the load
// generator and the mock on core 1 can drive thousands of requests per
// second at the server under test on core 0.
//
//   - The request is built once (request line, headers, body) and each
//     send is one write of those bytes.
//   - Each keep-alive connection has one reader goroutine and at most
//     one request in flight (no pipelining). The open loop's scheduler
//     writes each request at its scheduled time on an idle connection
//     (dialling a new one when none is idle), with no goroutine per
//     request; the reader parses the response with minimal work, records
//     the sample and puts the connection back, or writes the next
//     waiting request on it.
//   - Latency counts from the request's scheduled start (open loop: no
//     coordinated omission) or from its write (closed loop). Non-200
//     statuses, malformed responses, refused connections and connections
//     closed mid-response count as errors.
//
// The concurrency-1 interleaved measurement keeps net/http (benchOne):
// its figures are gated in CI against a stored baseline.

// loadClient sends one pre-built request to one target over a pool of
// keep-alive connections. It is reused across the runs of one target
// (one run at a time).
type loadClient struct {
	addr    string // host:port to dial
	req     []byte // the whole request
	stream  bool   // record time to first data: line and gaps
	gateway bool   // count the requests in gatewayRequests

	mu       sync.Mutex
	idle     []*loadConn // LIFO: the most recently used first
	conns    map[*loadConn]struct{}
	limit    int       // requests in flight at most (a run's)
	inflight int       // requests sent or dialling, not answered
	backlog  []loadJob // requests waiting for a slot, oldest first
	out      []sample  // the current run's samples, by job index
	stopped  bool      // the run is over: requests fail unsent
	pending  sync.WaitGroup
}

// loadJob is one request of a run.
type loadJob struct {
	i  int       // index into loadClient.out
	at time.Time // scheduled start; zero: the time it is written
	// retried is set when the job is sent again after a reused
	// connection was found closed before any byte of the response.
	retried bool
}

// loadConn is one connection and the job in flight on it.
type loadConn struct {
	c    net.Conn
	w    io.Writer // c, or its raw socket
	br   *bufio.Reader
	busy bool // a job is in flight (guarded by loadClient.mu)
	job  loadJob
	used atomic.Int32 // responses read on it
}

// errBenchTimeout marks the requests still unanswered when a run's
// deadline passed or its context was cancelled.
var errBenchTimeout = errors.New("no response in time")

// newLoadClient builds the request to target t once.
func newLoadClient(t benchTarget, body []byte, stream bool) (*loadClient, error) {
	u, err := url.Parse(t.url)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", t.url, err)
	}
	if u.Scheme != "http" {
		return nil, fmt.Errorf("%s: the load engine speaks plain http:// only", t.url)
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), "80")
	}
	return &loadClient{addr: host, req: buildRequest(u, t.header, body), stream: stream, gateway: t.name == "gateway",
		conns: map[*loadConn]struct{}{}}, nil
}

// buildRequest is the HTTP/1.1 POST of body to u with header h.
func buildRequest(u *url.URL, h http.Header, body []byte) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "POST %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: vigil-bench\r\n", u.RequestURI(), u.Host)
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if http.CanonicalHeaderKey(k) == "Content-Length" || http.CanonicalHeaderKey(k) == "Host" {
			continue
		}
		for _, v := range h[k] {
			fmt.Fprintf(&b, "%s: %s\r\n", k, v)
		}
	}
	fmt.Fprintf(&b, "Content-Length: %d\r\n\r\n", len(body))
	b.Write(body)
	return b.Bytes()
}

// warm opens connections until n are idle, so that a run's first
// requests do not pay for dialling.
func (c *loadClient) warm(n int) error {
	for {
		c.mu.Lock()
		k := len(c.idle)
		c.mu.Unlock()
		if k >= n {
			return nil
		}
		lc, err := c.dial()
		if err != nil {
			return err
		}
		c.mu.Lock()
		c.idle = append(c.idle, lc)
		c.mu.Unlock()
	}
}

// dial opens a connection and starts its reader.
func (c *loadClient) dial() (*loadConn, error) {
	nc, err := net.Dial("tcp", c.addr)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", c.addr, err)
	}
	var rw io.ReadWriter = nc
	if rs := newRawSocket(nc); rs != nil {
		rw = rs
	}
	lc := &loadConn{c: nc, w: rw, br: bufio.NewReaderSize(rw, 8<<10)}
	c.mu.Lock()
	c.conns[lc] = struct{}{}
	c.mu.Unlock()
	go c.read(lc)
	return lc, nil
}

// closeAll closes every connection (their readers then end).
func (c *loadClient) closeAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for lc := range c.conns {
		lc.c.Close()
	}
}

// start prepares a run of n requests with at most limit in flight.
func (c *loadClient) start(n, limit int) {
	c.mu.Lock()
	c.out = make([]sample, n)
	for i := range c.out {
		c.out[i].overhead = -1
	}
	c.limit = max(limit, 1)
	c.backlog = c.backlog[:0]
	c.stopped = false
	c.mu.Unlock()
	c.pending.Add(n)
}

// finish waits for the run's requests, at most until deadline or until
// ctx ends; then the requests still unanswered fail (their connections
// are closed) and the samples are returned.
func (c *loadClient) finish(ctx context.Context, deadline time.Duration) []sample {
	done := make(chan struct{})
	go func() { c.pending.Wait(); close(done) }()
	t := time.NewTimer(deadline)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	case <-ctx.Done():
	}
	select {
	case <-done:
	default:
		c.mu.Lock()
		bl := c.backlog
		c.backlog = nil
		c.stopped = true
		c.mu.Unlock()
		for _, j := range bl {
			c.complete(j, errBenchTimeout)
		}
		c.closeAll()
		<-done
	}
	c.mu.Lock()
	out := c.out
	c.out = nil
	c.mu.Unlock()
	return out
}

// complete records job j as failed with err (nil: already recorded).
func (c *loadClient) complete(j loadJob, err error) {
	if err != nil {
		s := &c.out[j.i]
		s.err = true
		if !j.at.IsZero() {
			s.total = time.Since(j.at)
		}
	}
	c.pending.Done()
}

// dispatch sends job j on an idle connection, on a new one, or queues
// it when the run's limit of requests in flight is reached.
func (c *loadClient) dispatch(j loadJob) {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		c.complete(j, errBenchTimeout)
		return
	}
	if c.inflight >= c.limit {
		c.backlog = append(c.backlog, j)
		c.mu.Unlock()
		return
	}
	c.inflight++
	if n := len(c.idle); n > 0 {
		lc := c.idle[n-1]
		c.idle = c.idle[:n-1]
		lc.busy, lc.job = true, j
		c.mu.Unlock()
		c.send(lc, j)
		return
	}
	c.mu.Unlock()
	go c.dialFor(j)
}

// dialFor opens a new connection for job j.
func (c *loadClient) dialFor(j loadJob) {
	lc, err := c.dial()
	if err != nil {
		c.release(nil, j, err)
		return
	}
	c.mu.Lock()
	lc.busy, lc.job = true, j
	c.mu.Unlock()
	c.send(lc, j)
}

// send writes the request of job j on lc, which holds it.
func (c *loadClient) send(lc *loadConn, j loadJob) {
	if j.at.IsZero() {
		j.at = time.Now()
		c.mu.Lock()
		lc.job.at = j.at
		c.mu.Unlock()
	}
	if c.gateway {
		gatewayRequests.Add(1)
	}
	if _, err := lc.w.Write(c.req); err != nil {
		c.mu.Lock()
		mine := lc.busy
		lc.busy = false
		c.mu.Unlock()
		lc.c.Close() // its reader sees the connection idle and drops it
		if mine {
			c.failed(lc, j, err)
		}
	}
}

// release ends job j on connection lc (nil: lost). With err set the job
// failed and lc, if any, is dropped. The freed slot goes to the oldest
// waiting job: on lc when it lives, else on an idle or new connection.
func (c *loadClient) release(lc *loadConn, j loadJob, err error) {
	c.mu.Lock()
	if len(c.backlog) > 0 && lc != nil && err == nil {
		next := c.backlog[0]
		c.backlog = c.backlog[1:]
		lc.busy, lc.job = true, next
		c.mu.Unlock()
		c.complete(j, nil)
		c.send(lc, next)
		return
	}
	c.inflight--
	if lc != nil && err == nil {
		lc.busy = false
		c.idle = append(c.idle, lc)
	}
	var next []loadJob
	for len(c.backlog) > 0 && c.inflight < c.limit {
		next = append(next, c.backlog[0])
		c.backlog = c.backlog[1:]
		c.inflight++
	}
	c.inflight -= len(next) // dispatch counts them again
	c.mu.Unlock()
	c.complete(j, err)
	for _, n := range next {
		c.dispatch(n)
	}
}

// failed ends job j, whose request could not be written on lc or got
// no byte of answer. When lc had served earlier requests, the server may
// have closed it while idle before the request reached it: the request
// is sent again, once, on another connection.
func (c *loadClient) failed(lc *loadConn, j loadJob, err error) {
	if lc.used.Load() == 0 || j.retried {
		c.release(nil, j, err)
		return
	}
	j.retried = true
	c.mu.Lock()
	c.inflight--
	c.mu.Unlock()
	c.dispatch(j)
}

// drop forgets a dead connection.
func (c *loadClient) drop(lc *loadConn) {
	lc.c.Close()
	c.mu.Lock()
	delete(c.conns, lc)
	if i := slices.Index(c.idle, lc); i >= 0 {
		c.idle = slices.Delete(c.idle, i, i+1)
	}
	c.mu.Unlock()
}

// read is lc's reader: it parses each response to the job in flight.
func (c *loadClient) read(lc *loadConn) {
	for {
		_, err := lc.br.Peek(1)
		c.mu.Lock()
		busy, j := lc.busy, lc.job
		if err != nil || !busy {
			lc.busy = false // a failed write must not count it again
		}
		c.mu.Unlock()
		if !busy {
			// Closed while idle (by the server, or by us), or bytes
			// nobody asked for: the connection is no use.
			c.drop(lc)
			return
		}
		if err != nil {
			c.drop(lc)
			c.failed(lc, j, err)
			return
		}
		s := &c.out[j.i]
		keep, err := readResponse(lc.br, c.stream, j.at, s)
		s.total = time.Since(j.at)
		lc.used.Add(1)
		if err != nil || !keep {
			c.mu.Lock()
			lc.busy = false
			c.mu.Unlock()
			c.drop(lc)
			if err != nil {
				s.err = true
			}
			c.release(nil, j, nil)
			return
		}
		c.release(lc, j, nil)
	}
}

// openLoopRun sends requests at a constant rate for d and returns one
// sample per request, each latency counted from its scheduled start (no
// coordinated omission). At most maxConns requests are in flight; later
// ones wait for a connection, their wait counted.
func openLoopRun(ctx context.Context, c *loadClient, rate int, d time.Duration, maxConns int) []sample {
	total := int(float64(rate) * d.Seconds())
	interval := time.Second / time.Duration(rate)
	c.start(total, maxConns)
	_ = c.warm(min(8, maxConns)) // a refused dial fails the requests instead
	sleep := time.Sleep
	if sl := newSleeper(); sl != nil {
		defer sl.close()
		sleep = sl.sleep
	}
	start := time.Now()
	i := 0
	for i < total && ctx.Err() == nil {
		// Send every request due by now (a late wake-up sends the
		// overdue ones back to back; their latency counts from the
		// schedule), then sleep until the next one is due.
		due := min(total, int(time.Since(start)/interval)+1)
		for ; i < due; i++ {
			c.dispatch(loadJob{i: i, at: start.Add(time.Duration(i) * interval)})
		}
		if i < total {
			if w := time.Until(start.Add(time.Duration(i) * interval)); w > 0 {
				sleep(w)
			}
		}
	}
	c.pending.Add(i - total) // not sent: cancelled
	return c.finish(ctx, time.Minute)[:i]
}

// closedLoopRun sends n requests with conc in flight at a time, each
// sent as soon as one is answered; it returns the samples (latency from
// each request's write) and the seconds the run took.
func closedLoopRun(ctx context.Context, c *loadClient, conc, n int) ([]sample, float64) {
	c.start(n, conc)
	_ = c.warm(conc)
	start := time.Now()
	for i := 0; i < n; i++ {
		c.dispatch(loadJob{i: i})
	}
	out := c.finish(ctx, time.Minute+time.Duration(n)*time.Millisecond)
	return out, time.Since(start).Seconds()
}

// sleeper waits precisely (bench_loop_linux.go).
type sleeper interface {
	sleep(d time.Duration)
	close()
}

// errMalformed is a response the parser cannot read.
var errMalformed = errors.New("malformed HTTP response")

// readResponse reads one HTTP/1.x response from br into s: an error
// unless the status is 200, the Vigil-Overhead-Ms header, and with
// stream the time from start to the first body line starting with
// "data:" and the gaps between such lines. It reports whether the
// connection can carry another request.
func readResponse(br *bufio.Reader, stream bool, start time.Time, s *sample) (keepAlive bool, err error) {
	for {
		line, err := readLine(br)
		if err != nil {
			return false, err
		}
		if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' {
			return false, fmt.Errorf("%w: status line %.40q", errMalformed, line)
		}
		http10 := line[7] == '0'
		status, ok := atoi3(line[9:12])
		if !ok || (len(line) > 12 && line[12] != ' ' && line[12] != '\r' && line[12] != '\n') {
			return false, fmt.Errorf("%w: status line %.40q", errMalformed, line)
		}
		h, err := readHeader(br)
		if err != nil {
			return false, err
		}
		if status >= 100 && status < 200 && status != 101 {
			continue // 100 Continue, 103 Early Hints: the response follows
		}
		if status != 200 {
			s.err = true
		}
		if h.overhead >= 0 {
			s.overhead = h.overhead
		}
		keepAlive = !h.close && (!http10 || h.keepAlive)
		h.chunked = h.chunked && !http10 // HTTP/1.0 has no chunked encoding
		var sc *sseScan
		if stream {
			sc = &sseScan{start: start, s: s, lineStart: true}
		}
		switch {
		case status == 101 || status == 204 || status == 304:
			return keepAlive && status != 101, nil
		case h.chunked:
			return keepAlive, readChunked(br, sc)
		case h.length >= 0:
			return keepAlive, consume(br, h.length, sc)
		default: // the body ends with the connection
			return false, consume(br, -1, sc)
		}
	}
}

// respHeader is what readResponse needs of a response's header.
type respHeader struct {
	length    int64 // Content-Length, -1 when absent
	chunked   bool
	close     bool // Connection: close
	keepAlive bool // Connection: keep-alive (HTTP/1.0)
	overhead  float64
}

// readHeader reads header lines up to the blank line.
func readHeader(br *bufio.Reader) (respHeader, error) {
	h := respHeader{length: -1, overhead: -1}
	for {
		line, err := readLine(br)
		if err != nil {
			return h, err
		}
		line = trimEOL(line)
		if len(line) == 0 {
			return h, nil
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return h, fmt.Errorf("%w: header line %.40q", errMalformed, line)
		}
		value = bytes.TrimSpace(value)
		switch {
		case asciiEqualFold(name, "content-length"):
			n, err := strconv.ParseInt(string(value), 10, 64)
			if err != nil || n < 0 {
				return h, fmt.Errorf("%w: Content-Length %.40q", errMalformed, value)
			}
			h.length = n
		case asciiEqualFold(name, "transfer-encoding"):
			h.chunked = asciiEqualFold(value, "chunked")
		case asciiEqualFold(name, "connection"):
			h.close = h.close || containsFold(value, "close")
			h.keepAlive = h.keepAlive || containsFold(value, "keep-alive")
		case asciiEqualFold(name, "vigil-overhead-ms"):
			if v, err := strconv.ParseFloat(string(value), 64); err == nil {
				h.overhead = v
			}
		}
	}
}

// readLine returns the next line, '\n' included; a line longer than
// br's buffer is cut to its first bufSize bytes (its rest is skipped),
// which is enough for the headers read here.
func readLine(br *bufio.Reader) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	if err == nil {
		return line, nil
	}
	if !errors.Is(err, bufio.ErrBufferFull) {
		if errors.Is(err, io.EOF) && len(line) > 0 {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	head := append([]byte(nil), line[:min(len(line), 256)]...)
	for errors.Is(err, bufio.ErrBufferFull) {
		_, err = br.ReadSlice('\n')
	}
	if err != nil {
		return nil, err
	}
	return append(head, '\n'), nil
}

func trimEOL(b []byte) []byte {
	b = bytes.TrimSuffix(b, []byte("\n"))
	return bytes.TrimSuffix(b, []byte("\r"))
}

// readChunked reads a chunked body and its trailer.
func readChunked(br *bufio.Reader, sc *sseScan) error {
	for {
		line, err := readLine(br)
		if err != nil {
			return err
		}
		size := trimEOL(line)
		if i := bytes.IndexByte(size, ';'); i >= 0 {
			size = size[:i]
		}
		n, err := strconv.ParseInt(string(bytes.TrimSpace(size)), 16, 64)
		if err != nil || n < 0 || n > 1<<40 {
			return fmt.Errorf("%w: chunk size %.40q", errMalformed, line)
		}
		if n == 0 {
			_, err := readHeader(br) // the trailer, up to the blank line
			return err
		}
		if err := consume(br, n, sc); err != nil {
			return err
		}
		line, err = readLine(br)
		if err != nil {
			return err
		}
		if len(trimEOL(line)) != 0 {
			return fmt.Errorf("%w: no line end after a chunk", errMalformed)
		}
	}
}

// consume reads n body bytes (n < 0: up to EOF), passing them to sc
// when set.
func consume(br *bufio.Reader, n int64, sc *sseScan) error {
	if sc == nil && n >= 0 {
		for n > 0 {
			k, err := br.Discard(int(min(n, 1<<30)))
			n -= int64(k)
			if err != nil {
				return unexpected(err)
			}
		}
		return nil
	}
	for n != 0 {
		if br.Buffered() == 0 {
			if _, err := br.Peek(1); err != nil {
				if n < 0 && errors.Is(err, io.EOF) {
					return nil
				}
				return unexpected(err)
			}
		}
		k := br.Buffered()
		if n > 0 {
			k = int(min(int64(k), n))
			n -= int64(k)
		}
		p, _ := br.Peek(k)
		if sc != nil {
			sc.feed(p)
		}
		br.Discard(k)
	}
	return nil
}

func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// sseScan finds the body lines that start with "data:" and records the
// time to the first and the gaps between them.
type sseScan struct {
	start     time.Time
	s         *sample
	last      time.Time
	lineStart bool
	match     int // bytes of "data:" matched at the start of this line
}

const sseData = "data:"

func (sc *sseScan) feed(p []byte) {
	for len(p) > 0 {
		if sc.lineStart || sc.match > 0 {
			k := 0
			for k < len(p) && sc.match < len(sseData) && p[k] == sseData[sc.match] {
				k++
				sc.match++
			}
			sc.lineStart = false
			if sc.match == len(sseData) {
				sc.event()
				sc.match = 0
			} else if k < len(p) {
				sc.match = 0 // not a data line (or a short line)
			}
			p = p[k:]
			if sc.match > 0 {
				return // the prefix continues in the next read
			}
		}
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			return
		}
		p = p[i+1:]
		sc.lineStart = true
	}
}

func (sc *sseScan) event() {
	now := time.Now()
	if sc.last.IsZero() {
		sc.s.ttfb = now.Sub(sc.start)
	} else {
		sc.s.gaps = append(sc.s.gaps, now.Sub(sc.last))
	}
	sc.last = now
}

// atoi3 parses three decimal digits.
func atoi3(b []byte) (int, bool) {
	n := 0
	for _, c := range b[:3] {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// asciiEqualFold reports whether b equals the lower-case ASCII s,
// ignoring case.
func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range b {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}

// containsFold reports whether b contains the lower-case ASCII s,
// ignoring case.
func containsFold(b []byte, s string) bool {
	for i := 0; i+len(s) <= len(b); i++ {
		if asciiEqualFold(b[i:i+len(s)], s) {
			return true
		}
	}
	return false
}

// openConns is the number of connections c has open.
func (c *loadClient) openConns() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.conns)
}
