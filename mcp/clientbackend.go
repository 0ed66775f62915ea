package mcp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/vigilhq/vigil/client"
	"github.com/vigilhq/vigil/server"
)

// ClientBackend is the proxy's Backend in the standalone gateway: the
// Vigil server at URL is reached through package client with each
// caller's key. A key's identity is cached 60 s (kept while the server
// is unreachable); a dataset's MCP guardrails are cached until the
// server's change feed (followed with the key while it is in use)
// reports a change to the dataset, and re-validated every 5 minutes;
// recording and pins go through ClientStore.
type ClientBackend struct {
	url      string
	spoolDir string
	log      *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc

	mu    sync.Mutex
	ids   map[string]idEntry     // key → identity
	rules map[string]*rulesEntry // owner \x00 dataset → rules
	feeds map[string]time.Time   // key → last use, while its feed runs
	wg    sync.WaitGroup
}

type idEntry struct {
	id *client.Identity
	at time.Time
}

type rulesEntry struct {
	guard *Guard
	etag  string
	at    time.Time
}

// identityTTL and rulesTTL are how long a key's identity and a dataset's
// rules are used without asking the server again.
const (
	identityTTL = time.Minute
	rulesTTL    = 5 * time.Minute
	feedIdle    = 10 * time.Minute
)

// NewClientBackend returns the Backend of a standalone gateway in front
// of the Vigil server at url. Records the server cannot take are kept
// under spoolDir ("" = none), one folder per key, and written when the
// key is next used.
func NewClientBackend(url, spoolDir string, log *slog.Logger) *ClientBackend {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &ClientBackend{url: url, spoolDir: spoolDir, log: log, ctx: ctx, cancel: cancel,
		ids: map[string]idEntry{}, rules: map[string]*rulesEntry{}, feeds: map[string]time.Time{}}
}

// Close stops the change feeds.
func (b *ClientBackend) Close() {
	b.cancel()
	b.wg.Wait()
}

func (b *ClientBackend) client(key string) *client.Client {
	return client.New(b.url, key, client.WithRetries(1))
}

// Store returns the ClientStore of key. Its spool is a folder of its
// own, named by a hash of the key (keys are never written to disk), and
// is replayed when the key is first used after a start.
func (b *ClientBackend) Store(key string) ClientStore {
	cs := ClientStore{C: b.client(key)}
	if b.spoolDir != "" {
		h := sha256.Sum256([]byte(key))
		cs.SpoolDir = filepath.Join(b.spoolDir, hex.EncodeToString(h[:8]))
	}
	return cs
}

// Open implements Backend.
func (b *ClientBackend) Open(ctx context.Context, key, dataset string) (*Access, error) {
	if key == "" {
		return &Access{}, nil
	}
	id, err := b.identity(ctx, key)
	if err != nil {
		return nil, err
	}
	switch id.Scope {
	case "ingest", "full", "admin":
	default:
		return nil, ErrForbidden
	}
	acc := &Access{Store: b.Store(key), Owner: id.ID}
	if dataset == "" {
		acc.Guard = &Guard{}
		return acc, nil
	}
	acc.Guard = b.guard(ctx, key, id.Username, dataset)
	return acc, nil
}

// identity resolves key through GET /api/v1/user/identity, cached.
func (b *ClientBackend) identity(ctx context.Context, key string) (*client.Identity, error) {
	b.mu.Lock()
	e, ok := b.ids[key]
	b.mu.Unlock()
	if ok && time.Since(e.at) < identityTTL {
		return e.id, nil
	}
	id, err := b.client(key).Identity(ctx)
	if err != nil {
		var ae *client.APIError
		if errors.As(err, &ae) && (ae.StatusCode == 401 || ae.StatusCode == 403) {
			b.mu.Lock()
			delete(b.ids, key)
			b.mu.Unlock()
			return nil, server.ErrInvalidKey
		}
		if ok { // unreachable: keep using what we know
			return e.id, nil
		}
		return nil, fmt.Errorf("identity of the caller's key at %s: %w", b.url, err)
	}
	b.mu.Lock()
	b.ids[key] = idEntry{id, time.Now()}
	_, following := b.feeds[key]
	b.feeds[key] = time.Now()
	if !following {
		b.wg.Add(1)
	}
	b.mu.Unlock()
	if !following {
		go b.follow(key)
	}
	if !ok && b.spoolDir != "" {
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
			defer cancel()
			if n, err := b.Store(key).ReplaySpool(ctx); err != nil {
				b.log.Warn("mcp proxy: spooled sessions not written yet", "written", n, "err", err)
			} else if n > 0 {
				b.log.Info("mcp proxy: spooled sessions written", "sessions", n)
			}
		}()
	}
	return id, nil
}

