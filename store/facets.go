package store

import "context"

// Facets are counts over whole datasets and whole search results, for
// the web UI's trace list sidebar and datasets page: computed with a few
// grouped queries, never by reading every trace.
type Facets interface {
	// SearchFacets counts over every trace req matches (its Query,
	// access rules and DatasetIDs; Order, Limit and Cursor are ignored).
	// A query that does not parse gives the error Search gives.
	SearchFacets(ctx context.Context, req SearchRequest) (*SearchFacets, error)
	// CountEvents returns the number of events (the sum of the traces'
	// message counts) of each dataset in ids; a dataset without traces
	// or unknown is absent.
	CountEvents(ctx context.Context, ids []string) (map[string]int64, error)
}

// SearchFacets are the sidebar counts of a search.
type SearchFacets struct {
	// Hierarchy counts traces by the first element of their
	// hierarchy_path ("" for traces without one).
	Hierarchy map[string]int
	// Sources counts annotations by source as the search API's
	// annotations_by_source does: stored annotations ("" is "user") and
	// each finding once per citation ("guardrails-error", or "mcp-pin"
	// for the mcp-pin monitor).
	Sources map[string]int
	// Severities counts traces by their highest severity ("info",
	// "warn", "critical") over their annotations and findings, as the
	// search API's max_severity; traces with none are not counted.
	Severities map[string]int
}
