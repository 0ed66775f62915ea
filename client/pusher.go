package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrPusherClosed is returned by Pusher.Add after Close.
var ErrPusherClosed = errors.New("client: pusher closed")

// PusherOptions configure a Pusher. Zero fields take their defaults.
type PusherOptions struct {
	Dataset       string        // target dataset; "" pushes snippets
	BatchSize     int           // traces per push request (default 100)
	MaxBuffered   int           // traces held in memory at most (default 10 * BatchSize); Add blocks when full
	FlushInterval time.Duration // a partial batch is sent after this long (default 1 s)
	Concurrency   int           // push requests in flight at once (default 2)
	// OnError, when set, is called (from a background goroutine) for each
	// batch that failed; the traces of that batch are dropped. Nil: errors
	// are only collected and returned by Close.
	OnError func(err error, traces int)
}

// PushTrace is one trace for a Pusher: its events plus optional metadata
// and annotations.
type PushTrace struct {
	Messages    []any
	Metadata    map[string]any
	Annotations []AnnotationCreate
}

// Pusher batches traces in the background and pushes them to one dataset.
// Memory is bounded by MaxBuffered traces: Add blocks while the buffer is
// full. Close flushes what is buffered and waits for every push. A Pusher
// is safe for concurrent use.
type Pusher struct {
	c    *Client
	opts PusherOptions
	in   chan PushTrace
	done chan struct{}

	closeOnce sync.Once
	mu        sync.Mutex
	closed    bool
	errs      []error
	pushed    int
}

// NewPusher starts a Pusher. Call Close to flush and stop it.
func (c *Client) NewPusher(opts PusherOptions) *Pusher {
	if opts.BatchSize <= 0 {
		opts.BatchSize = 100
	}
	if opts.MaxBuffered <= 0 {
		opts.MaxBuffered = 10 * opts.BatchSize
	}
	if opts.FlushInterval <= 0 {
		opts.FlushInterval = time.Second
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = 2
	}
	p := &Pusher{c: c, opts: opts, in: make(chan PushTrace, opts.MaxBuffered), done: make(chan struct{})}
	go p.loop()
	return p
}

// Add queues one trace. It blocks while the buffer is full, and returns
// ctx.Err() if ctx ends first or ErrPusherClosed after Close.
func (p *Pusher) Add(ctx context.Context, t PushTrace) (err error) {
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return ErrPusherClosed
	}
	defer func() {
		if recover() != nil { // send on the channel Close just closed
			err = ErrPusherClosed
		}
	}()
	select {
	case p.in <- t:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Pushed returns how many traces the server has acknowledged so far.
func (p *Pusher) Pushed() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pushed
}

// Close flushes the buffer, waits for every push to finish (or ctx to
// end) and returns the errors of failed batches, joined.
func (p *Pusher) Close(ctx context.Context) error {
	p.closeOnce.Do(func() {
		p.mu.Lock()
		p.closed = true
		p.mu.Unlock()
		close(p.in)
	})
	select {
	case <-p.done:
	case <-ctx.Done():
		return fmt.Errorf("pusher close: %w", ctx.Err())
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return errors.Join(p.errs...)
}

func (p *Pusher) loop() {
	defer close(p.done)
	sem := make(chan struct{}, p.opts.Concurrency)
	var wg sync.WaitGroup
	send := func(batch []PushTrace) {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			p.push(batch)
		}()
	}
	ticker := time.NewTicker(p.opts.FlushInterval)
	defer ticker.Stop()
	batch := make([]PushTrace, 0, p.opts.BatchSize)
	for {
		select {
		case t, ok := <-p.in:
			if !ok {
				if len(batch) > 0 {
					send(batch)
				}
				wg.Wait()
				return
			}
			batch = append(batch, t)
			if len(batch) >= p.opts.BatchSize {
				send(batch)
				batch = make([]PushTrace, 0, p.opts.BatchSize)
			}
		case <-ticker.C:
			if len(batch) > 0 {
				send(batch)
				batch = make([]PushTrace, 0, p.opts.BatchSize)
			}
		}
	}
}

// push sends one batch, retrying only when the server said it did not
// process the request (429/503), so traces are never duplicated.
func (p *Pusher) push(batch []PushTrace) {
	req := PushRequest{Dataset: p.opts.Dataset, Messages: make([][]any, len(batch))}
	hasMeta, hasAnn := false, false
	for i, t := range batch {
		req.Messages[i] = t.Messages
		hasMeta = hasMeta || t.Metadata != nil
		hasAnn = hasAnn || t.Annotations != nil
	}
	if hasMeta {
		req.Metadata = make([]map[string]any, len(batch))
		for i, t := range batch {
			req.Metadata[i] = t.Metadata
			if req.Metadata[i] == nil {
				req.Metadata[i] = map[string]any{}
			}
		}
	}
	if hasAnn {
		req.Annotations = make([][]AnnotationCreate, len(batch))
		for i, t := range batch {
			req.Annotations[i] = t.Annotations
			if req.Annotations[i] == nil {
				req.Annotations[i] = []AnnotationCreate{}
			}
		}
	}
	var err error
	backoff := p.c.minBackoff
	for attempt := 0; ; attempt++ {
		_, err = p.c.Push(context.Background(), req)
		var ae *APIError
		if err == nil || attempt >= p.c.maxRetries || !errors.As(err, &ae) ||
			(ae.StatusCode != 429 && ae.StatusCode != 503) {
			break
		}
		time.Sleep(jitter(backoff))
		backoff = min(backoff*2, p.c.maxBackoff)
	}
	p.mu.Lock()
	if err == nil {
		p.pushed += len(batch)
	} else {
		p.errs = append(p.errs, fmt.Errorf("push %d traces: %w", len(batch), err))
	}
	p.mu.Unlock()
	if err != nil && p.opts.OnError != nil {
		p.opts.OnError(err, len(batch))
	}
}
