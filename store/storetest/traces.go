package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vigilhq/vigil/store"
)

func init() {
	register("PushSnippets", testPushSnippets)
	register("PushIndicesAndBytes", testPushIndices)
	register("PushExplicitIndicesAndIDs", testPushExplicit)
	register("PushAtomic", testPushAtomic)
	register("PushPrepare", testPushPrepare)
	register("PushConcurrent", testPushConcurrent)
	register("Append", testAppend)
	register("AppendConcurrentChain", testAppendConcurrent)
	register("ListTraces", testListTraces)
	register("IterTraces", testIterTraces)
	register("IterTraceEvents", testIterTraceEvents)
	register("UpdateTrace", testUpdateTrace)
	register("DeleteTrace", testDeleteTrace)
	register("FinishRun", testFinishRun)
}

func testPushSnippets(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	u := newUser(t, s, "u")
	res, err := s.PushTraces(ctx, store.PushRequest{OwnerID: u.ID, Traces: []store.NewTrace{
		{Name: "one", Messages: events("a", 2)}, {Messages: events("b", 1)},
	}})
	must(t, err)
	if res.Dataset != nil || len(res.Traces) != 2 {
		t.Fatalf("snippet push: dataset %v, %d traces", res.Dataset, len(res.Traces))
	}
	for _, tr := range res.Traces {
		if tr.Index != 0 || tr.DatasetID != "" || tr.Status != store.RunOpen || tr.SessionID != tr.ID {
			t.Errorf("snippet %+v", tr)
		}
	}
	snips, err := s.ListTraces(ctx, store.TraceFilter{OwnerID: u.ID, Snippets: true, Order: store.OrderTimeCreatedDesc})
	must(t, err)
	if len(snips) != 2 {
		t.Fatalf("ListTraces(snippets) = %d", len(snips))
	}
	_, err = s.PushTraces(ctx, store.PushRequest{OwnerID: u.ID, DatasetName: "missing", Traces: []store.NewTrace{{Messages: events("c", 1)}}})
	wantErr(t, err, store.ErrNotFound)
	if _, err := s.PushTraces(ctx, store.PushRequest{OwnerID: u.ID}); err == nil {
		t.Error("empty push succeeded")
	}
	for _, md := range []string{`[1]`, `"s"`, `{"a":`} {
		_, err := s.PushTraces(ctx, store.PushRequest{OwnerID: u.ID, Traces: []store.NewTrace{{Metadata: json.RawMessage(md), Messages: events("d", 1)}}})
		if err == nil || !strings.Contains(err.Error(), "trace 0 metadata") {
			t.Errorf("push with metadata %s: %v", md, err)
		}
		if err := s.CreateDataset(ctx, &store.Dataset{OwnerID: u.ID, Name: "bad", Metadata: json.RawMessage(md)}); err == nil {
			t.Errorf("dataset with metadata %s accepted", md)
		}
	}
}

func testPushIndices(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	u := newUser(t, s, "u")
	// Bytes are kept exactly: odd spacing, key order, escapes.
	odd := []byte(`{"role":"user" ,  "content":"a\u00e9\ud83d\ude00 <&>","z":1,"a":[1.50,2e3],"message_id":"m-odd"}`)
	req := store.PushRequest{OwnerID: u.ID, DatasetName: "ds", CreateIfMissing: true, NewDatasetMetadata: json.RawMessage(`{"created_on":"now"}`),
		Seal: chainSeal,
		Traces: []store.NewTrace{
			{Name: "first", HierarchyPath: []string{"suite", "case"}, Metadata: json.RawMessage(`{"k":"v","n":1}`), SessionKey: "h:run-1", KeyID: "key-1",
				Messages: []store.Message{{ID: "m-odd", NodeIDs: []string{"N1", "N2"}, Data: odd}, {Data: json.RawMessage(`{"role":"assistant"}`)}}},
			{Messages: events("x", 3)},
		}}
	res, err := s.PushTraces(ctx, req)
	must(t, err)
	if !res.DatasetCreated || res.Dataset.Name != "ds" || res.Dataset.NumTraces != 2 || res.Dataset.NextIndex != 2 {
		t.Fatalf("dataset %+v created %v", res.Dataset, res.DatasetCreated)
	}
	assertJSON(t, res.Dataset.Metadata, `{"created_on":"now"}`)
	if res.Traces[0].Index != 0 || res.Traces[1].Index != 1 {
		t.Errorf("indices %d %d", res.Traces[0].Index, res.Traces[1].Index)
	}
	generated := res.Traces[0].Messages[1].ID
	if generated == "" {
		t.Fatal("message without id got none")
	}
	got, err := s.GetTrace(ctx, res.Traces[0].ID, true)
	must(t, err)
	if got.Name != "first" || !reflect.DeepEqual(got.HierarchyPath, []string{"suite", "case"}) || got.SessionKey != "h:run-1" ||
		got.KeyID != "key-1" || got.DatasetID != res.Dataset.ID || got.MessageCount != 2 || got.OwnerID != u.ID {
		t.Errorf("GetTrace = %+v", got)
	}
	assertJSON(t, got.Metadata, `{"k":"v","n":1}`)
	if !bytes.Equal(got.Messages[0].Data, odd) {
		t.Errorf("stored bytes changed:\n got %s\nwant %s", got.Messages[0].Data, odd)
	}
	if got.Messages[0].ID != "m-odd" || got.Messages[0].Index != 0 || !reflect.DeepEqual(got.Messages[0].NodeIDs, []string{"N1", "N2"}) ||
		got.Messages[1].ID != generated || got.Messages[1].Index != 1 {
		t.Errorf("messages = %+v", got.Messages)
	}
	recs := checkChain(t, s, got.SessionID, 2)
	var rt receiptText
	must(t, json.Unmarshal([]byte(recs[0].Text), &rt))
	if rt.MessageID != "m-odd" {
		t.Errorf("receipt 0 covers %q", rt.MessageID)
	}
	nomsg, err := s.GetTrace(ctx, res.Traces[1].ID, false)
	must(t, err)
	if nomsg.Messages != nil || nomsg.MessageCount != 3 || nomsg.Name != "" || nomsg.HierarchyPath == nil {
		t.Errorf("GetTrace without messages = %+v", nomsg)
	}
	// The next push continues the counter; the dataset already exists.
	res2 := push(t, s, u.ID, "ds", 2, 1)
	if res2.DatasetCreated || res2.Traces[0].Index != 2 || res2.Traces[1].Index != 3 {
		t.Errorf("second push: created %v indices %d %d", res2.DatasetCreated, res2.Traces[0].Index, res2.Traces[1].Index)
	}
	_, err = s.GetTrace(ctx, store.NewID(), false)
	wantErr(t, err, store.ErrNotFound)
	// Duplicate message ids within a trace are a conflict.
	_, err = s.PushTraces(ctx, store.PushRequest{OwnerID: u.ID, DatasetName: "ds", Traces: []store.NewTrace{
		{Messages: []store.Message{event("same", "user", "a"), event("same", "user", "b")}}}})
	wantErr(t, err, store.ErrConflict)
}

