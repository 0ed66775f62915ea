package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/vigilhq/vigil/store"
	"github.com/vigilhq/vigil/trace"
)

// annotationCreate is the create form of an annotation (explorer-api §2.2).
type annotationCreate struct {
	Content       json.RawMessage `json:"content"`
	Address       *string         `json:"address"`
	ExtraMetadata json.RawMessage `json:"extra_metadata"`
}

// newAnnotation validates one create form and returns the store record
// (not yet anchored: AnchorIndex or MessageID set from the address).
// Invalid address grammar is 400 invalid_address.
func newAnnotation(raw json.RawMessage, p *principal) (*store.Annotation, error) {
	var c annotationCreate
	if err := json.Unmarshal(raw, &c); err != nil || c.Address == nil || len(c.Content) == 0 {
		return nil, badRequest("Failed to parse annotation: %s", compactJSON(raw))
	}
	a := &store.Annotation{UserID: p.User.ID, Resolved: true, Content: contentText(c.Content)}
	if !isBlank(c.ExtraMetadata) {
		var o map[string]json.RawMessage
		if json.Unmarshal(c.ExtraMetadata, &o) != nil || o == nil {
			return nil, badRequest("extra_metadata must be an object")
		}
		a.ExtraMetadata = c.ExtraMetadata
		if src, ok := o["source"]; ok {
			_ = json.Unmarshal(src, &a.Source)
		}
	}
	if err := setAddress(a, *c.Address); err != nil {
		return nil, err
	}
	return a, nil
}

// contentText is the stored text of an annotation's content: a JSON
// string's value, kept exactly (a lone surrogate stays one, ledger.md §2.1;
// encoding/json made it U+FFFD), or any other JSON value's compact text.
func contentText(raw json.RawMessage) string {
	if v, err := trace.ParseValue(raw); err == nil {
		if str, ok := v.(string); ok {
			return str
		}
	}
	return compactJSON(raw)
}

// exactString is a string that encodes to JSON exactly as it was decoded:
// a lone surrogate (held as WTF-8) is written as its \uXXXX escape, where
// encoding/json writes U+FFFD.
type exactString string

// MarshalJSON implements json.Marshaler.
func (s exactString) MarshalJSON() ([]byte, error) { return trace.Marshal(string(s)), nil }

// setAddress parses addr into the stored (message id | index, rest) form.
func setAddress(a *store.Annotation, addr string) error {
	ad, err := trace.ParseAddress(addr)
	if err != nil {
		return &Error{Status: http.StatusBadRequest, Code: CodeInvalidAddress, Detail: err.Error()}
	}
	if ad.Root {
		a.Address = "<root>"
		return nil
	}
	if len(ad.Steps) == 0 {
		return &Error{Status: http.StatusBadRequest, Code: CodeInvalidAddress, Detail: "address has no message step: " + addr}
	}
	first := ad.Steps[0]
	rest := trace.Address{Steps: append([]trace.Step{{Key: "x", Index: -1}}, ad.Steps[1:]...), Selector: ad.Selector}.String()
	// rest is "messages.x<tail>"; keep only <tail>.
	rest = strings.TrimPrefix(rest, "messages.x")
	switch {
	case first.ID != "":
		a.MessageID = first.ID
		a.Address = rest
	case first.Index >= 0:
		i := first.Index
		a.AnchorIndex = &i
		a.Address = rest
	default:
		return &Error{Status: http.StatusBadRequest, Code: CodeInvalidAddress, Detail: "address must start with messages.<index> or messages.@<message_id>: " + addr}
	}
	return nil
}

