package server

import (
	"container/list"
	"context"
	"crypto/sha256"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vigilhq/vigil/policy"
	"github.com/vigilhq/vigil/store"
)

// This file holds the caches of dataset guardrails (explorer-api §9.1):
// RuleCache, compiled rules by sha256 of their text, and the per-dataset
// rulesets built from it, kept fresh by the change feed (guardrailFeed):
// a local write drops its dataset's entry before the response is sent
// (read-your-writes), and a change notification (LISTEN/NOTIFY on
// PostgreSQL) drops it on every other process.

// DefaultRuleCacheSize is the number of compiled rules a RuleCache keeps
// when its size is 0 (guardrails.cache_size).
const DefaultRuleCacheSize = 1024

// RuleCache is an LRU cache of compiled rules keyed by sha256 of the rule
// text. Rules that fail to load are not cached. It is safe for concurrent
// use; the zero value is not usable, create one with NewRuleCache.
type RuleCache struct {
	opts policy.Options
	mu   sync.Mutex
	max  int
	ll   *list.List // front: most recently used; values are *cachedRule
	m    map[[32]byte]*list.Element

	hits, misses uint64

	// observe, when set, is told of each lookup: whether it hit, and the
	// compile time of a miss. The server feeds its metrics with it.
	observe func(hit bool, compile time.Duration)
}

type cachedRule struct {
	key [32]byte
	p   *policy.Policy
}

// NewRuleCache returns a cache of at most size rules (0:
// DefaultRuleCacheSize) compiled with opts.
func NewRuleCache(size int, opts policy.Options) *RuleCache {
	if size <= 0 {
		size = DefaultRuleCacheSize
	}
	return &RuleCache{opts: opts, max: size, ll: list.New(), m: map[[32]byte]*list.Element{}}
}

// Load returns the compiled rule for src, from the cache or compiled now.
// A load error is policy.Load's (it wraps policy.ErrLoad and a
// policy.ErrorList) and is not cached.
func (c *RuleCache) Load(src string) (*policy.Policy, error) {
	key := sha256.Sum256([]byte(src))
	c.mu.Lock()
	if e, ok := c.m[key]; ok {
		c.ll.MoveToFront(e)
		c.hits++
		c.mu.Unlock()
		if c.observe != nil {
			c.observe(true, 0)
		}
		return e.Value.(*cachedRule).p, nil
	}
	c.misses++
	c.mu.Unlock()
	start := time.Now()
	p, err := policy.Load(src, c.opts)
	if c.observe != nil {
		c.observe(false, time.Since(start))
	}
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[key]; ok { // compiled twice at once: keep the first
		c.ll.MoveToFront(e)
		return e.Value.(*cachedRule).p, nil
	}
	c.m[key] = c.ll.PushFront(&cachedRule{key: key, p: p})
	for c.ll.Len() > c.max {
		old := c.ll.Back()
		c.ll.Remove(old)
		delete(c.m, old.Value.(*cachedRule).key)
	}
	return p, nil
}

// Len returns the number of cached rules.
func (c *RuleCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ll.Len()
}

// Stats returns the number of lookups answered from the cache and the
// number that compiled.
func (c *RuleCache) Stats() (hits, misses uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hits, c.misses
}

// ruleset is a dataset's guardrails at one ruleset version, with the
// compiled rule of each enabled one.
type ruleset struct {
	DatasetID string
	Version   int64
	// Guardrails are every current guardrail, disabled ones included,
	// oldest first.
	Guardrails []*store.Guardrail
	// Rules maps the id of each enabled guardrail to its compiled rule.
	// A guardrail whose text no longer loads (a built-in removed since it
	// was saved) is in Errors instead.
	Rules  map[string]*policy.Policy
	Errors map[string]error
}

// rulesets caches the ruleset of each dataset. Entries are dropped by
// invalidate (local writes, change notifications) and all at once by
// reset (a feed subscription that was lost and re-established).
type rulesets struct {
	rules *RuleCache
	mu    sync.Mutex
	m     map[string]*ruleset
	// gen counts invalidations. A load caches its result only when no
	// invalidation happened since it began: one that arrived while it was
	// reading may concern what it read.
	gen uint64
}

