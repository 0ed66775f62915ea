package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"mime/multipart"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vigilhq/vigil/client"
	"github.com/vigilhq/vigil/store"
)

const uploadFile = `{"metadata": {"benchmark": "b", "note": "imported"}}
{"index": 3, "name": "three", "messages": [{"role": "user", "content": "hi there"}, {"role": "assistant", "content": "hello"}], "metadata": {"k": 1}, "annotations": [{"content": "greeting", "address": "messages.1.content:0-5", "extra_metadata": {"source": "user"}}]}
{"index": 7, "messages": [{"role": "user", "content": "second"}], "metadata": {}}

`

func TestUploadExportRoundTrip(t *testing.T) {
	forEachBackend(t, func(t *testing.T, ts *testServer) {
		ctx := context.Background()
		d, err := ts.c.Upload(ctx, "up", strings.NewReader(uploadFile), client.UploadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if d.NumTraces == nil || *d.NumTraces != 2 || d.ExtraMetadata["note"] != "imported" {
			t.Fatalf("uploaded dataset %+v", d)
		}
		// Create mode refuses a non-empty dataset.
		_, err = ts.c.Upload(ctx, "up", strings.NewReader(uploadFile), client.UploadOptions{})
		if err == nil || !strings.Contains(err.Error(), "Dataset with the same name already exists with traces") {
			t.Fatalf("second upload: %v", err)
		}
		// Append mode with colliding indices fails too; without indices it appends.
		if _, err := ts.c.Upload(ctx, "up", strings.NewReader(uploadFile), client.UploadOptions{Append: true}); err == nil {
			t.Fatal("append with colliding indices accepted")
		}
		if _, err := ts.c.Upload(ctx, "up", strings.NewReader("[{\"role\": \"user\", \"content\": \"raw\"}]\n"), client.UploadOptions{Append: true}); err != nil {
			t.Fatal(err)
		}
		rows, _ := ts.c.ListTraces(ctx, d.ID, 0, 0)
		if len(rows) != 3 || rows[0].Index != 3 || rows[1].Index != 7 || rows[2].Index != 8 || *rows[0].Name != "three" || *rows[1].Name != "Run 7" {
			t.Fatalf("rows after append %+v", rows)
		}
		// Uploaded runs are finished (ledger.md §7.1) and verify.
		v, err := ts.c.VerifyRun(ctx, rows[0].ID)
		if err != nil || !v.Valid {
			t.Fatalf("verify uploaded run %v %+v", err, v)
		}

		body, err := ts.c.Export(ctx, d.ID, client.ExportOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out, _ := io.ReadAll(body)
		body.Close()
		lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
		if len(lines) != 4 || !strings.HasPrefix(lines[0], `{"metadata":{`) || !strings.HasPrefix(lines[1], `{"index":3,"name":"three","messages":[{"role":"user","content":"hi there","message_id":"`) ||
			!strings.Contains(lines[1], `"annotations":[{"content":"greeting","address":"messages.1.content:0-5","extra_metadata":{"source":"user"}}]`) {
			t.Fatalf("export:\n%s", out)
		}
		// Re-upload the export into a new dataset: same indices, names, messages.
		d2, err := ts.c.Upload(ctx, "copy", bytes.NewReader(out), client.UploadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		body, _ = ts.c.Export(ctx, d2.ID, client.ExportOptions{})
		out2, _ := io.ReadAll(body)
		body.Close()
		l2 := strings.Split(strings.TrimSuffix(string(out2), "\n"), "\n")
		// Lines 1 and 2 round-trip exactly. Line 3 came from a raw upload
		// without index or name; re-imported with its exported index it is
		// named "Run 8" (explorer-api §8.2 names indexed traces).
		if !strings.Contains(l2[3], `"name":"Run 8"`) {
			t.Errorf("re-uploaded line 3: %s", l2[3])
		}
		for i := 1; i < 3; i++ {
			if lines[i] != l2[i] {
				t.Errorf("line %d differs after re-upload:\n%s\n%s", i, lines[i], l2[i])
			}
		}
		// Only annotated traces.
		body, _ = ts.c.Export(ctx, d.ID, client.ExportOptions{OnlyAnnotated: true})
		ann, _ := io.ReadAll(body)
		body.Close()
		if strings.Count(string(ann), "\n") != 2 {
			t.Errorf("annotated export:\n%s", ann)
		}
	})
}

func TestUploadMultipartAndErrors(t *testing.T) {
	ts := newTestServer(t, openSQLite(t))
	fileFirst := false
	send := func(fields map[string]string, file string) (int, string) {
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		if fileFirst {
			fw, _ := mw.CreateFormFile("file", "data.jsonl")
			fw.Write([]byte(file))
		}
		for k, v := range fields {
			mw.WriteField(k, v)
		}
		if !fileFirst {
			fw, _ := mw.CreateFormFile("file", "data.jsonl")
			fw.Write([]byte(file))
		}
		mw.Close()
		req, _ := http.NewRequest("POST", ts.URL+"/api/v1/dataset/upload", &buf)
		req.Header.Set("Content-Type", mw.FormDataContentType())
		req.Header.Set("Authorization", "Bearer "+adminKey)
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if st, b := send(map[string]string{"name": "mp", "is_public": "true"}, uploadFile); st != 200 || !strings.Contains(b, `"is_public":true`) {
		t.Fatalf("multipart upload: %d %s", st, b)
	}
	fileFirst = true // the file part before the fields is spooled
	if st, b := send(map[string]string{"name": "mp2"}, uploadFile); st != 200 || !strings.Contains(b, `"num_traces":2`) {
		t.Fatalf("multipart upload, file first: %d %s", st, b)
	}
	fileFirst = false
	for _, tc := range []struct{ name, file, want string }{
		{"meta twice", "{\"metadata\": {}}\n{\"metadata\": {}}\n", "line 2: The metadata row can appear at most once in the file."},
		{"meta late", "[{\"role\": \"user\"}]\n{\"metadata\": {}}\n", "line 2: The metadata row must be the first row in the file."},
		{"bad index", "{\"index\": \"x\", \"messages\": []}\n", "in the file. Index must be an integer."},
		{"dup index", "{\"index\": 1, \"messages\": []}\n{\"index\": 1, \"messages\": []}\n", "line 2: Duplicate index found: 1 in the file."},
		{"index inconsistent", "{\"index\": 1, \"messages\": []}\n{\"messages\": []}\n", "The 'index' key is inconsistently present"},
		{"mixed forms", "[{\"role\": \"user\"}]\n{\"messages\": []}\n", "line 2: The file cannot contain both raw event lists and annotated event lists."},
		{"bad annotation", "{\"messages\": [{\"role\": \"user\"}], \"annotations\": [{\"content\": \"x\"}]}\n", "Failed to parse annotation"},
		{"bad json", "[{\"role\": \n", "line 1: invalid JSON"},
		{"event not object", "[1, 2]\n", "line 1: trace 0 must be a list of objects"},
	} {
		st, b := send(map[string]string{"name": "e" + fmt.Sprint(len(tc.name))}, tc.file)
		if st != 400 || !strings.Contains(b, tc.want) {
			t.Errorf("%s: %d %s, want 400 containing %q", tc.name, st, b, tc.want)
		}
	}
	if st, b := send(map[string]string{}, uploadFile); st != 400 || !strings.Contains(b, "name must be provided") {
		t.Errorf("no name: %d %s", st, b)
	}
	// A file without traces creates the dataset (or fills an empty one).
	if st, b := send(map[string]string{"name": "empty"}, ""); st != 200 || !strings.Contains(b, `"num_traces":0`) {
		t.Errorf("empty file: %d %s", st, b)
	}
	if st, b := send(map[string]string{"name": "empty"}, "{\"metadata\": {\"k\": \"v\"}}\n"); st != 200 || !strings.Contains(b, `"k":"v"`) {
		t.Errorf("metadata-only file into an empty dataset: %d %s", st, b)
	}
	if st, b := send(map[string]string{"name": "mp"}, "{\"metadata\": {}}\n"); st != 400 || !strings.Contains(b, "already exists with traces") {
		t.Errorf("metadata-only file into a non-empty dataset: %d %s", st, b)
	}
}

// TestExportBoundedMemory exports a generated dataset (scaled down from
// the 1 GB run in bench/) and checks the heap does not grow with it.
func TestExportBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	ts := newTestServer(t, openSQLite(t))
	ctx := context.Background()
	const batch, events = 100, 5
	traces := 1000
	if raceEnabled {
		traces = 200 // ~10 MB: the race detector makes SQLite slow; the bound is checked without it
	}
	big := strings.Repeat("lorem ipsum dolor sit amet ", 400) // ~10 KB per event
	// Generate the dataset straight through the store (the push path has
	// its own tests); the export is what is measured.
	admin, err := ts.st.GetUserByName(ctx, "admin")
	if err != nil {
		t.Fatal(err)
	}
	event, _ := json.Marshal(map[string]any{"role": "user", "content": big})
	for i := 0; i < traces; i += batch {
		req := store.PushRequest{OwnerID: admin.ID, DatasetName: "big", CreateIfMissing: true}
		for j := 0; j < batch; j++ {
			nt := store.NewTrace{}
			for k := 0; k < events; k++ {
				nt.Messages = append(nt.Messages, store.Message{NodeIDs: []string{"n"}, Data: event})
			}
			req.Traces = append(req.Traces, nt)
		}
		if _, err := ts.st.PushTraces(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	d, _ := ts.c.GetDatasetByName(ctx, "admin", "big")
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	body, err := ts.c.Export(ctx, d.ID, client.ExportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var peak uint64
	buf := make([]byte, 64<<10)
	total := 0
	for i := 0; ; i++ {
		n, err := body.Read(buf)
		total += n
		if i%40 == 0 {
			// Live heap: what the export holds, not garbage awaiting GC.
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapAlloc)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	body.Close()
	growth := int64(peak) - int64(before.HeapAlloc)
	t.Logf("exported %d MB; live heap before %d KB, peak %d KB", total>>20, before.HeapAlloc>>10, peak>>10)
	if total < traces*events*10000 {
		t.Fatalf("exported only %d bytes", total)
	}
	// The export is ~51 MB; an export that buffered it would hold all of
	// it. A streaming one holds a page (25 traces, ~1.25 MB) with its
	// driver copies, plus HTTP buffers: 4-14 MB measured, whatever the
	// dataset's size (the dataset is large so that the two stay apart on a
	// loaded machine, where the sampled peak varies).
	if !raceEnabled && growth > int64(total)/2 {
		t.Errorf("heap grew by %d MB while exporting %d MB: export is not streaming", growth>>20, total>>20)
	}
}

// writeUploadFile writes a generated JSONL file of n annotated traces, two
// events of about len(content) bytes each, to w. Line bad (1-based, 0 for
// none) is replaced by a line with invalid JSON.
func writeUploadFile(w io.Writer, n int, content string, bad int) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	ev, _ := json.Marshal(content)
	for i := 1; i <= n; i++ {
		var err error
		if i == bad {
			_, err = fmt.Fprintf(bw, "{\"messages\": [{\"role\": \"user\", \"content\": %s}\n", ev)
		} else {
			_, err = fmt.Fprintf(bw, "{\"name\": \"t%d\", \"messages\": [{\"role\": \"user\", \"content\": %s}, {\"role\": \"assistant\", \"content\": %s}], \"annotations\": [{\"content\": \"a\", \"address\": \"messages.0.content:0-5\"}]}\n", i, ev, ev)
		}
		if err != nil {
			return err
		}
	}
	return bw.Flush()
}

// heapSampler records the peak live heap until stopped.
func heapSampler() (stop func() uint64) {
	done := make(chan struct{})
	peakc := make(chan uint64)
	go func() {
		var peak uint64
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			// Live heap: what the upload holds, not garbage awaiting GC.
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapAlloc)
			select {
			case <-done:
				peakc <- peak
				return
			case <-tick.C:
			}
		}
	}()
	return func() uint64 {
		close(done)
		return <-peakc
	}
}

// TestUploadBoundedMemory uploads a generated ~50 MB file, streamed from a
// pipe, and checks that the heap does not grow with it (explorer-api §8.2
// with the 1 GiB default upload limit).
func TestUploadBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	ts := newTestServer(t, openSQLite(t))
	ctx := context.Background()
	traces := 2500
	if raceEnabled {
		traces = 500 // ~10 MB: the race detector makes parsing slow
	}
	content := strings.Repeat("lorem ipsum dolor sit amet ", 400) // ~10 KB per event
	total := traces * 2 * len(content)
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeUploadFile(pw, traces, content, 0)) }()
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	stop := heapSampler()
	d, err := ts.c.Upload(ctx, "big", pr, client.UploadOptions{})
	peak := stop()
	if err != nil {
		t.Fatal(err)
	}
	growth := int64(peak) - int64(before.HeapAlloc)
	t.Logf("uploaded %d MB in %d traces; live heap before %d KB, peak %d KB (+%d KB)", total>>20, traces, before.HeapAlloc>>10, peak>>10, growth>>10)
	if d.NumTraces == nil || *d.NumTraces != traces {
		t.Fatalf("uploaded dataset %+v", d)
	}
	rows, err := ts.c.ListTraces(ctx, d.ID, 1, traces-1)
	if err != nil || len(rows) != 1 || rows[0].Name == nil || *rows[0].Name != fmt.Sprint("t", traces) {
		t.Fatalf("last trace: %v %+v", err, rows)
	}
	// Batches of uploadBatchBytes (4 MB) of events: about 20 MB of live
	// heap measured at peak (events, receipts, the store's copies), whatever
	// the file size. Holding the file would be several times its size.
	if limit := int64(48 << 20); !raceEnabled && growth > limit {
		t.Errorf("heap grew by %d MB while uploading %d MB: upload is not bounded", growth>>20, total>>20)
	}
}

// TestUploadInvalidLateLine puts an invalid line at the end of a file of
// several batches: nothing is stored and the error names the line, for raw
// and multipart bodies (fields before or after the file).
func TestUploadInvalidLateLine(t *testing.T) {
	ts := newTestServer(t, openSQLite(t))
	ctx := context.Background()
	admin, _ := ts.st.GetUserByName(ctx, "admin")
	smallBatches(t)
	const traces = 200 // ~800 KB: several batches
	content := strings.Repeat("lorem ipsum dolor sit amet ", 40)
	var file bytes.Buffer
	writeUploadFile(&file, traces, content, traces)
	multi := func(fileFirst bool) func(name string) (*http.Request, error) {
		return func(name string) (*http.Request, error) {
			var buf bytes.Buffer
			mw := multipart.NewWriter(&buf)
			if !fileFirst {
				mw.WriteField("name", name)
			}
			fw, _ := mw.CreateFormFile("file", "data.jsonl")
			fw.Write(file.Bytes())
			if fileFirst {
				mw.WriteField("name", name)
			}
			mw.Close()
			req, err := http.NewRequest("POST", ts.URL+"/api/v1/dataset/upload", &buf)
			req.Header.Set("Content-Type", mw.FormDataContentType())
			return req, err
		}
	}
	for _, tc := range []struct {
		name string
		req  func(name string) (*http.Request, error)
	}{
		{"raw", func(name string) (*http.Request, error) {
			return http.NewRequest("POST", ts.URL+"/api/v1/dataset/upload?name="+name, bytes.NewReader(file.Bytes()))
		}},
		{"multipart", multi(false)},
		{"multipart file first", multi(true)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := "late_" + strings.ReplaceAll(tc.name, " ", "_")
			req, err := tc.req(name)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+adminKey)
			resp, err := ts.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			want := fmt.Sprintf(`"detail":"line %d: invalid JSON: `, traces)
			if resp.StatusCode != 400 || !strings.Contains(string(b), want) || !strings.Contains(string(b), fmt.Sprintf(`"line":%d`, traces)) {
				t.Fatalf("%d %.300s, want 400 with %s", resp.StatusCode, b, want)
			}
			if _, err := ts.st.GetDatasetByName(ctx, admin.ID, name); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("dataset after a failed upload: %v", err)
			}
		})
	}
}

