package store

import "context"

// EventRanges reads part of a trace's events, for viewers of long traces
// that show one page of them.
type EventRanges interface {
	// TraceEvents returns the trace's events whose index is in [from, to)
	// in index order (Index, ID, NodeIDs and Data set); fewer, or none,
	// when the trace has fewer events. ErrNotFound when the trace is
	// absent.
	TraceEvents(ctx context.Context, traceID string, from, to int) ([]Message, error)
}
