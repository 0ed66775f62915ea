package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"strconv"
	"strings"

	"github.com/vigilhq/vigil/store"
)

// This file holds JSONL upload and streaming export (explorer-api §8).

// lineError is a 400 that names the 1-based line of the upload.
func lineError(line int, format string, args ...any) *Error {
	e := badRequest(format, args...)
	e.Extra = map[string]any{"line": line}
	if line > 0 {
		e.Detail = fmt.Sprintf("line %d: %s", line, e.Detail)
	}
	return e
}

// handleUpload serves POST /api/v1/dataset/upload: multipart/form-data
// (file, name, is_public, mode) or a raw JSONL body with the same fields
// as query parameters.
func (s *Server) handleUpload(w http.ResponseWriter, r *http.Request, p *principal) error {
	q := r.URL.Query()
	name, isPublic, mode := q.Get("name"), q.Get("is_public"), q.Get("mode")
	var src io.Reader
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if ct == "multipart/form-data" {
		r.Body = http.MaxBytesReader(w, r.Body, s.maxUp)
		mr, err := r.MultipartReader()
		if err != nil {
			return badRequest("invalid multipart body: %v", err)
		}
		// Fields may come in any order. The file is streamed when the
		// fields came first (what clients do); a file part before the
		// other fields is spooled to a temporary file.
		for {
			part, err := mr.NextPart()
			if err == io.EOF {
				break
			}
			if err != nil {
				return toUploadErr(err)
			}
			switch part.FormName() {
			case "name", "is_public", "mode":
				b, err := io.ReadAll(io.LimitReader(part, 1024))
				if err != nil {
					return toUploadErr(err)
				}
				switch part.FormName() {
				case "name":
					name = string(b)
				case "is_public":
					isPublic = string(b)
				case "mode":
					mode = string(b)
				}
				continue
			case "file":
			default:
				continue
			}
			if name != "" {
				src = part // stream it
				break
			}
			f, err := os.CreateTemp("", "vigil-upload-*.jsonl")
			if err != nil {
				return fmt.Errorf("spool upload: %w", err)
			}
			defer os.Remove(f.Name())
			defer f.Close()
			if _, err := io.Copy(f, part); err != nil {
				return toUploadErr(err)
			}
			if _, err := f.Seek(0, io.SeekStart); err != nil {
				return fmt.Errorf("spool upload: %w", err)
			}
			src = f
		}
		if src == nil {
			return badRequest("multipart upload has no file field")
		}
	} else {
		body, err := s.body(w, r, s.maxUp)
		if err != nil {
			return err
		}
		src = body
	}
	if name == "" {
		return badRequest("name must be provided")
	}
	if !validDatasetName(name) {
		return errDatasetName()
	}
	public := false
	switch strings.ToLower(isPublic) {
	case "", "false":
	case "true":
		public = true
	default:
		return badRequest("is_public must be \"true\" or \"false\"")
	}
	switch mode {
	case "", "create", "append":
	default:
		return badRequest("mode must be create or append")
	}
	up, err := s.parseUpload(src, p, name)
	if err != nil {
		return err
	}
	now := s.now()
	pre, err := s.presign(up.traces, name)
	if err != nil {
		return err
	}
	req := store.PushRequest{
		OwnerID:            p.User.ID,
		DatasetName:        name,
		CreateIfMissing:    true,
		NewDatasetMetadata: createdOnMetadata(now),
		RequireEmpty:       mode != "append",
		MergeMetadata:      up.datasetMeta,
		ReplaceTakenIDs:    true,
		Traces:             up.traces,
		Tools:              toolList(up.tools),
		Seal:               s.sealFunc(name, pre),
		Close:              s.closeFunc(),
	}
	res, err := s.st.PushTraces(r.Context(), req)
	if errors.Is(err, store.ErrConflict) {
		if mode != "append" {
			return badRequest("Dataset with the same name already exists with traces, to add new traces use the push API")
		}
		return badRequest("an explicit index in the file is already used in dataset %s: %v", name, err)
	}
	if err != nil {
		return err
	}
	if public && !res.Dataset.IsPublic {
		if d, err := s.st.UpdateDataset(r.Context(), res.Dataset.ID, store.DatasetUpdate{IsPublic: &public}); err == nil {
			res.Dataset = d
		}
	}
	s.metrics.Add("vigil_ingest_traces_total", uint64(len(up.traces)), "upload")
	s.metrics.Add("vigil_ingest_messages_total", uint64(up.events), "upload")
	d, err := s.st.GetDataset(r.Context(), res.Dataset.ID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.datasetJSON(r, d, true))
	return nil
}

