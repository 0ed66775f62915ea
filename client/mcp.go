package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// MCP sessions and tool pins (explorer-api §13): what the stdio wrapper
// and standalone gateways use to have the server judge tool definitions
// and keep session records, and what `vigil mcp pins` lists and approves.

// MCPSession is a recorded MCP session. Client and Server are
// {name, version} objects or nil.
type MCPSession struct {
	ID              string          `json:"id"`
	TraceID         string          `json:"trace_id"`
	Dataset         string          `json:"dataset"`
	Transport       string          `json:"transport"`
	Client          json.RawMessage `json:"client,omitempty"`
	Server          json.RawMessage `json:"server,omitempty"`
	ServerName      string          `json:"server_name,omitempty"`
	ProtocolVersion string          `json:"protocol_version"`
	Upstream        string          `json:"upstream"`
	SystemUser      string          `json:"system_user"`
	StartedAt       string          `json:"started_at,omitempty"`
	LastSeenAt      string          `json:"last_seen_at,omitempty"`
	EndedAt         *time.Time      `json:"ended_at,omitempty"`
}

// PutMCPSession creates or updates session s (by s.ID).
func (c *Client) PutMCPSession(ctx context.Context, s MCPSession) (*MCPSession, error) {
	var out MCPSession
	if err := c.call(ctx, http.MethodPut, "/api/v1/mcp/sessions/"+url.PathEscape(s.ID), nil, s, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// MCPSessions lists the caller's sessions, filtered by dataset and server
// name when not "", newest first; cursor "" starts at the first page.
func (c *Client) MCPSessions(ctx context.Context, dataset, server string, limit int, cursor string) (sessions []MCPSession, next string, err error) {
	q := url.Values{}
	for k, v := range map[string]string{"dataset": dataset, "server": server, "cursor": cursor} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out struct {
		Sessions   []MCPSession `json:"sessions"`
		NextCursor *string      `json:"next_cursor"`
	}
	if err := c.call(ctx, http.MethodGet, "/api/v1/mcp/sessions", q, nil, &out); err != nil {
		return nil, "", err
	}
	if out.NextCursor != nil {
		next = *out.NextCursor
	}
	return out.Sessions, next, nil
}

// MCPPinVerdict is the server's verdict on one observed tool.
type MCPPinVerdict struct {
	Tool        string   `json:"tool"`
	Observation string   `json:"observation"` // first_use, same, added, changed or removed
	Approved    bool     `json:"approved"`
	Hash        string   `json:"hash"`
	Fields      []string `json:"fields,omitempty"`
	RenamedFrom string   `json:"renamed_from,omitempty"`
}

// ObserveMCPTools sends one tools/list page of server (the raw tool
// objects) for pinning; traceID ("" when not recording) receives the
// findings; complete says every page has been seen.
func (c *Client) ObserveMCPTools(ctx context.Context, server, traceID string, tools []json.RawMessage, complete bool) ([]MCPPinVerdict, error) {
	in := map[string]any{"server": server, "tools": tools, "complete": complete}
	if traceID != "" {
		in["trace_id"] = traceID
	}
	var out struct {
		Verdicts []MCPPinVerdict `json:"verdicts"`
	}
	if err := c.call(ctx, http.MethodPost, "/api/v1/mcp/pins/observe", nil, in, &out); err != nil {
		return nil, err
	}
	return out.Verdicts, nil
}

// MCPPin is a tool's pinned definition with its pending version.
type MCPPin struct {
	ID           string          `json:"id"`
	Server       string          `json:"server"`
	Tool         string          `json:"tool"`
	Hash         string          `json:"hash"`
	Pinned       json.RawMessage `json:"pinned"`
	Status       string          `json:"status"` // approved or pending
	Pending      json.RawMessage `json:"pending"`
	ApprovedBy   *string         `json:"approved_by"`
	TimeApproved *string         `json:"time_approved"`
}

// MCPPins lists the caller's pins, of one server when server is not "".
func (c *Client) MCPPins(ctx context.Context, server string) ([]MCPPin, error) {
	q := url.Values{}
	if server != "" {
		q.Set("server", server)
	}
	var out struct {
		Pins []MCPPin `json:"pins"`
	}
	if err := c.call(ctx, http.MethodGet, "/api/v1/mcp/pins", q, nil, &out); err != nil {
		return nil, err
	}
	return out.Pins, nil
}

// ApproveMCPPin promotes pin id's pending version to approved.
func (c *Client) ApproveMCPPin(ctx context.Context, id string) (*MCPPin, error) {
	var out MCPPin
	if err := c.call(ctx, http.MethodPost, "/api/v1/mcp/pins/"+url.PathEscape(id)+"/approve", nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ForgetMCPPin deletes pin id; the tool's next sighting is trusted anew.
func (c *Client) ForgetMCPPin(ctx context.Context, id string) error {
	return c.call(ctx, http.MethodDelete, "/api/v1/mcp/pins/"+url.PathEscape(id), nil, nil, nil)
}

// MCPSessionTrace returns the id of the caller's most recent unfinished
// trace of dataset with session key sessionKey, or "" when there is none
// (GET /api/v1/mcp/session-trace).
func (c *Client) MCPSessionTrace(ctx context.Context, dataset, sessionKey string) (string, error) {
	q := url.Values{"dataset": {dataset}, "session_key": {sessionKey}}
	var out struct {
		TraceID *string `json:"trace_id"`
	}
	if err := c.call(ctx, http.MethodGet, "/api/v1/mcp/session-trace", q, nil, &out); err != nil {
		return "", err
	}
	if out.TraceID == nil {
		return "", nil
	}
	return *out.TraceID, nil
}