// guard returns the dataset's MCP rules, from the cache while fresh. When
// they cannot be fetched and none are cached, the guard is unavailable
// (every check fails with it; fail mode applies).
func (b *ClientBackend) guard(ctx context.Context, key, username, dataset string) *Guard {
	k := username + "\x00" + dataset
	b.mu.Lock()
	e := b.rules[k]
	b.feeds[key] = time.Now()
	b.mu.Unlock()
	if e != nil && time.Since(e.at) < rulesTTL {
		return e.guard
	}
	f := client.GuardrailFilter{Kind: "mcp"}
	if e != nil {
		f.IfNoneMatch = e.etag
	}
	list, err := b.client(key).Guardrails(ctx, username, dataset, f)
	var ae *client.APIError
	switch {
	case errors.As(err, &ae) && (ae.StatusCode == 404 || ae.StatusCode == 403):
		list = &client.GuardrailList{} // no such dataset yet: no rules
	case err != nil:
		if e != nil {
			return e.guard
		}
		b.log.Warn("mcp proxy: dataset guardrails unavailable", "dataset", dataset, "err", err)
		return &Guard{Unavailable: "guardrails unavailable"}
	case list.NotModified && e != nil:
		b.mu.Lock()
		e.at = time.Now()
		b.mu.Unlock()
		return e.guard
	}
	g := &Guard{}
	for _, p := range list.Policies {
		if !p.Enabled {
			continue
		}
		r, err := LoadRule(p.ID, p.Name, p.Content, p.Action)
		if err != nil {
			// A dataset rule that no longer compiles is an evaluation
			// failure (fail mode applies).
			g.Unavailable = err.Error()
			continue
		}
		r.Version = p.Version
		if p.Scope != nil {
			r.Servers, r.Clients = p.Scope.MCPServers, p.Scope.MCPClients
		}
		g.Rules = append(g.Rules, r)
	}
	b.mu.Lock()
	b.rules[k] = &rulesEntry{guard: g, etag: list.ETag, at: time.Now()}
	b.mu.Unlock()
	return g
}

// follow long-polls the change feed with key while the key was used in
// the last 10 minutes, dropping the cached rules of changed datasets.
func (b *ClientBackend) follow(key string) {
	defer b.wg.Done()
	c := client.New(b.url, key, client.WithRetries(0))
	var seq int64
	started := false
	backoff := 500 * time.Millisecond
	for b.ctx.Err() == nil {
		b.mu.Lock()
		if time.Since(b.feeds[key]) > feedIdle {
			delete(b.feeds, key)
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		ctx, cancel := context.WithTimeout(b.ctx, 40*time.Second)
		ch, err := c.GuardrailChangesAfter(ctx, seq, 25*time.Second)
		cancel()
		if err != nil {
			select {
			case <-b.ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 30*time.Second)
			continue
		}
		backoff = 500 * time.Millisecond
		b.mu.Lock()
		if ch.Reset || (started && seq == 0 && ch.Seq > 0) {
			// Lost position, or the feed's first change ("after=0"
			// answers with the position only): drop everything.
			clear(b.rules)
		}
		for _, x := range ch.Changes {
			delete(b.rules, x.Owner+"\x00"+x.Dataset)
		}
		b.mu.Unlock()
		if started && seq == 0 && ch.Seq == 0 {
			// Nothing has ever changed: "after=0" does not wait.
			select {
			case <-b.ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
		seq, started = ch.Seq, true
	}
}
