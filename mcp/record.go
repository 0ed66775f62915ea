package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vigilhq/vigil/client"
)

// Store is what a session needs from Vigil: tool-pin verdicts and the
// recording of the session as a trace. ClientStore reaches a server over
// its HTTP API (the stdio wrapper, standalone gateways); package server
// provides the in-process one for `vigil serve` (ServerStore). Both write
// traces through package ingest.
type Store interface {
	// ObservePins has the server judge one tools/list page
	// (explorer-api §13); traceID "" writes no findings.
	ObservePins(ctx context.Context, server, traceID string, tools []json.RawMessage, complete bool) ([]client.MCPPinVerdict, error)
	// CreateTrace pushes a new trace with its first events and metadata
	// into dataset and returns its id; sessionKey ("" = none) is stored
	// as its session key where the store supports it.
	CreateTrace(ctx context.Context, dataset, sessionKey string, meta map[string]any, events []json.RawMessage) (string, error)
	// SessionTrace finds the open trace of dataset with sessionKey ("" =
	// none, or not supported).
	SessionTrace(ctx context.Context, dataset, sessionKey string) (string, error)
	// MergeMetadata applies an RFC 7386 merge patch to the trace's
	// metadata.
	MergeMetadata(ctx context.Context, traceID string, patch map[string]any) error
	// AppendEvents appends events to a trace.
	AppendEvents(ctx context.Context, traceID string, events []json.RawMessage) error
	// PutSession upserts the session record.
	PutSession(ctx context.Context, s client.MCPSession) error
}

// recorder writes a session's events in order on its own goroutine, so
// that recording is never on the message path: the first batch creates
// the trace, later ones are appended. Flush waits for everything queued
// so far (pinning needs the trace id of the tools/list it judges).
type recorder struct {
	st      Store
	dataset string
	key     func() string // the trace's session key
	log     *slog.Logger
	meta    func() map[string]any
	onTrace func(traceID string)
	session func() string

	mu      sync.Mutex
	queue   []json.RawMessage
	waiters []chan struct{}
	wake    chan struct{}
	done    chan struct{}
	closed  bool
	traceID string
	created bool         // the trace was created by this session (not joined)
	failed  atomic.Int64 // events dropped
	// spooling: a batch went to the spool, so the rest of the session
	// follows it there, in order.
	spooling bool
}

