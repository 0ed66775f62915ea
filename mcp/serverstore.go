package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/vigilhq/vigil/client"
	"github.com/vigilhq/vigil/server"
)

// ServerBackend is the proxy's Backend inside `vigil serve`: keys are
// resolved by the server (same cache, same revocation), rules come from
// the server's store through its compiled-rule cache, pins are judged by
// server.ObserveMCPTools and sessions are recorded through the server's
// ingest path, all in-process. A dataset's compiled rules are kept while
// its ruleset version is unchanged, so a guardrail write applies to the
// next request.
type ServerBackend struct {
	S *server.Server

	mu    sync.Mutex
	rules map[string]cachedGuard // dataset id → rules
	ids   map[string]cachedID    // owner + "\x00" + dataset name → dataset id
}

// cachedID is a dataset id found by name, and when.
type cachedID struct {
	id string
	at time.Time
}

// datasetIDTTL is how long a dataset's id found by its name is reused
// without asking the store again. The ruleset version itself always comes
// from the server's ruleset cache, which every guardrail write refreshes,
// so only a rename or a delete of the dataset takes up to this long to
// be seen by the rules of its MCP sessions (its traces are written by
// name, unaffected).
const datasetIDTTL = time.Second

type cachedGuard struct {
	version int64
	guard   *Guard
}

// NewServerBackend returns the in-process Backend of srv.
func NewServerBackend(srv *server.Server) *ServerBackend {
	return &ServerBackend{S: srv, rules: map[string]cachedGuard{}}
}

// Open implements Backend.
func (b *ServerBackend) Open(ctx context.Context, key, dataset string) (*Access, error) {
	if key == "" {
		return &Access{}, nil
	}
	c, err := b.S.AuthenticateKey(ctx, key)
	if err != nil {
		return nil, err
	}
	if !c.CanIngest() {
		return nil, ErrForbidden
	}
	st := serverStore{s: b.S, c: c}
	dsID, version, err := b.rulesetVersion(ctx, c, dataset)
	if err != nil {
		return nil, fmt.Errorf("guardrails of dataset %s: %w", dataset, err)
	}
	if dsID == "" {
		return &Access{Store: st, Guard: &Guard{}, Owner: c.User.ID}, nil
	}
	b.mu.Lock()
	cg, ok := b.rules[dsID]
	b.mu.Unlock()
	if ok && cg.version == version {
		return &Access{Store: st, Guard: cg.guard, Owner: c.User.ID}, nil
	}
	g, err := b.load(ctx, c, dataset)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	if b.rules == nil {
		b.rules = map[string]cachedGuard{}
	}
	b.rules[dsID] = cachedGuard{version, g}
	b.mu.Unlock()
	return &Access{Store: st, Guard: g, Owner: c.User.ID}, nil
}

// rulesetVersion returns the id and ruleset version of the caller's
// dataset ("" when there is none yet), as server.MCPRulesetVersion does,
// without a store query per request: the id found by name is kept for
// datasetIDTTL and the version read from the server's ruleset cache.
func (b *ServerBackend) rulesetVersion(ctx context.Context, c *server.Caller, dataset string) (string, int64, error) {
	if dataset == "" || c == nil {
		return "", 0, nil
	}
	k := c.User.ID + "\x00" + dataset
	b.mu.Lock()
	ci, ok := b.ids[k]
	b.mu.Unlock()
	if ok && time.Since(ci.at) < datasetIDTTL {
		if r, err := b.S.DatasetRulesByID(ctx, ci.id); err == nil {
			return ci.id, r.Version, nil
		}
	}
	id, version, err := b.S.MCPRulesetVersion(ctx, c, dataset)
	if err != nil {
		return "", 0, err
	}
	b.mu.Lock()
	if b.ids == nil {
		b.ids = map[string]cachedID{}
	}
	if id == "" {
		delete(b.ids, k)
	} else {
		if len(b.ids) >= maxCachedIDs {
			clear(b.ids)
		}
		b.ids[k] = cachedID{id, time.Now()}
	}
	b.mu.Unlock()
	return id, version, nil
}

