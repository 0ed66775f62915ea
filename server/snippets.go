package server

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/vigilhq/vigil/ingest"
	"github.com/vigilhq/vigil/store"
)

// This file serves the smaller trace and dataset endpoints of
// explorer-api §4.1 and §5: snippets, trace PATCH, link sharing, and the
// dataset index and full views.

// handleSnippetNew serves POST /api/v1/trace/snippets/new
// {content: [events], extra_metadata?, name?, hierarchy_path?} → {"id"}.
func (s *Server) handleSnippetNew(w http.ResponseWriter, r *http.Request, p *principal) error {
	var in struct {
		Content       json.RawMessage `json:"content"`
		ExtraMetadata json.RawMessage `json:"extra_metadata"`
		Name          *string         `json:"name"`
		HierarchyPath []string        `json:"hierarchy_path"`
	}
	if err := s.decodeJSON(w, r, &in, false); err != nil {
		return err
	}
	if !isJSONArray(in.Content) {
		return badRequest("content must be a list of events")
	}
	var warn warnings
	id := store.NewID()
	pe, err := ingest.Prepare(in.Content, ingest.TraceOptions{TraceID: id, Path: "content"}, &warn)
	if err != nil {
		return err
	}
	nt := store.NewTrace{ID: id, Messages: pe.Messages, TimeCreated: s.now(), KeyID: p.Key.ID}
	if !isBlank(in.ExtraMetadata) {
		if err := applyTraceMetadata(&nt, in.ExtraMetadata, 0); err != nil {
			return badRequest("extra_metadata must be an object")
		}
	}
	if in.Name != nil {
		nt.Name = *in.Name
	}
	if in.HierarchyPath != nil {
		nt.HierarchyPath = in.HierarchyPath
	}
	res, err := s.ing.Push(r.Context(), ingest.PushRequest{
		PushRequest: store.PushRequest{OwnerID: p.User.ID, Traces: []store.NewTrace{nt}, Tools: ingest.ToolList(pe.Tools)},
		Blobs:       pe.Images.Blobs,
	})
	if err != nil {
		return err
	}
	s.metrics.Add("vigil_ingest_traces_total", 1, "push")
	s.metrics.Add("vigil_ingest_messages_total", uint64(len(pe.Messages)), "push")
	writeJSON(w, http.StatusOK, map[string]string{"id": res.Traces[0].ID})
	return nil
}

// handleSnippetList serves GET /api/v1/trace/snippets?limit=: the caller's
// snippets, newest first.
func (s *Server) handleSnippetList(w http.ResponseWriter, r *http.Request, p *principal) error {
	limit, err := intParam(r.URL.Query().Get("limit"), "limit")
	if err != nil {
		return err
	}
	list, err := s.st.ListTraces(r.Context(), store.TraceFilter{OwnerID: p.User.ID, Snippets: true, Order: store.OrderTimeCreatedDesc, Limit: limit, WithMessages: true})
	if err != nil {
		return err
	}
	out := make([]traceJSON, len(list))
	for i, t := range list {
		out[i] = s.traceJSON(r, t, 100000, true)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// traceForWrite loads a trace the caller may change, or 404.
func (s *Server) traceForWrite(r *http.Request, p *principal) (*store.Trace, error) {
	t, err := s.st.GetTrace(r.Context(), r.PathValue("id"), false)
	if errors.Is(err, store.ErrNotFound) || (err == nil && !s.canWrite(p, t.OwnerID)) {
		return nil, notFound("Trace not found")
	}
	return t, err
}

// handleTracePatch serves PATCH /api/v1/trace/{id}
// {name?, hierarchy_path?, metadata_merge?} → Trace without messages.
func (s *Server) handleTracePatch(w http.ResponseWriter, r *http.Request, p *principal) error {
	var in struct {
		Name          *string         `json:"name"`
		HierarchyPath *[]string       `json:"hierarchy_path"`
		MetadataMerge json.RawMessage `json:"metadata_merge"`
	}
	if err := s.decodeJSON(w, r, &in, false); err != nil {
		return err
	}
	var up store.TraceUpdate
	up.Name, up.HierarchyPath = in.Name, in.HierarchyPath
	if !isBlank(in.MetadataMerge) {
		var o map[string]json.RawMessage
		if json.Unmarshal(in.MetadataMerge, &o) != nil || o == nil {
			return badRequest("metadata_merge must be an object (an RFC 7386 merge patch)")
		}
		up.MetadataMerge = in.MetadataMerge
	}
	t, err := s.traceForWrite(r, p)
	if err != nil {
		return err
	}
	if t, err = s.st.UpdateTrace(r.Context(), t.ID, up); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.traceJSON(r, t, 0, true))
	return nil
}

// handleSharedGet serves GET /api/v1/trace/{id}/shared.
func (s *Server) handleSharedGet(w http.ResponseWriter, r *http.Request, p *principal) error {
	t, err := s.traceForRead(r, p, r.PathValue("id"), false)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]bool{"shared": t.Shared})
	return nil
}