func testPushExplicit(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	u := newUser(t, s, "u")
	idx := func(i int64) *int64 { return &i }
	fixed := store.NewID()
	res, err := s.PushTraces(ctx, store.PushRequest{OwnerID: u.ID, DatasetName: "up", CreateIfMissing: true, RequireEmpty: true,
		MergeMetadata: map[string]json.RawMessage{"benchmark": json.RawMessage(`"b"`)},
		Traces: []store.NewTrace{
			{ID: fixed, Index: idx(5), Messages: events("a", 1)},
			{Index: idx(2), Messages: events("b", 1), Status: store.RunCompleted},
		}, Seal: chainSeal, Close: closeSeal})
	must(t, err)
	if res.Traces[0].ID != fixed || res.Traces[0].Index != 5 || res.Traces[1].Index != 2 || res.Dataset.NextIndex != 6 {
		t.Fatalf("explicit push: %s/%d %d next %d", res.Traces[0].ID, res.Traces[0].Index, res.Traces[1].Index, res.Dataset.NextIndex)
	}
	assertJSON(t, res.Dataset.Metadata, `{"benchmark":"b"}`)
	// The finished trace's run is completed and its session closed.
	fin, _ := s.GetTrace(ctx, res.Traces[1].ID, false)
	sess, _ := s.GetSession(ctx, fin.SessionID)
	if fin.Status != store.RunCompleted || fin.EndedAt == nil || sess.ClosedAt == nil || sess.CloseHash != sess.Tail.LastHash || sess.CloseHash == "0" {
		t.Errorf("finished at push: status %s, session %+v", fin.Status, sess)
	}
	// Create mode on a non-empty dataset.
	_, err = s.PushTraces(ctx, store.PushRequest{OwnerID: u.ID, DatasetName: "up", RequireEmpty: true, Traces: []store.NewTrace{{Messages: events("c", 1)}}})
	wantErr(t, err, store.ErrConflict)
	// Explicit index collisions are an IndexTakenError naming the index:
	// with a stored trace, and within the push (an explicit index equal
	// to the next automatic one).
	for _, tt := range []struct {
		traces []store.NewTrace
		want   store.IndexTakenError
	}{
		{[]store.NewTrace{{Index: idx(3), Messages: events("d", 1)}, {Index: idx(2), Messages: events("d", 1)}}, store.IndexTakenError{Dataset: "up", Index: 2}},
		{[]store.NewTrace{{Index: idx(6), Messages: events("d", 1)}, {Messages: events("d", 1)}}, store.IndexTakenError{Dataset: "up", Index: 6, InPush: true}},
	} {
		_, err = s.PushTraces(ctx, store.PushRequest{OwnerID: u.ID, DatasetName: "up", Traces: tt.traces})
		wantErr(t, err, store.ErrConflict)
		var taken *store.IndexTakenError
		if !errors.As(err, &taken) || *taken != tt.want {
			t.Errorf("index collision: %v, want %+v", err, tt.want)
		}
	}
	// The counter moved past the largest explicit index.
	next := push(t, s, u.ID, "up", 1, 1)
	if next.Traces[0].Index != 6 {
		t.Errorf("auto index after explicit 5 = %d, want 6", next.Traces[0].Index)
	}
	// A taken id fails, unless ReplaceTakenIDs.
	_, err = s.PushTraces(ctx, store.PushRequest{OwnerID: u.ID, DatasetName: "up", Traces: []store.NewTrace{{ID: fixed, Messages: events("e", 1)}}})
	wantErr(t, err, store.ErrConflict)
	rep, err := s.PushTraces(ctx, store.PushRequest{OwnerID: u.ID, DatasetName: "up", ReplaceTakenIDs: true,
		Traces: []store.NewTrace{{ID: fixed, Messages: events("e", 1)}, {ID: "11111111-2222-7333-8444-555555555555", Messages: events("f", 1)}}})
	must(t, err)
	if rep.Traces[0].ID == fixed || rep.Traces[1].ID != "11111111-2222-7333-8444-555555555555" {
		t.Errorf("ReplaceTakenIDs: ids %s %s", rep.Traces[0].ID, rep.Traces[1].ID)
	}
	// Annotations pushed with traces are anchored to their messages.
	res3, err := s.PushTraces(ctx, store.PushRequest{OwnerID: u.ID, DatasetName: "up", Traces: []store.NewTrace{{
		Messages: events("g", 2),
		Annotations: []*store.Annotation{
			{UserID: u.ID, Content: "on 1", Address: ".content:0-3", AnchorIndex: intp(1), Resolved: true},
			{UserID: u.ID, Content: "off", Address: ".content", AnchorIndex: intp(7), Resolved: true},
			{UserID: u.ID, Content: "root", Address: "<root>", Resolved: true, ExtraMetadata: json.RawMessage(`{"source":"analyzer"}`)},
		}}}})
	must(t, err)
	anns, err := s.ListAnnotations(ctx, res3.Traces[0].ID, nil)
	must(t, err)
	if len(anns) != 3 {
		t.Fatalf("%d annotations", len(anns))
	}
	byContent := map[string]*store.Annotation{}
	for _, a := range anns {
		byContent[a.Content] = a
	}
	if a := byContent["on 1"]; a.MessageID != "g-1" || a.Address != ".content:0-3" || !a.Resolved {
		t.Errorf("anchored annotation %+v", a)
	}
	if a := byContent["off"]; a.MessageID != "" || a.Address != "messages.7.content" || a.Resolved {
		t.Errorf("unresolvable annotation %+v", a)
	}
	if a := byContent["root"]; a.Source != "analyzer" || a.Address != "<root>" || a.OwnerID != u.ID {
		t.Errorf("root annotation %+v", a)
	}
}

