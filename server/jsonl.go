package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"strconv"
	"strings"

	"github.com/vigilhq/vigil/ingest"
	"github.com/vigilhq/vigil/store"
	"github.com/vigilhq/vigil/trace"
)

// This file holds JSONL upload and streaming export (explorer-api §8).
//
// Upload runs in two passes so that memory stays bounded whatever the file
// size (explorer-api §8.2):
//   - Pass 1 (spoolUpload) streams the body through trace.Reader (the one
//     JSONL parser), validates every line, converts it into the
//     store.NewTrace it will become and spools that, one JSON line per
//     trace, to a temporary file. An invalid line stops the upload with a
//     400 naming it; nothing has been written.
//   - Pass 2 (pushUpload) reads the spool back and pushes it in batches of
//     about uploadBatchBytes of events. A file that fits in one batch is one
//     PushTraces transaction. store.Store has no streaming push, so a larger
//     file is several transactions; when a later one fails, the earlier ones
//     are undone (rollbackUpload) so the upload still leaves no partial
//     dataset behind.

// Upload batch limits: a batch is pushed once it holds uploadBatchBytes of
// event JSON or uploadBatchTraces traces. The heap an upload needs is a
// small multiple of this (events, receipts, the store's copy), not of the
// file size. Variables so tests can make small files span batches.
var (
	uploadBatchBytes  = 4 << 20
	uploadBatchTraces = 1000
)

// lineError is a 400 that names the 1-based line of the upload.
func lineError(line int, format string, args ...any) *Error {
	e := badRequest(format, args...)
	e.Extra = map[string]any{"line": line}
	if line > 0 {
		e.Detail = fmt.Sprintf("line %d: %s", line, e.Detail)
	}
	return e
}

// uploadFields are the upload's form fields or query parameters.
type uploadFields struct {
	name, isPublic, mode string
}

// check validates the fields (explorer-api §8.2).
func (f uploadFields) check() error {
	if f.name == "" {
		return badRequest("name must be provided")
	}
	if !validDatasetName(f.name) {
		return errDatasetName()
	}
	switch strings.ToLower(f.isPublic) {
	case "", "false", "true":
	default:
		return badRequest("is_public must be \"true\" or \"false\"")
	}
	switch f.mode {
	case "", "create", "append":
	default:
		return badRequest("mode must be create or append")
	}
	return nil
}

// handleUpload serves POST /api/v1/dataset/upload: multipart/form-data
// (file, name, is_public, mode) or a raw JSONL body with the same fields
// as query parameters.
func (s *Server) handleUpload(w http.ResponseWriter, r *http.Request, p *principal) error {
	q := r.URL.Query()
	f := uploadFields{name: q.Get("name"), isPublic: q.Get("is_public"), mode: q.Get("mode")}
	var sp *uploadSpool
	defer func() {
		if sp != nil {
			sp.close()
		}
	}()
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if ct == "multipart/form-data" {
		r.Body = http.MaxBytesReader(w, r.Body, s.maxUp)
		mr, err := r.MultipartReader()
		if err != nil {
			return badRequest("invalid multipart body: %v", err)
		}
		// Fields may come in any order; the file part is validated and
		// spooled as it streams by, wherever it is.
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
					f.name = string(b)
				case "is_public":
					f.isPublic = string(b)
				case "mode":
					f.mode = string(b)
				}
			case "file":
				if sp != nil {
					return badRequest("multipart upload has more than one file field")
				}
				if f.name != "" { // the fields came first (what clients do): fail early
					if err := f.check(); err != nil {
						return err
					}
				}
				if sp, err = s.spoolUpload(part, p); err != nil {
					return err
				}
			}
		}
		if sp == nil {
			return badRequest("multipart upload has no file field")
		}
	} else {
		body, err := s.body(w, r, s.maxUp)
		if err != nil {
			return err
		}
		if err := f.check(); err != nil {
			return err
		}
		if sp, err = s.spoolUpload(body, p); err != nil {
			return err
		}
	}
	if err := f.check(); err != nil {
		return err
	}
	datasetID, err := s.pushUpload(r.Context(), sp, p, f)
	if err != nil {
		return err
	}
	if strings.EqualFold(f.isPublic, "true") {
		public := true
		if _, err := s.st.UpdateDataset(r.Context(), datasetID, store.DatasetUpdate{IsPublic: &public}); err != nil {
			return err
		}
	}
	s.metrics.Add("vigil_ingest_traces_total", uint64(sp.traces), "upload")
	s.metrics.Add("vigil_ingest_messages_total", uint64(sp.events), "upload")
	d, err := s.st.GetDataset(r.Context(), datasetID)
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
	if errors.Is(err, errBodyIdle) {
		return readBodyError(err)
	}
	return badRequest("read upload: %v", err)
}

