package server

import (
	"context"
	"encoding/json"
)

// The request and answer of an ask (POST /api/v1/ask, package ask). They
// live here so that the web UI can render answers through an Asker
// without importing package ask; package ask implements Asker.

// Asker answers questions over the runs a caller may read.
type Asker interface {
	// Ask answers req for caller c (nil: anonymous). Bad input is a 400
	// *Error; a dataset or trace c may not read is a 404 *Error.
	Ask(ctx context.Context, c *Caller, req AskRequest) (*AskAnswer, error)
}

// AskRequest is the body of POST /api/v1/ask.
type AskRequest struct {
	// Question is the question in plain words; it may hold parts of the
	// search grammar (quoted phrases, tool:, meta:, after: …).
	Question string `json:"question"`
	// Dataset restricts to one dataset (an id, user/name or a name in the
	// caller's namespace); TraceID to one trace.
	Dataset string `json:"dataset,omitempty"`
	TraceID string `json:"trace_id,omitempty"`
	// Since restricts to traces created since then: a duration back from
	// now ("7d", "12h", "30m", "2w") or a time (RFC 3339 or YYYY-MM-DD).
	Since string `json:"since,omitempty"`
	// Model is the model to answer with; "" uses the configured one (none:
	// evidence only) and "none" asks for the evidence only.
	Model string `json:"model,omitempty"`
}

// AskEvidence is one piece of evidence: the text at an address of a
// trace and why it was chosen.
type AskEvidence struct {
	TraceID string `json:"trace_id"`
	// Address is the explorer-api §2.3 address of the quoted text.
	Address string `json:"address"`
	// Quote is the text at Address, exactly as stored.
	Quote string `json:"quote"`
	// Why says why: "search: <term>", "tool: <name>", "finding <id>
	// (<monitor>): <title>", "annotation <id>: <content>", "rule: <text>".
	Why string `json:"why"`
	// Score orders the evidence (higher first; ties by trace id, address).
	Score float64 `json:"score"`
	// Dataset is the trace's dataset name and TraceIndex its index there,
	// for links (/u/{user}/{dataset}/t/{index}); DatasetUser the owner.
	Dataset     string `json:"dataset,omitempty"`
	DatasetUser string `json:"dataset_user,omitempty"`
	TraceIndex  int64  `json:"trace_index"`
}

// AskCitation is one citation of a model answer. Reason, set on dropped
// citations only, says which check failed.
type AskCitation struct {
	TraceID string `json:"trace_id"`
	Address string `json:"address"`
	Quote   string `json:"quote"`
	Reason  string `json:"reason,omitempty"`
	// Dataset, DatasetUser and TraceIndex locate a valid citation's
	// trace for links, as in AskEvidence.
	Dataset     string `json:"dataset,omitempty"`
	DatasetUser string `json:"dataset_user,omitempty"`
	TraceIndex  int64  `json:"trace_index,omitempty"`
}

// AskToolCall is one tool call the model made, as it was executed.
type AskToolCall struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	// Error is the error the tool returned to the model ("" = none).
	Error string `json:"error,omitempty"`
	// Results is how many items (traces, events, violations, findings)
	// the tool returned.
	Results int `json:"results"`
}

// AskUsage is what a model answer cost, with the limits it ran under.
type AskUsage struct {
	Steps            int   `json:"steps"`
	MaxSteps         int   `json:"max_steps"`
	PromptTokens     int   `json:"prompt_tokens"`
	CompletionTokens int   `json:"completion_tokens"`
	MaxTokens        int   `json:"max_tokens"`
	ElapsedMS        int64 `json:"elapsed_ms"`
	TimeoutMS        int64 `json:"timeout_ms"`
}

// AskAnswer is the response of POST /api/v1/ask.
type AskAnswer struct {
	Question string `json:"question"`
	// Mode is "evidence" (no model) or "model".
	Mode string `json:"mode"`
	// Query is the search the question was turned into (the §7.2
	// grammar), "" when it has none.
	Query string `json:"query"`
	// Evidence is the model-free evidence, best first (at most 50).
	Evidence []AskEvidence `json:"evidence"`
	// Answer is the model's answer, each claim marked [n] with the index
	// (from 1) of its citation in Citations; "" in evidence mode and when
	// the answer was refused.
	Answer string `json:"answer,omitempty"`
	// Citations are the citations that passed the checks, numbered as
	// the answer marks them.
	Citations []AskCitation `json:"citations"`
	// UnsupportedClaims counts the citations that failed a check (listed
	// in Dropped, with their Reason).
	UnsupportedClaims int           `json:"unsupported_claims"`
	Dropped           []AskCitation `json:"dropped,omitempty"`
	// Refused is set when the model's answer had no valid citation: the
	// answer is then withheld and Note says so.
	Refused bool   `json:"refused,omitempty"`
	Note    string `json:"note,omitempty"`
	// ToolCalls are the model's tool calls in order.
	ToolCalls []AskToolCall `json:"tool_calls"`
	Usage     *AskUsage     `json:"usage,omitempty"`
	// ExchangeTraceID is the trace the exchange was recorded as (dataset
	// vigil-ask of the caller); "" when it was not recorded.
	ExchangeTraceID string `json:"exchange_trace_id,omitempty"`
}