func toUploadErr(err error) error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return &Error{Status: http.StatusRequestEntityTooLarge, Code: CodeTooLarge, Detail: fmt.Sprintf("upload larger than %d bytes", mbe.Limit)}
	}
	if ae := (*Error)(nil); errors.As(err, &ae) {
		return ae
	}
	return badRequest("read upload: %v", err)
}

// parsedUpload is a validated JSONL file.
type parsedUpload struct {
	datasetMeta map[string]json.RawMessage
	traces      []store.NewTrace
	tools       map[string]*store.ToolUse
	events      int
}

// uploadLine is the annotated-object line form.
type uploadLine struct {
	Index         json.RawMessage   `json:"index"`
	ID            string            `json:"id"`
	Name          *string           `json:"name"`
	HierarchyPath []string          `json:"hierarchy_path"`
	Messages      json.RawMessage   `json:"messages"`
	Metadata      json.RawMessage   `json:"metadata"`
	Annotations   []json.RawMessage `json:"annotations"`
}

// parseUpload reads and validates the whole file (explorer-api §8.1,
// §8.2) before anything is written. Lines are read without a length cap.
func (s *Server) parseUpload(src io.Reader, p *principal, name string) (*parsedUpload, error) {
	br := bufio.NewReaderSize(src, 1<<20)
	up := &parsedUpload{tools: map[string]*store.ToolUse{}}
	const (
		formNone = iota
		formRaw
		formObject
	)
	form := formNone
	withIndex, sawTrace := false, false
	seen := map[int64]bool{}
	var warn warnings
	for lineNo := 1; ; lineNo++ {
		line, err := br.ReadBytes('\n')
		if err != nil && err != io.EOF {
			return nil, toUploadErr(err)
		}
		eof := err == io.EOF
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			if eof {
				break
			}
			continue
		}
		var nt store.NewTrace
		autoName := false // nt.Name is the "Run <index>" default
		var events json.RawMessage
		var anns []json.RawMessage
		switch line[0] {
		case '[':
			var elems []json.RawMessage
			if err := json.Unmarshal(line, &elems); err != nil {
				return nil, lineError(lineNo, "invalid JSON: %v", err)
			}
			if form == formObject {
				return nil, lineError(lineNo, "The file cannot contain both raw event lists and annotated event lists.")
			}
			form = formRaw
			if len(elems) > 0 {
				var first map[string]json.RawMessage
				if json.Unmarshal(elems[0], &first) == nil && first != nil {
					_, hasRole := first["role"]
					_, hasType := first["type"]
					_, hasTools := first["tools"]
					if md, ok := first["metadata"]; ok && !hasRole && !hasType && !hasTools {
						nt.Metadata = md
						elems = elems[1:]
					}
				}
			}
			events = append(append([]byte{'['}, joinRaw(elems)...), ']')
			if withIndex {
				return nil, lineError(lineNo, "The 'index' key is inconsistently present — found in some events but missing in others.")
			}
		case '{':
			var obj map[string]json.RawMessage
			if err := json.Unmarshal(line, &obj); err != nil {
				return nil, lineError(lineNo, "invalid JSON: %v", err)
			}
			if _, hasMsgs := obj["messages"]; !hasMsgs {
				if md, ok := obj["metadata"]; ok {
					if sawTrace {
						return nil, lineError(lineNo, "The metadata row must be the first row in the file.")
					}
					if up.datasetMeta != nil {
						return nil, lineError(lineNo, "The metadata row can appear at most once in the file.")
					}
					var m map[string]json.RawMessage
					if json.Unmarshal(md, &m) != nil || m == nil {
						return nil, lineError(lineNo, "metadata must be an object")
					}
					delete(m, "policies") // guardrail import comes with the guardrails API
					up.datasetMeta = m
					continue
				}
				return nil, lineError(lineNo, "a line must be a list of events, an object with messages, or the metadata row")
			}
			if form == formRaw {
				return nil, lineError(lineNo, "The file cannot contain both raw event lists and annotated event lists.")
			}
			form = formObject
			var ul uploadLine
			if err := json.Unmarshal(line, &ul); err != nil {
				return nil, lineError(lineNo, "invalid trace line: %v", err)
			}
			hasIndex := !isBlank(ul.Index)
			if sawTrace && hasIndex != withIndex {
				return nil, lineError(lineNo, "The 'index' key is inconsistently present — found in some events but missing in others.")
			}
			withIndex = hasIndex
			if hasIndex {
				idx, err := strconv.ParseInt(string(bytes.TrimSpace(ul.Index)), 10, 64)
				if err != nil || idx < 0 {
					return nil, lineError(lineNo, "Invalid index found: %s in the file. Index must be an integer.", ul.Index)
				}
				if seen[idx] {
					return nil, lineError(lineNo, "Duplicate index found: %d in the file.", idx)
				}
				seen[idx] = true
				nt.Index = &idx
				nt.Name, autoName = "Run "+strconv.FormatInt(idx, 10), true
			}
			nt.ID = ul.ID
			if !isBlank(ul.Metadata) {
				nt.Metadata = ul.Metadata
			}
			events = ul.Messages
			anns = ul.Annotations
			if ul.Name != nil {
				nt.Name, autoName = *ul.Name, false
			}
			if ul.HierarchyPath != nil {
				nt.HierarchyPath = ul.HierarchyPath
			}
		default:
			return nil, lineError(lineNo, "a line must be a JSON list or object")
		}
		sawTrace = true
		if !isJSONArray(events) {
			return nil, lineError(lineNo, "messages must be a list of events")
		}
		pe, err := prepareTrace(events, ingestOptions{traceIdx: len(up.traces)}, &warn)
		if err != nil {
			var ae *Error
			if errors.As(err, &ae) {
				return nil, lineError(lineNo, "%s", ae.Detail)
			}
			return nil, err
		}
		// Names and paths: the top-level values win over the metadata's;
		// an indexed trace without a name is "Run <index>".
		topName, topHP := nt.Name, nt.HierarchyPath
		nt.Name, nt.HierarchyPath = "", nil
		if len(nt.Metadata) > 0 {
			if err := applyTraceMetadata(&nt, nt.Metadata, len(up.traces)); err != nil {
				return nil, lineError(lineNo, "metadata must be an object")
			}
		}
		if topName != "" && (nt.Name == "" || !autoName) {
			nt.Name = topName
		}
		if topHP != nil {
			nt.HierarchyPath = topHP
		}
		for _, raw := range anns {
			a, err := newAnnotation(raw, p)
			if err != nil {
				return nil, lineError(lineNo, "Failed to parse annotation: %s", compactJSON(raw))
			}
			nt.Annotations = append(nt.Annotations, a)
		}
		resolveAnnotations(pe.decoded, nt.Annotations)
		nt.Messages = pe.messages
		nt.Status = store.RunCompleted
		nt.Session = s.newSession(p.User.ID, &nt, name)
		if nt.ID == "" {
			nt.ID = store.NewID()
		}
		mergeTools(up.tools, pe.tools)
		up.events += len(pe.messages)
		up.traces = append(up.traces, nt)
		if eof {
			break
		}
	}
	return up, nil
}