// uploadReadError maps a trace.Reader error to the upload's 400 naming the
// line, keeping Invariant's texts (without trace's "invalid dataset: "
// prefix), or to toUploadErr for a read error.
func uploadReadError(err error) error {
	var le *trace.LineError
	if !errors.As(err, &le) {
		return toUploadErr(err)
	}
	var se *trace.SyntaxError
	if errors.As(le.Err, &se) {
		return lineError(le.Line, "invalid JSON: %v", se)
	}
	return lineError(le.Line, "%s", strings.TrimPrefix(le.Err.Error(), trace.ErrDataset.Error()+": "))
}

// uploadSpool is a validated upload: its traces, converted, in a
// temporary file, one spooledTrace per line.
type uploadSpool struct {
	f           *os.File
	datasetMeta map[string]json.RawMessage // the dataset line's metadata, or nil
	traces      int
	events      int
}

func (sp *uploadSpool) close() {
	sp.f.Close()
	os.Remove(sp.f.Name())
}

// spooledTrace is one line of an upload spool.
type spooledTrace struct {
	Trace store.NewTrace            `json:"trace"`
	Tools map[string]*store.ToolUse `json:"tools,omitempty"`
	// Blobs are the trace's images (images.go), stored in pass 2.
	Blobs []*store.Blob `json:"blobs,omitempty"`
}