func intp(i int) *int { return &i }

func testPushAtomic(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	u := newUser(t, s, "u")
	boom := errors.New("boom")
	calls := 0
	_, err := s.PushTraces(ctx, store.PushRequest{OwnerID: u.ID, DatasetName: "atomic", CreateIfMissing: true,
		Traces: []store.NewTrace{{Messages: events("a", 1)}, {Messages: events("b", 1)}},
		Seal: func(ctx context.Context, req store.SealRequest) ([]store.Receipt, error) {
			calls++
			if calls == 2 {
				return nil, boom
			}
			return chainSeal(ctx, req)
		}})
	wantErr(t, err, boom)
	_, err = s.GetDatasetByName(ctx, u.ID, "atomic")
	wantErr(t, err, store.ErrNotFound)
	n, err := s.CountTraces(ctx, store.TraceFilter{OwnerID: u.ID})
	must(t, err)
	if n != 0 {
		t.Errorf("%d traces after a failed push", n)
	}
	// A receipt without a hash is rejected, also atomically.
	_, err = s.PushTraces(ctx, store.PushRequest{OwnerID: u.ID, DatasetName: "atomic", CreateIfMissing: true,
		Traces: []store.NewTrace{{Messages: events("a", 1)}},
		Seal: func(context.Context, store.SealRequest) ([]store.Receipt, error) {
			return []store.Receipt{{ID: "r", Text: "{}"}}, nil
		}})
	if err == nil {
		t.Fatal("receipt without hash accepted")
	}
	// The counter did not move: the first successful push gets index 0.
	res := push(t, s, u.ID, "atomic", 1, 1)
	if res.Traces[0].Index != 0 {
		t.Errorf("index after failed pushes = %d", res.Traces[0].Index)
	}
}

