package ask

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/vigilhq/vigil/ingest"
	"github.com/vigilhq/vigil/server"
	"github.com/vigilhq/vigil/store"
)

// Recording: every exchange with a model becomes a trace of the caller's
// vigil-ask dataset, written through package ingest like any agent run
// (receipts, monitors and search apply), so that asking is auditable.

// maxRecordedResult bounds a tool result kept in the recorded trace.
const maxRecordedResult = 8000

// exchange is what was said during one answer.
type exchange struct {
	question string
	model    string
	steps    []exchangeStep
	final    string
}

// exchangeStep is one model turn with tool calls and their results.
type exchangeStep struct {
	calls   []chatToolCall
	results []string
}

// record writes the exchange as a trace of c's vigil-ask dataset and
// returns its id; "" for an anonymous caller (no namespace to write to).
func (s *Service) record(ctx context.Context, c *server.Caller, req server.AskRequest, ans *server.AskAnswer, ex *exchange) (string, error) {
	if c == nil || c.User == nil {
		return "", nil
	}
	events := []any{map[string]any{"role": "user", "content": ex.question}}
	for k, st := range ex.steps {
		var calls []any
		for i, call := range st.calls {
			id := call.ID
			if id == "" {
				id = "call_" + strconv.Itoa(k) + "_" + strconv.Itoa(i)
			}
			var args any = call.Function.Arguments
			var obj map[string]any
			if json.Unmarshal([]byte(call.Function.Arguments), &obj) == nil {
				args = obj
			}
			calls = append(calls, map[string]any{"id": id, "type": "function",
				"function": map[string]any{"name": call.Function.Name, "arguments": args}})
		}
		events = append(events, map[string]any{"role": "assistant", "content": nil, "tool_calls": calls})
		for i, out := range st.results {
			id := st.calls[i].ID
			if id == "" {
				id = "call_" + strconv.Itoa(k) + "_" + strconv.Itoa(i)
			}
			events = append(events, map[string]any{"role": "tool", "tool_call_id": id, "content": clipRunes(out, maxRecordedResult)})
		}
	}
	events = append(events, map[string]any{"role": "assistant", "content": ex.final})
	raw, err := json.Marshal(events)
	if err != nil {
		return "", fmt.Errorf("ask: encode exchange: %w", err)
	}
	md, err := json.Marshal(map[string]any{"vigil_ask": map[string]any{
		"mode": ans.Mode, "model": ex.model, "dataset": req.Dataset, "trace_id": req.TraceID, "since": req.Since,
		"query": ans.Query, "citations": ans.Citations, "dropped": ans.Dropped, "unsupported_claims": ans.UnsupportedClaims,
		"refused": ans.Refused, "note": ans.Note, "usage": ans.Usage, "tool_calls": len(ans.ToolCalls)}})
	if err != nil {
		return "", fmt.Errorf("ask: encode exchange metadata: %w", err)
	}
	id := store.NewID()
	var warn ingest.Warnings
	pe, err := ingest.Prepare(raw, ingest.TraceOptions{TraceID: id}, &warn)
	if err != nil {
		return "", fmt.Errorf("ask: prepare exchange trace: %w", err)
	}
	nt := store.NewTrace{ID: id, Name: "ask: " + clipRunes(ex.question, 80), Metadata: md, Messages: pe.Messages,
		TimeCreated: s.cfg.Now().UTC()}
	if c.Key != nil {
		nt.KeyID = c.Key.ID
	}
	res, err := s.srv.Ingester().Push(ctx, ingest.PushRequest{PushRequest: store.PushRequest{OwnerID: c.User.ID,
		DatasetName: AskDataset, CreateIfMissing: true, Traces: []store.NewTrace{nt}, Tools: ingest.ToolList(pe.Tools)},
		Blobs: pe.Images.Blobs})
	if err != nil {
		return "", fmt.Errorf("ask: record exchange in %s: %w", AskDataset, err)
	}
	return res.Traces[0].ID, nil
}
