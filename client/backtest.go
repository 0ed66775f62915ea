package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
)

// BacktestRequest is the body of both backtest calls (explorer-api §9.4).
// Give Policy (the rule text) or PolicyID with Version (a stored
// guardrail version; Version 0 is its current one).
type BacktestRequest struct {
	Policy     string         `json:"policy,omitempty"`
	PolicyID   string         `json:"policy_id,omitempty"`
	Version    int            `json:"version,omitempty"`
	Parameters map[string]any `json:"parameters,omitempty"`
	// Query restricts the traces checked (a search filter).
	Query string `json:"query,omitempty"`
	// MaxConcurrent is the number of traces analysed at once (0: the
	// server's CPU count).
	MaxConcurrent int `json:"max_concurrent,omitempty"`
	// Limit checks at most that many traces, in index order (0: all).
	Limit int `json:"limit,omitempty"`
	// Store files the violations as findings.
	Store bool `json:"store,omitempty"`
	// CompareTo is the baseline rule of BacktestCompare (not accepted by
	// Backtest).
	CompareTo *BacktestRule `json:"compare_to,omitempty"`
}

// BacktestRule names a rule: its text, or a stored guardrail version.
type BacktestRule struct {
	Policy   string `json:"policy,omitempty"`
	PolicyID string `json:"policy_id,omitempty"`
	Version  int    `json:"version,omitempty"`
}

// BacktestMetadata is the first frame of a backtest stream.
type BacktestMetadata struct {
	NumTraces     int `json:"num_traces"`
	MaxConcurrent int `json:"max_concurrent"`
}

// BacktestSummary is the last frame of a backtest stream.
type BacktestSummary struct {
	NumTraces    int   `json:"num_traces"`
	NumTriggered int   `json:"num_triggered"`
	NumErrors    int   `json:"num_errors"`
	NumFailures  int   `json:"num_failures"`
	DurationMS   int64 `json:"duration_ms"`
}

// BacktestFrame is one frame of a backtest stream: the metadata (first),
// a trace's result (TraceID set; Status "success" or "error"; Errors and
// Failures as in a check result), or the summary (Done).
type BacktestFrame struct {
	Metadata  *BacktestMetadata `json:"metadata,omitempty"`
	TraceID   string            `json:"traceId,omitempty"`
	Index     int64             `json:"index"`
	Status    string            `json:"status,omitempty"`
	Triggered bool              `json:"triggered"`
	Errors    []CheckViolation  `json:"errors,omitempty"`
	Failures  []CheckFailure    `json:"failures,omitempty"`
	// Error is a trace's analysis error, or on a last frame with Done
	// false, why the run stopped.
	Error   string           `json:"error,omitempty"`
	Done    bool             `json:"done"`
	Summary *BacktestSummary `json:"summary,omitempty"`
}

// Backtest runs req over dataset datasetID as a stream
// (POST /api/v1/dataset/byid/{id}/policy-check/stream) and calls onFrame
// for the metadata frame and then each trace frame, in completion order.
// It returns the summary. An error from onFrame stops the stream (the
// server then cancels the run) and is returned. A rule that does not
// compile is an *APIError with Code "policy_invalid", before any frame.
func (c *Client) Backtest(ctx context.Context, datasetID string, req BacktestRequest, onFrame func(*BacktestFrame) error) (*BacktestSummary, error) {
	path := "/api/v1/dataset/byid/" + url.PathEscape(datasetID) + "/policy-check/stream"
	b, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("backtest: encode request: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // closing the body early cancels the server's run
	resp, err := c.do(ctx, &request{method: http.MethodPost, path: path, body: b, headers: http.Header{"Accept": {"text/event-stream"}}})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	rd := bufio.NewReaderSize(resp.Body, 64<<10)
	for {
		data, err := readSSEData(rd)
		if err == io.EOF {
			return nil, fmt.Errorf("backtest %s: the stream ended before its summary", datasetID)
		}
		if err != nil {
			return nil, fmt.Errorf("backtest %s: read stream: %w", datasetID, err)
		}
		f := &BacktestFrame{}
		if err := json.Unmarshal(data, f); err != nil {
			return nil, fmt.Errorf("backtest %s: decode frame %.80q: %w", datasetID, data, err)
		}
		switch {
		case f.Done && f.Summary != nil:
			return f.Summary, nil
		case f.Metadata == nil && f.TraceID == "" && f.Error != "":
			return nil, fmt.Errorf("backtest %s: the server stopped: %s", datasetID, f.Error)
		}
		if onFrame != nil {
			if err := onFrame(f); err != nil {
				return nil, err
			}
		}
	}
}

// readSSEData returns the data of the next server-sent event (its data
// lines joined by newlines; other fields and comments skipped), or io.EOF
// at a clean end of the stream.
func readSSEData(rd *bufio.Reader) ([]byte, error) {
	var data []byte
	have := false
	for {
		line, err := rd.ReadBytes('\n')
		if err != nil {
			if err == io.EOF && len(line) == 0 && !have {
				return nil, io.EOF
			}
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			if have {
				return data, nil
			}
			continue
		}
		v, ok := bytes.CutPrefix(line, []byte("data:"))
		if !ok {
			continue // event:, id:, retry: or a comment
		}
		v = bytes.TrimPrefix(v, []byte(" "))
		if have {
			data = append(data, '\n')
		}
		data, have = append(data, v...), true
	}
}

// BacktestComparison is the answer of BacktestCompare.
type BacktestComparison struct {
	Summary BacktestComparisonSummary `json:"summary"`
	// Traces lists the traces that triggered either rule or failed, by
	// index (at most 10,000; Summary.Truncated says when there were more).
	Traces []BacktestComparedTrace `json:"traces"`
}

// BacktestComparisonSummary counts a comparison: NewlyTriggered traces
// trigger the rule and not the baseline, NoLongerTriggered the reverse.
type BacktestComparisonSummary struct {
	NumTraces         int   `json:"num_traces"`
	NumTriggered      int   `json:"num_triggered"`
	BaselineTriggered int   `json:"baseline_triggered"`
	NewlyTriggered    int   `json:"newly_triggered"`
	NoLongerTriggered int   `json:"no_longer_triggered"`
	NumErrors         int   `json:"num_errors"`
	DurationMS        int64 `json:"duration_ms"`
	Truncated         bool  `json:"truncated"`
}

// BacktestComparedTrace is one listed trace of a comparison.
type BacktestComparedTrace struct {
	ID                string           `json:"id"`
	Index             int64            `json:"index"`
	Triggered         bool             `json:"triggered"`
	BaselineTriggered bool             `json:"baseline_triggered"`
	Errors            []CheckViolation `json:"errors"`
	Error             string           `json:"error,omitempty"`
	BaselineError     string           `json:"baseline_error,omitempty"`
}

// BacktestCompare runs req over dataset datasetID and, with
// req.CompareTo, the baseline rule too, and returns the counts
// (POST /api/v1/dataset/byid/{id}/policy-check): the safe-rollout check
// of a new rule version.
func (c *Client) BacktestCompare(ctx context.Context, datasetID string, req BacktestRequest) (*BacktestComparison, error) {
	if datasetID == "" {
		return nil, errors.New("backtest compare: dataset id is empty")
	}
	var out BacktestComparison
	if err := c.call(ctx, http.MethodPost, "/api/v1/dataset/byid/"+url.PathEscape(datasetID)+"/policy-check", nil, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
