package gateway

import "time"

// When a stitched session ends (no call for gateway.session_idle_timeout)
// its run is finished (spec §8.3, ledger.md §7.1): the recorder gets a
// FinishRun record after the session's last call record.

// finishRun hands the run of an ended session to the recorder, once the
// session's records were handed over. Called with the index locked.
func (g *Gateway) finishRun(s *session) {
	if s.ident == nil || s.traceID == "" {
		return
	}
	tail := s.tail
	rec := &Record{Identity: s.ident, Dataset: s.dataset, TraceID: s.traceID, FinishRun: true, CallID: "finish-" + s.traceID}
	go func() {
		if tail != nil {
			<-tail
		}
		if !g.opts.Recorder.Record(rec) {
			g.log.Warn("gateway: run not finished (record queue full)", "trace_id", s.traceID)
		}
	}()
}

// sweepSessions ends idle sessions even when no call arrives to notice,
// until Close.
func (g *Gateway) sweepSessions() {
	every := min(g.opts.SessionIdle/4, time.Minute)
	t := time.NewTicker(max(every, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-g.stop:
			return
		case <-t.C:
			ss := g.sessions
			ss.mu.Lock()
			ss.expire(ss.now())
			ss.mu.Unlock()
		}
	}
}
