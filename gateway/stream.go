package gateway

import (
	"context"
	"errors"
	"io"
	"net/http"
	"time"
)

// This file is the streaming guard of spec §6.4: upstream events are
// released to the client strictly in order, text only once a passing
// checkpoint has covered H characters beyond it, tool-call fragments only
// once their whole call has passed, and final events only after the
// final checkpoint.

// guardStream is the state of one guarded stream. Everything but the
// checkpoint evaluation and, once an event is held, the reading of the
// upstream body runs on the handler's goroutine.
type guardStream struct {
	c      *call
	w      http.ResponseWriter
	resp   *http.Response
	parser streamParser
	mode   string // incremental, buffer, passthrough; "open" = no blocking rules
	h, i   int
	d      time.Duration

	queue        []*frame
	covered      map[int]int // C_c: text covered by the latest passing checkpoint
	coveredTools map[string]bool
	startLens    map[int]int // text lengths at the latest checkpoint start
	checking     bool
	again        bool // a trigger arrived while a checkpoint ran
	unchecked    time.Time
	timer        *time.Timer // fires D after the oldest unchecked text
	timerC       <-chan time.Time
	gotFirst     bool // an upstream event arrived
	upDone       bool
	finalRunning bool
	finalPassed  bool
	result       string // the Vigil-Guardrail-Result set by prepareHeaders
	sent         bool   // status and headers written
	lastRelease  time.Time
	released     int
	verdicts     []*verdict
	failure      string
	protocolErr  string
}

// checkpoint is a finished evaluation with the snapshot it covered.
type checkpoint struct {
	v     *verdict
	lens  map[int]int
	tools []string
	final bool
}

// idleBody cancels the upstream call when no byte arrives for idle.
type idleBody struct {
	r    io.Reader
	t    *time.Timer
	idle time.Duration
}

func (b *idleBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.t.Reset(b.idle)
	return n, err
}

// eventTooLarge marks the event of the bytes read up to a frame over
// maxFrame; the rest of the body follows as one neutral event, both
// forwarded uninspected (spec §4.3).
const eventTooLarge = "\x00too-large"

// frameSource reads an SSE upstream body frame by frame; it is read
// first by the handler's goroutine and then, once an event is held, by
// the reader goroutine, never by both.
type frameSource struct {
	sr   *sseReader
	body io.Reader
	tail int   // 1: the too-large marker was returned; 2: the rest too
	err  error // the error that ends the stream, returned from now on
}

// next returns the next upstream frame with its arrival time, or the
// error that ended the stream (io.EOF at its end).
func (fs *frameSource) next() (*frame, error) {
	switch {
	case fs.err != nil && fs.tail == 0:
		return nil, fs.err
	case fs.tail == 1:
		// After a frame over maxFrame, the rest of the body as one
		// neutral event, then the error.
		fs.tail = 2
		b, _ := io.ReadAll(fs.body)
		return &frame{raw: b, kind: kindNeutral, at: time.Now()}, nil
	case fs.tail == 2:
		fs.tail = 0
		return nil, fs.err
	}
	f, err := fs.sr.next()
	if err != nil {
		fs.err = err
		if errors.Is(err, errFrameTooLarge) {
			fs.tail = 1
			rest := append([]byte(nil), fs.sr.rest()...)
			return &frame{raw: rest, at: time.Now(), event: eventTooLarge}, nil
		}
		return nil, err
	}
	f.at = time.Now()
	return f, nil
}

