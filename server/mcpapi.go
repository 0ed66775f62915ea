package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/vigilhq/vigil/store"
)

// The MCP sessions and tool pins endpoints (explorer-api §13). The
// pinning decisions are in mcppins.go.

// mcpRoutes adds the /api/v1/mcp/ routes.
func (s *Server) mcpRoutes(mux *http.ServeMux) {
	s.handle(mux, "PUT /api/v1/mcp/sessions/{id}", accessIngest, s.handleMCPSessionPut)
	s.handle(mux, "GET /api/v1/mcp/sessions", accessRead, s.handleMCPSessionList)
	s.handle(mux, "POST /api/v1/mcp/pins/observe", accessIngest, s.handleMCPPinsObserve)
	s.handle(mux, "GET /api/v1/mcp/pins", accessRead, s.handleMCPPinList)
	s.handle(mux, "POST /api/v1/mcp/pins/{id}/approve", accessFull, s.handleMCPPinApprove)
	s.handle(mux, "DELETE /api/v1/mcp/pins/{id}", accessFull, s.handleMCPPinDelete)
	s.handle(mux, "GET /api/v1/mcp/session-trace", accessIngest, s.handleMCPSessionTrace)
}

// MCPSessionInput is the body of PUT /api/v1/mcp/sessions/{id}.
type MCPSessionInput struct {
	TraceID         string          `json:"trace_id"`
	Dataset         string          `json:"dataset"`
	Transport       string          `json:"transport"`
	Client          json.RawMessage `json:"client"`
	Server          json.RawMessage `json:"server"`
	ServerName      string          `json:"server_name"`
	ProtocolVersion string          `json:"protocol_version"`
	Upstream        string          `json:"upstream"`
	SystemUser      string          `json:"system_user"`
	EndedAt         *time.Time      `json:"ended_at"`
	State           json.RawMessage `json:"state"`
}

// PutMCPSessionFor upserts an MCP session of ownerID (explorer-api §13).
// A session id owned by someone else is a 404.
func (s *Server) PutMCPSessionFor(ctx context.Context, ownerID, id string, in *MCPSessionInput) (*store.MCPSession, error) {
	if id == "" || len(id) > 128 {
		return nil, badRequest("session id must be 1 to 128 characters")
	}
	if old, err := s.st.GetMCPSession(ctx, id); err == nil && old.OwnerID != ownerID {
		return nil, notFound("MCP session %s not found", id)
	} else if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	for name, v := range map[string]json.RawMessage{"client": in.Client, "server": in.Server, "state": in.State} {
		if isBlank(v) {
			continue
		}
		var o map[string]any
		if json.Unmarshal(v, &o) != nil || o == nil {
			return nil, badRequest("%s must be a JSON object", name)
		}
	}
	serverName := in.ServerName
	if serverName == "" && !isBlank(in.Server) {
		var srv struct{ Name string }
		_ = json.Unmarshal(in.Server, &srv)
		serverName = srv.Name
	}
	m := &store.MCPSession{ID: id, OwnerID: ownerID, TraceID: in.TraceID, Dataset: in.Dataset, Transport: in.Transport,
		Client: blankNil(in.Client), Server: blankNil(in.Server), ServerName: serverName, ProtocolVersion: in.ProtocolVersion,
		Upstream: in.Upstream, SystemUser: in.SystemUser, StartedAt: s.now(), LastSeenAt: s.now(), EndedAt: in.EndedAt, State: blankNil(in.State)}
	if err := s.st.PutMCPSession(ctx, m); err != nil {
		return nil, err
	}
	return s.st.GetMCPSession(ctx, id)
}

func blankNil(v json.RawMessage) json.RawMessage {
	if isBlank(v) {
		return nil
	}
	return v
}

func (s *Server) handleMCPSessionPut(w http.ResponseWriter, r *http.Request, p *principal) error {
	var in MCPSessionInput
	if err := s.decodeJSON(w, r, &in, false); err != nil {
		return err
	}
	m, err := s.PutMCPSessionFor(r.Context(), p.User.ID, r.PathValue("id"), &in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, mcpSessionJSON(m))
	return nil
}

func mcpSessionJSON(m *store.MCPSession) map[string]any {
	raw := func(v json.RawMessage) any {
		if len(v) == 0 {
			return nil
		}
		return v
	}
	return map[string]any{"id": m.ID, "trace_id": m.TraceID, "dataset": m.Dataset, "transport": m.Transport,
		"client": raw(m.Client), "server": raw(m.Server), "protocol_version": m.ProtocolVersion, "upstream": m.Upstream,
		"system_user": m.SystemUser, "started_at": formatTime(m.StartedAt), "last_seen_at": formatTime(m.LastSeenAt), "ended_at": mcpTime(m.EndedAt)}
}

