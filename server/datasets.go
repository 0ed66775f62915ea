package server

import (
	"cmp"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/vigilhq/vigil/store"
)

// datasetJSON is the API form of a dataset (explorer-api §2.5).
type datasetJSON struct {
	ID              string          `json:"id"`
	Name            string          `json:"name"`
	ExtraMetadata   json.RawMessage `json:"extra_metadata"`
	IsPublic        bool            `json:"is_public"`
	UserID          string          `json:"user_id"`
	TimeCreated     string          `json:"time_created"`
	LatestTraceTime *string         `json:"latest_trace_time"`
	User            *userRef        `json:"user"`
	NumTraces       *int            `json:"num_traces,omitempty"`
	Queries         []savedQuery    `json:"queries,omitempty"`
}

type savedQuery struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Query     string `json:"query"`
	Count     *int   `json:"count"`
	Deletable bool   `json:"deletable"`
}

// builtinQueries are the saved queries every dataset has (§2.5), with the
// count of "all"; datasetQueries counts the others.
func builtinQueries(numTraces int) []savedQuery {
	n := numTraces
	return []savedQuery{
		{ID: "all", Name: "All", Query: "", Count: &n},
		{ID: "annotated", Name: "Annotated", Query: "is:annotated"},
		{ID: "unannotated", Name: "Unannotated", Query: "not:annotated"},
		{ID: "flagged", Name: "Flagged", Query: "is:flagged"},
	}
}

func (s *Server) datasetJSON(r *http.Request, d *store.Dataset, full bool) datasetJSON {
	var err error
	out := datasetJSON{
		ID: d.ID, Name: d.Name, ExtraMetadata: d.Metadata, IsPublic: d.IsPublic, UserID: d.OwnerID,
		TimeCreated: formatTime(d.TimeCreated),
	}
	if len(out.ExtraMetadata) == 0 {
		out.ExtraMetadata = json.RawMessage("{}")
	}
	if d.LatestTraceTime != nil {
		t := formatTime(*d.LatestTraceTime)
		out.LatestTraceTime = &t
	}
	if u, err := s.st.GetUser(r.Context(), d.OwnerID); err == nil {
		out.User = newUserRef(u)
	}
	if full {
		n := d.NumTraces
		out.NumTraces = &n
		if out.Queries, err = s.datasetQueries(r, d); err != nil {
			out.Queries = builtinQueries(n)
		}
	}
	return out
}

// handleDatasetCreate serves POST /api/v1/dataset/create.
func (s *Server) handleDatasetCreate(w http.ResponseWriter, r *http.Request, p *principal) error {
	var in map[string]json.RawMessage
	if err := s.decodeJSON(w, r, &in, false); err != nil {
		return err
	}
	if in == nil || isBlank(in["name"]) {
		return badRequest("name must be provided")
	}
	var name string
	if json.Unmarshal(in["name"], &name) != nil {
		return badRequest("name must be a string")
	}
	if !validDatasetName(name) {
		return errDatasetName()
	}
	md := map[string]json.RawMessage{}
	if raw := in["metadata"]; !isBlank(raw) {
		if json.Unmarshal(raw, &md) != nil || md == nil {
			return badRequest("metadata must be a dictionary")
		}
	}
	isPublic := false
	if raw := in["is_public"]; !isBlank(raw) {
		if json.Unmarshal(raw, &isPublic) != nil {
			return badRequest("is_public must be a boolean")
		}
	}
	if err := checkMetadata(md); err != nil {
		return err
	}
	md["created_on"] = json.RawMessage(strconv.Quote(s.now().UTC().Format("2006-01-02 15:04:05")))
	mdb, _ := json.Marshal(md)
	d := &store.Dataset{OwnerID: p.User.ID, Name: name, Metadata: mdb, IsPublic: isPublic}
	if err := s.st.CreateDataset(r.Context(), d); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return apiErr(http.StatusBadRequest, CodeDatasetExists, "Dataset with the same name already exists")
		}
		return err
	}
	writeJSON(w, http.StatusOK, s.datasetJSON(r, d, true))
	return nil
}

