package server

import (
	"net/http"
)

// GET /api/v1/mcp/session-trace?dataset=NAME&session_key=KEY [V], ingest
// scope: the caller's most recent unfinished trace of dataset with that
// session key, {"trace_id": id|null}. The standalone gateway and the
// stdio wrapper use it to record an agent's MCP calls into the trace its
// LLM calls went to (pushed with metadata.session_key), as the in-process
// gateway does.

func (s *Server) handleMCPSessionTrace(w http.ResponseWriter, r *http.Request, p *principal) error {
	q := r.URL.Query()
	dataset, key := q.Get("dataset"), q.Get("session_key")
	if dataset == "" || key == "" {
		return badRequest("dataset and session_key are required")
	}
	if len(key) > maxSessionKey {
		return badRequest("session_key must be at most %d characters", maxSessionKey)
	}
	id, err := s.MCPSessionTrace(r.Context(), callerOf(p), dataset, key)
	if err != nil {
		return err
	}
	var out any
	if id != "" {
		out = id
	}
	writeJSON(w, http.StatusOK, map[string]any{"trace_id": out})
	return nil
}

// maxSessionKey bounds a trace's session key ("h:" and 128 characters of
// Invariant-Session, or "m:" and an MCP session id, with room to spare).
const maxSessionKey = 256
