package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Dataset guardrails (explorer-api §9.1–9.3): CRUD, history and the change
// feed that remote gateways poll.

// GuardrailScope limits where a guardrail applies (explorer-api §2.6);
// empty lists match everything. Globs use * and ?, case-insensitively.
type GuardrailScope struct {
	Kinds      []string `json:"kinds,omitempty"` // "llm", "mcp"
	MCPServers []string `json:"mcp_servers,omitempty"`
	MCPClients []string `json:"mcp_clients,omitempty"`
}

// Guardrail is a dataset guardrail (explorer-api §2.6).
type Guardrail struct {
	ID              string          `json:"id"`
	Name            string          `json:"name"`
	Content         string          `json:"content"` // the rule text
	Enabled         bool            `json:"enabled"`
	Action          string          `json:"action"` // "block" or "log"
	ExtraMetadata   map[string]any  `json:"extra_metadata"`
	LastUpdatedTime string          `json:"last_updated_time"` // YYYY-MM-DD HH:MM:SS, UTC
	Version         int             `json:"version"`
	Severity        string          `json:"severity"`
	Scope           *GuardrailScope `json:"scope"` // nil: every kind
	UpdatedBy       string          `json:"updated_by"`
	TimeCreated     string          `json:"time_created"`
}

// GuardrailCreate is the body of CreateGuardrail. Name and Policy are
// required; the zero values of the rest mean the server defaults
// (enabled, action "log", severity "warn", no scope).
type GuardrailCreate struct {
	Name          string          `json:"name"`
	Policy        string          `json:"policy"`
	Enabled       *bool           `json:"enabled,omitempty"`
	Action        string          `json:"action,omitempty"`
	Severity      string          `json:"severity,omitempty"`
	Scope         *GuardrailScope `json:"scope,omitempty"`
	ExtraMetadata map[string]any  `json:"extra_metadata,omitempty"`
	Comment       string          `json:"comment,omitempty"` // kept on the version row
}

// GuardrailUpdate is the body of UpdateGuardrail: nil fields are left as
// they are. ClearScope sets the scope to null (every kind). BaseVersion,
// when > 0, makes the update fail with 409 version_conflict unless the
// guardrail is still at that version.
type GuardrailUpdate struct {
	Name          *string
	Policy        *string
	Enabled       *bool
	Action        *string
	Severity      *string
	Scope         *GuardrailScope
	ClearScope    bool
	ExtraMetadata map[string]any
	Comment       string
	BaseVersion   int
}

func (u GuardrailUpdate) body() map[string]any {
	m := map[string]any{}
	set := func(k string, v any, ok bool) {
		if ok {
			m[k] = v
		}
	}
	set("name", u.Name, u.Name != nil)
	set("policy", u.Policy, u.Policy != nil)
	set("enabled", u.Enabled, u.Enabled != nil)
	set("action", u.Action, u.Action != nil)
	set("severity", u.Severity, u.Severity != nil)
	set("scope", u.Scope, u.Scope != nil)
	set("scope", nil, u.ClearScope)
	set("extra_metadata", u.ExtraMetadata, u.ExtraMetadata != nil)
	set("comment", u.Comment, u.Comment != "")
	set("base_version", u.BaseVersion, u.BaseVersion > 0)
	return m
}

// GuardedDataset is the Dataset the guardrail writes return: its
// ExtraMetadata["policies"] lists the current guardrails and
// RulesetVersion counts the dataset's guardrail changes.
type GuardedDataset struct {
	Dataset
	RulesetVersion int64 `json:"ruleset_version"`
}

// Policies decodes ExtraMetadata["policies"].
func (d *GuardedDataset) Policies() ([]Guardrail, error) {
	raw, err := json.Marshal(d.ExtraMetadata["policies"])
	if err != nil {
		return nil, err
	}
	var out []Guardrail
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("dataset %s: extra_metadata.policies: %w", d.ID, err)
	}
	return out, nil
}