func (c *call) serveStream(w http.ResponseWriter, r *http.Request, resp *http.Response, upCtx context.Context, cancel context.CancelCauseFunc) {
	g := c.g
	so := g.opts.Stream
	s := &guardStream{c: c, w: w, resp: resp, parser: c.p.stream(), mode: so.Mode, h: so.HoldbackChars, i: so.CheckInterval, d: so.CheckMaxDelay,
		covered: map[int]int{}, coveredTools: map[string]bool{}, startLens: map[int]int{}}
	if len(c.rules.block) == 0 {
		s.mode = "open"
	} else if c.rules.streamFinal || (c.kind == "gemini" && !c.d.geminiSSE) {
		// Non-monotone rules, and Gemini's JSON-array streams (whose
		// elements are checked as one response), run in buffer mode.
		s.mode = "buffer"
	}
	ctx := upCtx
	idle := time.AfterFunc(c.u.StreamIdleTimeout, func() { cancel(errUpstreamTimeout) })
	defer idle.Stop()
	body := &idleBody{r: resp.Body, t: idle, idle: c.u.StreamIdleTimeout}
	// A read blocked on this goroutine ends when ctx is done (idle
	// timeout, client gone): the upstream client aborts it, and closing
	// the body makes sure of it whatever the client.
	defer context.AfterFunc(ctx, func() { resp.Body.Close() })()
	s.prepareHeaders()

	// While nothing is pending (no event held, no checkpoint running,
	// no check timer set) the upstream's frames are read, parsed and
	// released on this goroutine: the first byte and, in passthrough and
	// open modes, every event reach the client without a goroutine
	// hand-off. A blocked read still ends on the idle timeout and on the
	// client's disconnection, both of which cancel ctx (above).
	// Once something is pending, a reader goroutine takes the body over
	// and the loop selects between its frames, checkpoint results,
	// timers and keepalives. Gemini's JSON-array streams always use it.
	var src *frameSource
	if c.kind != "gemini" || c.d.geminiSSE {
		src = &frameSource{sr: newSSEReader(body), body: body}
	}
	var frames chan *frame // nil until the reader goroutine starts
	var readErr chan error
	startReader := func() {
		frames, readErr = make(chan *frame, 64), make(chan error, 1)
		go func(frames chan<- *frame, readErr chan<- error) {
			defer close(frames)
			if src == nil {
				readArray(body, frames, readErr)
				return
			}
			for {
				f, err := src.next()
				if err != nil {
					if err != io.EOF {
						readErr <- err
					}
					return
				}
				frames <- f
			}
		}(frames, readErr)
	}
	// However the loop below ends, let the reader finish: it may be
	// blocked sending a frame nobody reads any more.
	defer func() {
		if frames := frames; frames != nil {
			go func() {
				for range frames {
				}
			}()
		}
	}()
	inline := src != nil
	if !inline {
		startReader()
	}
	checks := make(chan checkpoint, 1)
	var keep *time.Ticker
	var keepC <-chan time.Time
	defer func() {
		if keep != nil {
			keep.Stop()
		}
	}()
	var blocked *verdict
	clientGone, timedOut := false, false
loop:
	for {
		if inline && (s.upDone || len(s.queue) > 0 || s.checking || s.timerC != nil) {
			inline = false
			if !s.upDone {
				startReader()
			}
			keep = time.NewTicker(so.Keepalive)
			keepC = keep.C
		}
		if inline {
			f, err := src.next()
			switch {
			case err == nil:
				s.accept(f)
			case ctx.Err() != nil:
				// Cancelled (idle timeout, client gone): handled below.
			default:
				s.upstreamEnd(err, ctx)
			}
		} else {
			select {
			case f, ok := <-frames:
				if !ok {
					frames = nil
					var err error = io.EOF
					select {
					case err = <-readErr:
					default:
					}
					s.upstreamEnd(err, ctx)
					break
				}
				s.accept(f)
			case cp := <-checks:
				if v := s.checked(cp); v != nil {
					blocked = v
				}
			case <-s.timerC:
				s.timerC = nil
				s.again = true
			case <-keepC:
				if s.sent && len(s.queue) > 0 && time.Since(s.lastRelease) >= so.Keepalive {
					if _, err := w.Write(c.keepalive()); err != nil {
						clientGone = true
					}
					flush(w)
					s.lastRelease = time.Now()
				}
			case <-ctx.Done():
			}
		}
		if r.Context().Err() != nil {
			clientGone = true
		} else if ctx.Err() != nil {
			timedOut = true
		}
		if clientGone || timedOut || blocked != nil {
			s.queue = nil
			break loop
		}
		if s.protocolErr != "" && len(c.rules.block) > 0 && !g.opts.FailOpen {
			// A stream protocol error is an evaluation failure (spec §6.6).
			v := &verdict{statuses: map[string]string{}}
			for _, gr := range c.rules.block {
				v.fail(g, gr, "stream protocol error: "+s.protocolErr, true)
			}
			blocked = v
			s.queue = nil
			break loop
		}
		if s.protocolErr != "" && s.mode != "open" {
			s.failure = "stream protocol error: " + s.protocolErr
			s.mode = "open"
			for _, f := range s.queue {
				if f.kind != kindFinal {
					f.kind = kindNeutral
				}
			}
		}
		if s.mode != "open" {
			s.maybeCheck(checks)
		}
		if err := s.release(); err != nil {
			clientGone = true
			break loop
		}
		if s.upDone && len(s.queue) == 0 && !s.checking && (s.mode == "open" || s.finalPassed) {
			break loop
		}
	}
	if s.timer != nil {
		s.timer.Stop()
	}
	out := s.parser.output()
	var all *verdict
	for _, v := range s.verdicts {
		if all == nil {
			all = &verdict{statuses: map[string]string{}}
		}
		for k, st := range v.statuses {
			if all.statuses[k] != ruleMatched && all.statuses[k] != ruleError {
				all.statuses[k] = st
			}
		}
		all.errors = append(all.errors, v.errors...)
		all.rules = append(all.rules, v.rules...)
		all.elapsed += v.elapsed
	}
	if all != nil {
		mergeStatuses(c.statuses, "output", all)
	}
	switch {
	case blocked != nil:
		cancel(errBlocked)
		c.result = "block"
		c.commitSession(recordInput{out: out, blockedAt: "response"})
		if !s.sent {
			s.writeHeaders()
		}
		w.Write(c.d.guardrailEvent("response", blocked.details(), !s.sentBody()))
		c.setTrailers(w.Header(), "block")
		flush(w)
		c.record(recordInput{out: out, blockedAt: "response", verdict: blocked, delivered: s.mode == "passthrough"})
	case clientGone:
		cancel(errClientGone)
		c.record(recordInput{out: out, verdict: all, clientGone: true})
	case timedOut:
		// The upstream timed out between events.
		if !s.sent {
			s.writeHeaders()
		}
		w.Write(c.d.upstreamErrorEvent(http.StatusGatewayTimeout, "upstream "+c.u.Name+" timed out", !s.sentBody()))
		c.setTrailers(w.Header(), c.resultOr())
		flush(w)
		c.record(recordInput{out: out, verdict: all, upstreamStatus: http.StatusGatewayTimeout, errBody: []byte("stream idle timeout")})
	default:
		c.commitSession(recordInput{out: out})
		if !s.sent {
			s.writeHeaders()
		}
		if g.opts.Stream.OverheadComment && c.kind != "gemini" {
			w.Write([]byte(": vigil overhead_ms=" + ms(time.Since(c.t0)-c.upEnd.Sub(c.upStart)) + " held_ms=" + ms(c.heldMax) + "\n\n"))
		}
		if s.failure != "" && c.result == "" {
			c.result = "fail-open"
		}
		c.setTrailers(w.Header(), c.resultOr())
		flush(w)
		c.record(recordInput{out: out, verdict: all})
	}
}