func newRulesets(rules *RuleCache) *rulesets {
	return &rulesets{rules: rules, m: map[string]*ruleset{}}
}

func (rs *rulesets) get(datasetID string) *ruleset {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.m[datasetID]
}

func (rs *rulesets) invalidate(datasetID string) {
	rs.mu.Lock()
	delete(rs.m, datasetID)
	rs.gen++
	rs.mu.Unlock()
}

func (rs *rulesets) reset() {
	rs.mu.Lock()
	clear(rs.m)
	rs.gen++
	rs.mu.Unlock()
}

func (rs *rulesets) generation() uint64 {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.gen
}

// load reads the dataset's guardrails, compiles the enabled ones and
// caches the result under version, the dataset's ruleset version read
// before the guardrails (so the entry is at least that fresh), unless an
// invalidation arrived while it read: the write behind it may or may not
// be in what was read, and the entry would outlive its invalidation.
func (rs *rulesets) load(ctx context.Context, st store.Store, datasetID string, version int64) (*ruleset, error) {
	gen := rs.generation()
	gs, err := st.ListGuardrails(ctx, datasetID)
	if err != nil {
		return nil, fmt.Errorf("load guardrails of dataset %s: %w", datasetID, err)
	}
	r := &ruleset{DatasetID: datasetID, Version: version, Guardrails: gs, Rules: map[string]*policy.Policy{}, Errors: map[string]error{}}
	for _, g := range gs {
		if !g.Enabled {
			continue
		}
		p, err := rs.rules.Load(g.Content)
		if err != nil {
			r.Errors[g.ID] = fmt.Errorf("guardrail %s (%s): %w", g.ID, g.Name, err)
			continue
		}
		r.Rules[g.ID] = p
	}
	rs.mu.Lock()
	if old := rs.m[datasetID]; rs.gen == gen && (old == nil || old.Version <= version) {
		rs.m[datasetID] = r
	}
	rs.mu.Unlock()
	return r, nil
}

// rulesetOf returns the ruleset of d at d.RulesetVersion, from the cache
// when it holds that version. Callers that have just read the dataset use
// it; it is correct whatever the state of the feed.
func (s *Server) rulesetOf(ctx context.Context, d *store.Dataset) (*ruleset, error) {
	if r := s.rulesets.get(d.ID); r != nil && r.Version == d.RulesetVersion {
		return r, nil
	}
	return s.rulesets.load(ctx, s.st, d.ID, d.RulesetVersion)
}

// currentRuleset returns the dataset's current ruleset without reading the
// dataset while the change feed is live (the hot path of monitors and
// gateways): a cached entry is current because every change drops it,
// here at once and on other processes within the notification delay. With
// the feed down it reads the dataset's ruleset version first.
func (s *Server) currentRuleset(ctx context.Context, datasetID string) (*ruleset, error) {
	if s.feed.live() {
		if r := s.rulesets.get(datasetID); r != nil {
			return r, nil
		}
	}
	d, err := s.st.GetDataset(ctx, datasetID)
	if err != nil {
		return nil, fmt.Errorf("ruleset of dataset %s: %w", datasetID, err)
	}
	return s.rulesetOf(ctx, d)
}

// guardrailChannel is the notification channel of guardrail changes; the
// payload is "<dataset id> <ruleset version>".
const guardrailChannel = "vigil_guardrails"

// guardrailFeed follows guardrail changes: it wakes long-polls of the
// change feed and invalidates cached rulesets, for writes on this process
// (changed) and, through the store's Notifier, on every other process.
type guardrailFeed struct {
	s *Server

	mu      sync.Mutex
	wake    chan struct{} // closed and replaced on every change
	up      bool          // a subscription is established
	lastErr error         // why the subscription is down
	since   time.Time     // when it went down (or started)

	cancel context.CancelFunc
	done   chan struct{}
}

// retryDelay is the first wait before re-subscribing; it doubles up to
// maxRetryDelay.
const (
	retryDelay    = 100 * time.Millisecond
	maxRetryDelay = 5 * time.Second
	// feedPurgeEvery is how often the feed's entries older than
	// feedRetention are purged.
	feedPurgeEvery = time.Hour
	feedRetention  = 7 * 24 * time.Hour
)

