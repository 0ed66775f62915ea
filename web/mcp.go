package web

import (
	"encoding/json"
	"net/url"
)

type mcpView struct {
	Layout
	Available bool
	Pins      []mcpPin
	CanWrite  bool
}

type mcpPin struct {
	ID      string          `json:"id"`
	Server  string          `json:"server"`
	Tool    string          `json:"tool"`
	Hash    string          `json:"hash"`
	Status  string          `json:"status"`
	Pinned  json.RawMessage `json:"pinned"`
	Pending json.RawMessage `json:"pending"`
	Diff    []diffLine      `json:"-"`
}

// mcpPage lists MCP tool pins (GET /api/v1/mcp/pins) with pending
// changes as a diff of description and schema. Until the server serves
// pins it shows an empty state.
func (h *Handler) mcpPage(q *request) error {
	if err := q.needLogin(); err != nil {
		return err
	}
	v := &mcpView{Layout: q.layout("MCP"), CanWrite: q.caller.CanWrite()}
	v.Section = "mcp"
	var res struct {
		Pins []mcpPin `json:"pins"`
	}
	if err := q.api("GET", "/api/v1/mcp/pins", nil, &res); err == nil {
		v.Available = true
		v.Pins = res.Pins
		for i := range v.Pins {
			p := &v.Pins[i]
			if len(p.Pending) > 0 && string(p.Pending) != "null" {
				p.Diff = lineDiff(pretty(p.Pinned), pretty(p.Pending))
			}
		}
	}
	return q.render("mcp", v)
}

// pinApprove promotes a pin's pending version (API §13).
func (h *Handler) pinApprove(q *request) error {
	if err := q.needLogin(); err != nil {
		return err
	}
	if err := q.api("POST", "/api/v1/mcp/pins/"+url.PathEscape(q.r.PathValue("id"))+"/approve", map[string]any{}, nil); err != nil {
		return err
	}
	return redirect("/mcp")
}

// pinForget forgets a pin: the next sighting is trusted as new (API §13).
func (h *Handler) pinForget(q *request) error {
	if err := q.needLogin(); err != nil {
		return err
	}
	if err := q.api("DELETE", "/api/v1/mcp/pins/"+url.PathEscape(q.r.PathValue("id")), nil, nil); err != nil {
		return err
	}
	return redirect("/mcp")
}