func (s *Server) handleMCPSessionList(w http.ResponseWriter, r *http.Request, p *principal) error {
	q := r.URL.Query()
	limit := 50
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			return badRequest("limit must be an integer from 1 to 1000")
		}
		limit = n
	}
	offset := 0
	if c := q.Get("cursor"); c != "" {
		n, err := strconv.Atoi(c)
		if err != nil || n < 0 {
			return badRequest("cursor is not a cursor this endpoint returned")
		}
		offset = n
	}
	list, err := s.st.ListMCPSessions(r.Context(), store.MCPSessionFilter{OwnerID: p.User.ID, Dataset: q.Get("dataset"), Server: q.Get("server"), Limit: limit + 1, Offset: offset})
	if err != nil {
		return err
	}
	var next any
	if len(list) > limit {
		list, next = list[:limit], strconv.Itoa(offset+limit)
	}
	out := make([]map[string]any, len(list))
	for i, m := range list {
		out[i] = mcpSessionJSON(m)
	}
	writeJSON(w, http.StatusOK, map[string]any{"sessions": out, "next_cursor": next})
	return nil
}

func (s *Server) handleMCPPinsObserve(w http.ResponseWriter, r *http.Request, p *principal) error {
	var in MCPObservation
	if err := s.decodeJSON(w, r, &in, false); err != nil {
		return err
	}
	if in.TraceID != "" {
		t, err := s.st.GetTrace(r.Context(), in.TraceID, false)
		if errors.Is(err, store.ErrNotFound) || (err == nil && !s.canWrite(p, t.OwnerID)) {
			return notFound("Trace not found")
		}
		if err != nil {
			return err
		}
	}
	v, err := s.ObserveMCPTools(r.Context(), p.User.ID, in)
	if err != nil {
		return err
	}
	if v == nil {
		v = []MCPPinVerdict{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"verdicts": v})
	return nil
}

// MCPPinJSON is the API form of a pin (explorer-api §13).
func MCPPinJSON(pin *store.MCPPin) map[string]any {
	var pinned map[string]json.RawMessage
	_ = json.Unmarshal(pin.Pinned, &pinned)
	var pending any
	if pin.Status == store.PinPending {
		var pd map[string]json.RawMessage
		_ = json.Unmarshal(pin.Pending, &pd)
		pending = map[string]any{"hash": pin.PendingHash, "description": pd["description"], "input_schema": pd["input_schema"],
			"title": pd["title"], "annotations": pd["annotations"], "output_schema": pd["output_schema"], "first_seen": mcpTime(pin.PendingFirstSeen)}
	}
	var by any
	if pin.ApprovedBy != "" {
		by = pin.ApprovedBy
	}
	return map[string]any{"id": pin.ID, "server": pin.Server, "tool": pin.Tool, "hash": pin.Hash,
		"pinned": map[string]any{"description": pinned["description"], "input_schema": pinned["input_schema"], "title": pinned["title"],
			"annotations": pinned["annotations"], "output_schema": pinned["output_schema"]},
		"status": pin.Status, "pending": pending, "approved_by": by, "time_approved": mcpTime(pin.TimeApproved)}
}

func (s *Server) handleMCPPinList(w http.ResponseWriter, r *http.Request, p *principal) error {
	pins, err := s.st.ListMCPPins(r.Context(), p.User.ID, r.URL.Query().Get("server"))
	if err != nil {
		return err
	}
	sortPins(pins)
	out := make([]map[string]any, len(pins))
	for i, pin := range pins {
		out[i] = MCPPinJSON(pin)
	}
	writeJSON(w, http.StatusOK, map[string]any{"pins": out})
	return nil
}

func (s *Server) handleMCPPinApprove(w http.ResponseWriter, r *http.Request, p *principal) error {
	pin, err := s.ApproveMCPPin(r.Context(), callerOf(p), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, MCPPinJSON(pin))
	return nil
}

func (s *Server) handleMCPPinDelete(w http.ResponseWriter, r *http.Request, p *principal) error {
	pin, err := s.visiblePin(r.Context(), callerOf(p), r.PathValue("id"))
	if err != nil {
		return err
	}
	if err := s.st.DeleteMCPPin(r.Context(), pin.ID); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true})
	return nil
}
