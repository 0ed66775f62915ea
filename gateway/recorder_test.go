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

// TestRecorderAppendsOfSeveralTraces interleaves the calls of two agent
// loops, so that the writer gets appends to both traces in one batch (one
// AppendMany): each loop is still one trace with every event in order and
// every call in its metadata.
func TestRecorderAppendsOfSeveralTraces(t *testing.T) {
	e := newEnv(t)
	hist := map[string]string{"a": `{"role":"user","content":"task a"}`, "b": `{"role":"user","content":"task b"}`}
	for step := 0; step < 3; step++ {
		for _, run := range []string{"a", "b"} {
			body := `{"model":"m","messages":[` + hist[run] + `]}`
			resp, b := e.post("/ds/openai/chat/completions", body, map[string]string{"Authorization": "Bearer sk",
				"Invariant-Authorization": "Bearer " + adminKey, "Invariant-Session": "run-" + run})
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%d %s", resp.StatusCode, b)
			}
			var out struct {
				Choices []struct {
					Message json.RawMessage `json:"message"`
				} `json:"choices"`
			}
			if err := json.Unmarshal(b, &out); err != nil || len(out.Choices) == 0 {
				t.Fatalf("response %s: %v", b, err)
			}
			hist[run] += "," + string(out.Choices[0].Message) + `,{"role":"user","content":"step ` + run + strings.Repeat("!", step) + `"}`
		}
	}
	trs := e.traces("ds")
	if len(trs) != 2 {
		t.Fatalf("%d traces, want 2", len(trs))
	}
	for _, tr := range trs {
		evs := eventsJSON(t, tr)
		// 3 calls, each adding its new user message and its answer.
		if len(evs) != 6 {
			t.Fatalf("trace %s: %d events, want 6: %v", tr.ID, len(evs), evs)
		}
		first, _ := evs[0]["content"].(string)
		run := strings.TrimPrefix(first, "task ")
		for i, want := range []string{"step " + run, "step " + run + "!"} {
			if got, _ := evs[2+2*i]["content"].(string); got != want {
				t.Errorf("trace of run %s: event %d content %q, want %q", run, 2+2*i, got, want)
			}
		}
		vig, _ := tr.ExtraMetadata["vigil"].(map[string]any)
		if calls, _ := vig["calls"].([]any); len(calls) != 3 {
			t.Errorf("trace of run %s: %d calls in its metadata, want 3", run, len(calls))
		}
	}
}