// accept takes in an upstream frame: parses it and queues it.
func (s *guardStream) accept(f *frame) {
	c := s.c
	if !s.gotFirst {
		c.upFirst, s.gotFirst = f.at, true
	}
	if f.event == eventTooLarge {
		f.event = ""
		s.protocolErr = errFrameTooLarge.Error()
	}
	if s.protocolErr == "" {
		s.parser.feed(f)
	}
	if c.stripUsage && f.data != nil && usageOnlyChunk(f.data) {
		return // recorded, not the client's (force_stream_usage)
	}
	if (s.mode == "open" || s.protocolErr != "") && f.kind != kindFinal {
		f.kind = kindNeutral
	}
	s.queue = append(s.queue, f)
	if f.kind == kindText && s.unchecked.IsZero() && s.mode == "incremental" {
		s.unchecked = f.at
		if s.timer == nil {
			s.timer = time.NewTimer(s.d)
		} else {
			s.timer.Reset(s.d)
		}
		s.timerC = s.timer.C
	}
}

// upstreamEnd notes the end of the upstream stream: io.EOF, or the read
// error that ended it (a protocol error unless the call was cancelled).
func (s *guardStream) upstreamEnd(err error, ctx context.Context) {
	s.upDone = true
	s.c.upEnd = time.Now()
	s.parser.finish()
	if err != io.EOF && !errors.Is(context.Cause(ctx), errBlocked) && ctx.Err() == nil {
		s.protocolErr = err.Error()
	}
}

// checked takes in a finished checkpoint; it returns its verdict when it
// blocks.
func (s *guardStream) checked(cp checkpoint) *verdict {
	s.checking = false
	if cp.final {
		s.finalRunning = false
	}
	s.verdicts = append(s.verdicts, cp.v)
	if cp.v.failure != "" && s.failure == "" {
		s.failure = cp.v.failure
	}
	if cp.v.blocked {
		return cp.v
	}
	for ch, n := range cp.lens {
		if n > s.covered[ch] {
			s.covered[ch] = n
		}
	}
	for _, k := range cp.tools {
		s.coveredTools[k] = true
	}
	if cp.final {
		s.finalPassed = true
	}
	return nil
}