func testPushConcurrent(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	u := newUser(t, s, "u")
	const pushers, perPush = 50, 3
	var wg sync.WaitGroup
	errs := make(chan error, pushers)
	ids := make([][]string, pushers)
	for p := range pushers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := store.PushRequest{OwnerID: u.ID, DatasetName: "busy", CreateIfMissing: true, Seal: chainSeal}
			for i := range perPush {
				req.Traces = append(req.Traces, store.NewTrace{Messages: events(fmt.Sprintf("p%d-%d", p, i), 2)})
			}
			res, err := s.PushTraces(ctx, req)
			if err != nil {
				errs <- err
				return
			}
			for i, tr := range res.Traces {
				if i > 0 && tr.Index != res.Traces[i-1].Index+1 {
					errs <- fmt.Errorf("pusher %d: indices within one push not contiguous: %d after %d", p, tr.Index, res.Traces[i-1].Index)
				}
				ids[p] = append(ids[p], tr.ID)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	ds, err := s.GetDatasetByName(ctx, u.ID, "busy")
	must(t, err)
	all, err := s.ListTraces(ctx, store.TraceFilter{DatasetID: ds.ID})
	must(t, err)
	if len(all) != pushers*perPush || ds.NumTraces != pushers*perPush || ds.NextIndex != pushers*perPush {
		t.Fatalf("%d traces (NumTraces %d, NextIndex %d), want %d", len(all), ds.NumTraces, ds.NextIndex, pushers*perPush)
	}
	for i, tr := range all {
		if tr.Index != int64(i) {
			t.Fatalf("trace %d has index %d: indices are not 0..n-1", i, tr.Index)
		}
	}
	for p := range pushers {
		for _, id := range ids[p] {
			if _, err := s.GetTrace(ctx, id, false); err != nil {
				t.Errorf("acknowledged trace %s: %v", id, err)
			}
		}
	}
}

func testAppend(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	u := newUser(t, s, "u")
	res := push(t, s, u.ID, "app", 1, 2)
	tr := res.Traces[0]
	at := time.Date(2027, 5, 6, 7, 8, 9, 123456000, time.UTC)
	out, err := s.AppendEvents(ctx, store.AppendRequest{TraceID: tr.ID, Messages: events("n", 2), Time: at, Seal: chainSeal,
		Annotations: []*store.Annotation{
			{UserID: u.ID, Content: "old", Address: ".content", AnchorIndex: intp(1), Resolved: true},
			{UserID: u.ID, Content: "new", Address: "", AnchorIndex: intp(3), Resolved: true},
			{UserID: u.ID, Content: "byid", MessageID: "m0-0", Address: ".role", Resolved: true},
		}})
	must(t, err)
	if len(out.Messages) != 2 || out.Messages[0].Index != 2 || out.Messages[1].Index != 3 || len(out.Receipts) != 2 ||
		out.Receipts[0].Seq != 2 || out.Trace.MessageCount != 4 || !out.Trace.TimeLastPushed.Equal(at) {
		t.Fatalf("AppendEvents = %+v", out)
	}
	got, err := s.GetTrace(ctx, tr.ID, true)
	must(t, err)
	var mids []string
	for i, m := range got.Messages {
		if m.Index != i {
			t.Errorf("message %d has index %d", i, m.Index)
		}
		mids = append(mids, m.ID)
	}
	if !reflect.DeepEqual(mids, []string{"m0-0", "m0-1", "n-0", "n-1"}) || !got.TimeLastPushed.Equal(at) || got.TimeCreated.Equal(at) {
		t.Errorf("after append: ids %v, last pushed %v", mids, got.TimeLastPushed)
	}
	checkChain(t, s, tr.SessionID, 4)
	ids, err := s.MessageIDs(ctx, tr.ID)
	must(t, err)
	if !reflect.DeepEqual(ids, mids) {
		t.Errorf("MessageIDs = %v, want %v", ids, mids)
	}
	_, err = s.MessageIDs(ctx, store.NewID())
	wantErr(t, err, store.ErrNotFound)
	anns, _ := s.ListAnnotations(ctx, tr.ID, nil)
	want := map[string]string{"old": "m0-1", "new": "n-1", "byid": "m0-0"}
	for _, a := range anns {
		if a.MessageID != want[a.Content] {
			t.Errorf("annotation %q anchored to %q, want %q", a.Content, a.MessageID, want[a.Content])
		}
	}
	ds, _ := s.GetDataset(ctx, res.Dataset.ID)
	if ds.LatestTraceTime == nil || !ds.LatestTraceTime.Equal(at) {
		t.Errorf("dataset LatestTraceTime = %v, want %v", ds.LatestTraceTime, at)
	}

	_, err = s.AppendEvents(ctx, store.AppendRequest{TraceID: store.NewID(), Messages: events("z", 1)})
	wantErr(t, err, store.ErrNotFound)
	_, err = s.AppendEvents(ctx, store.AppendRequest{TraceID: tr.ID, Messages: events("n", 1)})
	wantErr(t, err, store.ErrConflict)
	if _, err := s.AppendEvents(ctx, store.AppendRequest{TraceID: tr.ID}); err == nil {
		t.Error("empty append succeeded")
	}
	// A failing seal writes nothing.
	boom := errors.New("boom")
	_, err = s.AppendEvents(ctx, store.AppendRequest{TraceID: tr.ID, Messages: events("q", 1),
		Seal: func(context.Context, store.SealRequest) ([]store.Receipt, error) { return nil, boom }})
	wantErr(t, err, boom)
	got, _ = s.GetTrace(ctx, tr.ID, true)
	if got.MessageCount != 4 || len(got.Messages) != 4 {
		t.Errorf("failed append left %d messages", len(got.Messages))
	}
	checkChain(t, s, tr.SessionID, 4)
	// The seal sees the locked tail and the event positions.
	_, err = s.AppendEvents(ctx, store.AppendRequest{TraceID: tr.ID, Messages: events("r", 1),
		Seal: func(ctx context.Context, req store.SealRequest) ([]store.Receipt, error) {
			if req.FirstIndex != 4 || req.Session.Tail.Count != 4 || req.Trace.ID != tr.ID || len(req.Events) != 1 || req.Events[0].Index != 4 {
				return nil, fmt.Errorf("seal request: first %d tail %+v", req.FirstIndex, req.Session.Tail)
			}
			return chainSeal(ctx, req)
		}})
	must(t, err)
	checkChain(t, s, tr.SessionID, 5)
}

func testAppendConcurrent(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	u := newUser(t, s, "u")
	res := push(t, s, u.ID, "chain", 1, 1)
	tr := res.Traces[0]
	const writers, each = 8, 5
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				_, err := s.AppendEvents(ctx, store.AppendRequest{TraceID: tr.ID, Messages: events(fmt.Sprintf("w%d-%d", w, i), 2), Seal: chainSeal})
				if err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	n := 1 + writers*each*2
	recs := checkChain(t, s, tr.SessionID, n)
	got, err := s.GetTrace(ctx, tr.ID, true)
	must(t, err)
	if len(got.Messages) != n || got.MessageCount != n {
		t.Fatalf("%d messages, want %d", len(got.Messages), n)
	}
	// Receipt i covers message i: events and receipts were written together.
	for i, r := range recs {
		var rt receiptText
		must(t, json.Unmarshal([]byte(r.Text), &rt))
		if rt.MessageID != got.Messages[i].ID {
			t.Fatalf("receipt %d covers %s, message %d is %s", i, rt.MessageID, i, got.Messages[i].ID)
		}
	}
}

func testListTraces(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	u := newUser(t, s, "u")
	res := push(t, s, u.ID, "list", 10, 1)
	other := push(t, s, u.ID, "other", 2, 1)
	ds := res.Dataset.ID
	// Make trace 3 the most recently pushed.
	_, err := s.AppendEvents(ctx, store.AppendRequest{TraceID: res.Traces[3].ID, Messages: events("late", 1), Time: time.Now().Add(time.Hour)})
	must(t, err)
	idx := func(ts []*store.Trace) []int64 {
		out := []int64{}
		for _, t := range ts {
			out = append(out, t.Index)
		}
		return out
	}
	after := int64(6)
	for _, tc := range []struct {
		name string
		f    store.TraceFilter
		want []int64
	}{
		{"by index", store.TraceFilter{DatasetID: ds}, []int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}},
		{"desc", store.TraceFilter{DatasetID: ds, Order: store.OrderIndexDesc, Limit: 3}, []int64{9, 8, 7}},
		{"limit offset", store.TraceFilter{DatasetID: ds, Limit: 3, Offset: 4}, []int64{4, 5, 6}},
		{"offset only", store.TraceFilter{DatasetID: ds, Offset: 8}, []int64{8, 9}},
		{"keyset", store.TraceFilter{DatasetID: ds, AfterIndex: &after, Limit: 2}, []int64{7, 8}},
		{"indices", store.TraceFilter{DatasetID: ds, Indices: []int64{9, 1, 5, 42}}, []int64{1, 5, 9}},
		{"ids", store.TraceFilter{IDs: []string{res.Traces[2].ID, other.Traces[1].ID}}, []int64{1, 2}},
		{"empty ids", store.TraceFilter{DatasetID: ds, IDs: []string{}}, []int64{}},
		{"last pushed desc", store.TraceFilter{DatasetID: ds, Order: store.OrderTimeLastPushedDesc, Limit: 1}, []int64{3}},
		{"created", store.TraceFilter{DatasetID: ds, Order: store.OrderTimeCreated, Limit: 2}, []int64{0, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.ListTraces(ctx, tc.f)
			must(t, err)
			if !reflect.DeepEqual(idx(got), tc.want) {
				t.Errorf("ListTraces = %v, want %v", idx(got), tc.want)
			}
			if tc.f.Limit == 0 && tc.f.Offset == 0 && tc.f.AfterIndex == nil {
				n, err := s.CountTraces(ctx, tc.f)
				must(t, err)
				if n != len(tc.want) {
					t.Errorf("CountTraces = %d, want %d", n, len(tc.want))
				}
			}
		})
	}
	// Time bounds: trace 3 was pushed an hour ahead; all were created now.
	soon := time.Now().Add(30 * time.Minute)
	past := time.Now().Add(-time.Hour)
	for _, tc := range []struct {
		name string
		f    store.TraceFilter
		want int
	}{
		{"pushed from", store.TraceFilter{DatasetID: ds, PushedFrom: &soon}, 1},
		{"pushed before", store.TraceFilter{DatasetID: ds, PushedBefore: &soon}, 9},
		{"created from", store.TraceFilter{DatasetID: ds, CreatedFrom: &past}, 10},
		{"created before", store.TraceFilter{DatasetID: ds, CreatedBefore: &past}, 0},
		{"open runs", store.TraceFilter{DatasetID: ds, Status: store.RunOpen}, 10},
		{"completed runs", store.TraceFilter{DatasetID: ds, Status: store.RunCompleted}, 0},
	} {
		n, err := s.CountTraces(ctx, tc.f)
		must(t, err)
		if n != tc.want {
			t.Errorf("%s: CountTraces = %d, want %d", tc.name, n, tc.want)
		}
	}
	withMsgs, err := s.ListTraces(ctx, store.TraceFilter{DatasetID: ds, Indices: []int64{3, 4}, WithMessages: true})
	must(t, err)
	if len(withMsgs) != 2 || len(withMsgs[0].Messages) != 2 || len(withMsgs[1].Messages) != 1 || withMsgs[0].Messages[1].ID != "late-0" {
		t.Errorf("WithMessages: %+v", withMsgs)
	}
	sk, err := s.PushTraces(ctx, store.PushRequest{OwnerID: u.ID, DatasetName: "list", Traces: []store.NewTrace{{SessionKey: "h:abc", Messages: events("s", 1)}}})
	must(t, err)
	got, err := s.ListTraces(ctx, store.TraceFilter{SessionKey: "h:abc"})
	must(t, err)
	if len(got) != 1 || got[0].ID != sk.Traces[0].ID {
		t.Errorf("by session key: %v", got)
	}
}

