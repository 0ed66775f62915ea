package server

import (
	"context"
	"net/http"

	"github.com/vigilhq/vigil/store"
)

// SearchFacets returns the counts of a dataset's trace list sidebar
// (hierarchy roots, annotation sources, highest severities) over every
// trace q matches in datasetID that c may read, as the web UI shows
// them. The dataset must already be readable by c (DatasetForRead). An
// invalid query is the API's 400 query_invalid *Error.
func (s *Server) SearchFacets(r *http.Request, c *Caller, datasetID, q string) (*store.SearchFacets, error) {
	if err := readScope(c); err != nil {
		return nil, err
	}
	if _, err := parseQuery(q); err != nil {
		return nil, err
	}
	req := store.SearchRequest{Query: q, DatasetIDs: []string{datasetID}}
	s.searchAccess(c.principal(), &req)
	ctx, cancel := context.WithTimeout(r.Context(), searchTimeout)
	defer cancel()
	f, err := s.st.SearchFacets(ctx, req)
	if err != nil {
		return nil, queryError(err)
	}
	return f, nil
}