func startGuardrailFeed(s *Server) *guardrailFeed {
	ctx, cancel := context.WithCancel(context.Background())
	f := &guardrailFeed{s: s, wake: make(chan struct{}), since: s.now(), cancel: cancel, done: make(chan struct{}),
		lastErr: fmt.Errorf("not subscribed yet")}
	ready := make(chan struct{})
	go f.run(ctx, ready)
	// Wait briefly for the first subscription, so a server that has just
	// started already hears other processes' changes.
	select {
	case <-ready:
	case <-time.After(2 * time.Second):
	}
	return f
}

// run keeps a subscription open until ctx ends, re-subscribing with
// backoff when it breaks. Each new subscription resets every cached
// ruleset, since changes may have been missed while it was down.
func (f *guardrailFeed) run(ctx context.Context, ready chan struct{}) {
	defer close(f.done)
	delay := retryDelay
	purge := time.NewTicker(feedPurgeEvery)
	defer purge.Stop()
	first := true
	for ctx.Err() == nil {
		ch, err := f.s.st.Subscribe(ctx, guardrailChannel)
		if err == nil {
			f.setUp(true, nil)
			f.s.rulesets.reset()
			if first {
				close(ready)
				first = false
			}
			started := time.Now()
		recv:
			for {
				select {
				case payload, ok := <-ch:
					if !ok {
						break recv
					}
					f.notified(payload)
				case <-purge.C:
					if _, err := f.s.st.PurgeGuardrailChanges(ctx, f.s.now().Add(-feedRetention)); err != nil && ctx.Err() == nil {
						f.s.log.Warn("purge guardrail change feed", "err", err)
					}
				}
			}
			if ctx.Err() != nil {
				return
			}
			err = fmt.Errorf("guardrail change subscription ended")
			if time.Since(started) > maxRetryDelay {
				delay = retryDelay
			}
		}
		f.setUp(false, err)
		f.s.log.Warn("guardrail change feed down; retrying", "err", err, "retry_in", delay)
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		delay = min(2*delay, maxRetryDelay)
	}
}

func (f *guardrailFeed) setUp(up bool, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.up != up {
		f.since = f.s.now()
	}
	f.up, f.lastErr = up, err
}

// notified handles a payload "<dataset id> <ruleset version>".
func (f *guardrailFeed) notified(payload string) {
	id, _, _ := strings.Cut(payload, " ")
	if id != "" {
		f.s.rulesets.invalidate(id)
	}
	f.broadcast()
}

// broadcast wakes every waiter.
func (f *guardrailFeed) broadcast() {
	f.mu.Lock()
	close(f.wake)
	f.wake = make(chan struct{})
	f.mu.Unlock()
}

// waiter returns a channel closed at the next change.
func (f *guardrailFeed) waiter() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.wake
}

// live reports whether the subscription is established.
func (f *guardrailFeed) live() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.up
}

// status is the /readyz check: "ok", or why and since when the feed is
// stale.
func (f *guardrailFeed) status() (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.up {
		return "ok", true
	}
	return fmt.Sprintf("stale since %s: %v", formatTime(f.since), f.lastErr), false
}

// changed publishes a committed change of datasetID: it drops the cached
// ruleset and wakes waiters on this process at once (read-your-writes),
// then notifies the other processes. A failed notification is logged:
// the write is committed, and other processes see it once their feed
// re-subscribes (which resets their caches).
func (f *guardrailFeed) changed(ctx context.Context, datasetID string, rulesetVersion int64) {
	f.s.rulesets.invalidate(datasetID)
	f.broadcast()
	payload := datasetID + " " + strconv.FormatInt(rulesetVersion, 10)
	if err := f.s.st.Notify(context.WithoutCancel(ctx), guardrailChannel, payload); err != nil {
		f.s.log.Warn("notify guardrail change", "dataset", datasetID, "err", err)
	}
}

// stop ends the subscription and waits for it.
func (f *guardrailFeed) stop() {
	f.cancel()
	<-f.done
}
