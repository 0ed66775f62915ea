package gateway_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/vigilhq/vigil/gateway"
)

// TestRecorderBatchesAndReports records calls through the embedded
// recorder: every call becomes a trace although the writer holds records
// back to write them together, and the health route reports what was written.
func TestRecorderBatchesAndReports(t *testing.T) {
	e := newEnv(t)
	const n = 12
	for i := 0; i < n; i++ {
		body := `{"model":"m","messages":[{"role":"user","content":"call ` + strings.Repeat("x", i) + `"}]}`
		resp, b := e.post("/ds/openai/chat/completions", body, map[string]string{"Authorization": "Bearer sk", "Invariant-Authorization": "Bearer " + adminKey})
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%d %s", resp.StatusCode, b)
		}
	}
	if got := len(e.traces("ds")); got != n {
		t.Fatalf("%d traces, want %d", got, n)
	}
	resp, err := http.Get(e.base + "/health")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var h struct {
		Status   string               `json:"status"`
		Recorder *gateway.RecordStats `json:"recorder"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		t.Fatal(err)
	}
	if h.Status != "ok" || h.Recorder == nil {
		t.Fatalf("health %+v", h)
	}
	if h.Recorder.Written != n || h.Recorder.Dropped != 0 || h.Recorder.Pending != 0 || h.Recorder.MaxQueue < 1 {
		t.Errorf("recorder stats %+v, want %d written, none dropped or pending", *h.Recorder, n)
	}
}

// TestRecorderCloseWritesHeld: records the writer still holds (a long
// linger) are written by Close.
func TestRecorderCloseWritesHeld(t *testing.T) {
	e := newEnv(t)
	resp, b := e.post("/ds/openai/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		map[string]string{"Authorization": "Bearer sk", "Invariant-Authorization": "Bearer " + adminKey})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	e.gw.Idle()
	e.rec.Close() // writes what it holds, then stops
	if w, d, _ := e.rec.Stats(); w != 1 || d != 0 {
		t.Fatalf("written %d dropped %d after Close", w, d)
	}
}
