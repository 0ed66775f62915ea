package client

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/vigilhq/vigil/ledger"
)

// The run recorder: the Go counterpart of the Invariance SDK's
// runs.start / run.tool / run.log / session.record / session.close. A
// Run is a ledger session the agent writes through the
// Invariance-compatible endpoints (POST /v1/sessions, POST /v1/receipts,
// PATCH /v1/sessions/{id}; spec ledger §10): every tool call, LLM step
// and log inside it becomes one receipt, chained and (with
// RecorderOptions.Key) signed on the agent's side, so that the server
// stores but cannot forge the agent's history. Receipts are buffered and
// pushed in the background; Close pushes what is left and closes the
// session with the chain's last hash. recorder_http.go holds the
// net/http middleware that records outgoing LLM calls.

// RecorderOptions configure a Recorder.
type RecorderOptions struct {
	// Agent is the agent's name, each receipt's agent (required). Register
	// its public key (vigil keygen; POST /api/v1/ledger/agents) so the
	// server checks the signatures.
	Agent string
	// Key signs the receipts (nil: unsigned, and the server signs them
	// instead, which proves less).
	Key ed25519.PrivateKey
	// FlushInterval is how often buffered receipts are pushed (0: 1s).
	FlushInterval time.Duration
	// BatchSize pushes as soon as that many receipts wait (0: 100).
	BatchSize int
	// MaxBuffered bounds the receipts waiting to be pushed (0: 10000).
	// While the server cannot be reached and that many wait, recording
	// fails with ErrBacklog and makes no receipt, so the chain stays
	// whole.
	MaxBuffered int
	// OnError, when set, is called with background push errors; the
	// receipts stay buffered and are pushed again (the server ignores a
	// receipt it already has).
	OnError func(error)
}

// Recorder starts runs of one agent. It is safe for concurrent use.
type Recorder struct {
	c   *Client
	opt RecorderOptions
}

// NewRecorder returns a Recorder sending runs through c.
func (c *Client) NewRecorder(opt RecorderOptions) (*Recorder, error) {
	if opt.Agent == "" {
		return nil, errors.New("recorder: Agent is required")
	}
	if opt.FlushInterval <= 0 {
		opt.FlushInterval = time.Second
	}
	if opt.BatchSize <= 0 {
		opt.BatchSize = 100
	}
	if opt.MaxBuffered <= 0 {
		opt.MaxBuffered = 10000
	}
	return &Recorder{c: c, opt: opt}, nil
}

// Action types of the receipts a Run writes (spec ledger §7.3 names).
const (
	ActionToolCall = "tool_call"
	ActionLLMStep  = "llm_step"
	ActionLog      = "log"
)

// Run is one recorded run: a ledger session and its chain. Its methods
// are safe for concurrent use; receipts are chained in completion order.
type Run struct {
	// ID is the session id (also the id of its run in the "sessions"
	// dataset's trace metadata, session_id).
	ID   string
	Name string

	rec    *Recorder
	mu     sync.Mutex
	tail   ledger.Tail
	buf    []*ledger.Receipt
	closed bool
	kick   chan struct{}
	stop   chan struct{}
	done   chan struct{}
	pushMu sync.Mutex // one push at a time, in chain order
}

type runCtxKey struct{}

// nodeCtx is the run and the current node (the parent of nodes started
// under it) in a context.
type nodeCtx struct {
	run  *Run
	node string
}

// RunFrom returns the run recorded in ctx (nil when none).
func RunFrom(ctx context.Context) *Run {
	nc, _ := ctx.Value(runCtxKey{}).(*nodeCtx)
	if nc == nil {
		return nil
	}
	return nc.run
}

func parentFrom(ctx context.Context) string {
	nc, _ := ctx.Value(runCtxKey{}).(*nodeCtx)
	if nc == nil {
		return ""
	}
	return nc.node
}

