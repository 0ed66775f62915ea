package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/vigilhq/vigil/ingest"
	"github.com/vigilhq/vigil/store"
)

// In-process recording for the embedded MCP proxy: the same ingest
// calls as POST /api/v1/push/trace and POST /api/v1/trace/{id}/messages,
// without the HTTP hop, so that monitors, receipts and search apply to
// recorded MCP sessions exactly as to pushed traces.

// RecordMCPTrace pushes a new trace of events (a JSON array) with
// metadata into the caller's dataset (created when missing) and returns
// its id. sessionKey ("" = none) is the trace's session key, which
// MCPSessionTrace finds again (spec: "h:<Invariant-Session value>", the
// key the LLM gateway gives header sessions, so both share a trace).
func (s *Server) RecordMCPTrace(ctx context.Context, c *Caller, dataset, sessionKey string, meta map[string]any, events []byte) (string, error) {
	if c == nil || !c.CanIngest() {
		return "", apiErr(403, CodeForbidden, "forbidden")
	}
	if !validDatasetName(dataset) {
		return "", errDatasetName()
	}
	now := s.now()
	id := store.NewID()
	var warn warnings
	pe, err := ingest.Prepare(events, ingest.TraceOptions{TraceID: id}, &warn)
	if err != nil {
		return "", err
	}
	nt := store.NewTrace{ID: id, TimeCreated: now, KeyID: c.Key.ID, Messages: pe.Messages, SessionKey: sessionKey}
	if meta != nil {
		raw, err := json.Marshal(meta)
		if err != nil {
			return "", fmt.Errorf("encode MCP trace metadata: %w", err)
		}
		if err := applyTraceMetadata(&nt, raw, 0); err != nil {
			return "", err
		}
	}
	res, err := s.ing.Push(ctx, ingest.PushRequest{PushRequest: store.PushRequest{
		OwnerID: c.User.ID, DatasetName: dataset, CreateIfMissing: true, NewDatasetMetadata: createdOnMetadata(now),
		Traces: []store.NewTrace{nt}, Tools: ingest.ToolList(pe.Tools),
	}, Blobs: pe.Images.Blobs})
	if err != nil {
		return "", err
	}
	s.metrics.Add("vigil_ingest_traces_total", 1, "mcp")
	s.metrics.Add("vigil_ingest_messages_total", uint64(len(pe.Messages)), "mcp")
	return res.Traces[0].ID, nil
}

// AppendMCPEvents appends events (a JSON array) to the caller's trace.
func (s *Server) AppendMCPEvents(ctx context.Context, c *Caller, traceID string, events []byte) error {
	if c == nil || !c.CanIngest() {
		return apiErr(403, CodeForbidden, "forbidden")
	}
	// Events without message ids (the proxy's) get new ULIDs, which
	// cannot clash: the trace's messages need not be read.
	withIDs := bytes.Contains(events, []byte(`"message_id"`))
	t, err := s.st.GetTrace(ctx, traceID, withIDs)
	if errors.Is(err, store.ErrNotFound) || (err == nil && !s.canWrite(c.principal(), t.OwnerID)) {
		return notFound("Trace not found")
	}
	if err != nil {
		return err
	}
	now := s.now()
	var warn warnings
	var pe *ingest.Prepared
	if withIDs {
		pe, err = ingest.PrepareAppend(t, events, now, "messages", &warn)
	} else {
		pe, err = ingest.Prepare(events, ingest.TraceOptions{FirstIndex: t.MessageCount, StrictTimestamps: true, DefaultTime: now, TraceID: t.ID, Path: "messages"}, &warn)
	}
	if err != nil {
		return err
	}
	res, err := s.ing.Append(ctx, ingest.AppendRequest{Trace: t, Events: pe, Time: now})
	if err != nil {
		return err
	}
	s.metrics.Add("vigil_ingest_messages_total", uint64(len(res.Messages)), "mcp")
	return nil
}

// MergeMCPTraceMetadata applies an RFC 7386 merge patch to the metadata
// of the caller's trace (an ingest key suffices: the proxy updates the
// traces it records).
func (s *Server) MergeMCPTraceMetadata(ctx context.Context, c *Caller, traceID string, patch map[string]any) error {
	if c == nil || !c.CanIngest() {
		return apiErr(403, CodeForbidden, "forbidden")
	}
	t, err := s.st.GetTrace(ctx, traceID, false)
	if errors.Is(err, store.ErrNotFound) || (err == nil && !s.canWrite(c.principal(), t.OwnerID)) {
		return notFound("Trace not found")
	}
	if err != nil {
		return err
	}
	raw, err := json.Marshal(patch)
	if err != nil {
		return fmt.Errorf("encode metadata patch: %w", err)
	}
	_, err = s.st.UpdateTrace(ctx, traceID, store.TraceUpdate{MetadataMerge: raw})
	return err
}

// MCPSessionTrace returns the id of the caller's most recent unfinished
// trace in dataset with that session key, or "" when there is none.
func (s *Server) MCPSessionTrace(ctx context.Context, c *Caller, dataset, sessionKey string) (string, error) {
	if c == nil || sessionKey == "" {
		return "", nil
	}
	d, err := s.st.GetDatasetByName(ctx, c.User.ID, dataset)
	if errors.Is(err, store.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	ts, err := s.st.ListTraces(ctx, store.TraceFilter{DatasetID: d.ID, OwnerID: c.User.ID, SessionKey: sessionKey})
	if err != nil {
		return "", err
	}
	best := ""
	var at time.Time
	for _, t := range ts {
		if t.EndedAt == nil && (best == "" || t.TimeLastPushed.After(at)) {
			best, at = t.ID, t.TimeLastPushed
		}
	}
	return best, nil
}

// MCPRulesetVersion returns the id and ruleset version of the caller's
// dataset ("", 0 when there is none yet): a cache of its guardrails is
// current while the version is unchanged.
func (s *Server) MCPRulesetVersion(ctx context.Context, c *Caller, dataset string) (string, int64, error) {
	if dataset == "" || c == nil {
		return "", 0, nil
	}
	d, err := s.st.GetDatasetByName(ctx, c.User.ID, dataset)
	if errors.Is(err, store.ErrNotFound) {
		return "", 0, nil
	}
	if err != nil {
		return "", 0, err
	}
	return d.ID, d.RulesetVersion, nil
}

// MCPGuardrails returns the enabled guardrails of the caller's dataset
// ("" or a dataset not yet created: none).
func (s *Server) MCPGuardrails(ctx context.Context, c *Caller, dataset string) ([]*store.Guardrail, error) {
	if dataset == "" || c == nil {
		return nil, nil
	}
	d, err := s.st.GetDatasetByName(ctx, c.User.ID, dataset)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	all, err := s.st.ListGuardrails(ctx, d.ID)
	if err != nil {
		return nil, err
	}
	var out []*store.Guardrail
	for _, g := range all {
		if g.Enabled {
			out = append(out, g)
		}
	}
	return out, nil
}
