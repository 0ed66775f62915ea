package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestPushHeapBound is issue 17's push memory bound: while one large push
// is decoded, sealed and stored, the server's live heap grows by at most
// 3× the body (it grew by about 18× when every receipt and row of the push
// was held until one final write).
func TestPushHeapBound(t *testing.T) {
	if testing.Short() {
		t.Skip("pushes 8 MB")
	}
	ts := newTestServer(t, openSQLite(t))
	body, err := json.Marshal(pushBatch("big", 3000, 20))
	if err != nil {
		t.Fatal(err)
	}
	ts.do(t, "POST", "/api/v1/push/trace", adminKey, pushBatch("big", 1, 2)) // dataset, caches
	live := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	live()         // twice: sync.Pool keeps what the first collection
	base := live() // frees (encoding/json's buffers) until the second
	done := make(chan int)
	go func() {
		req, _ := http.NewRequest("POST", ts.URL+"/api/v1/push/trace", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+adminKey)
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Error(err)
			done <- 0
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	var peak uint64
	tk := time.NewTicker(20 * time.Millisecond)
	defer tk.Stop()
	for code := -1; code < 0; {
		select {
		case code = <-done:
			if code != http.StatusOK {
				t.Fatalf("push: %d", code)
			}
		case <-tk.C:
			peak = max(peak, live())
		}
	}
	runtime.KeepAlive(body) // in base: it must not leave the heap during the push
	grew := int64(peak) - int64(base)
	t.Logf("body %.1f MB: live heap %d MB before, peak %d MB (+%.2f× the body)",
		float64(len(body))/(1<<20), base>>20, peak>>20, float64(grew)/float64(len(body)))
	if grew > 3*int64(len(body)) {
		t.Errorf("live heap grew by %d MB during a %d MB push, more than 3× the body", grew>>20, len(body)>>20)
	}
}

// TestWritePushResponse: the large-push response, written piece by piece,
// is byte for byte what writeJSON writes.
func TestWritePushResponse(t *testing.T) {
	tests := []struct {
		name string
		out  pushResponse
	}{
		{"snippets", pushResponse{ID: []string{"a"}, Username: "u", MessageIDs: [][]string{{"m1", "m2"}}}},
		{"dataset_and_warnings", pushResponse{ID: []string{"a", "b"}, Dataset: "d<&>", Username: "u",
			MessageIDs: [][]string{{"m1"}, {}}, Warnings: warnings{{Trace: 1, Message: -1, Detail: "x <y>"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want, got := httptest.NewRecorder(), httptest.NewRecorder()
			writeJSON(want, http.StatusOK, tt.out)
			if err := writePushResponse(got, &tt.out, func(i int) []string { return tt.out.MessageIDs[i] }); err != nil {
				t.Fatal(err)
			}
			if got.Body.String() != want.Body.String() || got.Header().Get("Content-Type") != want.Header().Get("Content-Type") {
				t.Errorf("got  %q\nwant %q", got.Body, want.Body)
			}
		})
	}
}

// TestLargePushPathAnswersAlike pushes the same body down the large-push
// path (decoded again in the transaction) and the ordinary one and
// compares what each answers and stores: message ids (a client's kept,
// a duplicate replaced with a warning), annotations anchored to the
// events, metadata, the ledger chain.
func TestLargePushPathAnswersAlike(t *testing.T) {
	body := `{"dataset":"same","messages":[
		[{"role":"user","content":"hello","message_id":"mine"},{"role":"assistant","content":"hi","message_id":"mine"}],
		[{"role":"user","content":"x"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":{"a":1}}}]},{"role":"tool","tool_call_id":"c1","content":"out"}]],
	 "annotations":[[{"content":"look","address":"messages.1.content:0-2"}],[]],
	 "metadata":[{"name":"first"},{"name":"second","hierarchy_path":["a","b"]}]}`
	type pushed struct {
		resp  pushResponse
		trace []any
	}
	run := func(t *testing.T, be backend, lazy bool) pushed {
		old := lazyPushBytes
		if lazy {
			lazyPushBytes = 1
		}
		defer func() { lazyPushBytes = old }()
		ts := newTestServer(t, be.open(t))
		code, b := ts.do(t, "POST", "/api/v1/push/trace", adminKey, body)
		if code != http.StatusOK {
			t.Fatalf("push: %d %s", code, b)
		}
		var out pushed
		if err := json.Unmarshal(b, &out.resp); err != nil {
			t.Fatal(err)
		}
		for i, id := range out.resp.ID {
			_, tb := ts.do(t, "GET", "/api/v1/trace/"+id+"?include_annotations=true", adminKey, nil)
			tr := decode(t, tb).(map[string]any)
			if code, vb := ts.do(t, "GET", "/api/v1/runs/"+id+"/verify", adminKey, nil); code != http.StatusOK || !bytes.Contains(vb, []byte(`"valid":true`)) {
				t.Errorf("trace %d: verify %d %s", i, code, vb)
			}
			out.trace = append(out.trace, []any{tr["name"], tr["hierarchy_path"], tr["messages"], tr["annotations"], len(out.resp.MessageIDs[i])})
		}
		return out
	}
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			eager, lazy := run(t, b, false), run(t, b, true)
			if eager.resp.MessageIDs[0][0] != "mine" || lazy.resp.MessageIDs[0][0] != "mine" {
				t.Errorf("client message id not kept: %v / %v", eager.resp.MessageIDs, lazy.resp.MessageIDs)
			}
			if len(lazy.resp.Warnings) == 0 || fmt.Sprint(lazy.resp.Warnings) != fmt.Sprint(eager.resp.Warnings) {
				t.Errorf("warnings differ:\nlazy  %v\neager %v", lazy.resp.Warnings, eager.resp.Warnings)
			}
			// Server-made ids, times and annotation ids differ between runs.
			norm := func(v any) string {
				b, _ := json.Marshal(v)
				s := string(b)
				s = regexp.MustCompile(`"[0-9A-HJKMNP-TV-Z]{26}"`).ReplaceAllString(s, `"ULID"`)
				s = regexp.MustCompile(`"[0-9a-f]{8}-[0-9a-f-]{27}"`).ReplaceAllString(s, `"UUID"`)
				return regexp.MustCompile(`"\d{4}-\d\d-\d\dT[^"]*"`).ReplaceAllString(s, `"TIME"`)
			}
			if norm(lazy.trace) != norm(eager.trace) {
				t.Errorf("stored traces differ:\nlazy  %s\neager %s", norm(lazy.trace), norm(eager.trace))
			}
			if !strings.Contains(norm(lazy.trace), `"look"`) {
				t.Errorf("annotation missing: %s", norm(lazy.trace))
			}
		})
	}
}