// newAnnotations validates a list of create forms for trace i of a push.
func newAnnotations(raws []json.RawMessage, p *principal, i int) ([]*store.Annotation, error) {
	out := make([]*store.Annotation, 0, len(raws))
	for _, raw := range raws {
		a, err := newAnnotation(raw, p)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// compactJSON returns b re-encoded compactly (keys sorted), numbers with
// their digits as written, or b itself when it is not JSON.
func compactJSON(b []byte) string {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil {
		return string(b)
	}
	out, _ := json.Marshal(v)
	return string(out)
}

// annotationJSON is the API form of an annotation.
type annotationJSON struct {
	ID            string          `json:"id"`
	TraceID       string          `json:"trace_id"`
	Content       exactString     `json:"content"`
	Address       string          `json:"address"`
	ExtraMetadata json.RawMessage `json:"extra_metadata"`
	TimeCreated   string          `json:"time_created"`
	User          *userRef        `json:"user"`
	MessageID     *string         `json:"message_id"`
	Resolved      bool            `json:"resolved"`
}

type userRef struct {
	ID           string `json:"id"`
	Username     string `json:"username"`
	ImageURLHash string `json:"image_url_hash"`
}

func newUserRef(u *store.User) *userRef {
	if u == nil {
		return nil
	}
	basis := u.Username
	if u.Email != "" {
		basis = strings.ToLower(u.Email)
	}
	h := sha256.Sum256([]byte(basis))
	return &userRef{ID: u.ID, Username: u.Username, ImageURLHash: hex.EncodeToString(h[:])}
}

// renderer turns stored annotations into API objects, caching users and
// the message-id → index map of one trace.
type renderer struct {
	s       *Server
	r       *http.Request
	users   map[string]*store.User
	index   map[string]int // message id -> position
	idForm  bool
	traceID string
}

func (s *Server) newRenderer(r *http.Request, t *store.Trace) *renderer {
	rd := &renderer{s: s, r: r, users: map[string]*store.User{}, idForm: r.URL.Query().Get("address_form") == "id"}
	if t != nil {
		rd.traceID = t.ID
		rd.index = make(map[string]int, len(t.Messages))
		for i, m := range t.Messages {
			rd.index[m.ID] = i
		}
	}
	return rd
}

func (rd *renderer) user(id string) *store.User {
	if u, ok := rd.users[id]; ok {
		return u
	}
	u, err := rd.s.st.GetUser(rd.r.Context(), id)
	if err != nil {
		u = nil
	}
	rd.users[id] = u
	return u
}

func (rd *renderer) annotation(a *store.Annotation) annotationJSON {
	out := annotationJSON{
		ID: a.ID, TraceID: a.TraceID, Content: exactString(a.Content), ExtraMetadata: a.ExtraMetadata,
		TimeCreated: formatTime(a.TimeCreated), User: newUserRef(rd.user(a.UserID)), Resolved: a.Resolved,
	}
	if len(out.ExtraMetadata) == 0 {
		out.ExtraMetadata = json.RawMessage("null")
	}
	out.Address = a.Address
	if a.MessageID != "" {
		id := a.MessageID
		out.MessageID = &id
		if i, ok := rd.index[id]; ok && !rd.idForm {
			out.Address = "messages." + strconv.Itoa(i) + a.Address
		} else {
			out.Address = "messages.@" + id + a.Address
		}
	}
	return out
}

// resolveAnnotations sets Resolved on annotations anchored by index
// against the decoded trace t (explorer-api §2.2: unresolvable ones are
// stored with resolved=false).
func resolveAnnotations(t *trace.Trace, anns []*store.Annotation) {
	if t == nil {
		return
	}
	for _, a := range anns {
		if a.AnchorIndex == nil {
			continue
		}
		full := "messages." + strconv.Itoa(*a.AnchorIndex) + a.Address
		ad, err := trace.ParseAddress(full)
		if err != nil {
			a.Resolved = false
			continue
		}
		if _, err := t.Resolve(ad); err != nil {
			a.Resolved = false
		}
	}
}

// decodeStored decodes a stored trace's messages into a trace.Trace (for
// address resolution); nil when it cannot.
func decodeStored(t *store.Trace) *trace.Trace {
	raw := make([]json.RawMessage, len(t.Messages))
	for i, m := range t.Messages {
		raw[i] = m.Data
	}
	b := append(append([]byte{'['}, joinRaw(raw)...), ']')
	tr, _ := trace.Decode(b)
	return tr
}

// traceForRead loads a trace the caller may read, or 404.
func (s *Server) traceForRead(r *http.Request, p *principal, id string, withMessages bool) (*store.Trace, error) {
	t, err := s.st.GetTrace(r.Context(), id, withMessages)
	if errors.Is(err, store.ErrNotFound) {
		return nil, notFound("Trace not found")
	}
	if err != nil {
		return nil, err
	}
	ok, err := s.canReadTrace(r, p, t)
	if err != nil {
		return nil, err
	}
	// A link-shared trace is readable by anyone holding its id.
	ok = ok || (t.Shared && !s.cfg.SharingDisabled)
	if !ok {
		return nil, notFound("Trace not found")
	}
	return t, nil
}

// handleAnnotate serves POST /api/v1/trace/{id}/annotate.
func (s *Server) handleAnnotate(w http.ResponseWriter, r *http.Request, p *principal) error {
	body, err := s.readJSONBody(w, r)
	if err != nil {
		return err
	}
	if err := unmarshalBody(body, new(map[string]json.RawMessage)); err != nil {
		return err
	}
	a, err := newAnnotation(body, p)
	if err != nil {
		return err
	}
	t, err := s.traceForRead(r, p, r.PathValue("id"), true)
	if err != nil {
		return err
	}
	a.TraceID, a.OwnerID = t.ID, t.OwnerID
	resolveAnnotations(decodeStored(t), []*store.Annotation{a})
	if a.MessageID != "" {
		if _, ok := indexOf(t, a.MessageID); !ok {
			a.Resolved = false
		}
	}
	if err := s.st.CreateAnnotation(r.Context(), a); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.newRenderer(r, t).annotation(a))
	return nil
}

func indexOf(t *store.Trace, msgID string) (int, bool) {
	for i, m := range t.Messages {
		if m.ID == msgID {
			return i, true
		}
	}
	return 0, false
}

// handleAnnotationList serves GET /api/v1/trace/{id}/annotations.
func (s *Server) handleAnnotationList(w http.ResponseWriter, r *http.Request, p *principal) error {
	t, err := s.traceForRead(r, p, r.PathValue("id"), true)
	if err != nil {
		return err
	}
	var sources []string
	if v := r.URL.Query().Get("source"); v != "" {
		sources = strings.Split(v, ",")
	}
	anns, err := s.st.ListAnnotations(r.Context(), t.ID, sources)
	if err != nil {
		return err
	}
	if anns, err = s.withFindings(r.Context(), t, anns, sources); err != nil {
		return err
	}
	rd := s.newRenderer(r, t)
	out := make([]annotationJSON, len(anns))
	for i, a := range anns {
		out[i] = rd.annotation(a)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// annotationForWrite loads an annotation of trace {id} the caller may
// change (its author or an admin).
func (s *Server) annotationForWrite(r *http.Request, p *principal, verb string) (*store.Trace, *store.Annotation, error) {
	t, err := s.traceForRead(r, p, r.PathValue("id"), true)
	if err != nil {
		return nil, nil, err
	}
	aid := r.PathValue("aid")
	if strings.Contains(aid, ".") {
		return nil, nil, apiErr(http.StatusConflict, CodeReadOnly, "annotation %s is served from a finding and is read-only", aid)
	}
	a, err := s.st.GetAnnotation(r.Context(), aid)
	if errors.Is(err, store.ErrNotFound) || (err == nil && a.TraceID != t.ID) {
		return nil, nil, notFound("Annotation not found")
	}
	if err != nil {
		return nil, nil, err
	}
	if a.UserID != p.User.ID && !p.isAdmin() {
		return nil, nil, apiErr(http.StatusUnauthorized, CodeUnauthenticated, "Unauthorized %s", verb)
	}
	return t, a, nil
}

// handleAnnotationUpdate serves PUT /api/v1/trace/{id}/annotation/{aid}.
func (s *Server) handleAnnotationUpdate(w http.ResponseWriter, r *http.Request, p *principal) error {
	var in struct {
		Content       json.RawMessage            `json:"content"`
		ExtraMetadata map[string]json.RawMessage `json:"extra_metadata"`
	}
	if err := s.decodeJSON(w, r, &in, false); err != nil {
		return err
	}
	t, a, err := s.annotationForWrite(r, p, "update")
	if err != nil {
		return err
	}
	var up store.AnnotationUpdate
	if !isBlank(in.Content) {
		c := contentText(in.Content)
		up.Content = &c
	}
	up.MetadataMerge = in.ExtraMetadata
	a, err = s.st.UpdateAnnotation(r.Context(), a.ID, up)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.newRenderer(r, t).annotation(a))
	return nil
}

// handleAnnotationDelete serves DELETE /api/v1/trace/{id}/annotation/{aid}.
func (s *Server) handleAnnotationDelete(w http.ResponseWriter, r *http.Request, p *principal) error {
	_, a, err := s.annotationForWrite(r, p, "delete")
	if err != nil {
		return err
	}
	if err := s.st.DeleteAnnotation(r.Context(), a.ID); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"message": "deleted"})
	return nil
}

