package client

import (
	"context"
	"encoding/json"
	"net/http"
)

// The guardrails check API (explorer-api §10): evaluate rules on a trace
// without storing anything. Errors are *APIError; Detail starts with the
// prefixes Invariant's clients recognise ("Failed to load policy: ",
// "Missing Policy Parameter: ", "Excessive Policy: ", "Input Validation
// Error: "), and a load error's Body["errors"] lists {line, column,
// message}. A 429 (the server's evaluation pool is full) is not retried:
// the calls are POSTs; retry after the Retry-After the error reports.

// CheckRequest is the body of Check.
type CheckRequest struct {
	// Messages is the trace: a list of events (maps, structs or
	// json.RawMessage).
	Messages any `json:"messages"`
	// Policy is the rule text.
	Policy string `json:"policy"`
	// Parameters are read by rules as input.NAME (nil: none).
	Parameters map[string]any `json:"parameters,omitempty"`
	// FromIndex, when not nil, checks in pending mode: Messages[:FromIndex]
	// are past events and only violations involving a later one are
	// reported.
	FromIndex *int `json:"from_index,omitempty"`
}

// CheckViolation is one violation of a check result (policy-language
// §11.1). Args and Kwargs hold JSON values as decoded by encoding/json.
type CheckViolation struct {
	Key    string         `json:"key"`
	Args   []any          `json:"args"`
	Kwargs map[string]any `json:"kwargs"`
	Ranges []string       `json:"ranges"`
}

// CheckFailure is a rule failure: a runtime error that stopped one
// binding, or a budget that stopped a rule (kind "budget_exceeded").
type CheckFailure struct {
	Rule    int    `json:"rule"`
	Line    int    `json:"line"`
	Column  int    `json:"column"`
	Kind    string `json:"kind"`
	Message string `json:"message"`
}

// CheckResult is the result of a check.
type CheckResult struct {
	Errors   []CheckViolation `json:"errors"`
	Failures []CheckFailure   `json:"failures"`
	Warnings []string         `json:"warnings"`
	// Truncated lists the rules a budget stopped (their violations may
	// be incomplete).
	Truncated []int `json:"truncated,omitempty"`
}

// Check evaluates req.Policy on req.Messages (POST /api/v1/policy/check).
func (c *Client) Check(ctx context.Context, req CheckRequest) (*CheckResult, error) {
	if req.Parameters == nil {
		req.Parameters = map[string]any{}
	}
	var out CheckResult
	if err := c.call(ctx, http.MethodPost, "/api/v1/policy/check", nil, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// BatchRequest is the body of CheckBatch.
type BatchRequest struct {
	Messages   any            `json:"messages"`
	Policies   []string       `json:"policies"`
	Parameters map[string]any `json:"parameters,omitempty"`
	// DatasetName is sent as Invariant's gateway does; the server does not
	// use it.
	DatasetName string `json:"dataset_name,omitempty"`
}

// BatchResult is one policy's outcome in a batch, in request order.
type BatchResult struct {
	Policy  string `json:"policy"`
	Success bool   `json:"success"`
	// ErrorMessage says why the policy failed to load or run ("" on
	// success), with the prefixes of the single check's errors.
	ErrorMessage string `json:"error_message"`
	CheckResult
}

// CheckBatch evaluates several policies on one trace
// (POST /api/v1/policy/check/batch). A policy that fails to load or run
// is a BatchResult with Success false; the call itself fails only for a
// malformed request, auth, limits or overload.
func (c *Client) CheckBatch(ctx context.Context, req BatchRequest) ([]BatchResult, error) {
	if req.Policies == nil {
		req.Policies = []string{}
	}
	var out struct {
		Result []BatchResult `json:"result"`
	}
	if err := c.call(ctx, http.MethodPost, "/api/v1/policy/check/batch", nil, req, &out); err != nil {
		return nil, err
	}
	return out.Result, nil
}

// LoadPolicy compiles a rule on the server and caches it for later checks
// (POST /api/v1/policy/load); an invalid rule is an *APIError whose Body
// holds "errors" with each error's line and column.
func (c *Client) LoadPolicy(ctx context.Context, policy string) error {
	var out json.RawMessage
	return c.call(ctx, http.MethodPost, "/api/v1/policy/load", nil, map[string]string{"policy": policy}, &out)
}
