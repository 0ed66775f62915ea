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

// TestFrontierSweep: a rate counts for a limit only if it and every
// rate below it met it, with no errors and a direct p99 the load
// generator kept within directP99Limit.
func TestFrontierSweep(t *testing.T) {
	type step struct {
		rate      int
		added     float64
		errors    int
		directP99 float64
	}
	for _, tc := range []struct {
		name  string
		steps []step
		want  [3]float64 // at 1, 5 and 10 ms
	}{
		{"all within", []step{{1000, 0.5, 0, 1}, {2000, 0.8, 0, 1}}, [3]float64{2000, 2000, 2000}},
		{"limits part ways", []step{{1000, 0.5, 0, 1}, {2000, 3, 0, 1}, {3000, 8, 0, 1}, {4000, 20, 0, 1}}, [3]float64{1000, 2000, 3000}},
		{"no recovery after a failure", []step{{1000, 0.5, 0, 1}, {2000, 30, 0, 1}, {3000, 0.5, 0, 1}}, [3]float64{1000, 1000, 1000}},
		{"errors fail a rate", []step{{1000, 0.5, 0, 1}, {2000, 0.5, 3, 1}}, [3]float64{1000, 1000, 1000}},
		{"load generator limit fails a rate", []step{{1000, 0.5, 0, 1}, {2000, 0.5, 0, directP99Limit + 1}}, [3]float64{1000, 1000, 1000}},
		{"first rate fails", []step{{1000, 12, 0, 1}}, [3]float64{0, 0, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFrontierSweep()
			for _, s := range tc.steps {
				f.rate(s.rate, s.added, s.errors, s.directP99)
			}
			if got := [3]float64{f.best[1], f.best[5], f.best[10]}; got != tc.want {
				t.Errorf("frontier %v, want %v", got, tc.want)
			}
		})
	}
}
