package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
)

// SearchOptions tune Search; zero values take the server's defaults.
type SearchOptions struct {
	// Datasets restricts the search: names (the caller's), user/name or
	// ids.
	Datasets []string
	// Limit is the page size (server default 50, at most 1000).
	Limit int
	// Cursor is the NextCursor of the previous page.
	Cursor string
	// Sort is index, -index, time_created, -time_created,
	// time_last_pushed or -time_last_pushed.
	Sort string
	// NoHighlights asks for no highlights.
	NoHighlights bool
}

// SearchResult is a page of GET /api/v1/search (explorer-api §7.1).
type SearchResult struct {
	Total           int         `json:"total"`
	TotalIsEstimate bool        `json:"total_is_estimate"`
	Parsed          string      `json:"parsed"`
	Traces          []SearchHit `json:"traces"`
	NextCursor      *string     `json:"next_cursor"`
}

// SearchHit is one trace of a search result.
type SearchHit struct {
	ID                  string               `json:"id"`
	Index               int                  `json:"index"`
	Dataset             *SearchDataset       `json:"dataset"`
	Name                *string              `json:"name"`
	HierarchyPath       []string             `json:"hierarchy_path"`
	TimeCreated         string               `json:"time_created"`
	TimeLastPushed      string               `json:"time_last_pushed"`
	MessageCount        int                  `json:"message_count"`
	AnnotationsBySource map[string]int       `json:"annotations_by_source"`
	MaxSeverity         *string              `json:"max_severity"`
	Highlights          map[string]Highlight `json:"highlights,omitempty"`
}

// SearchDataset names the dataset of a hit; nil for snippets.
type SearchDataset struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	User string `json:"user"`
}

// Highlight is the term a highlighted range matched.
type Highlight struct {
	Content string `json:"content"`
	Source  string `json:"source"`
}

// Search runs query (the explorer-api §7.2 grammar) over every dataset
// the caller can read. A query that does not parse gives an *APIError
// with Code "query_invalid" and Body["position"].
func (c *Client) Search(ctx context.Context, query string, opts SearchOptions) (*SearchResult, error) {
	q := url.Values{"q": {query}}
	for _, d := range opts.Datasets {
		q.Add("dataset", d)
	}
	if opts.Limit > 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	if opts.Cursor != "" {
		q.Set("cursor", opts.Cursor)
	}
	if opts.Sort != "" {
		q.Set("sort", opts.Sort)
	}
	if opts.NoHighlights {
		q.Set("highlights", "false")
	}
	var out SearchResult
	if err := c.call(ctx, http.MethodGet, "/api/v1/search", q, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// CompatSearchResult is the Invariant-compatible search result of one
// dataset: per title, the matching indices, and per index the highlights.
type CompatSearchResult struct {
	Result   map[string]CompatSearchEntry    `json:"result"`
	Mappings map[string]map[string]Highlight `json:"mappings"`
}

// CompatSearchEntry is one titled result.
type CompatSearchEntry struct {
	Traces      []int  `json:"traces"`
	Description string `json:"description"`
}

// SearchDatasetCompat runs GET /api/v1/dataset/byuser/{username}/{dataset}/s?query=.
func (c *Client) SearchDatasetCompat(ctx context.Context, username, dataset, query string) (*CompatSearchResult, error) {
	var out CompatSearchResult
	path := "/api/v1/dataset/byuser/" + url.PathEscape(username) + "/" + url.PathEscape(dataset) + "/s"
	if err := c.call(ctx, http.MethodGet, path, url.Values{"query": {query}}, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// SavedQuery is a dataset's saved search.
type SavedQuery struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Query     string `json:"query"`
	Count     *int   `json:"count,omitempty"`
	Deletable bool   `json:"deletable,omitempty"`
}

// SaveQuery saves query under name in a dataset; the query must parse.
func (c *Client) SaveQuery(ctx context.Context, username, dataset, name, query string) (*SavedQuery, error) {
	var out SavedQuery
	path := "/api/v1/dataset/byuser/" + url.PathEscape(username) + "/" + url.PathEscape(dataset) + "/s"
	if err := c.call(ctx, http.MethodPut, path, nil, map[string]string{"name": name, "query": query}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteQuery deletes a saved query.
func (c *Client) DeleteQuery(ctx context.Context, id string) error {
	return c.call(ctx, http.MethodDelete, "/api/v1/dataset/query/"+url.PathEscape(id), nil, nil, nil)
}

// DatasetQueries returns a dataset's queries with their counts: the
// built-ins, then the saved ones.
func (c *Client) DatasetQueries(ctx context.Context, id string) ([]SavedQuery, error) {
	var out struct {
		Queries []SavedQuery `json:"queries"`
	}
	if err := c.call(ctx, http.MethodGet, "/api/v1/dataset/byid/"+url.PathEscape(id), nil, nil, &out); err != nil {
		return nil, err
	}
	return out.Queries, nil
}

// FilterTraces lists the traces of a dataset matching query, ordered by
// index (limit 0 = all).
func (c *Client) FilterTraces(ctx context.Context, datasetID, query string, limit int) ([]TraceSummary, error) {
	q := url.Values{"query": {query}}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out []TraceSummary
	if err := c.call(ctx, http.MethodGet, "/api/v1/dataset/byid/"+url.PathEscape(datasetID)+"/traces", q, nil, &out); err != nil {
		return nil, err
	}
	return out, nil
}