// exportOptions say what an export line holds.
type exportOptions struct {
	includeIDs bool
	messageIDs bool
}

// exportLine renders one trace as an annotated-object line with the key
// order of explorer-api §8.1, ending in "\n". t carries messages and
// annotations.
func exportLine(t *store.Trace, opt exportOptions) []byte {
	var b bytes.Buffer
	b.WriteString(`{"index":`)
	b.WriteString(strconv.FormatInt(t.Index, 10))
	if opt.includeIDs {
		b.WriteString(`,"id":`)
		writeJSONString(&b, t.ID)
	}
	if t.Name != "" {
		b.WriteString(`,"name":`)
		writeJSONString(&b, t.Name)
	}
	if len(t.HierarchyPath) > 0 {
		b.WriteString(`,"hierarchy_path":`)
		hp, _ := json.Marshal(t.HierarchyPath)
		b.Write(hp)
	}
	b.WriteString(`,"messages":[`)
	index := make(map[string]int, len(t.Messages))
	for i, m := range t.Messages {
		index[m.ID] = i
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(renderEvent(m.Data, int(^uint(0)>>1), opt.messageIDs))
	}
	b.WriteString(`],"metadata":`)
	writeCompact(&b, objectOrEmpty(t.Metadata))
	b.WriteString(`,"annotations":[`)
	for i, a := range t.Annotations {
		if i > 0 {
			b.WriteByte(',')
		}
		addr := a.Address
		if a.MessageID != "" {
			if k, ok := index[a.MessageID]; ok {
				addr = "messages." + strconv.Itoa(k) + a.Address
			} else {
				addr = "messages.@" + a.MessageID + a.Address
			}
		}
		b.WriteString(`{"content":`)
		writeJSONString(&b, a.Content)
		b.WriteString(`,"address":`)
		writeJSONString(&b, addr)
		if len(a.ExtraMetadata) > 0 && string(a.ExtraMetadata) != "null" {
			b.WriteString(`,"extra_metadata":`)
			writeCompact(&b, a.ExtraMetadata)
		}
		b.WriteByte('}')
	}
	b.WriteString("]}\n")
	return b.Bytes()
}

