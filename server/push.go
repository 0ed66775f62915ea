package server

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/vigilhq/vigil/ingest"
	"github.com/vigilhq/vigil/store"
)

// handlePush serves POST /api/v1/push/trace (explorer-api §3.1).
func (s *Server) handlePush(w http.ResponseWriter, r *http.Request, p *principal) error {
	body, err := s.readJSONBody(w, r)
	if err != nil {
		return err
	}
	req, err := parsePush(body)
	if err != nil {
		return err
	}
	now := s.now()
	var warn warnings
	traces := make([]store.NewTrace, len(req.messages))
	tools := map[string]*store.ToolUse{}
	nEvents := 0
	// A large body is decoded twice: here to validate it and collect its
	// tools, warnings and annotations, keeping no event, then trace by
	// trace inside the store's transaction, which writes each trace's
	// rows as it goes, reading the traces back from a temporary file.
	// Neither its decoded events and their receipts nor, while the store
	// writes, its body sit in memory (issue 17).
	lazy := len(body) >= lazyPushBytes
	var gc gcPacer
	msgIDs := make([][]string, len(req.messages))
	// The large path keeps each trace's ids as one comma-joined string
	// (ids never hold a comma): a string per id costs more than the id.
	joinedIDs := make([]string, len(req.messages))
	var blobs []*store.Blob
	for i, raw := range req.messages {
		id := store.NewID()
		if lazy {
			gc.add(len(raw))
		}
		pe, err := ingest.Prepare(raw, ingest.TraceOptions{TraceIdx: i, TraceID: id}, &warn)
		if err != nil {
			return err
		}
		blobs = append(blobs, pe.Images.Blobs...)
		ingest.MergeTools(tools, pe.Tools)
		nt := store.NewTrace{ID: id, TimeCreated: now, KeyID: p.Key.ID}
		if !lazy {
			nt.Messages, msgIDs[i] = pe.Messages, messageIDs(pe.Messages)
		}
		if i < len(req.metadata) {
			if err := applyTraceMetadata(&nt, req.metadata[i], i); err != nil {
				return err
			}
		}
		if i < len(req.annotations) {
			anns, err := newAnnotations(req.annotations[i], p, i)
			if err != nil {
				return err
			}
			resolveAnnotations(pe.Decoded, anns)
			nt.Annotations = anns
		}
		nEvents += len(pe.Messages)
		traces[i] = nt
	}
	sreq := ingest.PushRequest{PushRequest: store.PushRequest{
		OwnerID:            p.User.ID,
		DatasetName:        req.dataset,
		CreateIfMissing:    true,
		NewDatasetMetadata: createdOnMetadata(now),
		Traces:             traces,
		Tools:              ingest.ToolList(tools),
	}, Blobs: blobs}
	if lazy {
		sp, err := spoolTraces(req.messages)
		if err != nil {
			return err
		}
		defer sp.close()
		req.messages, req.metadata, req.annotations = nil, nil, nil
		sreq.Prepare = func(i int, nt *store.NewTrace) error {
			raw, err := sp.trace(i)
			if err != nil {
				return err
			}
			// Same input, same outcome as the first pass: its warnings
			// are already in warn.
			gc.add(len(raw))
			pe, err := ingest.Prepare(raw, ingest.TraceOptions{TraceIdx: i, TraceID: nt.ID}, new(warnings))
			if err != nil {
				return err
			}
			nt.Messages, joinedIDs[i] = pe.Messages, joinIDs(pe.Messages)
			return nil
		}
	} else {
		// The body is no longer needed: let it be collected while the
		// store writes (req.messages, metadata and annotations are
		// slices of it).
		req.messages, req.metadata, req.annotations = nil, nil, nil
	}
	res, err := s.ing.Push(r.Context(), sreq)
	if err != nil {
		return err
	}
	s.metrics.Add("vigil_ingest_traces_total", uint64(len(traces)), "push")
	s.metrics.Add("vigil_ingest_messages_total", uint64(nEvents), "push")
	out := pushResponse{ID: make([]string, len(res.Traces)), Username: p.User.Username, MessageIDs: msgIDs, Warnings: warn}
	for i, t := range res.Traces {
		out.ID[i] = t.ID
	}
	if req.dataset != "" {
		out.Dataset = req.dataset
	}
	if !lazy {
		writeJSON(w, http.StatusOK, out)
		return nil
	}
	// A large push's message ids are megabytes of JSON: write them as they
	// are encoded, after collecting what the transaction left behind.
	runtime.GC()
	return writePushResponse(w, &out, func(i int) []string {
		if joinedIDs[i] == "" {
			return []string{}
		}
		return strings.Split(joinedIDs[i], ",")
	})
}