// Start creates the run's session (POST /v1/sessions) and returns a
// context carrying the run, and the run. Close it when done.
func (r *Recorder) Start(ctx context.Context, name string) (context.Context, *Run, error) {
	id := ledger.NewID()
	in := map[string]any{"id": id, "name": name, "agent_id": r.opt.Agent, "created_by": r.opt.Agent,
		"runtime": map[string]any{"sdk": "vigil-go"}}
	if err := r.c.call(ctx, "POST", "/v1/sessions", nil, in, nil); err != nil {
		return ctx, nil, fmt.Errorf("recorder: start run %q: %w", name, err)
	}
	run := &Run{ID: id, Name: name, rec: r, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go run.loop()
	return context.WithValue(ctx, runCtxKey{}, &nodeCtx{run: run}), run, nil
}

// Wrap returns h recorded as a run named name: the run starts before h,
// h's context carries it (Tool, Step and Log record into it, and
// Transport records its LLM calls), and it is closed after h returns.
// An error of h is logged in the run before it closes.
func (r *Recorder) Wrap(name string, h func(ctx context.Context) error) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		rctx, run, err := r.Start(ctx, name)
		if err != nil {
			return err
		}
		herr := h(rctx)
		if herr != nil {
			run.Log(rctx, "run failed", map[string]any{"error": herr.Error()})
		}
		cerr := run.Close(context.WithoutCancel(ctx))
		return errors.Join(herr, cerr)
	}
}

// Tool records fn as a tool call named name with input (run.tool): one
// tool_call node whose input is {name, input, parentId, startedAt,
// durationMs}, output fn's result and error fn's error. Nodes started
// inside fn (its ctx) get this node as parent. Without a run in ctx, fn
// just runs.
func Tool(ctx context.Context, name string, input any, fn func(ctx context.Context) (any, error)) (any, error) {
	if run := RunFrom(ctx); run != nil {
		return run.node(ctx, ActionToolCall, name, input, fn)
	}
	return fn(ctx)
}

// Step records fn as an LLM step named name (a model call), like Tool.
func Step(ctx context.Context, name string, input any, fn func(ctx context.Context) (any, error)) (any, error) {
	if run := RunFrom(ctx); run != nil {
		return run.node(ctx, ActionLLMStep, name, input, fn)
	}
	return fn(ctx)
}

// Tool records fn as a tool call of run r (see the function Tool).
func (r *Run) Tool(ctx context.Context, name string, input any, fn func(ctx context.Context) (any, error)) (any, error) {
	return r.node(ctx, ActionToolCall, name, input, fn)
}

// Step records fn as an LLM step of run r.
func (r *Run) Step(ctx context.Context, name string, input any, fn func(ctx context.Context) (any, error)) (any, error) {
	return r.node(ctx, ActionLLMStep, name, input, fn)
}

// Log records a log node (run.log): input {message, data, parentId}.
func (r *Run) Log(ctx context.Context, message string, data any) {
	_ = r.Record(ctx, ActionLog, map[string]any{"message": message, "data": data, "parentId": nullable(parentFrom(ctx))}, nil, nil)
}