// handleDatasetList serves GET /api/v1/dataset/list.
func (s *Server) handleDatasetList(w http.ResponseWriter, r *http.Request, p *principal) error {
	q := r.URL.Query()
	f := store.DatasetFilter{NameContains: q.Get("q")}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return badRequest("limit must be a non-negative integer")
		}
		f.Limit = n
	}
	switch kind := q.Get("kind"); kind {
	case "", "any":
		if p == nil {
			f.PublicOnly = true
		} else if !p.isAdmin() {
			f.VisibleTo = p.User.ID
		}
	case "private":
		if p == nil {
			writeJSON(w, http.StatusOK, []datasetJSON{})
			return nil
		}
		f.OwnerID = p.User.ID
	case "public", "homepage":
		f.PublicOnly = true
	default:
		return badRequest("kind must be private, public or any")
	}
	if p == nil && !s.cfg.AnonymousReadPublic {
		writeJSON(w, http.StatusOK, []datasetJSON{})
		return nil
	}
	list, err := s.st.ListDatasets(r.Context(), f)
	if err != nil {
		return err
	}
	out := make([]datasetJSON, len(list))
	for i, d := range list {
		out[i] = s.datasetJSON(r, d, false)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// handleDatasetListByUser serves GET /api/v1/dataset/list/byuser/{username}.
func (s *Server) handleDatasetListByUser(w http.ResponseWriter, r *http.Request, p *principal) error {
	u, err := s.st.GetUserByName(r.Context(), r.PathValue("username"))
	if errors.Is(err, store.ErrNotFound) {
		return notFound("User not found")
	}
	if err != nil {
		return err
	}
	list, err := s.st.ListDatasets(r.Context(), store.DatasetFilter{OwnerID: u.ID})
	if err != nil {
		return err
	}
	out := []datasetJSON{}
	for _, d := range list {
		if s.canReadDataset(p, d) {
			out = append(out, s.datasetJSON(r, d, false))
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// handleDatasetGet serves GET /api/v1/dataset/byid/{id} and byuser/{u}/{d}.
func (s *Server) handleDatasetGet(w http.ResponseWriter, r *http.Request, p *principal) error {
	d, err := s.datasetFromPath(r, p)
	if err != nil {
		return err
	}
	if s.canWrite(p, d.OwnerID) { // owners see the guardrails (explorer-api §2.5)
		return s.writeGuardedDataset(w, r, d.ID)
	}
	writeJSON(w, http.StatusOK, s.datasetJSON(r, d, true))
	return nil
}

// handleDatasetUpdate serves PUT on a dataset: {"content": bool} sets
// is_public (Invariant's field); [V] {"is_public", "name"}.
func (s *Server) handleDatasetUpdate(w http.ResponseWriter, r *http.Request, p *principal) error {
	var in map[string]json.RawMessage
	if err := s.decodeJSON(w, r, &in, false); err != nil {
		return err
	}
	d, err := s.datasetForWrite(r, p)
	if err != nil {
		return err
	}
	var up store.DatasetUpdate
	for _, k := range []string{"content", "is_public"} {
		if raw := in[k]; !isBlank(raw) {
			var b bool
			if json.Unmarshal(raw, &b) != nil {
				return badRequest("%s must be a boolean", k)
			}
			up.IsPublic = &b
		}
	}
	if raw := in["name"]; !isBlank(raw) {
		var name string
		if json.Unmarshal(raw, &name) != nil {
			return badRequest("name must be a string")
		}
		if !validDatasetName(name) {
			return errDatasetName()
		}
		up.Name = &name
	}
	d, err = s.st.UpdateDataset(r.Context(), d.ID, up)
	if errors.Is(err, store.ErrConflict) {
		return apiErr(http.StatusBadRequest, CodeDatasetExists, "Dataset with the same name already exists")
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.datasetJSON(r, d, true))
	return nil
}

// handleDatasetDelete serves DELETE on a dataset.
func (s *Server) handleDatasetDelete(w http.ResponseWriter, r *http.Request, p *principal) error {
	d, err := s.datasetForWrite(r, p)
	if err != nil {
		return err
	}
	if err := s.st.DeleteDataset(r.Context(), d.ID, s.closeFunc()); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"message": "Deleted"})
	return nil
}

// traceRow is one row of a dataset's trace list.
type traceRow struct {
	ID                  string          `json:"id"`
	Index               int64           `json:"index"`
	Name                *string         `json:"name"`
	HierarchyPath       []string        `json:"hierarchy_path"`
	ExtraMetadata       json.RawMessage `json:"extra_metadata"`
	TimeCreated         string          `json:"time_created"`
	Messages            []any           `json:"messages"`
	AnnotationsBySource map[string]int  `json:"annotations_by_source"`
}

// handleDatasetTraces serves GET …/traces?indices=&limit=&offset=&query=.
func (s *Server) handleDatasetTraces(w http.ResponseWriter, r *http.Request, p *principal) error {
	d, err := s.datasetFromPath(r, p)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	f := store.TraceFilter{DatasetID: d.ID, Order: store.OrderIndex}
	if f.Limit, err = intParam(q.Get("limit"), "limit"); err != nil {
		return err
	}
	if f.Offset, err = intParam(q.Get("offset"), "offset"); err != nil {
		return err
	}
	if v := q.Get("indices"); v != "" {
		for _, part := range strings.Split(v, ",") {
			n, err := strconv.ParseInt(strings.TrimSpace(part), 10, 64)
			if err != nil {
				return badRequest("indices must be a comma-separated list of integers, got %q", part)
			}
			f.Indices = append(f.Indices, n)
		}
	}
	if f.IDs, err = s.traceListQuery(r, d); err != nil { // [V] query= (§7 grammar)
		return err
	}
	return s.streamTraceList(w, r, f, func(list []*store.Trace) ([]any, error) {
		ids := make([]string, len(list))
		for i, t := range list {
			ids[i] = t.ID
		}
		counts, err := s.st.CountAnnotationsBySource(r.Context(), ids)
		if err == nil {
			counts, err = s.addFindingCounts(r.Context(), counts, ids)
		}
		if err != nil {
			return nil, err
		}
		out := make([]any, len(list))
		for i, t := range list {
			row := traceRow{ID: t.ID, Index: t.Index, Name: nullString(t.Name), HierarchyPath: nonNilStrings(t.HierarchyPath),
				ExtraMetadata: objectOrEmpty(t.Metadata), TimeCreated: formatTime(t.TimeCreated), Messages: []any{},
				AnnotationsBySource: counts[t.ID]}
			if row.AnnotationsBySource == nil {
				row.AnnotationsBySource = map[string]int{}
			}
			out[i] = row
		}
		return out, nil
	})
}

func intParam(v, name string) (int, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, badRequest("%s must be a non-negative integer, got %q", name, v)
	}
	return n, nil
}

func nullString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func nonNilStrings(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}

func objectOrEmpty(b json.RawMessage) json.RawMessage {
	if len(b) == 0 || string(b) == "null" {
		return json.RawMessage("{}")
	}
	return b
}

// checkMetadata type-checks the known dataset metadata keys
// (explorer-api §4.2).
func checkMetadata(md map[string]json.RawMessage) error {
	total := 0
	for k, v := range md {
		if len(k) > 256 {
			return badRequest("metadata key longer than 256 characters: %.40q…", k)
		}
		total += len(k) + len(v)
		if isBlank(v) {
			continue
		}
		switch k {
		case "benchmark", "name":
			var s string
			if json.Unmarshal(v, &s) != nil || s == "" {
				return badRequest("%s must be a non-empty string", k)
			}
		case "accuracy":
			var f float64
			if json.Unmarshal(v, &f) != nil || f < 0 {
				return badRequest("accuracy must be a number >= 0")
			}
		case "invariant.test_results":
			var tr struct {
				NumTests  *int `json:"num_tests"`
				NumPassed *int `json:"num_passed"`
			}
			if json.Unmarshal(v, &tr) != nil || tr.NumTests == nil || tr.NumPassed == nil {
				return badRequest("invariant.test_results must be {num_tests: int, num_passed: int}")
			}
		case "analysis_report":
			var s string
			if json.Unmarshal(v, &s) != nil {
				return badRequest("analysis_report must be a string")
			}
		case "policies":
			return badRequest("policies is read-only; use the guardrails API")
		}
	}
	if total > 1<<20 {
		return badRequest("metadata larger than 1 MiB")
	}
	return nil
}

// metadataDataset resolves the dataset of the metadata endpoints:
// {name} in owner_username's namespace, or the caller's. Invariant's sync
// client sends ?owner_username= and its async client ?owner=: both are read
// (owner_username wins when both are set).
func (s *Server) metadataDataset(r *http.Request, p *principal, write bool) (*store.Dataset, error) {
	name := r.PathValue("name")
	ownerID := p.User.ID
	q := r.URL.Query()
	if owner := cmp.Or(q.Get("owner_username"), q.Get("owner")); owner != "" && !write {
		u, err := s.st.GetUserByName(r.Context(), owner)
		if errors.Is(err, store.ErrNotFound) {
			return nil, notFound("Dataset not found")
		}
		if err != nil {
			return nil, err
		}
		ownerID = u.ID
	}
	d, err := s.st.GetDatasetByName(r.Context(), ownerID, name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, notFound("Dataset not found")
	}
	if err != nil {
		return nil, err
	}
	if !write && d.OwnerID != p.User.ID && !d.IsPublic && !p.isAdmin() {
		return nil, apiErr(http.StatusForbidden, CodeForbidden, "Not allowed to view metadata for this dataset")
	}
	return d, nil
}

// handleMetadataGet serves GET /api/v1/dataset/metadata/{name}.
func (s *Server) handleMetadataGet(w http.ResponseWriter, r *http.Request, p *principal) error {
	d, err := s.metadataDataset(r, p, false)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, objectOrEmpty(d.Metadata))
	return nil
}

// handleMetadataPut serves PUT /api/v1/dataset/metadata/{name}.
func (s *Server) handleMetadataPut(w http.ResponseWriter, r *http.Request, p *principal) error {
	var in map[string]json.RawMessage
	if err := s.decodeJSON(w, r, &in, false); err != nil {
		return err
	}
	var md map[string]json.RawMessage
	if in == nil || isBlank(in["metadata"]) || json.Unmarshal(in["metadata"], &md) != nil || md == nil {
		return badRequest("metadata must be a dictionary")
	}
	replaceAll := false
	if raw := in["replace_all"]; !isBlank(raw) {
		if json.Unmarshal(raw, &replaceAll) != nil {
			return badRequest("replace_all must be a boolean")
		}
	}
	if err := checkMetadata(md); err != nil {
		return err
	}
	d, err := s.metadataDataset(r, p, true)
	if err != nil {
		return err
	}
	out, err := s.st.PutDatasetMetadata(r.Context(), d.ID, md, replaceAll)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
