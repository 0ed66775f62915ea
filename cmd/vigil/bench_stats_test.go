package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
)

func TestBenchRecorderStats(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/gateway/health" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte(`{"status":"ok","recorder":{"written":7,"dropped":1,"max_queue":5,"pending":2}}`))
	}))
	defer ts.Close()
	st, ok := recorderStats(ts.Client(), ts.URL+"/api/v1/gateway/bench/openai/chat/completions")
	if !ok || st != (recStats{Written: 7, Dropped: 1, MaxQueue: 5, Pending: 2}) {
		t.Fatalf("stats %+v %v", st, ok)
	}
	if _, ok := recorderStats(ts.Client(), ts.URL+"/v1/chat/completions"); ok {
		t.Fatal("a URL outside the gateway has no recorder")
	}
	if s := cpuSeconds(os.Getpid()); s < 0 {
		t.Fatalf("cpuSeconds of this process: %v", s)
	}
	if s := cpuSeconds(0); s != -1 {
		t.Fatalf("cpuSeconds(0) = %v", s)
	}
}