// spoolUpload is pass 1 of an upload: it reads src to the end, validates
// every line (explorer-api §8.1, §8.2) and spools the converted traces.
// Memory holds one line at a time (plus the indices seen, for duplicate
// checks). Outcomes: the spool, positioned at its start; a 400 naming the
// line; a 413 when src exceeds the upload limit.
func (s *Server) spoolUpload(src io.Reader, p *principal) (_ *uploadSpool, err error) {
	f, err := os.CreateTemp("", "vigil-upload-*.jsonl")
	if err != nil {
		return nil, fmt.Errorf("spool upload: %w", err)
	}
	sp := &uploadSpool{f: f}
	defer func() {
		if err != nil {
			sp.close()
		}
	}()
	bw := bufio.NewWriterSize(f, 256<<10)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	rd := trace.NewReader(src)
	// A line is one trace: the push body limit (64 MiB by default) bounds
	// it as it bounds a push, and with it the memory a line needs.
	rd.MaxLineBytes = int(min(s.maxJSON, s.maxUp))
	for {
		e, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil && (e == nil || !errors.Is(err, trace.ErrInvalidTrace)) {
			return nil, uploadReadError(err)
		}
		// Problems inside a trace (err with an entry) are ingest.Prepare's
		// to report, as on push: most are warnings.
		st, err := uploadTrace(e, p, sp.traces)
		if err != nil {
			return nil, err
		}
		if err := enc.Encode(st); err != nil {
			return nil, fmt.Errorf("spool upload: %w", err)
		}
		sp.traces++
		sp.events += len(st.Trace.Messages)
	}
	if md := rd.Metadata(); md != nil {
		if err := json.Unmarshal(trace.Marshal(md), &sp.datasetMeta); err != nil {
			return nil, fmt.Errorf("upload dataset metadata: %w", err)
		}
		delete(sp.datasetMeta, "policies") // guardrail import comes with the guardrails API
	}
	if err := bw.Flush(); err != nil {
		return nil, fmt.Errorf("spool upload: %w", err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("spool upload: %w", err)
	}
	return sp, nil
}

// uploadTrace converts one JSONL entry into the trace it stores; i is its
// position among the file's traces. The session is set in pass 2, which
// knows the dataset name.
func uploadTrace(e *trace.Entry, p *principal, i int) (*spooledTrace, error) {
	t := e.Trace
	var nt store.NewTrace
	autoName := false // nt.Name is the "Run <index>" default
	if e.Form == trace.EntryAnnotated {
		if md, ok := t.Envelope.Get("metadata"); ok && md != nil {
			if _, isObj := md.(*trace.Object); !isObj {
				return nil, lineError(e.Line, "metadata must be an object")
			}
		}
		if e.HasIndex {
			if e.Index < 0 {
				return nil, lineError(e.Line, "Invalid index found: %d in the file. Index must be an integer.", e.Index)
			}
			idx := e.Index
			nt.Index = &idx
			nt.Name, autoName = "Run "+strconv.FormatInt(idx, 10), true
		}
		nt.ID = e.ID
		if e.Name != "" {
			nt.Name, autoName = e.Name, false
		}
	}
	if nt.ID == "" {
		nt.ID = store.NewID()
	}
	var warn warnings // the upload response is the dataset: warnings are dropped
	pe, err := ingest.Prepare(trace.Marshal(t.Values()), ingest.TraceOptions{TraceIdx: i, TraceID: nt.ID, Path: "messages"}, &warn)
	if err != nil {
		var ie *ingest.Error
		if errors.As(err, &ie) {
			return nil, lineError(e.Line, "%s", ie.Detail)
		}
		return nil, err
	}
	// Names and paths: the top-level values win over the metadata's;
	// an indexed trace without a name is "Run <index>".
	topName := nt.Name
	nt.Name = ""
	if t.Metadata != nil {
		if err := applyTraceMetadata(&nt, trace.Marshal(t.Metadata), i); err != nil {
			return nil, lineError(e.Line, "metadata must be an object")
		}
	}
	if topName != "" && (nt.Name == "" || !autoName) {
		nt.Name = topName
	}
	if e.HierarchyPath != nil {
		nt.HierarchyPath = e.HierarchyPath
	}
	for _, a := range e.Annotations {
		raw := trace.Marshal(a.Raw)
		an, err := newAnnotation(raw, p)
		if err != nil {
			return nil, lineError(e.Line, "Failed to parse annotation: %s", compactJSON(raw))
		}
		nt.Annotations = append(nt.Annotations, an)
	}
	resolveAnnotations(pe.Decoded, nt.Annotations)
	nt.Messages = pe.Messages
	nt.Status = store.RunCompleted
	return &spooledTrace{Trace: nt, Tools: pe.Tools, Blobs: pe.Images.Blobs}, nil
}

// uploadPush is the state of pass 2 of an upload.
type uploadPush struct {
	s       *Server
	p       *principal
	f       uploadFields
	batches int
	// datasetID and created are known after the first batch.
	datasetID string
	created   bool
	// Set before the first batch when more follow, for rollbackUpload:
	// the dataset metadata before the merge (nil: nothing to restore) and
	// the ids of the traces pushed so far (nil when the upload created
	// the dataset, which is then deleted whole).
	oldMeta json.RawMessage
	ids     *os.File
	idw     *bufio.Writer
}

// pushUpload is pass 2 of an upload: it pushes the spooled traces in
// batches and returns the dataset id. Outcomes: the 400s of
// explorer-api §8.2 (non-empty dataset in create mode, colliding explicit
// index), a store or seal error. On any error nothing of the upload stays
// in the store (see rollbackUpload for what cannot be undone).
func (s *Server) pushUpload(ctx context.Context, sp *uploadSpool, p *principal, f uploadFields) (_ string, err error) {
	if sp.traces == 0 {
		return s.emptyUpload(ctx, sp, p, f)
	}
	u := &uploadPush{s: s, p: p, f: f}
	defer func() {
		if u.ids != nil {
			u.ids.Close()
			os.Remove(u.ids.Name())
		}
	}()
	defer func() {
		if err != nil && u.batches > 0 {
			u.rollback(ctx)
		}
	}()
	dec := json.NewDecoder(bufio.NewReaderSize(sp.f, 256<<10))
	var (
		batch []store.NewTrace
		tools = map[string]*store.ToolUse{}
		size  int
	)
	for n := 0; ; n++ {
		var st spooledTrace
		err := dec.Decode(&st)
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", fmt.Errorf("read upload spool: %w", err)
		}
		if size >= uploadBatchBytes || len(batch) >= uploadBatchTraces {
			if err := u.push(ctx, sp, batch, tools, false); err != nil {
				return "", err
			}
			batch, tools, size = batch[:0], map[string]*store.ToolUse{}, 0
			clear(batch[:cap(batch)]) // let the pushed traces be collected
		}
		if err := s.ing.PutBlobs(ctx, p.User.ID, st.Blobs); err != nil {
			return "", err
		}
		ingest.MergeTools(tools, st.Tools)
		for _, m := range st.Trace.Messages {
			size += len(m.Data)
		}
		batch = append(batch, st.Trace)
	}
	if err := u.push(ctx, sp, batch, tools, true); err != nil {
		return "", err
	}
	return u.datasetID, nil
}

// emptyUpload handles a file without traces (PushTraces needs at least
// one): it creates the dataset unless it exists (an existing one must be
// empty in create mode) and merges the dataset line's metadata.
func (s *Server) emptyUpload(ctx context.Context, sp *uploadSpool, p *principal, f uploadFields) (string, error) {
	d, err := s.st.GetDatasetByName(ctx, p.User.ID, f.name)
	if errors.Is(err, store.ErrNotFound) {
		d = &store.Dataset{OwnerID: p.User.ID, Name: f.name, Metadata: createdOnMetadata(s.now())}
		err = s.st.CreateDataset(ctx, d)
		if errors.Is(err, store.ErrConflict) { // created meanwhile
			d, err = s.st.GetDatasetByName(ctx, p.User.ID, f.name)
		}
	}
	if err != nil {
		return "", err
	}
	if d.NumTraces > 0 && f.mode != "append" {
		return "", badRequest("Dataset with the same name already exists with traces, to add new traces use the push API")
	}
	if sp.datasetMeta != nil {
		if _, err := s.st.PutDatasetMetadata(ctx, d.ID, sp.datasetMeta, false); err != nil {
			return "", err
		}
	}
	return d.ID, nil
}