func testIterTraces(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	u := newUser(t, s, "u")
	res := push(t, s, u.ID, "exp", 10, 2)
	push(t, s, u.ID, "noise", 3, 1)
	ds := res.Dataset.ID
	must(t, s.CreateAnnotation(ctx, &store.Annotation{TraceID: res.Traces[4].ID, UserID: u.ID, Content: "a", Address: "<root>"}))
	must(t, s.CreateAnnotation(ctx, &store.Annotation{TraceID: res.Traces[7].ID, UserID: u.ID, Content: "b", Address: ".content", AnchorIndex: intp(1)}))
	collect := func(opt store.IterOptions) ([]int64, []*store.Trace) {
		var idx []int64
		var ts []*store.Trace
		for tr, err := range s.IterTraces(ctx, ds, opt) {
			must(t, err)
			idx = append(idx, tr.Index)
			ts = append(ts, tr)
		}
		return idx, ts
	}
	for _, size := range []int{0, 1, 3, 10, 11} {
		idx, ts := collect(store.IterOptions{PageSize: size})
		if !reflect.DeepEqual(idx, []int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}) {
			t.Errorf("page size %d: %v", size, idx)
		}
		if len(ts[0].Messages) != 2 || len(ts[4].Annotations) != 1 || len(ts[7].Annotations) != 1 || ts[7].Annotations[0].MessageID != "m7-1" {
			t.Errorf("page size %d: messages/annotations not loaded", size)
		}
	}
	idx, _ := collect(store.IterOptions{OnlyAnnotated: true, PageSize: 1})
	if !reflect.DeepEqual(idx, []int64{4, 7}) {
		t.Errorf("only annotated: %v", idx)
	}
	idx, _ = collect(store.IterOptions{IDs: []string{res.Traces[9].ID, res.Traces[0].ID}})
	if !reflect.DeepEqual(idx, []int64{0, 9}) {
		t.Errorf("ids: %v", idx)
	}
	// Stopping early is fine.
	n := 0
	for range s.IterTraces(ctx, ds, store.IterOptions{PageSize: 2}) {
		n++
		if n == 3 {
			break
		}
	}
	// A cancelled context ends the sequence with an error.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	var gotErr error
	for _, err := range s.IterTraces(cctx, ds, store.IterOptions{}) {
		if err != nil {
			gotErr = err
		}
	}
	if gotErr == nil {
		t.Error("IterTraces with a cancelled context yielded no error")
	}
}