func newRecorder(st Store, dataset string, key, session func() string, log *slog.Logger, meta func() map[string]any, onTrace func(string)) *recorder {
	r := &recorder{st: st, dataset: dataset, key: key, session: session, log: log, meta: meta, onTrace: onTrace, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go r.loop()
	return r
}

// maxQueue bounds the events waiting to be written for one session;
// beyond it new events are dropped and logged (the store is too slow or
// down, and the session must not grow without bound).
const maxQueue = 10000

// add queues events.
func (r *recorder) add(events ...json.RawMessage) {
	r.mu.Lock()
	dropped := 0
	if !r.closed {
		if len(r.queue)+len(events) > maxQueue {
			dropped = len(events)
			r.failed.Add(int64(dropped))
		} else {
			r.queue = append(r.queue, events...)
		}
	}
	r.mu.Unlock()
	if dropped > 0 {
		r.log.Error("mcp: recording queue full; events dropped", "events", dropped, "queue", maxQueue)
	}
	r.signal()
}

func (r *recorder) signal() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// flush waits until everything queued before it is written (or ctx ends)
// and returns the trace id ("" when none could be created).
func (r *recorder) flush(ctx context.Context) string {
	ch := make(chan struct{})
	r.mu.Lock()
	if r.closed {
		id := r.traceID
		r.mu.Unlock()
		return id
	}
	r.waiters = append(r.waiters, ch)
	r.mu.Unlock()
	r.signal()
	select {
	case <-ch:
	case <-ctx.Done():
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.traceID
}

// close writes what is queued, waiting at most until ctx ends.
func (r *recorder) close(ctx context.Context) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.closed = true
	r.mu.Unlock()
	r.signal()
	select {
	case <-r.done:
	case <-ctx.Done():
		r.log.Warn("mcp: records not written before shutdown", "err", ctx.Err())
	}
}

// Write-behind batching, as the LLM gateway's recorder does: a queued
// event waits up to recLinger for others to share its write, ending
// early once the session has been quiet for recQuiet, when recBatch
// events are queued, or when a flush or the close asks. One append per
// burst instead of one per message keeps the store's transaction off the
// core that serves the session's next call.
const (
	recLinger = 200 * time.Millisecond
	recQuiet  = 20 * time.Millisecond
	recBatch  = 1024
)

func (r *recorder) loop() {
	defer close(r.done)
	t := time.NewTimer(time.Hour)
	t.Stop()
	for {
		<-r.wake
		r.linger(t)
		r.mu.Lock()
		batch, waiters, closed := r.queue, r.waiters, r.closed
		r.queue, r.waiters = nil, nil
		r.mu.Unlock()
		if len(batch) > 0 {
			r.write(batch)
		}
		for _, w := range waiters {
			close(w)
		}
		if closed {
			// Nothing is queued after the close: all is written.
			return
		}
	}
}

// linger waits for more events to join the queued ones (see recLinger).
func (r *recorder) linger(t *time.Timer) {
	deadline := time.Now().Add(recLinger)
	for {
		r.mu.Lock()
		n, urgent := len(r.queue), len(r.waiters) > 0 || r.closed
		r.mu.Unlock()
		if urgent || n == 0 || n >= recBatch {
			return
		}
		wait := min(recQuiet, time.Until(deadline))
		if wait <= 0 {
			return
		}
		t.Reset(wait)
		select {
		case <-r.wake:
			// More events, a flush or the close: look again.
			t.Stop()
		case <-t.C:
			return
		}
	}
}

// spoolOrDrop keeps a batch the store could not take in the spool, when
// the store has one; the trace then continues in the spool too.
func (r *recorder) spoolOrDrop(batch []json.RawMessage, cause error) {
	if sp, ok := r.st.(Spooler); ok {
		var meta map[string]any
		if r.traceID == "" {
			meta = r.meta()
		}
		err := sp.Spool(r.session(), r.dataset, r.key(), r.traceID, meta, batch)
		if err == nil {
			if !r.spooling {
				r.log.Warn("mcp: server unreachable; events spooled", "events", len(batch), "err", cause)
			}
			r.spooling = true
			return
		}
		cause = errors.Join(cause, err)
	}
	r.failed.Add(int64(len(batch)))
	r.log.Error("mcp: recording failed; events dropped", "events", len(batch), "trace", r.traceID, "err", cause)
}

// write stores one batch, retrying a failed write with backoff (0.5 s
// doubling, up to 5 attempts) before dropping it with a log line.
func (r *recorder) write(batch []json.RawMessage) {
	if r.spooling {
		r.spoolOrDrop(batch, errors.New("earlier events of the session are spooled"))
		return
	}
	delay := 500 * time.Millisecond
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		var err error
		key := r.key()
		if r.traceID == "" {
			// A trace of the same session key (the agent's LLM calls
			// through the gateway, or this session before a restart)
			// takes the events.
			if id, ferr := r.st.SessionTrace(ctx, r.dataset, key); ferr == nil && id != "" {
				r.mu.Lock()
				r.traceID = id
				r.mu.Unlock()
				if r.onTrace != nil {
					r.onTrace(id)
				}
			}
		}
		if r.traceID == "" {
			var id string
			id, err = r.st.CreateTrace(ctx, r.dataset, key, r.meta(), batch)
			if err == nil {
				r.mu.Lock()
				r.traceID, r.created = id, true
				r.mu.Unlock()
				if r.onTrace != nil {
					r.onTrace(id)
				}
			}
		} else {
			err = r.st.AppendEvents(ctx, r.traceID, batch)
		}
		cancel()
		if err == nil {
			return
		}
		var api *client.APIError
		if asAPIError(err, &api) && api.StatusCode < 500 && api.StatusCode != 429 {
			r.failed.Add(int64(len(batch)))
			r.log.Error("mcp: recording refused; events dropped", "events", len(batch), "trace", r.traceID, "err", err)
			return
		}
		r.mu.Lock()
		closed := r.closed
		r.mu.Unlock()
		if attempt >= 5 || closed && attempt >= 2 {
			r.spoolOrDrop(batch, err)
			return
		}
		time.Sleep(delay)
		delay *= 2
	}
}
