package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// UserRef is the short user object embedded in datasets and annotations.
type UserRef struct {
	ID           string `json:"id"`
	Username     string `json:"username"`
	ImageURLHash string `json:"image_url_hash,omitempty"`
}

// Dataset is a dataset object (explorer-api §2.5).
type Dataset struct {
	ID              string         `json:"id"`
	Name            string         `json:"name"`
	ExtraMetadata   map[string]any `json:"extra_metadata"`
	IsPublic        bool           `json:"is_public"`
	UserID          string         `json:"user_id"`
	TimeCreated     string         `json:"time_created"`
	LatestTraceTime string         `json:"latest_trace_time,omitempty"`
	User            *UserRef       `json:"user,omitempty"`
	NumTraces       *int           `json:"num_traces,omitempty"`
}

// Annotation is an annotation object (explorer-api §2.2).
type Annotation struct {
	ID            string         `json:"id"`
	TraceID       string         `json:"trace_id"`
	Content       string         `json:"content"`
	Address       string         `json:"address"`
	ExtraMetadata map[string]any `json:"extra_metadata"`
	TimeCreated   string         `json:"time_created"`
	User          *UserRef       `json:"user,omitempty"`
	MessageID     *string        `json:"message_id"`
	Resolved      bool           `json:"resolved"`
}

// AnnotationCreate is the create form of an annotation.
type AnnotationCreate struct {
	Content       string         `json:"content"`
	Address       string         `json:"address"`
	ExtraMetadata map[string]any `json:"extra_metadata,omitempty"`
}

// Trace is a trace object (explorer-api §2.4). Messages are kept as raw
// JSON so key order and unknown keys survive.
type Trace struct {
	ID             string            `json:"id"`
	Index          int               `json:"index"`
	Dataset        *string           `json:"dataset"`
	DatasetName    string            `json:"dataset_name,omitempty"`
	UserID         string            `json:"user_id"`
	User           string            `json:"user"`
	Name           *string           `json:"name"`
	HierarchyPath  []string          `json:"hierarchy_path"`
	Messages       []json.RawMessage `json:"messages"`
	ExtraMetadata  map[string]any    `json:"extra_metadata"`
	TimeCreated    string            `json:"time_created"`
	TimeLastPushed string            `json:"time_last_pushed"`
	Annotations    []Annotation      `json:"annotations,omitempty"`
	MessageCount   int               `json:"message_count"`
}

// TraceSummary is one row of a dataset's trace list.
type TraceSummary struct {
	ID                  string         `json:"id"`
	Index               int            `json:"index"`
	Name                *string        `json:"name"`
	HierarchyPath       []string       `json:"hierarchy_path"`
	ExtraMetadata       map[string]any `json:"extra_metadata"`
	TimeCreated         string         `json:"time_created"`
	AnnotationsBySource map[string]int `json:"annotations_by_source"`
}

// PushRequest is the body of POST /api/v1/push/trace (explorer-api §3.1).
// Each element of Messages is one trace: a list of events (maps, structs
// or json.RawMessage). Annotations and Metadata, when set, have one entry
// per trace. An empty Dataset pushes snippets.
type PushRequest struct {
	Messages    [][]any              `json:"messages"`
	Annotations [][]AnnotationCreate `json:"annotations,omitempty"`
	Metadata    []map[string]any     `json:"metadata,omitempty"`
	Dataset     string               `json:"dataset,omitempty"`
}

// Warning is a non-fatal ingest note.
type Warning struct {
	Trace   int    `json:"trace"`
	Message int    `json:"message"`
	Detail  string `json:"detail"`
}

// PushResponse is the response of a push.
type PushResponse struct {
	ID         []string   `json:"id"`
	Dataset    string     `json:"dataset,omitempty"`
	Username   string     `json:"username"`
	MessageIDs [][]string `json:"message_ids,omitempty"`
	Warnings   []Warning  `json:"warnings,omitempty"`
}