// handleAnnotationsReplace serves POST /api/v1/trace/{id}/annotations/update.
func (s *Server) handleAnnotationsReplace(w http.ResponseWriter, r *http.Request, p *principal) error {
	var in struct {
		Source      *string           `json:"source"`
		Annotations []json.RawMessage `json:"annotations"`
	}
	if err := s.decodeJSON(w, r, &in, false); err != nil {
		return err
	}
	if in.Source == nil {
		return badRequest("source must be provided")
	}
	t, err := s.traceForRead(r, p, r.PathValue("id"), true)
	if err != nil {
		return err
	}
	if !s.canWrite(p, t.OwnerID) {
		return notFound("Trace not found")
	}
	anns, err := newAnnotations(in.Annotations, p, 0)
	if err != nil {
		return err
	}
	resolveAnnotations(decodeStored(t), anns)
	for _, a := range anns {
		a.TraceID, a.OwnerID = t.ID, t.OwnerID
	}
	del, ins, err := s.st.ReplaceAnnotations(r.Context(), t.ID, *in.Source, anns)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]int{"deleted": del, "inserted": ins})
	return nil
}

// Findings served as annotations (explorer-api §15): each finding on a
// trace is one read-only annotation per citation, source
// "guardrails-error" ("mcp-pin" for MCP tool pinning), content its title,
// id "<finding id>.<citation index>", extra_metadata the finding's
// context (the gateway's location, blocked, call_id, guardrail; a stored
// backtest's backtest:true) plus finding_id, status, severity, score,
// key, monitor and monitor_id. A finding without citations concerns the
// whole run and is served once, at <root>. They are never stored as
// annotations, so annotation writes cannot reach them: PUT and DELETE on
// such an id get 409 read_only (annotationForWrite), and
// …/annotations/update never replaces them.