// traceSpool holds a large push's traces (one JSON array each) in a
// temporary file while the store writes them.
type traceSpool struct {
	f   *os.File
	off []int64 // trace i is f[off[i]:off[i+1]]
}

func spoolTraces(traces []json.RawMessage) (*traceSpool, error) {
	f, err := os.CreateTemp("", "vigil-push-*")
	if err != nil {
		return nil, fmt.Errorf("spool push: %w", err)
	}
	sp := &traceSpool{f: f, off: make([]int64, 1, len(traces)+1)}
	bw := bufio.NewWriterSize(f, 256<<10)
	for _, raw := range traces {
		bw.Write(raw)
		sp.off = append(sp.off, sp.off[len(sp.off)-1]+int64(len(raw)))
	}
	if err := bw.Flush(); err != nil {
		sp.close()
		return nil, fmt.Errorf("spool push: %w", err)
	}
	return sp, nil
}

func (sp *traceSpool) trace(i int) ([]byte, error) {
	b := make([]byte, sp.off[i+1]-sp.off[i])
	if _, err := sp.f.ReadAt(b, sp.off[i]); err != nil {
		return nil, fmt.Errorf("read spooled trace %d: %w", i, err)
	}
	return b, nil
}

func (sp *traceSpool) close() {
	sp.f.Close()
	os.Remove(sp.f.Name())
}

func joinIDs(msgs []store.Message) string {
	var b strings.Builder
	for i, m := range msgs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(m.ID)
	}
	return b.String()
}

// writePushResponse writes out as writeJSON would, one message-id list at
// a time, taking trace i's ids from ids(i) (out.MessageIDs is not read).
func writePushResponse(w http.ResponseWriter, out *pushResponse, ids func(i int) []string) error {
	jw := newJSONWriter(w)
	jw.raw(`{"id":`)
	jw.value(out.ID)
	if out.Dataset != "" {
		jw.raw(`,"dataset":`)
		jw.value(out.Dataset)
	}
	jw.raw(`,"username":`)
	jw.value(out.Username)
	jw.raw(`,"message_ids":[`)
	for i := range out.ID {
		if i > 0 {
			jw.raw(",")
		}
		jw.value(ids(i))
	}
	jw.raw("]")
	if len(out.Warnings) > 0 {
		jw.raw(`,"warnings":`)
		jw.value(out.Warnings)
	}
	jw.raw("}\n")
	return jw.flush()
}

// lazyPushBytes is the body size from which a push is decoded a second
// time inside the store's transaction instead of held decoded (handlePush);
// a variable so tests can send small pushes down that path.
var lazyPushBytes = 4 << 20

// gcPacer collects garbage after every gcPaceBytes of events a large
// push decodes. Decoding allocates many times the events' size in short-
// lived values; left to the collector's pace (vigil serve runs with
// GOGC=400) they would pile up to several times the live heap, which a
// large push makes large: a 50 MB push peaked at 1 GB resident.
type gcPacer struct{ n int }

// gcPaceBytes is the event bytes decoded between two collections.
const gcPaceBytes = 256 << 10

func (g *gcPacer) add(n int) {
	if g.n += n; g.n >= gcPaceBytes {
		g.n = 0
		runtime.GC()
	}
}

func messageIDs(msgs []store.Message) []string {
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		ids[i] = m.ID
	}
	return ids
}

type pushResponse struct {
	ID         []string   `json:"id"`
	Dataset    string     `json:"dataset,omitempty"`
	Username   string     `json:"username"`
	MessageIDs [][]string `json:"message_ids"`
	Warnings   warnings   `json:"warnings,omitempty"`
}

// pushRequest is a validated push body.
type pushRequest struct {
	messages    []json.RawMessage   // one JSON array per trace
	annotations [][]json.RawMessage // nil or one list per trace
	metadata    []json.RawMessage   // nil or one object (or null) per trace
	dataset     string
}

