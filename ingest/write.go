package ingest

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/vigilhq/vigil/store"
)

// PushRequest is the input of Ingester.Push: the store's push request,
// whose traces carry their prepared messages (or whose Prepare fills
// them in the transaction), plus the images of those traces.
type PushRequest struct {
	store.PushRequest
	// Blobs are the traces' images (Prepared.Images.Blobs), stored
	// before the traces that link them.
	Blobs []*store.Blob
}

// Push stores new traces with their receipts in one store transaction
// (which also enqueues their monitor evaluations): it gives each trace
// without a session a new server-signed one, stores the blobs, presigns
// the receipts of new traces when their messages are at hand (no
// Prepare) and sets the request's Seal. Close is left as the caller set
// it (Ingester.Close closes the sessions of traces pushed finished).
func (in *Ingester) Push(ctx context.Context, req PushRequest) (*store.PushResult, error) {
	for i := range req.Traces {
		if req.Traces[i].Session == nil {
			req.Traces[i].Session = in.NewSession(req.OwnerID, &req.Traces[i], req.DatasetName)
		}
	}
	if err := in.PutBlobs(ctx, req.OwnerID, req.Blobs); err != nil {
		return nil, err
	}
	var pre map[string][]store.Receipt
	if req.Prepare == nil {
		var err error
		if pre, err = in.Presign(req.Traces, req.DatasetName); err != nil {
			return nil, err
		}
	}
	req.Seal = in.Seal(req.DatasetName, pre)
	return in.st.PushTraces(ctx, req.PushRequest)
}

// PrepareAppend normalises events (a JSON array) to be appended to trace
// t at time now: message ids must not clash with t's, an unparsable
// timestamp is an error, events without one get now, and event indices
// continue after t's messages. path is the JSON path of the events in the
// request, for errors.
func PrepareAppend(t *store.Trace, events []byte, now time.Time, path string, warn *Warnings) (*Prepared, error) {
	used := make(map[string]bool, len(t.Messages))
	for _, m := range t.Messages {
		used[m.ID] = true
	}
	return Prepare(events, TraceOptions{FirstIndex: len(t.Messages), UsedIDs: used, StrictTimestamps: true, DefaultTime: now, TraceID: t.ID, Path: path}, warn)
}

// AppendRequest is the input of Ingester.Append.
type AppendRequest struct {
	Trace       *store.Trace // the trace appended to, as read (with messages)
	Events      *Prepared    // from PrepareAppend
	Annotations []*store.Annotation
	Time        time.Time // becomes the trace's last push time
	// Name and MetadataMerge update the trace in the same transaction
	// (AppendMany only; nil: unchanged).
	Name          *string
	MetadataMerge json.RawMessage
	// OTLPSpanIDs are recorded with the append (store.AppendRequest).
	OTLPSpanIDs []string
}

// Append stores prepared events at the end of a trace with their
// receipts in one store transaction: the images first, then the events
// stably sorted by timestamp, sealed in the trace's session (whose agent
// defaults from the trace's dataset).
func (in *Ingester) Append(ctx context.Context, req AppendRequest) (*store.AppendResult, error) {
	t := req.Trace
	if err := in.PutBlobs(ctx, t.OwnerID, req.Events.Images.Blobs); err != nil {
		return nil, err
	}
	msgs := sortByTimestamp(req.Events.Messages)
	dsName := ""
	if t.DatasetID != "" {
		if d, err := in.st.GetDataset(ctx, t.DatasetID); err == nil {
			dsName = d.Name
		}
	}
	return in.st.AppendEvents(ctx, store.AppendRequest{
		TraceID: t.ID, Messages: msgs, Annotations: req.Annotations, Tools: ToolList(req.Events.Tools), Time: req.Time, Seal: in.Seal(dsName, nil),
	})
}

// AppendMany stores the appends of several traces (each as Append would,
// Events may be nil for a name or metadata update only) in one store
// transaction, which also enqueues their monitor evaluations. A trace
// missing or finished has that error in its outcome and the others are
// written; any other error writes nothing. On SQLite, concurrent calls
// share transactions (group commit, see groupcommit.go); each returns once
// its own appends are committed.
func (in *Ingester) AppendMany(ctx context.Context, reqs []AppendRequest) ([]store.AppendOutcome, error) {
	dsNames := map[string]string{}
	sreqs := make([]store.AppendRequest, len(reqs))
	for i, req := range reqs {
		t := req.Trace
		sr := store.AppendRequest{TraceID: t.ID, Annotations: req.Annotations, Time: req.Time, Name: req.Name, MetadataMerge: req.MetadataMerge, OTLPSpanIDs: req.OTLPSpanIDs}
		if req.Events != nil && len(req.Events.Messages) > 0 {
			if err := in.PutBlobs(ctx, t.OwnerID, req.Events.Images.Blobs); err != nil {
				return nil, err
			}
			name, ok := dsNames[t.DatasetID]
			if !ok && t.DatasetID != "" {
				if d, err := in.st.GetDataset(ctx, t.DatasetID); err == nil {
					name = d.Name
				}
				dsNames[t.DatasetID] = name
			}
			sr.Messages, sr.Tools, sr.Seal = sortByTimestamp(req.Events.Messages), ToolList(req.Events.Tools), in.Seal(name, nil)
		}
		sreqs[i] = sr
	}
	if in.grouped {
		return in.appendGrouped(ctx, sreqs)
	}
	return in.st.AppendMany(ctx, sreqs)
}

// sortByTimestamp stably sorts appended messages by their timestamp
// (all carry one after PrepareAppend; numbers are milliseconds).
func sortByTimestamp(msgs []store.Message) []store.Message {
	type keyed struct {
		t time.Time
		m store.Message
	}
	ks := make([]keyed, len(msgs))
	for i, m := range msgs {
		var v struct {
			Timestamp any `json:"timestamp"`
		}
		_ = json.Unmarshal(m.Data, &v)
		switch ts := v.Timestamp.(type) {
		case string:
			ks[i].t, _ = ParseTime(ts)
		case float64:
			ks[i].t = time.UnixMilli(int64(ts))
		}
		ks[i].m = m
	}
	slices.SortStableFunc(ks, func(a, b keyed) int { return a.t.Compare(b.t) })
	out := make([]store.Message, len(ks))
	for i, k := range ks {
		out[i] = k.m
	}
	return out
}
