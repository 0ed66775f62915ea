package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"runtime"
	"strings"
	"testing"

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
}

// TestExportBoundedMemory exports a generated dataset (scaled down from
// the 1 GB run in bench/) and checks the heap does not grow with it.
func TestExportBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	ts := newTestServer(t, openSQLite(t))
	ctx := context.Background()
	const traces, batch, events = 400, 100, 5
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
	// The export is ~21 MB; an export that buffered it would hold all of
	// it. A streaming one holds a page (25 traces, ~0.5 MB) or two plus
	// driver and HTTP buffers: about 4 MB measured.
	if growth > int64(total)/2 {
		t.Errorf("heap grew by %d MB while exporting %d MB: export is not streaming", growth>>20, total>>20)
	}
}