// findingSource is the annotation source a finding is served under.
func findingSource(f *store.Finding) string {
	if f.MonitorID == "mcp-pin" {
		return "mcp-pin"
	}
	return "guardrails-error"
}

// findingCitations returns the addresses a finding is served at: its
// citations' addresses, or <root> when it has none.
func findingCitations(f *store.Finding) []string {
	var cites []struct {
		Address string `json:"address"`
	}
	_ = json.Unmarshal(f.Citations, &cites) // stored by the server: a JSON array
	out := make([]string, 0, len(cites))
	for _, c := range cites {
		out = append(out, c.Address)
	}
	if len(out) == 0 {
		out = append(out, "<root>")
	}
	return out
}

// findingAnnotations renders the findings of trace t (its messages
// loaded) as annotations, anchored and resolved like stored ones, in
// finding order.
func findingAnnotations(t *store.Trace, fs []*store.Finding) []*store.Annotation {
	if len(fs) == 0 {
		return nil
	}
	var out []*store.Annotation
	for _, f := range fs {
		md := map[string]any{}
		_ = json.Unmarshal(f.Context, &md) // an object or nil
		delete(md, "source")               // the monitor's "monitor" names where it arose, not the annotation source
		md["source"] = findingSource(f)
		md["finding_id"], md["status"], md["severity"], md["score"] = f.ID, f.Status, f.Severity, f.Score
		md["key"], md["monitor"], md["monitor_id"] = f.Key, f.Monitor, f.MonitorID
		extra, _ := marshalNoEscape(md) // decoded JSON plus strings: always encodable
		for i, addr := range findingCitations(f) {
			a := &store.Annotation{ID: f.ID + "." + strconv.Itoa(i), TraceID: t.ID, OwnerID: t.OwnerID, Content: f.Title,
				ExtraMetadata: extra, Source: findingSource(f), Resolved: true, TimeCreated: f.CreatedAt}
			if setAddress(a, addr) != nil {
				a.Address, a.Resolved = addr, false
			}
			out = append(out, a)
		}
	}
	resolveAnnotations(decodeStored(t), out)
	for _, a := range out {
		if a.AnchorIndex == nil {
			continue
		}
		if i := *a.AnchorIndex; i < len(t.Messages) {
			a.MessageID = t.Messages[i].ID
		} else {
			a.Address, a.Resolved = "messages."+strconv.Itoa(i)+a.Address, false
		}
		a.AnchorIndex = nil
	}
	return out
}