// push writes one batch; last says no batch follows.
func (u *uploadPush) push(ctx context.Context, sp *uploadSpool, batch []store.NewTrace, tools map[string]*store.ToolUse, last bool) error {
	s, first := u.s, u.batches == 0
	if first && !last {
		if err := u.prepareRollback(ctx, sp); err != nil {
			return err
		}
	}
	req := store.PushRequest{
		OwnerID:            u.p.User.ID,
		DatasetName:        u.f.name,
		CreateIfMissing:    true,
		NewDatasetMetadata: createdOnMetadata(s.now()),
		RequireEmpty:       first && u.f.mode != "append",
		ReplaceTakenIDs:    true,
		Traces:             batch,
		Tools:              ingest.ToolList(tools),
		Close:              s.closeFunc(),
	}
	if first {
		req.MergeMetadata = sp.datasetMeta
	}
	res, err := s.ing.Push(ctx, ingest.PushRequest{PushRequest: req})
	var taken *store.IndexTakenError
	if errors.Is(err, store.ErrConflict) && req.RequireEmpty && !errors.As(err, &taken) {
		return badRequest("Dataset with the same name already exists with traces, to add new traces use the push API")
	}
	if err != nil {
		return err
	}
	if first {
		u.datasetID, u.created = res.Dataset.ID, res.DatasetCreated
		if u.created && u.ids != nil {
			u.ids.Close()
			os.Remove(u.ids.Name())
			u.ids, u.idw = nil, nil
		}
	}
	u.batches++
	if u.idw != nil {
		for _, t := range res.Traces {
			u.idw.WriteString(t.ID)
			u.idw.WriteByte('\n')
		}
	}
	return nil
}

// prepareRollback records what rollback needs before the first of several
// batches: the dataset's metadata, when the upload merges into an existing
// one, and a file for the ids of the pushed traces.
func (u *uploadPush) prepareRollback(ctx context.Context, sp *uploadSpool) error {
	if sp.datasetMeta != nil {
		d, err := u.s.st.GetDatasetByName(ctx, u.p.User.ID, u.f.name)
		switch {
		case err == nil:
			u.oldMeta = d.Metadata
		case !errors.Is(err, store.ErrNotFound):
			return err
		}
	}
	f, err := os.CreateTemp("", "vigil-upload-ids-*")
	if err != nil {
		return fmt.Errorf("upload: %w", err)
	}
	u.ids, u.idw = f, bufio.NewWriter(f)
	return nil
}

// rollback undoes the batches pushed so far after a later one failed: it
// deletes the dataset when the upload created it, else the pushed traces,
// and restores the dataset metadata the upload merged into. What it cannot
// undo: the dataset's index counter has moved on, the ledger keeps the
// (closed) sessions and receipts of the deleted traces (store.DeleteTrace
// keeps them), and readers may have seen the traces meanwhile. Errors are
// logged: the caller is already failing.
func (u *uploadPush) rollback(ctx context.Context) {
	s := u.s
	ctx = context.WithoutCancel(ctx)
	fail := func(err error) {
		s.log.Error("upload rollback incomplete", "dataset", u.datasetID, "err", err)
	}
	if u.created {
		if err := s.st.DeleteDataset(ctx, u.datasetID, s.closeFunc()); err != nil && !errors.Is(err, store.ErrNotFound) {
			fail(err)
		}
		return
	}
	if u.idw != nil {
		if err := u.idw.Flush(); err != nil {
			fail(err)
			return
		}
		if _, err := u.ids.Seek(0, io.SeekStart); err != nil {
			fail(err)
			return
		}
		sc := bufio.NewScanner(u.ids)
		for sc.Scan() {
			if err := s.st.DeleteTrace(ctx, sc.Text(), s.closeFunc()); err != nil && !errors.Is(err, store.ErrNotFound) {
				fail(err)
			}
		}
		if err := sc.Err(); err != nil {
			fail(err)
		}
	}
	if u.oldMeta != nil {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(u.oldMeta, &m); err != nil {
			fail(err)
			return
		}
		if _, err := s.st.PutDatasetMetadata(ctx, u.datasetID, m, true); err != nil {
			fail(err)
		}
	}
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
		if t.Annotations, err = s.withFindings(r.Context(), t, t.Annotations, nil); err != nil {
			_ = bw.Flush()
			return fmt.Errorf("export dataset %s: %w", d.ID, err)
		}
		if err := s.inlineImages(r.Context(), t); err != nil {
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
