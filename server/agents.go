package server

import (
	"errors"
	"net/http"
	"time"

	"github.com/vigilhq/vigil/ledger"
	"github.com/vigilhq/vigil/store"
)

// The agent key registry (spec/ledger.md §7.4, §7.6, §10): public keys of
// agents that sign their own receipts. Keys are instance-wide, so changing
// them needs an admin key; reading needs read scope.

type agentKeyJSON struct {
	Agent     string `json:"agent"`
	PublicKey string `json:"publicKey"`
	CreatedAt int64  `json:"createdAt"`
	RevokedAt *int64 `json:"revokedAt"`
}

func agentKeyOut(k *store.AgentKey) agentKeyJSON {
	return agentKeyJSON{Agent: k.Agent, PublicKey: k.PublicKey, CreatedAt: k.CreatedAt.UnixMilli(), RevokedAt: optMillis(k.RevokedAt)}
}

// handleAgentPut serves POST /api/v1/ledger/agents {agent, publicKey}.
func (s *Server) handleAgentPut(w http.ResponseWriter, r *http.Request, p *principal) error {
	var in struct {
		Agent     string `json:"agent"`
		PublicKey string `json:"publicKey"`
	}
	if err := s.decodeJSON(w, r, &in, false); err != nil {
		return err
	}
	if in.Agent == "" {
		return badRequest("agent must be a non-empty string")
	}
	pub, err := ledger.ParsePublicKey(in.PublicKey)
	if err != nil {
		return badRequest("publicKey must be 64 hex characters: %v", err)
	}
	k := &store.AgentKey{Agent: in.Agent, PublicKey: ledger.PublicKeyHex(pub), CreatedAt: s.now().Truncate(time.Microsecond)}
	if err := s.st.PutAgentKey(r.Context(), k); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, agentKeyOut(k))
	return nil
}

// handleAgentList serves GET /api/v1/ledger/agents.
func (s *Server) handleAgentList(w http.ResponseWriter, r *http.Request, p *principal) error {
	keys, err := s.st.ListAgentKeys(r.Context())
	if err != nil {
		return err
	}
	out := make([]agentKeyJSON, len(keys))
	for i, k := range keys {
		out[i] = agentKeyOut(k)
	}
	writeJSON(w, http.StatusOK, map[string]any{"agents": out})
	return nil
}

// handleAgentGet serves GET /api/v1/ledger/agents/{agent...}: the agent's
// active key.
func (s *Server) handleAgentGet(w http.ResponseWriter, r *http.Request, p *principal) error {
	k, err := s.st.GetAgentKey(r.Context(), r.PathValue("agent"))
	if errors.Is(err, store.ErrNotFound) {
		return notFound("no active key for agent %q", r.PathValue("agent"))
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, agentKeyOut(k))
	return nil
}

// handleAgentDelete serves DELETE /api/v1/ledger/agents/{agent...}: revokes
// the agent's key (kept for verifying old receipts).
func (s *Server) handleAgentDelete(w http.ResponseWriter, r *http.Request, p *principal) error {
	err := s.st.RevokeAgentKey(r.Context(), r.PathValue("agent"), s.now())
	if errors.Is(err, store.ErrNotFound) {
		return notFound("no active key for agent %q", r.PathValue("agent"))
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]bool{"success": true})
	return nil
}