// maxCachedIDs bounds the dataset ids kept by name.
const maxCachedIDs = 10000

// load compiles the dataset's MCP guardrails.
func (b *ServerBackend) load(ctx context.Context, c *server.Caller, dataset string) (*Guard, error) {
	gs, err := b.S.MCPGuardrails(ctx, c, dataset)
	if err != nil {
		return nil, fmt.Errorf("guardrails of dataset %s: %w", dataset, err)
	}
	g := &Guard{}
	for _, gr := range gs {
		var scope struct {
			Kinds      []string `json:"kinds"`
			MCPServers []string `json:"mcp_servers"`
			MCPClients []string `json:"mcp_clients"`
		}
		if len(gr.Scope) > 0 {
			_ = json.Unmarshal(gr.Scope, &scope)
		}
		if len(scope.Kinds) > 0 && !slices.Contains(scope.Kinds, "mcp") {
			continue
		}
		p, err := b.S.Rules().Load(gr.Content)
		if err != nil {
			// A dataset rule that no longer compiles is an evaluation
			// failure (fail mode applies).
			g.Unavailable = fmt.Sprintf("guardrail %q does not compile: %v", gr.Name, err)
			continue
		}
		g.Rules = append(g.Rules, &Rule{ID: gr.ID, Name: gr.Name, Content: gr.Content, Action: gr.Action, Version: gr.Version,
			Servers: scope.MCPServers, Clients: scope.MCPClients, Policy: p})
	}
	return g, nil
}

// serverStore is the in-process Store of one caller.
type serverStore struct {
	s *server.Server
	c *server.Caller
}

// ObservePins implements Store.
func (ss serverStore) ObservePins(ctx context.Context, srv, traceID string, tools []json.RawMessage, complete bool) ([]client.MCPPinVerdict, error) {
	vs, err := ss.s.ObserveMCPTools(ctx, ss.c.User.ID, server.MCPObservation{Server: srv, TraceID: traceID, Tools: tools, Complete: complete})
	out := make([]client.MCPPinVerdict, len(vs))
	for i, v := range vs {
		out[i] = client.MCPPinVerdict(v)
	}
	return out, err
}

// CreateTrace implements Store.
func (ss serverStore) CreateTrace(ctx context.Context, dataset, sessionKey string, meta map[string]any, events []json.RawMessage) (string, error) {
	return ss.s.RecordMCPTrace(ctx, ss.c, dataset, sessionKey, meta, joinEvents(events))
}

// SessionTrace implements Store.
func (ss serverStore) SessionTrace(ctx context.Context, dataset, sessionKey string) (string, error) {
	return ss.s.MCPSessionTrace(ctx, ss.c, dataset, sessionKey)
}

// AppendEvents implements Store.
func (ss serverStore) AppendEvents(ctx context.Context, traceID string, events []json.RawMessage) error {
	return ss.s.AppendMCPEvents(ctx, ss.c, traceID, joinEvents(events))
}

// MergeMetadata implements Store.
func (ss serverStore) MergeMetadata(ctx context.Context, traceID string, patch map[string]any) error {
	return ss.s.MergeMCPTraceMetadata(ctx, ss.c, traceID, patch)
}

// PutSession implements Store.
func (ss serverStore) PutSession(ctx context.Context, s client.MCPSession) error {
	in := &server.MCPSessionInput{TraceID: s.TraceID, Dataset: s.Dataset, Transport: s.Transport, Client: s.Client, Server: s.Server,
		ServerName: s.ServerName, ProtocolVersion: s.ProtocolVersion, Upstream: s.Upstream, SystemUser: s.SystemUser, EndedAt: s.EndedAt}
	_, err := ss.s.PutMCPSessionFor(ctx, ss.c.User.ID, s.ID, in)
	return err
}

func joinEvents(events []json.RawMessage) []byte {
	b := make([][]byte, len(events))
	for i, e := range events {
		b[i] = e
	}
	if len(b) == 0 {
		return []byte("[]")
	}
	return joinBatch(b, false)
}

// ErrForbidden is the error of a key whose scope is below ingest.
var ErrForbidden = errors.New("forbidden")
