package store

import (
	"context"
	"errors"
	"time"
)

// Searcher runs the search queries of explorer-api §7 over the trigram
// indexes the stores keep of every trace's searchable text.
type Searcher interface {
	// Search returns the traces matching req.Query (the §7.2 grammar) that
	// the caller may read, one page in req.Order. A query that does not
	// parse gives an error wrapping the parser's *search.Error (with its
	// position); an invalid cursor an error wrapping ErrInvalidCursor.
	Search(ctx context.Context, req SearchRequest) (*SearchResult, error)
}

// SearchRequest is one search.
type SearchRequest struct {
	// Query is the query text; "" matches every trace.
	Query string
	// Access limits the traces searched. AllOwners (admins) reads every
	// owner's traces; otherwise OwnerID's own traces, plus those in public
	// datasets when Public is set.
	AllOwners bool
	OwnerID   string
	Public    bool
	// CallerID is the namespace a bare dataset: name resolves in.
	CallerID string
	// DatasetIDs, when non-nil, restricts to these datasets (the dataset=
	// parameter); an empty non-nil list matches nothing.
	DatasetIDs []string
	// Order of the page; ties break on trace id.
	Order TraceOrder
	// Limit is the page size (0 = 50); Cursor the NextCursor of the
	// previous page.
	Limit  int
	Cursor string
	// Now resolves relative times (after:-1d); zero = the current time.
	Now time.Time
	// WithMessages fills in the Messages of the traces returned.
	WithMessages bool
	// NoTotal skips counting (Total is then -1).
	NoTotal bool
}

// SearchResult is one page of a search.
type SearchResult struct {
	Traces []*Trace
	// Total counts the matches exactly up to MaxSearchTotal; beyond it
	// Total is MaxSearchTotal and TotalIsEstimate is set.
	Total           int
	TotalIsEstimate bool
	// NextCursor continues after this page; "" on the last page.
	NextCursor string
}

// MaxSearchTotal is how far a search counts exactly (explorer-api §7.1).
const MaxSearchTotal = 10000

// ErrInvalidCursor is returned for a cursor this store did not issue.
var ErrInvalidCursor = errors.New("invalid cursor")
