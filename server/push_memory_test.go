package server

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
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
	base := live()
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
			if err := writePushResponse(got, &tt.out); err != nil {
				t.Fatal(err)
			}
			if got.Body.String() != want.Body.String() || got.Header().Get("Content-Type") != want.Header().Get("Content-Type") {
				t.Errorf("got  %q\nwant %q", got.Body, want.Body)
			}
		})
	}
}