// parsePush validates a push body with Invariant's texts
// (explorer-api §3.1).
func parsePush(body []byte) (*pushRequest, error) {
	// One validating pass and one split, where encoding/json makes two
	// passes and copies each member; anything unusual takes its path, so
	// errors read the same.
	if err := checkUTF8(body); err != nil { // metadata and annotations too
		return nil, err
	}
	top, ok := map[string]json.RawMessage(nil), false
	if json.Valid(body) {
		top, ok = splitObject(body)
	}
	if !ok {
		if err := unmarshalBody(body, &top); err != nil {
			return nil, err
		}
	}
	if top == nil {
		return nil, badRequest("request body must be a JSON object")
	}
	req := &pushRequest{}
	if isBlank(top["messages"]) || !splitArray(top["messages"], &req.messages) {
		return nil, badRequest("messages must be a list of traces")
	}
	if len(req.messages) == 0 {
		return nil, badRequest("messages must not be empty")
	}
	for i, m := range req.messages {
		if !isJSONArray(m) {
			return nil, ingest.NotObjectsError(i)
		}
	}
	if raw := top["annotations"]; !isBlank(raw) {
		var lists []json.RawMessage
		if json.Unmarshal(raw, &lists) != nil {
			return nil, badRequest("annotations must be a list of annotations")
		}
		if len(lists) != len(req.messages) {
			return nil, badRequest("annotations must be the same length as messages")
		}
		req.annotations = make([][]json.RawMessage, len(lists))
		for i, l := range lists {
			if isBlank(l) {
				continue
			}
			if json.Unmarshal(l, &req.annotations[i]) != nil {
				return nil, badRequest("annotations must be a list of annotations")
			}
		}
	}
	if raw := top["metadata"]; !isBlank(raw) {
		if json.Unmarshal(raw, &req.metadata) != nil {
			return nil, badRequest("metadata must be a list of metadata")
		}
		if len(req.metadata) != len(req.messages) {
			return nil, badRequest("metadata must be the same length as messages")
		}
	}
	if raw := top["dataset"]; !isBlank(raw) {
		if json.Unmarshal(raw, &req.dataset) != nil {
			return nil, badRequest("dataset name must be a string")
		}
		if !validDatasetName(req.dataset) {
			return nil, errDatasetName()
		}
	}
	return req, nil
}

// splitArray sets *out to the elements of raw, a JSON array, as
// sub-slices; it reports false when raw is not an array. raw must be valid
// JSON (a member of a body json.Valid accepted): this is one pass where
// json.Unmarshal into []json.RawMessage makes two and copies.
func splitArray(raw []byte, out *[]json.RawMessage) bool {
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '[' {
		return false
	}
	i = skipSpace(raw, i+1)
	elems := []json.RawMessage{}
	for i < len(raw) && raw[i] != ']' {
		var v json.RawMessage
		v, i = scanValue(raw, i)
		elems = append(elems, v)
		if i < len(raw) && raw[i] == ',' {
			i = skipSpace(raw, i+1)
		}
	}
	*out = elems
	return true
}

// splitObject returns the members of body, a JSON object, as sub-slices,
// as json.Unmarshal into map[string]json.RawMessage would (the last of
// duplicate names wins). body must be valid JSON. It reports false when
// body is not an object or a name has an escape (the caller then decodes
// with encoding/json).
func splitObject(body []byte) (map[string]json.RawMessage, bool) {
	i := skipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		return nil, false
	}
	top := map[string]json.RawMessage{}
	i = skipSpace(body, i+1)
	for i < len(body) && body[i] == '"' {
		start := i + 1
		for i = start; i < len(body) && body[i] != '"'; i++ {
			if body[i] == '\\' {
				return nil, false
			}
		}
		name := string(body[start:i])
		i = skipSpace(body, i+1)
		if i >= len(body) || body[i] != ':' {
			return nil, false
		}
		var v json.RawMessage
		v, i = scanValue(body, skipSpace(body, i+1))
		top[name] = v
		if i < len(body) && body[i] == ',' {
			i = skipSpace(body, i+1)
		}
	}
	return top, true
}

// scanValue returns the valid JSON value that starts at raw[i] and the
// index of what follows it (a ',', ']' or '}' of the enclosing value, or
// len(raw)).
func scanValue(raw []byte, i int) (json.RawMessage, int) {
	start, depth := i, 0
scan:
	for ; i < len(raw); i++ {
		switch raw[i] {
		case '"':
			for i++; i < len(raw) && raw[i] != '"'; i++ {
				if raw[i] == '\\' {
					i++
				}
			}
		case '[', '{':
			depth++
		case ']', '}':
			if depth == 0 {
				break scan
			}
			depth--
		case ',':
			if depth == 0 {
				break scan
			}
		}
	}
	end := i
	for end > start && isSpace(raw[end-1]) {
		end--
	}
	return json.RawMessage(raw[start:end:end]), i
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

func isJSONArray(b []byte) bool {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		case '[':
			return true
		}
		return false
	}
	return false
}