func guardrailPath(datasetID string, rest ...string) string {
	p := "/api/v1/dataset/" + url.PathEscape(datasetID) + "/policy"
	for _, r := range rest {
		p += "/" + url.PathEscape(r)
	}
	return p
}

// CreateGuardrail adds a guardrail to a dataset. A rule that does not
// compile is an *APIError with code "policy_invalid" whose Body["errors"]
// lists each error's line, column and message.
func (c *Client) CreateGuardrail(ctx context.Context, datasetID string, in GuardrailCreate) (*GuardedDataset, error) {
	var out GuardedDataset
	if err := c.call(ctx, http.MethodPost, guardrailPath(datasetID), nil, in, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// UpdateGuardrail changes a guardrail, writing a new version.
func (c *Client) UpdateGuardrail(ctx context.Context, datasetID, policyID string, up GuardrailUpdate) (*GuardedDataset, error) {
	var out GuardedDataset
	if err := c.call(ctx, http.MethodPut, guardrailPath(datasetID, policyID), nil, up.body(), &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteGuardrail deletes a guardrail (its versions are kept, and
// RestoreGuardrail brings it back). comment may be "".
func (c *Client) DeleteGuardrail(ctx context.Context, datasetID, policyID, comment string) (*GuardedDataset, error) {
	var q url.Values
	if comment != "" {
		q = url.Values{"comment": {comment}}
	}
	var out GuardedDataset
	if err := c.call(ctx, http.MethodDelete, guardrailPath(datasetID, policyID), q, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GuardrailFilter selects the guardrails Guardrails returns by scope; its
// zero value returns all of them.
type GuardrailFilter struct {
	Kind       string // "llm" or "mcp"
	ServerName string // an MCP server name
	ClientName string // an MCP client name
	// IfNoneMatch is the ETag of an earlier answer: when the ruleset has
	// not changed since, the answer is NotModified with no policies.
	IfNoneMatch string
}

// GuardrailList is the answer of Guardrails.
type GuardrailList struct {
	Policies    []Guardrail `json:"policies"`
	ETag        string      `json:"-"` // "rs-<ruleset version>", quoted
	NotModified bool        `json:"-"`
}

// Guardrails returns the guardrails of username's dataset (disabled ones
// included), the endpoint gateways poll.
func (c *Client) Guardrails(ctx context.Context, username, dataset string, f GuardrailFilter) (*GuardrailList, error) {
	q := url.Values{}
	for k, v := range map[string]string{"kind": f.Kind, "server_name": f.ServerName, "client_name": f.ClientName} {
		if v != "" {
			q.Set(k, v)
		}
	}
	r := &request{method: http.MethodGet, query: q,
		path: "/api/v1/dataset/byuser/" + url.PathEscape(username) + "/" + url.PathEscape(dataset) + "/policy"}
	if f.IfNoneMatch != "" {
		r.headers = http.Header{"If-None-Match": {f.IfNoneMatch}}
	}
	resp, err := c.do(ctx, r)
	var ae *APIError
	if errors.As(err, &ae) && ae.StatusCode == http.StatusNotModified {
		return &GuardrailList{ETag: f.IfNoneMatch, NotModified: true}, nil
	}
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := &GuardrailList{ETag: resp.Header.Get("ETag")}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return nil, fmt.Errorf("GET %s: decode response: %w", r.path, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return out, nil
}

// GuardrailVersion is one immutable version of a guardrail (explorer-api
// §9.1).
type GuardrailVersion struct {
	PolicyID       string          `json:"policy_id"`
	Version        int             `json:"version"`
	RulesetVersion int64           `json:"ruleset_version"`
	Name           string          `json:"name"`
	Content        string          `json:"content"`
	Enabled        bool            `json:"enabled"`
	Action         string          `json:"action"`
	Severity       string          `json:"severity"`
	Scope          *GuardrailScope `json:"scope"`
	ExtraMetadata  map[string]any  `json:"extra_metadata"`
	Change         string          `json:"change"` // created, updated, deleted, restored, imported
	Comment        string          `json:"comment"`
	Author         UserRef         `json:"author"`
	TimeCreated    string          `json:"time_created"`
}

// GuardrailVersions returns a guardrail's versions, newest first.
func (c *Client) GuardrailVersions(ctx context.Context, datasetID, policyID string) ([]GuardrailVersion, error) {
	var out struct {
		Versions []GuardrailVersion `json:"versions"`
	}
	if err := c.call(ctx, http.MethodGet, guardrailPath(datasetID, policyID, "versions"), nil, nil, &out); err != nil {
		return nil, err
	}
	return out.Versions, nil
}

// GetGuardrailVersion returns version n of a guardrail.
func (c *Client) GetGuardrailVersion(ctx context.Context, datasetID, policyID string, n int) (*GuardrailVersion, error) {
	var out GuardrailVersion
	if err := c.call(ctx, http.MethodGet, guardrailPath(datasetID, policyID, "versions", strconv.Itoa(n)), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// RestoreGuardrail writes a new version equal to version n (undeleting a
// deleted guardrail) and returns the guardrail.
func (c *Client) RestoreGuardrail(ctx context.Context, datasetID, policyID string, n int, comment string) (*Guardrail, error) {
	var out Guardrail
	in := map[string]string{"comment": comment}
	if err := c.call(ctx, http.MethodPost, guardrailPath(datasetID, policyID, "versions", strconv.Itoa(n), "restore"), nil, in, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// PolicyHistory is a page of a dataset's guardrail versions, newest first.
type PolicyHistory struct {
	Versions   []GuardrailVersion `json:"versions"`
	NextCursor *string            `json:"next_cursor"` // nil on the last page
}

// PolicyHistory returns a page of every guardrail version of a dataset
// (limit 0: the server's default of 50; cursor "" for the first page).
func (c *Client) PolicyHistory(ctx context.Context, datasetID string, limit int, cursor string) (*PolicyHistory, error) {
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	var out PolicyHistory
	if err := c.call(ctx, http.MethodGet, "/api/v1/dataset/"+url.PathEscape(datasetID)+"/policy-history", q, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Ruleset is a dataset's guardrails as of one ruleset version.
type Ruleset struct {
	RulesetVersion int64       `json:"ruleset_version"`
	Policies       []Guardrail `json:"policies"`
}

// RulesetAt returns the guardrails that applied at ruleset version rv.
func (c *Client) RulesetAt(ctx context.Context, datasetID string, rv int64) (*Ruleset, error) {
	var out Ruleset
	p := "/api/v1/dataset/" + url.PathEscape(datasetID) + "/ruleset/" + strconv.FormatInt(rv, 10)
	if err := c.call(ctx, http.MethodGet, p, nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GuardrailChange is one entry of the change feed.
type GuardrailChange struct {
	Seq            int64  `json:"seq"`
	DatasetID      string `json:"dataset_id"`
	Dataset        string `json:"dataset"`
	Owner          string `json:"owner"`
	RulesetVersion int64  `json:"ruleset_version"`
	Time           string `json:"time"`
}

// GuardrailChanges is an answer of the change feed. Reset means the
// caller's position is older than the feed keeps: re-fetch every cached
// ruleset and continue from Seq.
type GuardrailChanges struct {
	Seq     int64             `json:"seq"`
	Changes []GuardrailChange `json:"changes"`
	Reset   bool              `json:"reset"`
}

// GuardrailChangesAfter returns the changes of datasets the caller can read
// after seq after. With after 0 it returns only the current seq. When
// nothing is newer, the server holds the request until a change arrives or
// wait (at most 60 s) passes. Keep wait under the HTTP client's
// response-header timeout (60 s for the default one), e.g. 30 s.
func (c *Client) GuardrailChangesAfter(ctx context.Context, after int64, wait time.Duration) (*GuardrailChanges, error) {
	q := url.Values{"after": {strconv.FormatInt(after, 10)}}
	if wait > 0 {
		q.Set("wait", strconv.FormatFloat(wait.Seconds(), 'f', -1, 64))
	}
	var out GuardrailChanges
	if err := c.call(ctx, http.MethodGet, "/api/v1/guardrails/changes", q, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
