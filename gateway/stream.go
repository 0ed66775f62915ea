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
// checkpoint evaluation runs on the handler's goroutine.
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
	upDone       bool
	finalRunning bool
	finalPassed  bool
	sent         bool // status and headers written
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
	timedOut := false
	idle := time.AfterFunc(c.u.StreamIdleTimeout, func() { cancel(errUpstreamTimeout) })
	defer idle.Stop()
	body := &idleBody{r: resp.Body, t: idle, idle: c.u.StreamIdleTimeout}

	frames := make(chan *frame, 64)
	readErr := make(chan error, 1)
	go func() {
		defer close(frames)
		if c.kind == "gemini" && !c.d.geminiSSE {
			readArray(body, frames, readErr)
			return
		}
		sr := newSSEReader(body)
		for {
			f, err := sr.next()
			if err != nil {
				if err != io.EOF {
					if errors.Is(err, errFrameTooLarge) {
						// Forward the rest uninspected (spec §4.3).
						rest := append([]byte(nil), sr.rest()...)
						frames <- &frame{raw: rest, at: time.Now(), event: "\x00too-large"}
						b, _ := io.ReadAll(body)
						frames <- &frame{raw: b, kind: kindNeutral, at: time.Now()}
					}
					readErr <- err
				}
				return
			}
			f.at = time.Now()
			frames <- f
		}
	}()
	// However the loop below ends, let the reader finish: it may be
	// blocked sending a frame nobody reads any more.
	src := frames
	defer func() {
		go func() {
			for range src {
			}
		}()
	}()
	checks := make(chan checkpoint, 1)
	var timer *time.Timer
	var timerC <-chan time.Time
	keep := time.NewTicker(so.Keepalive)
	defer keep.Stop()
	first := true
	var blocked *verdict
	clientGone := false
loop:
	for {
		select {
		case f, ok := <-frames:
			if !ok {
				frames = nil
				s.upDone = true
				c.upEnd = time.Now()
				s.parser.finish()
				select {
				case err := <-readErr:
					if !errors.Is(context.Cause(ctx), errBlocked) && ctx.Err() == nil {
						s.protocolErr = err.Error()
					}
				default:
				}
				break
			}
			if first {
				c.upFirst, first = f.at, false
			}
			if f.event == "\x00too-large" {
				f.event = ""
				s.protocolErr = errFrameTooLarge.Error()
			}
			if s.protocolErr == "" {
				s.parser.feed(f)
			}
			if c.stripUsage && f.data != nil && usageOnlyChunk(f.data) {
				break // recorded, not the client's (force_stream_usage)
			}
			if (s.mode == "open" || s.protocolErr != "") && f.kind != kindFinal {
				f.kind = kindNeutral
			}
			s.queue = append(s.queue, f)
			if f.kind == kindText && s.unchecked.IsZero() && s.mode == "incremental" {
				s.unchecked = f.at
				if timer == nil {
					timer = time.NewTimer(s.d)
				} else {
					timer.Reset(s.d)
				}
				timerC = timer.C
			}
		case cp := <-checks:
			s.checking = false
			if cp.final {
				s.finalRunning = false
			}
			s.verdicts = append(s.verdicts, cp.v)
			if cp.v.failure != "" && s.failure == "" {
				s.failure = cp.v.failure
			}
			if cp.v.blocked {
				blocked = cp.v
			} else {
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
			}
		case <-timerC:
			timerC = nil
			s.again = true
		case <-keep.C:
			if s.sent && len(s.queue) > 0 && time.Since(s.lastRelease) >= so.Keepalive {
				if _, err := w.Write(c.keepalive()); err != nil {
					clientGone = true
				}
				flush(w)
				s.lastRelease = time.Now()
			}
		case <-ctx.Done():
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
	if timer != nil {
		timer.Stop()
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
	for len(s.queue) > 0 && s.releasable(s.queue[0]) {
		f := s.queue[0]
		s.queue = s.queue[1:]
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

// writeHeaders writes the status line and headers with the first
// released event.
func (s *guardStream) writeHeaders() {
	c := s.c
	h := s.w.Header()
	copyResponseHeaders(h, s.resp.Header)
	c.setHeaders(h, c.resultOr(), rsVersion(c.rules))
	declareTrailers(h)
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
