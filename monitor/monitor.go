// Package monitor runs dataset guardrails on what arrives (spec/ledger.md
// §8): a pool of workers takes evaluation jobs from the store's durable
// queue (store.MonitorQueue, filled by every trace write in the write's own
// transaction), evaluates the dataset's enabled guardrails on the new
// events against the trace's history (policy.AnalyzeNewPending on the
// trace normalised once for all of them: the cost follows the new events,
// not the trace), and stores each violation as a finding
// (NewFinding: key and addresses mapped to stored positions, title,
// severity, score, citations), deduplicated on (monitorId, runId, key).
//
// Delivery is at least once: a job is deleted only after its findings are
// stored, and a job whose worker died is claimed again when its lease runs
// out, so a crash at any moment loses no evaluation; the findings' dedupe
// makes a repeated evaluation harmless. A rule that fails (an error, a
// blown budget, a rule that no longer loads) never stops ingest or the
// other rules: it is counted on its guardrail (store.MonitorErrors),
// logged once per guardrail version and failure, and the job completes.
//
// Non-goals: gateway inline blocking (the gateway evaluates its rules
// itself), backtests over whole datasets, serving findings (package
// server).
package monitor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vigilhq/vigil/policy"
	"github.com/vigilhq/vigil/store"
	"github.com/vigilhq/vigil/trace"
)

// Options configure a Pool. The zero value uses the defaults.
type Options struct {
	// Workers is the number of concurrent evaluations; 0 means
	// runtime.GOMAXPROCS(0).
	Workers int
	// Lease is how long a claimed job stays with its worker before another
	// may take it; 0 means 30 s. The pool renews the leases of the jobs it
	// holds every Lease/3, so only the jobs of a process that died wait
	// for their lease to run out (at most Lease) before another worker
	// takes them.
	Lease time.Duration
	// Poll is the wait between looks at an empty queue; 0 means 100 ms.
	// Wake, and the store's notifications on store.MonitorJobsChannel,
	// cut it short.
	Poll time.Duration
	// MaxAttempts is how often a job that fails on the store (not on a
	// rule) is tried before it is dropped with an error log; 0 means 10.
	MaxAttempts int
	// CacheSize is the number of compiled rules kept; 0 means 256.
	CacheSize int
	// Policy holds the engine's budgets (MaxSteps, WallTime,
	// MaxViolations, MaxValueSize, MaxAlloc, RegexTimeout) every
	// evaluation runs under. A zero WallTime means 10 s.
	Policy policy.Options
	// Logger receives failures; nil means slog.Default().
	Logger *slog.Logger
}

// claimBatch is the least number of jobs one claim takes.
const claimBatch = 256

// maxChunk is the most claimed jobs a worker takes at once (and whose
// traces it reads together).
const maxChunk = 32

// Stats are a pool's counters since it started.
type Stats struct {
	Jobs          int64 // jobs completed (evaluated, or nothing to do)
	Evaluations   int64 // guardrail evaluations run
	Findings      int64 // findings written (new or updated)
	RuleErrors    int64 // evaluations that failed or reported rule failures
	InvalidTraces int64 // jobs whose trace the engine could not normalise
	Retries       int64 // jobs put back after a store error
	Dropped       int64 // jobs given up after MaxAttempts
}

// Pool evaluates queued jobs until Stop.
type Pool struct {
	st    store.Store
	opts  Options
	log   *slog.Logger
	rules *ruleCache

	wake   chan struct{}
	cancel context.CancelFunc
	done   chan struct{}

	logged sync.Map // "guardrail id@version: failure" already logged

	heldMu sync.Mutex
	held   map[int64]*claim // claimed jobs, until completed, retried or released

	rulesetMu sync.Mutex
	rulesets  map[rulesetKey][]*store.Guardrail // enabled guardrails by dataset and ruleset version

	jobs, evals, findings, ruleErrors, invalid, retries, dropped atomic.Int64
}