// writeCompact writes JSON text without insignificant whitespace.
func writeCompact(b *bytes.Buffer, raw []byte) {
	if err := json.Compact(b, raw); err != nil {
		b.Write(raw)
	}
}

func writeJSONString(b *bytes.Buffer, s string) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	b.Truncate(b.Len() - 1) // drop the encoder's newline
}

// handleExport serves GET /api/v1/dataset/byid/{id}/download[/annotated]:
// the dataset line, then one line per trace in index order, streamed
// page by page so memory stays bounded whatever the dataset size.
func (s *Server) handleExport(w http.ResponseWriter, r *http.Request, p *principal) error {
	d, err := s.datasetFromPath(r, p)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	opt := exportOptions{includeIDs: q.Get("include_trace_ids") == "true", messageIDs: q.Get("message_ids") != "false"}
	onlyAnnotated := q.Get("only_annotated") == "true" || strings.HasSuffix(r.URL.Path, "/annotated")
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", d.Name+".jsonl"))
	bw := bufio.NewWriterSize(w, 64<<10)
	bw.WriteString(`{"metadata":`)
	bw.Write(objectOrEmpty(d.Metadata))
	bw.WriteString("}\n")
	rc := http.NewResponseController(w)
	n := 0
	for t, err := range s.st.IterTraces(r.Context(), d.ID, store.IterOptions{PageSize: exportPageSize, OnlyAnnotated: onlyAnnotated}) {
		if err != nil {
			// The status line is out; the client sees a truncated body.
			_ = bw.Flush()
			return fmt.Errorf("export dataset %s: %w", d.ID, err)
		}
		if _, err := bw.Write(exportLine(t, opt)); err != nil {
			return fmt.Errorf("export dataset %s: %w", d.ID, err)
		}
		if n++; n%100 == 0 {
			if err := bw.Flush(); err != nil {
				return fmt.Errorf("export dataset %s: %w", d.ID, err)
			}
			_ = rc.Flush()
		}
	}
	return bw.Flush()
}

// exportPageSize is how many traces an export reads per query: small, so
// the memory an export holds stays low even with large traces.
const exportPageSize = 25