func testUpdateTrace(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	u := newUser(t, s, "u")
	res, err := s.PushTraces(ctx, store.PushRequest{OwnerID: u.ID, DatasetName: "up", CreateIfMissing: true,
		Traces: []store.NewTrace{{Name: "old", Metadata: json.RawMessage(`{"a":{"b":1,"c":2},"d":3}`), Messages: events("a", 1)}}})
	must(t, err)
	id := res.Traces[0].ID
	name, yes := "new", true
	hp := []string{"x", "y"}
	got, err := s.UpdateTrace(ctx, id, store.TraceUpdate{Name: &name, HierarchyPath: &hp, Shared: &yes,
		MetadataMerge: json.RawMessage(`{"a":{"b":null,"e":[1]},"d":null,"f":"g"}`)})
	must(t, err)
	if got.Name != "new" || !reflect.DeepEqual(got.HierarchyPath, hp) || !got.Shared {
		t.Errorf("UpdateTrace = %+v", got)
	}
	assertJSON(t, got.Metadata, `{"a":{"c":2,"e":[1]},"f":"g"}`)
	stored, _ := s.GetTrace(ctx, id, false)
	assertJSON(t, stored.Metadata, `{"a":{"c":2,"e":[1]},"f":"g"}`)
	if stored.Name != "new" || !stored.Shared {
		t.Errorf("stored after update: %+v", stored)
	}
	empty := ""
	got, err = s.UpdateTrace(ctx, id, store.TraceUpdate{Name: &empty})
	must(t, err)
	if got.Name != "" {
		t.Errorf("name not cleared")
	}
	_, err = s.UpdateTrace(ctx, store.NewID(), store.TraceUpdate{Name: &name})
	wantErr(t, err, store.ErrNotFound)
}

