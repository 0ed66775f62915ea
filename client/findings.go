package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// Findings, the review queue and evals (spec/ledger.md §8, §10). Times
// are the ledger's integer milliseconds since the epoch.

// Finding review statuses.
const (
	FindingOpen      = "open"
	FindingAccepted  = "accepted"
	FindingDismissed = "dismissed"
)

// Finding is a stored violation (ledger.md §8.1).
type Finding struct {
	ID        string              `json:"id"`
	RunID     string              `json:"runId"`
	NodeID    *string             `json:"nodeId"` // nil: the whole run
	MonitorID string              `json:"monitorId"`
	Monitor   string              `json:"monitor"`
	Key       string              `json:"key"`
	Title     string              `json:"title"`
	Severity  string              `json:"severity"` // info, warn or critical
	Score     float64             `json:"score"`
	Citations []Citation          `json:"citations"`
	Status    string              `json:"status"`
	Context   map[string]any      `json:"context"`
	CreatedAt int64               `json:"createdAt"`
	UpdatedAt int64               `json:"updatedAt"`
	History   []FindingTransition `json:"history"`
}

// Citation is an address a finding points at.
type Citation struct {
	NodeID  *string `json:"nodeId"`
	Address string  `json:"address"`
}

// FindingTransition is one review step of a finding.
type FindingTransition struct {
	At   int64  `json:"at"`
	By   string `json:"by"`
	From string `json:"from"`
	To   string `json:"to"`
	Note string `json:"note"`
}

// FindingFilter selects findings; zero fields do not filter.
type FindingFilter struct {
	RunID     string
	MonitorID string
	Status    []string // FindingOpen, … (ignored by ReviewQueue)
	Severity  []string // "info", "warn", "critical"
	Limit     int      // 0: the server's default (50); at most 1000
	Cursor    string   // NextCursor of the previous page
}

func (f FindingFilter) query(withStatus bool) url.Values {
	q := url.Values{}
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	set("runId", f.RunID)
	set("monitorId", f.MonitorID)
	if withStatus {
		set("status", strings.Join(f.Status, ","))
	}
	set("severity", strings.Join(f.Severity, ","))
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	set("cursor", f.Cursor)
	return q
}

// FindingPage is a page of findings.
type FindingPage struct {
	Findings   []Finding `json:"findings"`
	NextCursor *string   `json:"next_cursor"` // nil on the last page
}

// Findings lists findings by creation time: the caller's own (an admin's:
// everyone's), or those of f.RunID.
func (c *Client) Findings(ctx context.Context, f FindingFilter) (*FindingPage, error) {
	var out FindingPage
	if err := c.call(ctx, http.MethodGet, "/api/v1/findings", f.query(true), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ReviewQueue lists open findings, critical first, then oldest first.
func (c *Client) ReviewQueue(ctx context.Context, f FindingFilter) (*FindingPage, error) {
	var out FindingPage
	if err := c.call(ctx, http.MethodGet, "/api/v1/review-queue", f.query(false), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetFinding returns one finding.
func (c *Client) GetFinding(ctx context.Context, id string) (*Finding, error) {
	var out Finding
	if err := c.call(ctx, http.MethodGet, "/api/v1/findings/"+url.PathEscape(id), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ReviewFinding moves a finding to status (FindingAccepted or
// FindingDismissed from open, FindingOpen from either) with an optional
// note. Any other move is an *APIError with status 409. It is not retried:
// a repeat after a lost response would be refused as a move to the same
// status.
func (c *Client) ReviewFinding(ctx context.Context, id, status, note string) (*Finding, error) {
	in := map[string]string{"status": status}
	if note != "" {
		in["note"] = note
	}
	var out Finding
	if err := c.call(ctx, http.MethodPatch, "/api/v1/findings/"+url.PathEscape(id), nil, in, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// EvalResult is one eval case's result (ledger.md §8.3): the latest run
// of the case passes when no open warn or critical finding blocks it.
type EvalResult struct {
	Suite    string   `json:"suite"`
	Case     string   `json:"case"`
	RunID    string   `json:"runId"`
	Status   string   `json:"status"`   // "pass" or "fail"
	Blocking []string `json:"blocking"` // the ids of the findings that fail it
}

// EvalSuite summarises a suite: it passes when every case passes.
type EvalSuite struct {
	Suite  string `json:"suite"`
	Status string `json:"status"`
	Cases  int    `json:"cases"`
	Passed int    `json:"passed"`
	Failed int    `json:"failed"`
}

// EvalResults is the answer of Evals.
type EvalResults struct {
	Results []EvalResult `json:"results"`
	Suites  []EvalSuite  `json:"suites"`
}

// Evals computes the eval results of one suite ("" for every suite).
func (c *Client) Evals(ctx context.Context, suite string) (*EvalResults, error) {
	q := url.Values{}
	if suite != "" {
		q.Set("suite", suite)
	}
	var out EvalResults
	if err := c.call(ctx, http.MethodGet, "/api/v1/evals", q, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
