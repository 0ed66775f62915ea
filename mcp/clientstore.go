package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/vigilhq/vigil/client"
)

// ClientStore is the Store of the stdio wrapper: the server's HTTP API
// through package client (push, append, pins/observe, sessions).
type ClientStore struct {
	C *client.Client
}

// ObservePins implements Store.
func (cs ClientStore) ObservePins(ctx context.Context, server, traceID string, tools []json.RawMessage, complete bool) ([]client.MCPPinVerdict, error) {
	return cs.C.ObserveMCPTools(ctx, server, traceID, tools, complete)
}

// SessionTrace implements Store: the push API has no session keys, so a
// wrapper's session always gets its own trace.
func (cs ClientStore) SessionTrace(ctx context.Context, dataset, sessionKey string) (string, error) {
	return "", nil
}

// CreateTrace implements Store; the session key is not sent (the push
// API has none).
func (cs ClientStore) CreateTrace(ctx context.Context, dataset, sessionKey string, meta map[string]any, events []json.RawMessage) (string, error) {
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

// PutSession implements Store.
func (cs ClientStore) PutSession(ctx context.Context, s client.MCPSession) error {
	_, err := cs.C.PutMCPSession(ctx, s)
	return err
}

func asAPIError(err error, target **client.APIError) bool { return errors.As(err, target) }