func testDeleteTrace(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	u := newUser(t, s, "u")
	res := push(t, s, u.ID, "del", 3, 2)
	tr := res.Traces[1]
	must(t, s.CreateAnnotation(ctx, &store.Annotation{TraceID: tr.ID, UserID: u.ID, Content: "x", Address: "<root>"}))
	must(t, s.DeleteTrace(ctx, tr.ID, closeSeal))
	_, err := s.GetTrace(ctx, tr.ID, true)
	wantErr(t, err, store.ErrNotFound)
	wantErr(t, s.DeleteTrace(ctx, tr.ID, nil), store.ErrNotFound)
	anns, err := s.ListAnnotations(ctx, tr.ID, nil)
	must(t, err)
	if len(anns) != 0 {
		t.Errorf("%d annotations survive", len(anns))
	}
	sess, err := s.GetSession(ctx, tr.SessionID)
	must(t, err)
	if sess.ClosedAt == nil {
		t.Error("session of deleted trace still open")
	}
	checkChain(t, s, tr.SessionID, 2)
	ds, _ := s.GetDataset(ctx, res.Dataset.ID)
	if ds.NumTraces != 2 || ds.NextIndex != 3 {
		t.Errorf("dataset after delete: %d traces, next %d", ds.NumTraces, ds.NextIndex)
	}
	// Indices are never reused.
	again := push(t, s, u.ID, "del", 1, 1)
	if again.Traces[0].Index != 3 {
		t.Errorf("index after delete = %d, want 3", again.Traces[0].Index)
	}
	// Deleting without closeFn leaves the session open.
	must(t, s.DeleteTrace(ctx, res.Traces[0].ID, nil))
	sess, _ = s.GetSession(ctx, res.Traces[0].SessionID)
	if sess.ClosedAt != nil {
		t.Error("session closed without closeFn")
	}
}

func testFinishRun(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	u := newUser(t, s, "u")
	res := push(t, s, u.ID, "fin", 2, 2)
	tr := res.Traces[0]
	at := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	_, err := s.FinishRun(ctx, tr.ID, "bogus", at, closeSeal)
	if err == nil {
		t.Error("bogus status accepted")
	}
	got, err := s.FinishRun(ctx, tr.ID, store.RunFailed, at, closeSeal)
	must(t, err)
	if got.Status != store.RunFailed || got.EndedAt == nil || !got.EndedAt.Equal(at) {
		t.Errorf("FinishRun = %+v", got)
	}
	sess, _ := s.GetSession(ctx, tr.SessionID)
	if sess.Status() != "closed" || sess.CloseHash != sess.Tail.LastHash || sess.CloseSignature != "sig:"+sess.Tail.LastHash {
		t.Errorf("session after finish: %+v", sess)
	}
	_, err = s.FinishRun(ctx, tr.ID, store.RunCompleted, at, closeSeal)
	wantErr(t, err, store.ErrFinished)
	_, err = s.AppendEvents(ctx, store.AppendRequest{TraceID: tr.ID, Messages: events("late", 1), Seal: chainSeal})
	wantErr(t, err, store.ErrFinished)
	checkChain(t, s, tr.SessionID, 2)
	_, err = s.FinishRun(ctx, store.NewID(), store.RunCompleted, at, closeSeal)
	wantErr(t, err, store.ErrNotFound)
	// Closing the session alone also stops appends.
	_, err = s.CloseSession(ctx, res.Traces[1].SessionID, closeSeal)
	must(t, err)
	_, err = s.AppendEvents(ctx, store.AppendRequest{TraceID: res.Traces[1].ID, Messages: events("late", 1)})
	wantErr(t, err, store.ErrFinished)
	ts, _ := s.ListTraces(ctx, store.TraceFilter{DatasetID: res.Dataset.ID})
	statuses := []store.RunStatus{}
	for _, t := range ts {
		statuses = append(statuses, t.Status)
	}
	if !slices.Equal(statuses, []store.RunStatus{store.RunFailed, store.RunOpen}) {
		t.Errorf("statuses %v", statuses)
	}
}

