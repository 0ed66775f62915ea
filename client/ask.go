package client

import (
	"context"
	"encoding/json"
	"net/http"
)

// AskRequest is a question for POST /api/v1/ask.
type AskRequest struct {
	Question string `json:"question"`
	// Dataset (a name, user/name or id) and TraceID restrict the
	// question; Since restricts to runs created since then ("7d", "12h",
	// an RFC 3339 time or YYYY-MM-DD).
	Dataset string `json:"dataset,omitempty"`
	TraceID string `json:"trace_id,omitempty"`
	Since   string `json:"since,omitempty"`
	// Model picks the model; "" uses the server's (if any), "none" asks
	// for the evidence only.
	Model string `json:"model,omitempty"`
}

// AskEvidence is one piece of evidence: the quoted text at an address of
// a trace and why it was chosen.
type AskEvidence struct {
	TraceID     string  `json:"trace_id"`
	Address     string  `json:"address"`
	Quote       string  `json:"quote"`
	Why         string  `json:"why"`
	Score       float64 `json:"score"`
	Dataset     string  `json:"dataset,omitempty"`
	DatasetUser string  `json:"dataset_user,omitempty"`
	TraceIndex  int64   `json:"trace_index"`
}

// AskCitation is a citation of a model answer; Reason is set on dropped
// ones.
type AskCitation struct {
	TraceID     string `json:"trace_id"`
	Address     string `json:"address"`
	Quote       string `json:"quote"`
	Reason      string `json:"reason,omitempty"`
	Dataset     string `json:"dataset,omitempty"`
	DatasetUser string `json:"dataset_user,omitempty"`
	TraceIndex  int64  `json:"trace_index,omitempty"`
}

// AskToolCall is one tool call the model made.
type AskToolCall struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	Error     string          `json:"error,omitempty"`
	Results   int             `json:"results"`
}

// AskUsage is what a model answer used, with its limits.
type AskUsage struct {
	Steps            int   `json:"steps"`
	MaxSteps         int   `json:"max_steps"`
	PromptTokens     int   `json:"prompt_tokens"`
	CompletionTokens int   `json:"completion_tokens"`
	MaxTokens        int   `json:"max_tokens"`
	ElapsedMS        int64 `json:"elapsed_ms"`
	TimeoutMS        int64 `json:"timeout_ms"`
}

// AskAnswer is the response of POST /api/v1/ask (docs/api.md).
type AskAnswer struct {
	Question          string        `json:"question"`
	Mode              string        `json:"mode"` // "evidence" or "model"
	Query             string        `json:"query"`
	Evidence          []AskEvidence `json:"evidence"`
	Answer            string        `json:"answer,omitempty"`
	Citations         []AskCitation `json:"citations"`
	UnsupportedClaims int           `json:"unsupported_claims"`
	Dropped           []AskCitation `json:"dropped,omitempty"`
	Refused           bool          `json:"refused,omitempty"`
	Note              string        `json:"note,omitempty"`
	ToolCalls         []AskToolCall `json:"tool_calls"`
	Usage             *AskUsage     `json:"usage,omitempty"`
	ExchangeTraceID   string        `json:"exchange_trace_id,omitempty"`
}

// Ask asks a question over the runs the key may read (POST /api/v1/ask):
// the evidence, and with a model configured on the server, the model's
// answer with its citations checked.
func (c *Client) Ask(ctx context.Context, req AskRequest) (*AskAnswer, error) {
	var out AskAnswer
	if err := c.call(ctx, http.MethodPost, "/api/v1/ask", nil, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