// optsDefaults fills in the defaults of opts.
func optsDefaults(opts Options) Options {
	if opts.Workers <= 0 {
		opts.Workers = runtime.GOMAXPROCS(0)
	}
	if opts.Lease <= 0 {
		opts.Lease = 30 * time.Second
	}
	if opts.Poll <= 0 {
		opts.Poll = 100 * time.Millisecond
	}
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = 10
	}
	if opts.CacheSize <= 0 {
		opts.CacheSize = 256
	}
	if opts.Policy.WallTime <= 0 {
		opts.Policy.WallTime = 10 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return opts
}

// Start starts a pool on st. It returns at once; Stop ends it.
func Start(st store.Store, opts Options) *Pool {
	opts = optsDefaults(opts)
	ctx, cancel := context.WithCancel(context.Background())
	p := &Pool{st: st, opts: opts, log: opts.Logger, rules: newRuleCache(opts.CacheSize, opts.Policy),
		wake: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{}), held: map[int64]*claim{},
		rulesets: map[rulesetKey][]*store.Guardrail{}}
	go p.run(ctx)
	return p
}

// Wake makes an idle pool look at the queue now (a caller that has just
// written may call it to cut the poll delay). It never blocks.
func (p *Pool) Wake() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Stop stops claiming, waits for the evaluations in progress and puts the
// jobs claimed but not started back in the queue.
func (p *Pool) Stop() {
	p.cancel()
	<-p.done
}

// Stats returns the counters.
func (p *Pool) Stats() Stats {
	return Stats{Jobs: p.jobs.Load(), Evaluations: p.evals.Load(), Findings: p.findings.Load(), RuleErrors: p.ruleErrors.Load(),
		InvalidTraces: p.invalid.Load(), Retries: p.retries.Load(), Dropped: p.dropped.Load()}
}

// claim is a job the pool holds; mu serialises the lease's users (the
// renewer and the job's worker).
type claim struct {
	mu sync.Mutex
	j  *store.MonitorJob
}

