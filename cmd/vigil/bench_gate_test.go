package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// c1 is a concurrency-1 result of target with the given median added p50.
func c1(config, target string, addedP50 float64) BenchResult {
	return BenchResult{Config: config, Payload: "small", Measurement: "c1", Target: target,
		Values: map[string]float64{"added_p50_ms": addedP50 + 1, "round_added_p50_median_ms": addedP50}}
}

// stream is a streaming configuration's concurrency-1 result: a total
// duration dominated by the mock's pacing, and its added time to first byte.
func stream(config, target string, addedTotal, addedTTFB float64) BenchResult {
	return BenchResult{Config: config, Payload: "small", Measurement: "c1", Target: target,
		Values: map[string]float64{"round_added_p50_median_ms": addedTotal, "added_ttfb_p50_ms": addedTTFB}}
}

func TestGateStreamsUseFirstByte(t *testing.T) {
	base := []BenchResult{stream("S1", "floor", -6, 0.28), stream("S1", "gateway", -6.5, 0.36)}
	for _, tt := range []struct {
		name      string
		now       []BenchResult
		regressed bool
	}{
		{"pacing noise in the total is ignored", []BenchResult{stream("S1", "floor", 4, 0.28), stream("S1", "gateway", 9, 0.37)}, false},
		{"a slower first byte fails", []BenchResult{stream("S1", "floor", -6, 0.28), stream("S1", "gateway", -6.5, 0.60)}, true},
	} {
		rs := gateCompare(base, tt.now, nil, 0.2, 0.02)
		if len(rs) != 1 || !rs[0].comparable || rs[0].regressed != tt.regressed {
			t.Errorf("%s: %+v, want regressed %v", tt.name, rs, tt.regressed)
		}
	}
}

func TestGateCompare(t *testing.T) {
	base := []BenchResult{c1("G1", "floor", 0.25), c1("G1", "gateway", 0.30), c1("S1", "gateway", 600)}
	tests := []struct {
		name      string
		now       []BenchResult
		only      []string
		regressed map[string]bool // key → regressed; absent keys must not be reported
		missing   []string
	}{
		{"same figures pass", []BenchResult{c1("G1", "floor", 0.25), c1("G1", "gateway", 0.30), c1("S1", "gateway", 600)},
			nil, map[string]bool{"G1 small": false, "S1 small": false}, nil},
		{"gateway 50% slower, floor unchanged", []BenchResult{c1("G1", "floor", 0.25), c1("G1", "gateway", 0.45), c1("S1", "gateway", 610)},
			nil, map[string]bool{"G1 small": true, "S1 small": false}, nil},
		{"machine 50% slower as a whole", []BenchResult{c1("G1", "floor", 0.375), c1("G1", "gateway", 0.45), c1("S1", "gateway", 600)},
			nil, map[string]bool{"G1 small": false, "S1 small": false}, nil},
		{"a faster floor is noise, not a regression", []BenchResult{c1("G1", "floor", 0.20), c1("G1", "gateway", 0.30), c1("S1", "gateway", 600)},
			nil, map[string]bool{"G1 small": false, "S1 small": false}, nil},
		{"a faster floor does not excuse a slower gateway", []BenchResult{c1("G1", "floor", 0.20), c1("G1", "gateway", 0.40), c1("S1", "gateway", 600)},
			nil, map[string]bool{"G1 small": true, "S1 small": false}, nil},
		{"tiny absolute change ignored", []BenchResult{c1("G1", "floor", 0.25), c1("G1", "gateway", 0.30), c1("S1", "gateway", 600.01)},
			[]string{"S1"}, map[string]bool{"S1 small": false}, nil},
		{"last entry wins", []BenchResult{c1("G1", "floor", 0.25), c1("G1", "gateway", 0.9), c1("G1", "gateway", 0.31), c1("S1", "gateway", 600)},
			nil, map[string]bool{"G1 small": false, "S1 small": false}, nil},
		{"configuration missing", []BenchResult{c1("G1", "floor", 0.25), c1("G1", "gateway", 0.30)},
			nil, map[string]bool{"G1 small": false}, []string{"S1 small"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs := gateCompare(base, tt.now, tt.only, 0.2, 0.02)
			got := map[string]bool{}
			var missing []string
			for _, r := range rs {
				if !r.comparable {
					missing = append(missing, r.key)
					continue
				}
				got[r.key] = r.regressed
			}
			if len(got) != len(tt.regressed) {
				t.Fatalf("compared %v, want %v", got, tt.regressed)
			}
			for k, want := range tt.regressed {
				if g, ok := got[k]; !ok || g != want {
					t.Errorf("%s: regressed = %v (present %v), want %v", k, g, ok, want)
				}
			}
			if strings.Join(missing, ",") != strings.Join(tt.missing, ",") {
				t.Errorf("missing = %v, want %v", missing, tt.missing)
			}
		})
	}
}

func TestBenchGateCommand(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, rs []BenchResult) string {
		b, err := json.Marshal(rs)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	base := write("base.json", []BenchResult{c1("G1", "floor", 0.25), c1("G1", "gateway", 0.30)})
	good := write("good.json", []BenchResult{c1("G1", "floor", 0.25), c1("G1", "gateway", 0.32)})
	bad := write("bad.json", []BenchResult{c1("G1", "floor", 0.25), c1("G1", "gateway", 0.50)})
	other := write("other.json", []BenchResult{c1("G9", "gateway", 0.50)})

	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"bench", "gate", "--baseline", base, good}, nil, &out, &errb); code != 0 {
		t.Fatalf("good results: exit %d, stderr %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "| G1 small | 0.300 | 0.320 | 0.250 | 0.250 | 1.07 | ok |") {
		t.Errorf("table:\n%s", out.String())
	}
	out.Reset()
	errb.Reset()
	if code := run(context.Background(), []string{"bench", "gate", "--baseline", base, bad}, nil, &out, &errb); code != 1 {
		t.Fatalf("regressed results: exit %d, want 1", code)
	}
	if !strings.Contains(errb.String(), "G1 small (×1.67)") || !strings.Contains(out.String(), "REGRESSED (> 20%)") {
		t.Errorf("regression not named: stdout %s stderr %s", out.String(), errb.String())
	}
	errb.Reset()
	if code := run(context.Background(), []string{"bench", "gate", "--baseline", base, other}, nil, &out, &errb); code != 1 ||
		!strings.Contains(errb.String(), "missing") {
		t.Errorf("missing configuration: exit %d, stderr %s", code, errb.String())
	}
	errb.Reset()
	if code := run(context.Background(), []string{"bench", "gate", "--baseline", filepath.Join(dir, "nope.json"), good}, nil, &out, &errb); code == 0 ||
		!strings.Contains(errb.String(), "nope.json") {
		t.Errorf("missing baseline file: exit %d, stderr %s", code, errb.String())
	}
	errb.Reset()
	if code := run(context.Background(), []string{"bench", "gate", good}, nil, &out, &errb); code != 2 {
		t.Errorf("no --baseline: exit %d, want 2", code)
	}
}
