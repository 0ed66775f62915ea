package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"unicode/utf8"

	"github.com/vigilhq/vigil/store"
	"github.com/vigilhq/vigil/trace"
)

// traceJSON is the API form of a trace (explorer-api §2.4).
type traceJSON struct {
	ID             string            `json:"id"`
	Index          int64             `json:"index"`
	Dataset        *string           `json:"dataset"`
	DatasetName    *string           `json:"dataset_name"`
	UserID         string            `json:"user_id"`
	User           string            `json:"user"`
	Name           *string           `json:"name"`
	HierarchyPath  []string          `json:"hierarchy_path"`
	Messages       []json.RawMessage `json:"messages"`
	ExtraMetadata  json.RawMessage   `json:"extra_metadata"`
	TimeCreated    string            `json:"time_created"`
	TimeLastPushed string            `json:"time_last_pushed"`
	Annotations    []annotationJSON  `json:"annotations,omitempty"`
	SessionKey     *string           `json:"session_key"`
	MessageCount   int               `json:"message_count"`
}

// handleTraceGet serves GET /api/v1/trace/{id}.
func (s *Server) handleTraceGet(w http.ResponseWriter, r *http.Request, p *principal) error {
	q := r.URL.Query()
	maxLen := 100000
	if v := q.Get("max_length"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return badRequest("max_length must be a non-negative integer, got %q", v)
		}
		maxLen = n
	}
	t, err := s.traceForRead(r, p, r.PathValue("id"), true)
	if err != nil {
		return err
	}
	out := s.traceJSON(r, t, maxLen, q.Get("message_ids") != "false")
	if q.Get("include_annotations") == "true" {
		anns, err := s.st.ListAnnotations(r.Context(), t.ID, nil)
		if err != nil {
			return err
		}
		if anns, err = s.withFindings(r.Context(), t, anns, nil); err != nil {
			return err
		}
		rd := s.newRenderer(r, t)
		out.Annotations = make([]annotationJSON, len(anns))
		for i, a := range anns {
			out.Annotations[i] = rd.annotation(a)
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// traceJSON renders t (with its messages, if loaded) as the API object.
func (s *Server) traceJSON(r *http.Request, t *store.Trace, maxLen int, withIDs bool) traceJSON {
	out := traceJSON{
		ID: t.ID, Index: t.Index, UserID: t.OwnerID, Name: nullString(t.Name),
		HierarchyPath: nonNilStrings(t.HierarchyPath), ExtraMetadata: objectOrEmpty(t.Metadata),
		TimeCreated: formatTime(t.TimeCreated), TimeLastPushed: formatTime(t.TimeLastPushed),
		SessionKey: nullString(t.SessionKey), MessageCount: t.MessageCount,
		Messages: make([]json.RawMessage, len(t.Messages)),
	}
	if len(t.Messages) > 0 {
		out.MessageCount = len(t.Messages)
	}
	if u, err := s.st.GetUser(r.Context(), t.OwnerID); err == nil {
		out.User = u.Username
	}
	if t.DatasetID != "" {
		id := t.DatasetID
		out.Dataset = &id
		if d, err := s.st.GetDataset(r.Context(), t.DatasetID); err == nil {
			out.DatasetName = &d.Name
		}
	}
	for i, m := range t.Messages {
		out.Messages[i] = renderEvent(m.Data, maxLen, withIDs)
	}
	return out
}

// renderEvent returns a stored event for output: without message_id when
// withIDs is false, and with long strings truncated to maxLen code points
// (explorer-api §5). The stored data is never changed.
func renderEvent(data []byte, maxLen int, withIDs bool) json.RawMessage {
	if withIDs && utf8.RuneCount(data) <= maxLen {
		return data // nothing in it can be longer than the whole
	}
	v, err := trace.ParseValue(data)
	if err != nil {
		return data
	}
	o, ok := v.(*trace.Object)
	if !ok {
		return data
	}
	if !withIDs {
		o.Delete("message_id")
	}
	if c, ok := o.Get("content"); ok {
		o.Set("content", truncateContent(c, maxLen))
	}
	if tc, ok := o.Get("tool_calls"); ok {
		if calls, ok := tc.([]trace.Value); ok {
			for _, c := range calls {
				if co, ok := c.(*trace.Object); ok {
					if f, ok := co.Get("function"); ok {
						if fo, ok := f.(*trace.Object); ok {
							if a, ok := fo.Get("arguments"); ok {
								fo.Set("arguments", truncateDeep(a, maxLen))
							}
						}
					}
				}
			}
		}
	}
	return trace.Marshal(o)
}

func truncateContent(v trace.Value, maxLen int) trace.Value {
	switch c := v.(type) {
	case string:
		return truncateString(c, maxLen)
	case []trace.Value:
		for _, part := range c {
			if po, ok := part.(*trace.Object); ok {
				if t, ok := po.Get("text"); ok {
					if s, ok := t.(string); ok {
						po.Set("text", truncateString(s, maxLen))
					}
				}
			}
		}
	}
	return v
}

func truncateDeep(v trace.Value, maxLen int) trace.Value {
	switch c := v.(type) {
	case string:
		return truncateString(c, maxLen)
	case []trace.Value:
		for i := range c {
			c[i] = truncateDeep(c[i], maxLen)
		}
	case *trace.Object:
		for i := range c.Members {
			c.Members[i].Value = truncateDeep(c.Members[i].Value, maxLen)
		}
	}
	return v
}

// truncateString keeps the first and last halves of s around a marker
// when s is longer than maxLen code points.
func truncateString(s string, maxLen int) string {
	n := utf8.RuneCountInString(s)
	if n <= maxLen {
		return s
	}
	r := []rune(s)
	head, tail := maxLen/2, maxLen-maxLen/2
	return string(r[:head]) + fmt.Sprintf("<...truncated %d characters...>", n-maxLen) + string(r[n-tail:])
}

// handleTraceDelete serves DELETE /api/v1/trace/{id}.
func (s *Server) handleTraceDelete(w http.ResponseWriter, r *http.Request, p *principal) error {
	t, err := s.traceForRead(r, p, r.PathValue("id"), false)
	if err != nil {
		return err
	}
	if !s.canWrite(p, t.OwnerID) {
		return notFound("Trace not found")
	}
	if err := s.st.DeleteTrace(r.Context(), t.ID, s.closeFunc()); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"message": "deleted"})
	return nil
}

// handleTraceDownload serves GET /api/v1/trace/{id}/download: one JSONL
// line in the export trace-line format (explorer-api §8.1).
func (s *Server) handleTraceDownload(w http.ResponseWriter, r *http.Request, p *principal) error {
	t, err := s.traceForRead(r, p, r.PathValue("id"), true)
	if err != nil {
		return err
	}
	anns, err := s.st.ListAnnotations(r.Context(), t.ID, nil)
	if err != nil {
		return err
	}
	if t.Annotations, err = s.withFindings(r.Context(), t, anns, nil); err != nil {
		return err
	}
	if err := s.inlineImages(r.Context(), t); err != nil {
		return err
	}
	line := exportLine(t, exportOptions{includeIDs: true, messageIDs: r.URL.Query().Get("message_ids") != "false"})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", t.ID+".jsonl"))
	_, err = w.Write(line)
	return err
}
