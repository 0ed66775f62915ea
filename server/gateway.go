package server

import (
	"context"
	"errors"
	"fmt"

	"github.com/vigilhq/vigil/policy"
	"github.com/vigilhq/vigil/store"
)

// This file exports what the embedded LLM gateway needs from the
// server's dataset-guardrail cache.

// DatasetRules is one dataset's guardrails at one ruleset version.
type DatasetRules struct {
	DatasetID string
	Version   int64
	// Guardrails are every current guardrail, disabled ones included,
	// oldest first.
	Guardrails []*store.Guardrail
	// Rules maps the id of each enabled guardrail to its compiled rule;
	// Errors holds the enabled ones whose text no longer loads.
	Rules  map[string]*policy.Policy
	Errors map[string]error
}

// DatasetRulesByID returns the current guardrails of a dataset, from the
// cache the change feed keeps fresh (a write on this process drops its
// entry before its response is sent). An unknown dataset is
// store.ErrNotFound.
func (s *Server) DatasetRulesByID(ctx context.Context, datasetID string) (*DatasetRules, error) {
	r, err := s.currentRuleset(ctx, datasetID)
	if err != nil {
		return nil, err
	}
	return &DatasetRules{DatasetID: r.DatasetID, Version: r.Version, Guardrails: r.Guardrails, Rules: r.Rules, Errors: r.Errors}, nil
}

// DatasetID returns the id of the owner's dataset of that name, or
// store.ErrNotFound.
func (s *Server) DatasetID(ctx context.Context, ownerID, name string) (string, error) {
	d, err := s.st.GetDatasetByName(ctx, ownerID, name)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return "", err
		}
		return "", fmt.Errorf("dataset %s: %w", name, err)
	}
	return d.ID, nil
}

// FinishRun finishes the run of a trace as completed and closes its
// ledger session (spec/ledger.md §7.1), as the gateway does when a
// stitched session ends. A run already finished is not an error.
func (s *Server) FinishRun(ctx context.Context, traceID string) error {
	_, err := s.st.FinishRun(ctx, traceID, store.RunCompleted, s.now(), s.closeFunc())
	if err != nil && !errors.Is(err, store.ErrFinished) {
		return fmt.Errorf("finish run %s: %w", traceID, err)
	}
	return nil
}