// testIterTraceEvents: every trace once, in index order, its events the
// stored data joined in index order (what IterTraces gives as Messages),
// with IterTraces' filters and errors.
func testIterTraceEvents(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	u := newUser(t, s, "u")
	res := push(t, s, u.ID, "exp", 10, 3)
	push(t, s, u.ID, "noise", 3, 1)
	empty, err := s.PushTraces(ctx, store.PushRequest{OwnerID: u.ID, DatasetName: "exp", Traces: []store.NewTrace{{Metadata: json.RawMessage(`{"k":"v"}`)}}})
	must(t, err)
	ds := res.Dataset.ID
	must(t, s.CreateAnnotation(ctx, &store.Annotation{TraceID: res.Traces[4].ID, UserID: u.ID, Content: "a", Address: "<root>"}))
	var want []string
	for tr, err := range s.IterTraces(ctx, ds, store.IterOptions{}) {
		must(t, err)
		var b []byte
		for i, m := range tr.Messages {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, m.Data...)
		}
		want = append(want, fmt.Sprintf("%d %s %s [%s]", tr.Index, tr.ID, tr.Metadata, b))
	}
	if len(want) != 11 || !strings.HasSuffix(want[10], empty.Traces[0].ID+` {"k":"v"} []`) {
		t.Fatalf("IterTraces gave %q", want)
	}
	collect := func(opt store.IterOptions) []string {
		var got []string
		var all []*store.TraceEvents
		for te, err := range s.IterTraceEvents(ctx, ds, opt) {
			all = append(all, te)
			must(t, err)
			if te.Trace.Messages != nil || te.Trace.Annotations != nil || te.Trace.MessageCount != strings.Count(string(te.Events), `"role"`) {
				t.Errorf("trace %s: messages %v, annotations %v, count %d", te.Trace.ID, te.Trace.Messages, te.Trace.Annotations, te.Trace.MessageCount)
			}
			if !json.Valid(te.Events) {
				t.Errorf("trace %s: events not JSON: %s", te.Trace.ID, te.Events)
			}
		}
		for _, te := range all { // after the sequence: no buffer is reused
			got = append(got, fmt.Sprintf("%d %s %s %s", te.Trace.Index, te.Trace.ID, te.Trace.Metadata, te.Events))
		}
		return got
	}
	for _, size := range []int{0, 1, 3, 11, 12} {
		if got := collect(store.IterOptions{PageSize: size}); !reflect.DeepEqual(got, want) {
			t.Errorf("page size %d:\n%q\nwant\n%q", size, got, want)
		}
	}
	if got := collect(store.IterOptions{OnlyAnnotated: true}); !reflect.DeepEqual(got, want[4:5]) {
		t.Errorf("only annotated: %q", got)
	}
	if got := collect(store.IterOptions{IDs: []string{res.Traces[9].ID, res.Traces[0].ID}, PageSize: 1}); !reflect.DeepEqual(got, []string{want[0], want[9]}) {
		t.Errorf("ids: %q", got)
	}
	if got := collect(store.IterOptions{}); len(got) != 11 {
		t.Errorf("default page size: %d traces", len(got))
	}
	n := 0
	for range s.IterTraceEvents(ctx, ds, store.IterOptions{PageSize: 2}) {
		if n++; n == 3 {
			break
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	var gotErr error
	for _, err := range s.IterTraceEvents(cctx, ds, store.IterOptions{}) {
		if err != nil {
			gotErr = err
		}
	}
	if gotErr == nil {
		t.Error("IterTraceEvents with a cancelled context yielded no error")
	}
}

// testPushPrepare: PushRequest.Prepare fills each trace's events late,
// the store lets them go once queued, and a push large enough to be
// written in several pieces is still one transaction.
func testPushPrepare(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	u := newUser(t, s, "u")
	big := strings.Repeat("x", 1<<20) // 3 traces × 2 events of 1 MiB: written in pieces
	mk := func(i int) []store.Message {
		return []store.Message{event(fmt.Sprintf("p%d-0", i), "user", big), event(fmt.Sprintf("p%d-1", i), "assistant", fmt.Sprint(i))}
	}
	prepare := func(fail int) func(int, *store.NewTrace) error {
		return func(i int, nt *store.NewTrace) error {
			if i == fail {
				return errors.New("boom")
			}
			nt.Messages = mk(i)
			return nil
		}
	}
	req := store.PushRequest{OwnerID: u.ID, DatasetName: "prep", CreateIfMissing: true, Seal: chainSeal,
		Traces: make([]store.NewTrace, 3), Prepare: prepare(2)}
	_, err := s.PushTraces(ctx, req)
	if err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("err = %v, want boom", err)
	}
	n, err := s.CountTraces(ctx, store.TraceFilter{OwnerID: u.ID})
	must(t, err)
	if n != 0 {
		t.Errorf("%d traces after a push whose Prepare failed", n)
	}
	req.Traces, req.Prepare = make([]store.NewTrace, 3), prepare(-1)
	res, err := s.PushTraces(ctx, req)
	must(t, err)
	for i, tr := range res.Traces {
		if tr.Messages != nil || req.Traces[i].Messages != nil {
			t.Errorf("trace %d: events still held after the push", i)
		}
		got, err := s.GetTrace(ctx, tr.ID, true)
		must(t, err)
		want := mk(i)
		if got.Index != int64(i) || len(got.Messages) != 2 || got.Messages[0].ID != want[0].ID || string(got.Messages[1].Data) != string(want[1].Data) {
			t.Fatalf("trace %d stored as index %d with %d messages", i, got.Index, len(got.Messages))
		}
		checkChain(t, s, tr.SessionID, 2)
	}
}