// Push stores the traces of req in one transaction and returns their ids.
// It is not retried (a retry after a lost response would duplicate).
func (c *Client) Push(ctx context.Context, req PushRequest) (*PushResponse, error) {
	var out PushResponse
	if err := c.call(ctx, http.MethodPost, "/api/v1/push/trace", nil, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// AppendResponse is the response of Append.
type AppendResponse struct {
	Success    bool      `json:"success"`
	MessageIDs []string  `json:"message_ids,omitempty"`
	Warnings   []Warning `json:"warnings,omitempty"`
}

// Append adds events (and optional annotations) to the end of a trace.
func (c *Client) Append(ctx context.Context, traceID string, messages []any, annotations []AnnotationCreate) (*AppendResponse, error) {
	in := map[string]any{"messages": messages}
	if annotations != nil {
		in["annotations"] = annotations
	}
	var out AppendResponse
	if err := c.call(ctx, http.MethodPost, "/api/v1/trace/"+url.PathEscape(traceID)+"/messages", nil, in, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// CreateDataset creates an empty dataset.
func (c *Client) CreateDataset(ctx context.Context, name string, metadata map[string]any, isPublic bool) (*Dataset, error) {
	in := map[string]any{"name": name, "is_public": isPublic}
	if metadata != nil {
		in["metadata"] = metadata
	}
	var out Dataset
	if err := c.call(ctx, http.MethodPost, "/api/v1/dataset/create", nil, in, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListDatasets lists the datasets the caller can see; kind is "private",
// "public" or "any" ("" means the server default).
func (c *Client) ListDatasets(ctx context.Context, kind string) ([]Dataset, error) {
	q := url.Values{}
	if kind != "" {
		q.Set("kind", kind)
	}
	var out []Dataset
	if err := c.call(ctx, http.MethodGet, "/api/v1/dataset/list", q, nil, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// GetDataset returns the dataset with the given id.
func (c *Client) GetDataset(ctx context.Context, id string) (*Dataset, error) {
	var out Dataset
	if err := c.call(ctx, http.MethodGet, "/api/v1/dataset/byid/"+url.PathEscape(id), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetDatasetByName returns the dataset name in username's namespace.
func (c *Client) GetDatasetByName(ctx context.Context, username, name string) (*Dataset, error) {
	var out Dataset
	p := "/api/v1/dataset/byuser/" + url.PathEscape(username) + "/" + url.PathEscape(name)
	if err := c.call(ctx, http.MethodGet, p, nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteDataset deletes a dataset and its traces.
func (c *Client) DeleteDataset(ctx context.Context, id string) error {
	return c.call(ctx, http.MethodDelete, "/api/v1/dataset/byid/"+url.PathEscape(id), nil, nil, nil)
}

// ListTraces lists a dataset's traces ordered by index (limit 0 = all).
func (c *Client) ListTraces(ctx context.Context, datasetID string, limit, offset int) ([]TraceSummary, error) {
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if offset > 0 {
		q.Set("offset", strconv.Itoa(offset))
	}
	var out []TraceSummary
	if err := c.call(ctx, http.MethodGet, "/api/v1/dataset/byid/"+url.PathEscape(datasetID)+"/traces", q, nil, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// GetMetadata returns a dataset's metadata; owner "" means the caller's
// own namespace.
func (c *Client) GetMetadata(ctx context.Context, dataset, owner string) (map[string]any, error) {
	q := url.Values{}
	if owner != "" {
		q.Set("owner_username", owner)
	}
	var out map[string]any
	if err := c.call(ctx, http.MethodGet, "/api/v1/dataset/metadata/"+url.PathEscape(dataset), q, nil, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// UpdateMetadata merges (or, with replaceAll, replaces) a dataset's
// metadata and returns the result.
func (c *Client) UpdateMetadata(ctx context.Context, dataset string, metadata map[string]any, replaceAll bool) (map[string]any, error) {
	var out map[string]any
	in := map[string]any{"metadata": metadata, "replace_all": replaceAll}
	if err := c.call(ctx, http.MethodPut, "/api/v1/dataset/metadata/"+url.PathEscape(dataset), nil, in, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// GetTrace returns a trace with its messages (and annotations when
// includeAnnotations is set).
func (c *Client) GetTrace(ctx context.Context, id string, includeAnnotations bool) (*Trace, error) {
	q := url.Values{}
	if includeAnnotations {
		q.Set("include_annotations", "true")
	}
	var out Trace
	if err := c.call(ctx, http.MethodGet, "/api/v1/trace/"+url.PathEscape(id), q, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteTrace deletes a trace and its annotations.
func (c *Client) DeleteTrace(ctx context.Context, id string) error {
	return c.call(ctx, http.MethodDelete, "/api/v1/trace/"+url.PathEscape(id), nil, nil, nil)
}

// DownloadTrace returns a trace as one JSONL line (explorer-api §8.1).
func (c *Client) DownloadTrace(ctx context.Context, id string) ([]byte, error) {
	resp, err := c.do(ctx, &request{method: http.MethodGet, path: "/api/v1/trace/" + url.PathEscape(id) + "/download"})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

// Annotate adds an annotation to a trace.
func (c *Client) Annotate(ctx context.Context, traceID string, a AnnotationCreate) (*Annotation, error) {
	var out Annotation
	if err := c.call(ctx, http.MethodPost, "/api/v1/trace/"+url.PathEscape(traceID)+"/annotate", nil, a, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Annotations lists a trace's annotations, oldest first.
func (c *Client) Annotations(ctx context.Context, traceID string) ([]Annotation, error) {
	var out []Annotation
	if err := c.call(ctx, http.MethodGet, "/api/v1/trace/"+url.PathEscape(traceID)+"/annotations", nil, nil, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// UpdateAnnotation changes an annotation's content (when content is
// non-nil) and merges extraMetadata into its metadata.
func (c *Client) UpdateAnnotation(ctx context.Context, traceID, annotationID string, content *string, extraMetadata map[string]any) (*Annotation, error) {
	in := map[string]any{}
	if content != nil {
		in["content"] = *content
	}
	if extraMetadata != nil {
		in["extra_metadata"] = extraMetadata
	}
	var out Annotation
	p := "/api/v1/trace/" + url.PathEscape(traceID) + "/annotation/" + url.PathEscape(annotationID)
	if err := c.call(ctx, http.MethodPut, p, nil, in, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteAnnotation deletes an annotation.
func (c *Client) DeleteAnnotation(ctx context.Context, traceID, annotationID string) error {
	p := "/api/v1/trace/" + url.PathEscape(traceID) + "/annotation/" + url.PathEscape(annotationID)
	return c.call(ctx, http.MethodDelete, p, nil, nil, nil)
}

// UploadOptions are the options of Upload.
type UploadOptions struct {
	IsPublic bool
	Append   bool // mode=append: add to a non-empty dataset
}

// Upload streams a JSONL file (explorer-api §8.1) into dataset name as a
// raw body. r is read once; the call is not retried.
func (c *Client) Upload(ctx context.Context, name string, r io.Reader, opts UploadOptions) (*Dataset, error) {
	q := url.Values{"name": {name}, "is_public": {strconv.FormatBool(opts.IsPublic)}}
	if opts.Append {
		q.Set("mode", "append")
	}
	resp, err := c.do(ctx, &request{method: http.MethodPost, path: "/api/v1/dataset/upload", query: q,
		stream: r, ctype: "application/x-ndjson"})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out Dataset
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, fmt.Errorf("upload: decode response: %w", err)
	}
	return &out, nil
}

// ExportOptions are the options of Export.
type ExportOptions struct {
	IncludeTraceIDs bool
	OnlyAnnotated   bool
}

// Export opens a streaming JSONL export of a dataset. The caller reads
// and closes the returned body; nothing is buffered in memory.
func (c *Client) Export(ctx context.Context, datasetID string, opts ExportOptions) (io.ReadCloser, error) {
	q := url.Values{}
	if opts.IncludeTraceIDs {
		q.Set("include_trace_ids", "true")
	}
	if opts.OnlyAnnotated {
		q.Set("only_annotated", "true")
	}
	resp, err := c.do(ctx, &request{method: http.MethodGet, path: "/api/v1/dataset/byid/" + url.PathEscape(datasetID) + "/download", query: q})
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// Identity is the caller's identity (explorer-api §12.1).
type Identity struct {
	Username string `json:"username"`
	ID       string `json:"id"`
	Role     string `json:"role"`
	KeyID    string `json:"key_id"`
	Scope    string `json:"scope"`
}

// Identity returns who the client's key belongs to.
func (c *Client) Identity(ctx context.Context) (*Identity, error) {
	var out Identity
	if err := c.call(ctx, http.MethodGet, "/api/v1/user/identity", nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// KeyCreate is the optional body of CreateKey.
type KeyCreate struct {
	Name      string `json:"name,omitempty"`
	Scope     string `json:"scope,omitempty"` // read, ingest, full (default) or admin
	ExpiresAt string `json:"expires_at,omitempty"`
	User      string `json:"user,omitempty"`
}

// CreatedKey is the response of CreateKey; Key is the plaintext, shown once.
type CreatedKey struct {
	ID        string  `json:"id"`
	Key       string  `json:"key"`
	Name      string  `json:"name"`
	Scope     string  `json:"scope"`
	Prefix    string  `json:"prefix"`
	ExpiresAt *string `json:"expires_at"`
}

// CreateKey creates an API key.
func (c *Client) CreateKey(ctx context.Context, in KeyCreate) (*CreatedKey, error) {
	var out CreatedKey
	if err := c.call(ctx, http.MethodPost, "/api/v1/keys/create", nil, in, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// KeyInfo is one row of ListKeys.
type KeyInfo struct {
	ID          string  `json:"id"`
	TimeCreated string  `json:"time_created"`
	Expired     bool    `json:"expired"`
	HashedKey   string  `json:"hashed_key"`
	Name        string  `json:"name"`
	Scope       string  `json:"scope"`
	Prefix      string  `json:"prefix"`
	LastUsedAt  *string `json:"last_used_at"`
	ExpiresAt   *string `json:"expires_at"`
}

// ListKeys lists the caller's API keys.
func (c *Client) ListKeys(ctx context.Context) ([]KeyInfo, error) {
	var out struct {
		Keys []KeyInfo `json:"keys"`
	}
	if err := c.call(ctx, http.MethodGet, "/api/v1/keys/list", nil, nil, &out); err != nil {
		return nil, err
	}
	return out.Keys, nil
}

// RevokeKey revokes an API key.
func (c *Client) RevokeKey(ctx context.Context, id string) error {
	return c.call(ctx, http.MethodDelete, "/api/v1/keys/"+url.PathEscape(id), nil, nil, nil)
}

// VerifyResult is a chain verification result (ledger.md §5.3, §6.4, §7.5).
type VerifyResult struct {
	Valid    bool   `json:"valid"`
	BrokenAt *int   `json:"brokenAt"`
	Reason   string `json:"reason"`
	Errors   []struct {
		Index  int    `json:"index"`
		Reason string `json:"reason"`
	} `json:"errors"`
}

// PublicKey returns the server's ledger public key (64 hex characters).
func (c *Client) PublicKey(ctx context.Context) (string, error) {
	var out struct {
		PublicKey string `json:"publicKey"`
	}
	if err := c.call(ctx, http.MethodGet, "/api/v1/ledger/public-key", nil, nil, &out); err != nil {
		return "", err
	}
	return out.PublicKey, nil
}

// SessionReceipts returns the raw body of GET
// /api/v1/ledger/sessions/{id}/receipts: {"receipts":[…],"closeHash"?},
// exactly what `vigil receipts verify` reads.
func (c *Client) SessionReceipts(ctx context.Context, sessionID string) ([]byte, error) {
	resp, err := c.do(ctx, &request{method: http.MethodGet, path: "/api/v1/ledger/sessions/" + url.PathEscape(sessionID) + "/receipts"})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

// VerifyRun verifies a run's chain and its binding to the stored events.
func (c *Client) VerifyRun(ctx context.Context, runID string) (*VerifyResult, error) {
	var out VerifyResult
	if err := c.call(ctx, http.MethodGet, "/api/v1/runs/"+url.PathEscape(runID)+"/verify", nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// VerifySession verifies a ledger session.
func (c *Client) VerifySession(ctx context.Context, sessionID string) (*VerifyResult, error) {
	var out VerifyResult
	if err := c.call(ctx, http.MethodGet, "/api/v1/ledger/sessions/"+url.PathEscape(sessionID)+"/verify", nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Raw sends a request with a JSON body (nil for none) to path (starting
// with "/") and decodes a JSON response into out (nil to discard). It is
// the escape hatch for endpoints without a typed method.
func (c *Client) Raw(ctx context.Context, method, path string, in, out any) error {
	p, q, _ := strings.Cut(path, "?")
	vals, err := url.ParseQuery(q)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	return c.call(ctx, method, p, vals, in, out)
}
