package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/vigilhq/vigil/store"
)

// TraceWindow is GET /api/v1/trace/{id}?include_annotations=true for a
// viewer that shows the events [from, to) of a long trace: the same trace
// object (as caller c reads it; nil is anonymous, as with a share link)
// and every annotation and finding, but with only those events read from
// the store. Every other element of "messages" is null, so the array
// keeps its length and the annotations their anchors; annotations
// outside the window are not checked against their events ("resolved"
// as stored). Errors are the API's (*Error: 404 for a trace c may not
// read).
func (s *Server) TraceWindow(r *http.Request, c *Caller, id string, from, to int) ([]byte, error) {
	p := c.principal()
	t, err := s.traceForRead(r, p, id, false)
	if err != nil {
		return nil, err
	}
	ctx := r.Context()
	ids, err := s.st.MessageIDs(ctx, t.ID)
	if err != nil {
		return nil, fmt.Errorf("trace window %s: %w", t.ID, err)
	}
	evs, err := s.st.TraceEvents(ctx, t.ID, from, to)
	if err != nil {
		return nil, fmt.Errorf("trace window %s: %w", t.ID, err)
	}
	null := json.RawMessage("null")
	t.Messages = make([]store.Message, len(ids))
	for i, mid := range ids {
		t.Messages[i] = store.Message{ID: mid, Index: i, Data: null}
	}
	for _, m := range evs {
		if m.Index >= 0 && m.Index < len(t.Messages) {
			t.Messages[m.Index] = m
		}
	}
	out := s.traceJSON(r, t, 1<<30, true)
	anns, err := s.st.ListAnnotations(ctx, t.ID, nil)
	if err != nil {
		return nil, err
	}
	if anns, err = s.withFindings(ctx, t, anns, nil); err != nil {
		return nil, err
	}
	rd := s.newRenderer(r, t)
	out.Annotations = make([]annotationJSON, len(anns))
	for i, a := range anns {
		out.Annotations[i] = rd.annotation(a)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // as the API writes it
	if err := enc.Encode(out); err != nil {
		return nil, fmt.Errorf("trace window %s: %w", t.ID, err)
	}
	return b.Bytes(), nil
}