// withFindings returns the annotations anns of trace t (its messages
// loaded) with t's findings added as annotations, ordered by time created
// (stable), keeping only the given sources (nil = all).
func (s *Server) withFindings(ctx context.Context, t *store.Trace, anns []*store.Annotation, sources []string) ([]*store.Annotation, error) {
	if len(sources) > 0 && !slices.Contains(sources, "guardrails-error") && !slices.Contains(sources, "mcp-pin") {
		return anns, nil
	}
	fs, err := s.st.ListFindings(ctx, store.FindingFilter{RunID: t.ID})
	if err != nil {
		return nil, fmt.Errorf("findings of trace %s: %w", t.ID, err)
	}
	fas := findingAnnotations(t, fs)
	if len(fas) == 0 {
		return anns, nil
	}
	out := slices.Clone(anns)
	for _, a := range fas {
		if len(sources) == 0 || slices.Contains(sources, a.Source) {
			out = append(out, a)
		}
	}
	slices.SortStableFunc(out, func(a, b *store.Annotation) int { return a.TimeCreated.Compare(b.TimeCreated) })
	return out, nil
}

// addFindingCounts adds to counts (per trace id, per source, as
// CountAnnotationsBySource returns them) the annotations the findings of
// the traces ids are served as. counts may be nil; the result is not.
func (s *Server) addFindingCounts(ctx context.Context, counts map[string]map[string]int, ids []string) (map[string]map[string]int, error) {
	if counts == nil {
		counts = map[string]map[string]int{}
	}
	if len(ids) == 0 {
		return counts, nil
	}
	fs, err := s.st.ListFindings(ctx, store.FindingFilter{RunIDs: ids})
	if err != nil {
		return nil, fmt.Errorf("findings of %d traces: %w", len(ids), err)
	}
	for _, f := range fs {
		c := counts[f.RunID]
		if c == nil {
			c = map[string]int{}
			counts[f.RunID] = c
		}
		c[findingSource(f)] += len(findingCitations(f))
	}
	return counts, nil
}