// Record appends one receipt with the given action, input, output and
// error (session.record). It fails on a closed run or a value that is
// not JSON.
func (r *Run) Record(ctx context.Context, action string, input, output any, err error) error {
	return r.append("", action, input, output, err)
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// node runs fn as a node of r with a fresh id (known before fn runs, so
// its children can point at it).
func (r *Run) node(ctx context.Context, action, name string, input any, fn func(ctx context.Context) (any, error)) (any, error) {
	id := ledger.NewID()
	parent := parentFrom(ctx)
	start := time.Now()
	out, err := fn(context.WithValue(ctx, runCtxKey{}, &nodeCtx{run: r, node: id}))
	in := map[string]any{"name": name, "input": input, "parentId": nullable(parent), "startedAt": start.UnixMilli(),
		"durationMs": time.Since(start).Milliseconds()}
	if rerr := r.append(id, action, in, out, err); rerr != nil && r.rec.opt.OnError != nil {
		r.rec.opt.OnError(rerr)
	}
	return out, err
}

// ErrRunClosed is the error of recording into a closed run.
var ErrRunClosed = errors.New("recorder: run is closed")

// ErrBacklog is the error of recording while MaxBuffered receipts wait
// to be pushed.
var ErrBacklog = errors.New("recorder: too many receipts wait to be pushed")

// jsonValue turns a Go value into the ledger's JSON value model.
func jsonValue(v any) (any, error) {
	if v == nil {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return ledger.Parse(b)
}

func (r *Run) append(id, action string, input, output any, err error) error {
	in, jerr := jsonValue(input)
	if jerr != nil {
		return fmt.Errorf("recorder: %s input: %w", action, jerr)
	}
	out, jerr := jsonValue(output)
	if jerr != nil {
		return fmt.Errorf("recorder: %s output: %w", action, jerr)
	}
	a := ledger.Action{ID: id, SessionID: r.ID, Agent: r.rec.opt.Agent, Action: action, Input: in, Output: out}
	if err != nil {
		a.Error = err.Error()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrRunClosed
	}
	if len(r.buf) >= r.rec.opt.MaxBuffered {
		return ErrBacklog
	}
	rc, aerr := ledger.Append(r.tail, a, r.rec.opt.Key)
	if aerr != nil {
		return fmt.Errorf("recorder: %s receipt: %w", action, aerr)
	}
	r.tail = rc.Tail()
	r.buf = append(r.buf, rc)
	if len(r.buf) >= r.rec.opt.BatchSize {
		select {
		case r.kick <- struct{}{}:
		default:
		}
	}
	return nil
}

// loop pushes buffered receipts every FlushInterval, or when a batch is
// full, until Close.
func (r *Run) loop() {
	defer close(r.done)
	t := time.NewTicker(r.rec.opt.FlushInterval)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
		case <-r.kick:
		}
		if err := r.Flush(context.Background()); err != nil && r.rec.opt.OnError != nil {
			r.rec.opt.OnError(err)
		}
	}
}

// Flush pushes the buffered receipts now (POST /v1/receipts). On error
// they stay buffered.
func (r *Run) Flush(ctx context.Context) error {
	r.pushMu.Lock()
	defer r.pushMu.Unlock()
	r.mu.Lock()
	batch := r.buf
	r.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	raws := make([]json.RawMessage, len(batch))
	for i, rc := range batch {
		raws[i] = rc.Raw
	}
	if err := r.rec.c.call(ctx, "POST", "/v1/receipts", nil, map[string]any{"receipts": raws}, nil); err != nil {
		return fmt.Errorf("recorder: push %d receipts of run %s: %w", len(batch), r.ID, err)
	}
	r.mu.Lock()
	r.buf = r.buf[len(batch):]
	r.mu.Unlock()
	return nil
}

// Close stops recording, pushes the remaining receipts and closes the
// session with the chain's last hash (session.close). Recording into a
// closed run fails with ErrRunClosed. Close is idempotent.
func (r *Run) Close(ctx context.Context) error {
	r.mu.Lock()
	already := r.closed
	r.closed = true
	r.mu.Unlock()
	if already {
		return nil
	}
	close(r.stop)
	<-r.done
	if err := r.Flush(ctx); err != nil {
		return err
	}
	closeHash := r.tail.PreviousHash()
	if err := r.rec.c.call(ctx, "PATCH", "/v1/sessions/"+r.ID, nil, map[string]any{"status": "closed", "close_hash": closeHash}, nil); err != nil {
		return fmt.Errorf("recorder: close run %s: %w", r.ID, err)
	}
	return nil
}

// Hash is the hash of the run's last receipt ("0" before the first).
func (r *Run) Hash() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.tail.PreviousHash()
}