// run claims jobs and hands them to the workers; a completer deletes
// finished jobs in batches (one transaction for many jobs).
func (p *Pool) run(ctx context.Context) {
	defer close(p.done)
	work := make(chan []*claim)
	// Room for two claims' worth of finished jobs: a worker never waits
	// while the completer waits for its turn at the store's writer.
	finished := make(chan *claim, 2*max(claimBatch, 4*p.opts.Workers))
	var completer, workers, helpers sync.WaitGroup
	completer.Go(func() { p.complete(finished) })
	for range p.opts.Workers {
		workers.Go(func() {
			for cs := range work {
				jobs := make([]*store.MonitorJob, len(cs))
				for i, c := range cs {
					jobs[i] = c.j
				}
				errs := p.evaluate(ctx, jobs)
				if ctx.Err() != nil { // stopping: all back to the queue
					p.release(cs...)
					continue
				}
				for i, c := range cs {
					if p.process(ctx, c, errs[i]) {
						finished <- c
					}
				}
			}
		})
	}
	helpers.Go(func() { p.renew(ctx) })
	if ch, err := p.st.Subscribe(ctx, store.MonitorJobsChannel); err != nil {
		p.log.Warn("monitor: no job notifications, polling only", "err", err)
	} else {
		helpers.Go(func() {
			for range ch {
				p.Wake()
			}
		})
	}
	defer func() {
		close(work)
		workers.Wait()
		close(finished)
		completer.Wait()
		helpers.Wait()
	}()
	// Claims are transactions on the store's writer, which pushes and the
	// search indexer also want (on SQLite, one writer, handed out in no
	// fixed order): a claim takes enough jobs for several pushes of 100
	// traces, or the queue would grow while pushes arrive and the workers
	// wait for their turn at the writer.
	batch := max(claimBatch, 4*p.opts.Workers)
	backoff := p.opts.Poll
	for ctx.Err() == nil {
		jobs, err := p.st.ClaimMonitorJobs(ctx, batch, p.opts.Lease)
		if err != nil && ctx.Err() == nil {
			p.log.Error("monitor: claim jobs", "err", err)
			backoff = min(2*backoff, 5*time.Second)
		} else {
			backoff = p.opts.Poll
		}
		claims := make([]*claim, len(jobs))
		p.heldMu.Lock()
		for i, j := range jobs {
			claims[i] = &claim{j: j}
			p.held[j.ID] = claims[i]
		}
		p.heldMu.Unlock()
		// Workers take the claims in chunks, each chunk's traces read in
		// one round trip.
		chunk := max(1, min(maxChunk, len(claims)/p.opts.Workers))
		for i := 0; i < len(claims); i += chunk {
			select {
			case work <- claims[i:min(i+chunk, len(claims))]:
			case <-ctx.Done():
				p.release(claims[i:]...)
				return
			}
		}
		if len(jobs) > 0 {
			continue // more may be due
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
		case <-p.wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// complete deletes finished jobs, as many per transaction as have
// finished meanwhile, until finished is closed.
func (p *Pool) complete(finished <-chan *claim) {
	for c := range finished {
		batch := []*claim{c}
	more:
		for len(batch) < cap(finished) {
			select {
			case c, ok := <-finished:
				if !ok {
					break more
				}
				batch = append(batch, c)
			default:
				break more
			}
		}
		jobs := make([]*store.MonitorJob, len(batch))
		for i, c := range batch {
			c.mu.Lock()
			jobs[i] = c.j
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if err := p.st.CompleteMonitorJobs(ctx, jobs); err != nil {
			p.log.Error("monitor: complete jobs", "jobs", len(jobs), "err", err) // they run again: harmless
		}
		cancel()
		for _, c := range batch {
			c.mu.Unlock()
			p.drop(c)
		}
	}
}

// renew extends the leases of the held jobs every Lease/3 until ctx ends.
func (p *Pool) renew(ctx context.Context) {
	tick := time.NewTicker(p.opts.Lease / 3)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		p.heldMu.Lock()
		claims := make([]*claim, 0, len(p.held))
		for _, c := range p.held {
			claims = append(claims, c)
		}
		p.heldMu.Unlock()
		for _, c := range claims {
			c.mu.Lock()
			ok, err := p.st.ExtendMonitorJob(ctx, c.j, p.opts.Lease)
			c.mu.Unlock()
			if err != nil && ctx.Err() == nil {
				p.log.Warn("monitor: extend lease", "job", c.j.ID, "err", err)
			} else if !ok && err == nil {
				p.log.Debug("monitor: lease lost (finished or taken over)", "job", c.j.ID)
			}
		}
	}
}

// drop forgets a claim.
func (p *Pool) drop(c *claim) {
	p.heldMu.Lock()
	delete(p.held, c.j.ID)
	p.heldMu.Unlock()
}

// release puts claimed jobs back, in one transaction, so a restart need
// not wait out their leases.
func (p *Pool) release(cs ...*claim) {
	if len(cs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	jobs := make([]*store.MonitorJob, len(cs))
	for i, c := range cs {
		c.mu.Lock()
		jobs[i] = c.j
	}
	if err := p.st.ReleaseMonitorJobs(ctx, jobs); err != nil {
		p.log.Warn("monitor: release jobs", "jobs", len(jobs), "err", err) // their leases run out instead
	}
	for _, c := range cs {
		c.mu.Unlock()
		p.drop(c)
	}
}

// process handles the outcome err of evaluating one job (Evaluate's).
// It returns true when the job is to be completed (done, or dropped
// after MaxAttempts); otherwise it has retried or (on shutdown) released
// it.
func (p *Pool) process(ctx context.Context, c *claim, err error) bool {
	j := c.j
	if ctx.Err() != nil { // stopped since the chunk was evaluated
		p.release(c)
		return false
	}
	if err == nil {
		p.jobs.Add(1)
		return true
	}
	if j.Attempts >= p.opts.MaxAttempts {
		p.dropped.Add(1)
		p.log.Error("monitor: job dropped after repeated store errors", "job", j.ID, "trace", j.TraceID, "attempts", j.Attempts, "err", err)
		return true
	}
	defer p.drop(c)
	c.mu.Lock()
	defer c.mu.Unlock()
	p.retries.Add(1)
	delay := min(time.Duration(1<<min(j.Attempts, 6))*time.Second, time.Minute)
	p.log.Warn("monitor: job failed, retrying", "job", j.ID, "trace", j.TraceID, "attempt", j.Attempts, "in", delay, "err", err)
	if err := p.st.RetryMonitorJob(ctx, j, delay, err.Error()); err != nil {
		p.log.Error("monitor: retry job", "job", j.ID, "err", err) // its lease runs out instead
	}
	return false
}

// rulesetKey names a dataset's ruleset at one version.
type rulesetKey struct {
	dataset string
	version int64
}

// guardrails returns the enabled guardrails of the job's dataset at the
// job's ruleset version (immutable, so cached).
func (p *Pool) guardrails(ctx context.Context, j *store.MonitorJob) ([]*store.Guardrail, error) {
	k := rulesetKey{j.DatasetID, j.RulesetVersion}
	p.rulesetMu.Lock()
	gs, ok := p.rulesets[k]
	p.rulesetMu.Unlock()
	if ok {
		return gs, nil
	}
	gs, err := p.st.RulesetAt(ctx, j.DatasetID, j.RulesetVersion)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil // the dataset is gone
	}
	if err != nil {
		return nil, fmt.Errorf("guardrails of dataset %s at ruleset %d: %w", j.DatasetID, j.RulesetVersion, err)
	}
	gs = slices.DeleteFunc(gs, func(g *store.Guardrail) bool { return !g.Enabled })
	p.rulesetMu.Lock()
	if len(p.rulesets) >= 1024 {
		clear(p.rulesets)
	}
	p.rulesets[k] = gs
	p.rulesetMu.Unlock()
	return gs, nil
}

// Evaluate runs the dataset's guardrails enabled at the job's ruleset
// version (those in force when the events were written) on the job's new
// events and stores their findings. Outcomes: nil when the job is done — also
// when the trace is gone, the dataset has no enabled guardrail, the trace
// cannot be normalised (counted and logged, spec/ledger.md §8) or a rule
// failed (counted on its guardrail); a store error otherwise, after which
// the job should be retried.
func (p *Pool) Evaluate(ctx context.Context, j *store.MonitorJob) error {
	return p.evaluate(ctx, []*store.MonitorJob{j})[0]
}

// evaluate is Evaluate of several jobs, their traces read in one round
// trip (store.MonitorTraces): errs[i] is the outcome of jobs[i].
func (p *Pool) evaluate(ctx context.Context, jobs []*store.MonitorJob) []error {
	errs := make([]error, len(jobs))
	gss := make([][]*store.Guardrail, len(jobs))
	var ids []string
	var ns, which []int
	for i, j := range jobs {
		gs, err := p.guardrails(ctx, j)
		if err != nil {
			errs[i] = err
			continue
		}
		if len(gs) == 0 {
			continue
		}
		gss[i] = gs
		ids, ns, which = append(ids, j.TraceID), append(ns, j.To), append(which, i)
	}
	if len(ids) == 0 {
		return errs
	}
	ts, err := p.st.MonitorTraces(ctx, ids, ns)
	for k, i := range which {
		switch {
		case err != nil:
			errs[i] = fmt.Errorf("read trace %s: %w", jobs[i].TraceID, err)
		case ts[k] == nil: // deleted since
		default:
			errs[i] = p.evaluateTrace(ctx, jobs[i], gss[i], ts[k])
		}
	}
	return errs
}

// evaluateTrace evaluates job j with the guardrails gs on st, its trace
// with (at least) its first j.To events.
func (p *Pool) evaluateTrace(ctx context.Context, j *store.MonitorJob, gs []*store.Guardrail, st *store.Trace) error {
	to := min(j.To, len(st.Messages))
	from := min(j.From, to)
	if from == to {
		return nil
	}
	t, err := decode(st.Messages[:to])
	if err != nil {
		p.invalid.Add(1)
		p.log.Warn("monitor: trace cannot be evaluated", "trace", st.ID, "err", err)
		return nil
	}
	pd := policy.NewPending(&trace.Trace{Events: t.Events[:from]}, &trace.Trace{Events: t.Events[from:]}) // normalised once for every guardrail
	var ev *Evaluated                                                                                     // made for the first violation
	var metadata map[string]any
	for _, g := range gs {
		pol, err := p.rules.load(g.Content)
		if err != nil {
			if err := p.ruleError(ctx, g, "load", fmt.Sprintf("rule does not load: %v", err)); err != nil {
				return err
			}
			continue
		}
		var ps map[string]any
		if slices.Contains(pol.Params(), "metadata") {
			if metadata == nil {
				metadata = map[string]any{}
				if len(st.Metadata) > 0 {
					_ = json.Unmarshal(st.Metadata, &metadata) // the store keeps a JSON object
				}
			}
			ps = map[string]any{"metadata": metadata}
		}
		p.evals.Add(1)
		res, err := pol.AnalyzeNewPending(ctx, pd, ps)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if err := p.ruleError(ctx, g, "analysis", fmt.Sprintf("analysis of trace %s failed: %v", st.ID, err)); err != nil {
				return err
			}
			continue
		}
		for _, f := range res.Failures {
			msg := fmt.Sprintf("rule %d at line %d, column %d: %s: %s", f.Rule, f.Line, f.Column, f.Kind, f.Message)
			if err := p.ruleError(ctx, g, f.Kind, msg); err != nil {
				return err
			}
		}
		var src Source // made for the first violation
		for _, v := range res.Errors {
			if src.MonitorID == "" {
				src = Source{MonitorID: g.ID, Monitor: g.Name, Severity: g.Severity,
					Context: marshal(map[string]any{"source": "monitor", "guardrail": map[string]any{"id": g.ID, "name": g.Name, "version": g.Version}})}
			}
			if ev == nil {
				nodeIDs := make([][]string, to)
				for i := range nodeIDs {
					nodeIDs[i] = st.Messages[i].NodeIDs
				}
				ev = NewEvaluated(t, nodeIDs)
			}
			f := NewFinding(src, ev, v)
			f.RunID, f.OwnerID = st.ID, st.OwnerID
			if _, _, err := p.st.UpsertFinding(ctx, f); err != nil {
				return fmt.Errorf("store finding %s of guardrail %s on trace %s: %w", f.Key, g.ID, st.ID, err)
			}
			p.findings.Add(1)
		}
	}
	return nil
}

// ruleError counts a failed evaluation on its guardrail and logs it once
// per guardrail version and kind. Only the store's error is returned.
func (p *Pool) ruleError(ctx context.Context, g *store.Guardrail, kind, msg string) error {
	p.ruleErrors.Add(1)
	if _, seen := p.logged.LoadOrStore(fmt.Sprintf("%s@%d: %s", g.ID, g.Version, kind), true); !seen {
		p.log.Warn("monitor: guardrail failed", "guardrail", g.ID, "name", g.Name, "version", g.Version, "kind", kind, "err", msg)
	}
	if err := p.st.RecordMonitorError(ctx, g.ID, msg, time.Time{}); err != nil {
		return fmt.Errorf("record error of guardrail %s: %w", g.ID, err)
	}
	return nil
}

// decode reads stored events as one trace.
func decode(msgs []store.Message) (*trace.Trace, error) {
	n := 2
	for _, m := range msgs {
		n += len(m.Data) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, '[')
	for i, m := range msgs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, m.Data...)
	}
	b = append(b, ']')
	t, err := trace.Decode(b)
	if err != nil {
		return nil, fmt.Errorf("invalid_trace: %w", err)
	}
	return t, nil
}