// smallBatches makes uploads of more than 100 KB span several batches for
// the duration of the test.
func smallBatches(t *testing.T) {
	old := uploadBatchBytes
	uploadBatchBytes = 100 << 10
	t.Cleanup(func() { uploadBatchBytes = old })
}

// failingPushStore fails the failAt-th PushTraces call (1-based) after
// failAt is set.
type failingPushStore struct {
	store.Store
	mu     sync.Mutex
	calls  int
	failAt int
}

func (s *failingPushStore) PushTraces(ctx context.Context, req store.PushRequest) (*store.PushResult, error) {
	s.mu.Lock()
	s.calls++
	fail := s.failAt > 0 && s.calls == s.failAt
	s.mu.Unlock()
	if fail {
		return nil, errors.New("injected push failure")
	}
	return s.Store.PushTraces(ctx, req)
}

func (s *failingPushStore) failNth(n int) {
	s.mu.Lock()
	s.calls, s.failAt = 0, n
	s.mu.Unlock()
}

// TestUploadRollback fails a later batch of a multi-batch upload: the
// batches already written are undone, so the upload stays all-or-nothing
// (explorer-api §8.2) although the store writes it in several transactions.
func TestUploadRollback(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) { testUploadRollback(t, b.open(t)) })
	}
}

func testUploadRollback(t *testing.T, st store.Store) {
	fs := &failingPushStore{Store: st}
	ts := newTestServer(t, fs)
	ctx := context.Background()
	admin, _ := ts.st.GetUserByName(ctx, "admin")
	smallBatches(t)
	content := strings.Repeat("lorem ipsum dolor sit amet ", 40)
	const traces = 150 // ~300 KB: three batches
	var file bytes.Buffer
	file.WriteString(`{"metadata": {"merged": "yes"}}` + "\n")
	writeUploadFile(&file, traces, content, 0)

	// A new dataset: deleted whole.
	fs.failNth(3)
	if _, err := ts.c.Upload(ctx, "fresh", bytes.NewReader(file.Bytes()), client.UploadOptions{}); err == nil {
		t.Fatal("upload with a failing batch succeeded")
	}
	if _, err := ts.st.GetDatasetByName(ctx, admin.ID, "fresh"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("dataset after a failed upload: %v", err)
	}

	// An existing dataset (append mode): its traces and metadata are back
	// as they were.
	fs.failNth(0)
	if _, err := ts.c.Upload(ctx, "kept", strings.NewReader(`{"metadata": {"merged": "no", "own": 1}}`+"\n"+`[{"role": "user", "content": "mine"}]`+"\n"), client.UploadOptions{}); err != nil {
		t.Fatal(err)
	}
	before, _ := ts.st.GetDatasetByName(ctx, admin.ID, "kept")
	fs.failNth(2)
	if _, err := ts.c.Upload(ctx, "kept", bytes.NewReader(file.Bytes()), client.UploadOptions{Append: true}); err == nil {
		t.Fatal("upload with a failing batch succeeded")
	}
	after, _ := ts.st.GetDatasetByName(ctx, admin.ID, "kept")
	if after.NumTraces != 1 || string(after.Metadata) != string(before.Metadata) {
		t.Fatalf("after rollback: %d traces, metadata %s; want 1, %s", after.NumTraces, after.Metadata, before.Metadata)
	}

	// A real conflict in a late batch: an explicit index already used.
	fs.failNth(0)
	var indexed bytes.Buffer
	for i := 1; i <= traces; i++ {
		idx := i
		if i == traces {
			idx = 0 // "kept" has index 0
		}
		fmt.Fprintf(&indexed, "{\"index\": %d, \"messages\": [{\"role\": \"user\", \"content\": %q}]}\n", idx, content+content)
	}
	_, err := ts.c.Upload(ctx, "kept", bytes.NewReader(indexed.Bytes()), client.UploadOptions{Append: true})
	if err == nil || !strings.Contains(err.Error(), `409 index_conflict: trace index 0 is already used in dataset "kept"`) {
		t.Fatalf("colliding index in a late batch: %v", err)
	}
	if after, _ := ts.st.GetDatasetByName(ctx, admin.ID, "kept"); after.NumTraces != 1 {
		t.Fatalf("after a late conflict: %d traces, want 1", after.NumTraces)
	}
}

