package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/vigilhq/vigil/client"
	"github.com/vigilhq/vigil/server"
)

// ClientStore is the Store of the stdio wrapper: the server's HTTP API
// through package client (push, append, pins/observe, sessions).
type ClientStore struct {
	C *client.Client
	// CacheDir ("" = none) keeps the approved fingerprints of each server
	// seen, so that pin checks go on from the cache while the server is
	// unreachable: a known tool with another fingerprint is still held.
	CacheDir string
	// SpoolDir ("" = none) keeps the records that could not be written;
	// ReplaySpool writes them at the next start.
	SpoolDir string
}

// ObservePins implements Store.
func (cs ClientStore) ObservePins(ctx context.Context, server, traceID string, tools []json.RawMessage, complete bool) ([]client.MCPPinVerdict, error) {
	vs, err := cs.C.ObserveMCPTools(ctx, server, traceID, tools, complete)
	if cs.CacheDir == "" {
		return vs, err
	}
	path := filepath.Join(cs.CacheDir, "pins-"+cacheName(server)+".json")
	cache := map[string]string{}
	if b, rerr := os.ReadFile(path); rerr == nil {
		_ = json.Unmarshal(b, &cache)
	}
	if err != nil {
		var api *client.APIError
		if errors.As(err, &api) || len(cache) == 0 {
			return nil, err // the server answered, or nothing is cached
		}
		return cachedVerdicts(cache, tools), nil
	}
	for _, v := range vs {
		if v.Approved && v.Observation != "removed" {
			cache[v.Tool] = v.Hash
		}
	}
	if b, merr := json.Marshal(cache); merr == nil && os.MkdirAll(cs.CacheDir, 0o700) == nil {
		tmp := path + ".tmp"
		if os.WriteFile(tmp, b, 0o600) == nil {
			_ = os.Rename(tmp, path)
		}
	}
	return vs, nil
}

// cachedVerdicts judges tools against cached approved fingerprints: a
// tool with another fingerprint is changed (not approved), an unknown
// one added.
func cachedVerdicts(cache map[string]string, tools []json.RawMessage) []client.MCPPinVerdict {
	var out []client.MCPPinVerdict
	for _, t := range tools {
		hash, name, err := server.MCPToolFingerprint(t)
		if err != nil {
			continue
		}
		v := client.MCPPinVerdict{Tool: name, Hash: hash, Approved: true, Observation: "added"}
		if old, ok := cache[name]; ok {
			v.Observation = "same"
			if old != hash {
				v.Observation, v.Approved, v.Fields = "changed", false, []string{"unknown: the Vigil server is unreachable"}
			}
		}
		out = append(out, v)
	}
	return out
}

// cacheName makes a server identity safe as a file name.
func cacheName(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			b[i] = '_'
		}
	}
	return string(b)
}

// SessionTrace implements Store: the open trace of dataset with the
// session key (GET /api/v1/mcp/session-trace), such as the one the
// gateway records an agent's LLM calls into. A server without the
// endpoint answers 404: the session gets its own trace.
func (cs ClientStore) SessionTrace(ctx context.Context, dataset, sessionKey string) (string, error) {
	if dataset == "" || sessionKey == "" {
		return "", nil
	}
	id, err := cs.C.MCPSessionTrace(ctx, dataset, sessionKey)
	if client.IsNotFound(err) {
		return "", nil
	}
	return id, err
}

// CreateTrace implements Store; the session key goes in the metadata as
// "session_key", which the push API makes the trace's session key.
func (cs ClientStore) CreateTrace(ctx context.Context, dataset, sessionKey string, meta map[string]any, events []json.RawMessage) (string, error) {
	if sessionKey != "" {
		m := make(map[string]any, len(meta)+1)
		for k, v := range meta {
			m[k] = v
		}
		m["session_key"] = sessionKey
		meta = m
	}
	msgs := make([]any, len(events))
	for i, e := range events {
		msgs[i] = e
	}
	res, err := cs.C.Push(ctx, client.PushRequest{Messages: [][]any{msgs}, Metadata: []map[string]any{meta}, Dataset: dataset})
	if err != nil {
		return "", err
	}
	if len(res.ID) != 1 {
		return "", fmt.Errorf("push: %d trace ids for one trace", len(res.ID))
	}
	return res.ID[0], nil
}

// AppendEvents implements Store.
func (cs ClientStore) AppendEvents(ctx context.Context, traceID string, events []json.RawMessage) error {
	msgs := make([]any, len(events))
	for i, e := range events {
		msgs[i] = e
	}
	_, err := cs.C.Append(ctx, traceID, msgs, nil)
	return err
}

// MergeMetadata implements Store (PATCH /api/v1/trace/{id}; a key of
// ingest scope is refused, which only leaves the metadata as created).
func (cs ClientStore) MergeMetadata(ctx context.Context, traceID string, patch map[string]any) error {
	return cs.C.Raw(ctx, "PATCH", "/api/v1/trace/"+traceID, map[string]any{"metadata_merge": patch}, nil)
}

// PutSession implements Store.
func (cs ClientStore) PutSession(ctx context.Context, s client.MCPSession) error {
	_, err := cs.C.PutMCPSession(ctx, s)
	return err
}

func asAPIError(err error, target **client.APIError) bool { return errors.As(err, target) }