// handleSharedSet serves PUT (share) and DELETE (unshare) on
// /api/v1/trace/{id}/shared.
func (s *Server) handleSharedSet(w http.ResponseWriter, r *http.Request, p *principal) error {
	if s.cfg.SharingDisabled {
		return apiErr(http.StatusForbidden, CodeForbidden, "link sharing is disabled on this server")
	}
	t, err := s.traceForWrite(r, p)
	if err != nil {
		return err
	}
	shared := r.Method == http.MethodPut
	if t, err = s.st.UpdateTrace(r.Context(), t.ID, store.TraceUpdate{Shared: &shared}); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]bool{"shared": t.Shared})
	return nil
}

// handleDatasetIndices serves GET …/{u}/{d}/indices.
func (s *Server) handleDatasetIndices(w http.ResponseWriter, r *http.Request, p *principal) error {
	d, err := s.datasetFromPath(r, p)
	if err != nil {
		return err
	}
	type row struct {
		Index         int64    `json:"index"`
		ID            string   `json:"id"`
		Name          *string  `json:"name"`
		HierarchyPath []string `json:"hierarchy_path"`
		Messages      []any    `json:"messages"`
	}
	return s.streamTraceList(w, r, store.TraceFilter{DatasetID: d.ID}, func(list []*store.Trace) ([]any, error) {
		out := make([]any, len(list))
		for i, t := range list {
			out[i] = row{Index: t.Index, ID: t.ID, Name: nullString(t.Name), HierarchyPath: nonNilStrings(t.HierarchyPath), Messages: []any{}}
		}
		return out, nil
	})
}

// maxFullTraces is the largest dataset GET …/full returns (explorer-api
// §4.1); larger ones get 413 and should be exported instead.
const maxFullTraces = 10000

// handleDatasetFull serves GET …/{u}/{d}/full: the dataset plus every
// trace with messages and annotations.
func (s *Server) handleDatasetFull(w http.ResponseWriter, r *http.Request, p *principal) error {
	d, err := s.datasetFromPath(r, p)
	if err != nil {
		return err
	}
	if d.NumTraces > maxFullTraces {
		return apiErr(http.StatusRequestEntityTooLarge, CodeTooLarge,
			"dataset has %d traces, more than %d; use the export endpoint", d.NumTraces, maxFullTraces)
	}
	type full struct {
		datasetJSON
		Traces []traceJSON `json:"traces"`
	}
	out := full{datasetJSON: s.datasetJSON(r, d, true), Traces: []traceJSON{}}
	for t, err := range s.st.IterTraces(r.Context(), d.ID, store.IterOptions{PageSize: exportPageSize}) {
		if err != nil {
			return err
		}
		tj := s.traceJSON(r, t, 100000, true)
		if t.Annotations, err = s.withFindings(r.Context(), t, t.Annotations, nil); err != nil {
			return err
		}
		rd := s.newRenderer(r, t)
		tj.Annotations = make([]annotationJSON, len(t.Annotations))
		for i, a := range t.Annotations {
			tj.Annotations[i] = rd.annotation(a)
		}
		out.Traces = append(out.Traces, tj)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