// sentBody reports whether any upstream event went to the client.
func (s *guardStream) sentBody() bool { return s.released > 0 }

// keepalive is the provider's keepalive (spec §6.4).
func (c *call) keepalive() []byte {
	switch {
	case c.u.Type == TypeAnthropic:
		return []byte("event: ping\ndata: {\"type\":\"ping\"}\n\n")
	case c.kind == "gemini" && !c.d.geminiSSE:
		return []byte("\n")
	}
	return []byte(": keepalive\n\n")
}

// maybeCheck starts a checkpoint when one is due and none runs.
func (s *guardStream) maybeCheck(out chan<- checkpoint) {
	lens := s.parser.textLens()
	if s.checking {
		return
	}
	final := s.upDone && !s.finalPassed && !s.finalRunning
	due := final || (s.again && s.mode == "incremental")
	if !due && s.mode == "incremental" {
		n := 0
		for ch, l := range lens {
			n += l - s.startLens[ch]
		}
		if n >= s.i {
			due = true
		}
		if !due {
			_, keys := s.parser.draft()
			for _, k := range keys {
				if !s.coveredTools[k] {
					due = true
					break
				}
			}
		}
	}
	if !due {
		return
	}
	s.again = false
	s.unchecked = time.Time{}
	s.checking = true
	if final {
		s.finalRunning = true
	}
	evs, keys := s.parser.draft()
	s.startLens = lens
	c := s.c
	go func() {
		if evs == nil {
			evs = []event{} // nothing drafted yet: the request is past
		}
		v := c.evaluateOn(context.Background(), c.rules.block, 0, evs)
		out <- checkpoint{v: v, lens: lens, tools: keys, final: final}
	}()
}

// release writes the head events that may go out (spec §6.4).
func (s *guardStream) release() error {
	n := 0
	for n < len(s.queue) && s.releasable(s.queue[n]) {
		f := s.queue[n]
		if !s.sent {
			s.writeHeaders()
		}
		if f.kind == kindFinal {
			s.c.commitSession(recordInput{out: s.parser.output()})
		}
		if f.kind != kindNeutral {
			if held := time.Since(f.at); held > s.c.heldMax {
				s.c.heldMax = held
			}
		}
		if _, err := s.w.Write(f.raw); err != nil {
			return err
		}
		s.released++
		n++
	}
	if n > 0 {
		// Keep the queue's array: the next events reuse it.
		m := copy(s.queue, s.queue[n:])
		clear(s.queue[m:])
		s.queue = s.queue[:m]
		s.lastRelease = time.Now()
		flush(s.w)
	}
	return nil
}

func (s *guardStream) releasable(f *frame) bool {
	if f.kind == kindFinal && !s.upDone {
		return false // the session index learns the outcome first (release)
	}
	if s.mode == "open" || f.kind == kindNeutral {
		return true
	}
	if s.finalPassed {
		return true
	}
	switch s.mode {
	case "passthrough":
		return f.kind != kindFinal
	case "buffer":
		return false
	}
	switch f.kind {
	case kindText:
		for _, sp := range f.spans {
			if sp.end > s.covered[sp.choice]-s.h {
				return false
			}
		}
		return true
	case kindTool:
		return s.parser.toolDone(f.tool) && s.coveredTools[f.tool]
	}
	return false
}

// prepareHeaders sets the response headers before the first upstream
// event is read, so that only the timings are left to set when it is
// released.
func (s *guardStream) prepareHeaders() {
	c := s.c
	h := s.w.Header()
	copyResponseHeaders(h, s.resp.Header)
	s.result = c.resultOr()
	c.setHeaders(h, s.result, rsVersion(c.rules))
	declareTrailers(h)
}

// writeHeaders writes the status line and headers with the first
// released event; the timings are those of this moment.
func (s *guardStream) writeHeaders() {
	c := s.c
	h := s.w.Header()
	if r := c.resultOr(); r != s.result {
		h.Set("Vigil-Guardrail-Result", r)
	}
	c.setTimings(h, time.Now())
	s.w.WriteHeader(s.resp.StatusCode)
	s.sent = true
}

// writeStreamHeaders starts an SSE response for a Vigil-generated error.
func (c *call) writeStreamHeaders(w http.ResponseWriter) {
	h := w.Header()
	if c.kind == "gemini" && !c.d.geminiSSE {
		h.Set("Content-Type", "application/json")
	} else {
		h.Set("Content-Type", "text/event-stream")
	}
	h.Set("Cache-Control", "no-cache")
	declareTrailers(h)
	w.WriteHeader(http.StatusOK)
}