// failingIterStore fails IterTraces after the first trace, as a database
// that drops the connection in the middle of an export would.
type failingIterStore struct{ store.Store }

func (f failingIterStore) IterTraces(ctx context.Context, datasetID string, opt store.IterOptions) iter.Seq2[*store.Trace, error] {
	return func(yield func(*store.Trace, error) bool) {
		for t, err := range f.Store.IterTraces(ctx, datasetID, opt) {
			if err != nil || !yield(t, nil) {
				return
			}
			yield(nil, errors.New("connection reset by peer"))
			return
		}
	}
}

// TestExportFailureAbortsResponse: an export that fails after the status
// line must not end like a complete one (a clean end of a chunked body),
// or `vigil export` writes a truncated file and exits 0. The connection
// is aborted, so the client's read fails.
func TestExportFailureAbortsResponse(t *testing.T) {
	ts := newTestServer(t, failingIterStore{openSQLite(t)})
	ctx := context.Background()
	d, err := ts.c.Upload(ctx, "cut", strings.NewReader(uploadFile), client.UploadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	body, err := ts.c.Export(ctx, d.ID, client.ExportOptions{})
	if err != nil {
		return // aborted before the headers went out: fine too
	}
	defer body.Close()
	got, err := io.ReadAll(body)
	if err == nil {
		t.Fatalf("truncated export read without error:\n%s", got)
	}
}

// TestUploadAppendIndexConflict: appending a file whose explicit indices
// are already used is a 409 index_conflict naming the index and the
// dataset, with nothing added (it was a 400 carrying the raw
// "UNIQUE constraint failed" of SQLite or PostgreSQL's duplicate key).
func TestUploadAppendIndexConflict(t *testing.T) {
	forEachBackend(t, func(t *testing.T, ts *testServer) {
		ctx := context.Background()
		d, err := ts.c.Upload(ctx, "up", strings.NewReader(uploadFile), client.UploadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		line := func(i int) string {
			return fmt.Sprintf(`{"index": %d, "messages": [{"role": "user", "content": "x"}]}`+"\n", i)
		}
		for _, tt := range []struct {
			name, file string
			taken      int // -1: accepted
		}{
			{"same file again", uploadFile, 3},
			{"second index taken", line(5) + line(7), 7},
			{"unused index between", line(5), -1},
			{"index taken by the previous append", line(5), 5},
			{"beyond the last", line(100), -1},
		} {
			t.Run(tt.name, func(t *testing.T) {
				before, _ := ts.c.ListTraces(ctx, d.ID, 0, 0)
				_, err := ts.c.Upload(ctx, "up", strings.NewReader(tt.file), client.UploadOptions{Append: true})
				after, _ := ts.c.ListTraces(ctx, d.ID, 0, 0)
				if tt.taken < 0 {
					if err != nil || len(after) != len(before)+1 {
						t.Fatalf("append: %v, %d traces after %d", err, len(after), len(before))
					}
					return
				}
				var ae *client.APIError
				if !errors.As(err, &ae) || ae.StatusCode != http.StatusConflict || ae.Code != "index_conflict" {
					t.Fatalf("append with index %d taken: %v, want 409 index_conflict", tt.taken, err)
				}
				want := fmt.Sprintf(`trace index %d is already used in dataset "up": leave the index out`, tt.taken)
				if !strings.HasPrefix(ae.Detail, want) || strings.Contains(strings.ToLower(ae.Detail), "constraint") {
					t.Errorf("detail %q, want it to start with %q", ae.Detail, want)
				}
				if len(after) != len(before) {
					t.Errorf("a refused append changed the dataset: %d traces, was %d", len(after), len(before))
				}
			})
		}
	})
}