// applyTraceMetadata sets a new trace's metadata, name and hierarchy path
// from one push metadata entry (null or an object). Invariant's "uploader"
// key is dropped.
func applyTraceMetadata(nt *store.NewTrace, raw json.RawMessage, i int) error {
	if isBlank(raw) {
		return nil
	}
	var md map[string]json.RawMessage
	if json.Unmarshal(raw, &md) != nil || md == nil {
		return badRequest("metadata must be a list of metadata (entry %d is not an object)", i)
	}
	delete(md, "uploader")
	if v, ok := md["name"]; ok && !isBlank(v) {
		var name string
		if json.Unmarshal(v, &name) == nil {
			nt.Name = name
		}
	}
	if v, ok := md["hierarchy_path"]; ok && !isBlank(v) {
		var hp []string
		if json.Unmarshal(v, &hp) == nil {
			nt.HierarchyPath = hp
		}
	}
	// [V] A string "session_key" is also the trace's session key (what the
	// standalone gateway and the MCP wrapper push for an agent session).
	if v, ok := md["session_key"]; ok && !isBlank(v) {
		var key string
		if json.Unmarshal(v, &key) == nil && key != "" && len(key) <= maxSessionKey {
			nt.SessionKey = key
		}
	}
	b, err := json.Marshal(md)
	if err != nil {
		return err
	}
	nt.Metadata = b
	return nil
}

func createdOnMetadata(now time.Time) json.RawMessage {
	b, _ := json.Marshal(map[string]string{"created_on": now.UTC().Format("2006-01-02 15:04:05")})
	return b
}

// handleAppend serves POST /api/v1/trace/{id}/messages (explorer-api §3.2).
func (s *Server) handleAppend(w http.ResponseWriter, r *http.Request, p *principal) error {
	body, err := s.readJSONBody(w, r)
	if err != nil {
		return err
	}
	var top map[string]json.RawMessage
	if err := unmarshalBody(body, &top); err != nil {
		return err
	}
	var events []json.RawMessage
	if top == nil || isBlank(top["messages"]) || json.Unmarshal(top["messages"], &events) != nil || len(events) == 0 {
		return badRequest("Invalid messages format - expected a non-empty list of dictionaries")
	}
	for _, e := range events {
		var o map[string]json.RawMessage
		if json.Unmarshal(e, &o) != nil || o == nil {
			return badRequest("Invalid messages format - expected a non-empty list of dictionaries")
		}
	}
	var annRaw []json.RawMessage
	if raw := top["annotations"]; !isBlank(raw) {
		if json.Unmarshal(raw, &annRaw) != nil {
			return badRequest("Invalid annotations format - expected a list of dictionaries or an empty list")
		}
		for _, a := range annRaw {
			var o map[string]json.RawMessage
			if json.Unmarshal(a, &o) != nil || o == nil {
				return badRequest("Invalid annotations format - expected a list of dictionaries or an empty list")
			}
		}
	}
	id := r.PathValue("id")
	t, err := s.st.GetTrace(r.Context(), id, true)
	if errors.Is(err, store.ErrNotFound) || (err == nil && !s.canWrite(p, t.OwnerID)) {
		return notFound("Trace not found")
	}
	if err != nil {
		return err
	}
	now := s.now()
	var warn warnings
	// New messages are stably sorted by timestamp among themselves
	// (events without one get the request time) and appended after the
	// existing ones.
	raw := append(append([]byte{'['}, joinRaw(events)...), ']')
	pe, err := ingest.PrepareAppend(t, raw, now, "messages", &warn)
	if err != nil {
		return err
	}
	anns, err := newAnnotations(annRaw, p, 0)
	if err != nil {
		return err
	}
	res, err := s.ing.Append(r.Context(), ingest.AppendRequest{Trace: t, Events: pe, Annotations: anns, Time: now})
	if err != nil {
		return err
	}
	s.metrics.Add("vigil_ingest_traces_total", 1, "append")
	s.metrics.Add("vigil_ingest_messages_total", uint64(len(res.Messages)), "append")
	ids := make([]string, len(res.Messages))
	for i, m := range res.Messages {
		ids[i] = m.ID
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "message_ids": ids, "warnings": nonNil(warn)})
	return nil
}

func nonNil(w warnings) warnings {
	if w == nil {
		return warnings{}
	}
	return w
}

func joinRaw(list []json.RawMessage) []byte {
	var b []byte
	for i, x := range list {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, x...)
	}
	return b
}
