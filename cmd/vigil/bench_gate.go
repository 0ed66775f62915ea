package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
)

// vigil bench gate: the regression gate CI runs after the reduced
// benchmark. It compares the gateway's added p50 at concurrency 1 of each
// configuration in a results file with a stored baseline and fails when
// one regressed by more than --max-regression.
//
// The added p50 is the median over interleaved rounds of (gateway −
// direct); for a streaming configuration, the added time to first byte.
// When both files hold the floor proxy's figures for the same
// configuration and the floor got slower, the gateway's ratio is divided
// by the floor's, so a machine that is slower as a whole (a loaded CI
// runner) does not read as a gateway regression. A floor that got faster
// is not used: with few samples that is mostly noise.

// gateResult is one configuration's comparison.
type gateResult struct {
	key                   string  // "G1 small"
	base, now             float64 // gateway added p50, ms
	floorBase, floorNow   float64 // floor added p50, ms (0: not measured)
	ratio                 float64 // now/base, divided by the floor's when known
	regressed, comparable bool
}

func benchGate(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("bench gate", "bench gate --baseline FILE [--max-regression 0.2] [--configs G1,S1] RESULTS",
		"Compare the gateway's added p50 at concurrency 1 (streams: added time to first byte) in RESULTS (a bench-results.json written by\n"+
			"vigil bench run or mcp) with --baseline, configuration by configuration, and exit 1 when one\n"+
			"regressed by more than --max-regression (0.2 = 20%). When both files hold the floor proxy's\n"+
			"figures and the floor got slower, the comparison is relative to the floor measured in the same\n"+
			"run, so a machine that is slower as a whole does not fail the gate. Differences under --min-delta are ignored.", stderr)
	baseline := fs.String("baseline", "", "the stored baseline results file (required)")
	maxReg := fs.Float64("max-regression", 0.2, "largest accepted regression of the added p50, as a fraction")
	minDelta := fs.Float64("min-delta", 0.02, "added-p50 differences below this many milliseconds never fail")
	configs := fs.String("configs", "", "only these configuration ids, comma-separated (default: every one in the baseline)")
	rest, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if *baseline == "" || len(rest) != 1 {
		return exitCode(2, "bench gate: --baseline FILE and one RESULTS file are required")
	}
	base, err := loadBenchResults(*baseline)
	if err != nil {
		return err
	}
	now, err := loadBenchResults(rest[0])
	if err != nil {
		return err
	}
	var only []string
	if *configs != "" {
		only = strings.Split(*configs, ",")
	}
	rs := gateCompare(base, now, only, *maxReg, *minDelta)
	if len(rs) == 0 {
		return exitCode(1, fmt.Sprintf("bench gate: no configuration of %s is in %s", *baseline, rest[0]))
	}
	fmt.Fprintln(stdout, "| configuration | baseline added p50 ms | now | floor baseline | floor now | ratio | result |")
	fmt.Fprintln(stdout, "|---|---|---|---|---|---|---|")
	var failed []string
	for _, r := range rs {
		verdict := "ok"
		switch {
		case !r.comparable:
			verdict = "missing in results"
			failed = append(failed, r.key+" (missing)")
		case r.regressed:
			verdict = fmt.Sprintf("REGRESSED (> %.0f%%)", *maxReg*100)
			failed = append(failed, fmt.Sprintf("%s (×%.2f)", r.key, r.ratio))
		}
		fl := func(v float64) string {
			if v == 0 {
				return "—"
			}
			return fmt.Sprintf("%.3f", v)
		}
		fmt.Fprintf(stdout, "| %s | %.3f | %s | %s | %s | %.2f | %s |\n", r.key, r.base, fl(r.now), fl(r.floorBase), fl(r.floorNow), r.ratio, verdict)
	}
	if len(failed) > 0 {
		return exitCode(1, "bench gate: added p50 regressed against "+*baseline+": "+strings.Join(failed, ", "))
	}
	return nil
}

// loadBenchResults reads a results file written by vigil bench.
func loadBenchResults(path string) ([]BenchResult, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("bench gate: %w", err)
	}
	var rs []BenchResult
	if err := json.Unmarshal(b, &rs); err != nil {
		return nil, fmt.Errorf("bench gate: %s: not a bench results array: %w", path, err)
	}
	return rs, nil
}

// addedP50 is target's added p50 at concurrency 1 for config and payload
// in rs: for a streaming configuration the added time to first byte (its
// total duration is the mock's pacing, ±10 ms), else the median over
// rounds where it was recorded, else the p50 of all samples; the last
// entry wins (a results file is appended to).
func addedP50(rs []BenchResult, config, payload, target string) (float64, bool) {
	v, ok := 0.0, false
	for _, r := range rs {
		if r.Config != config || r.Payload != payload || r.Measurement != "c1" || r.Target != target {
			continue
		}
		if x, has := r.Values["added_ttfb_p50_ms"]; has {
			v, ok = x, true // a stream: its total duration is the mock's pacing
		} else if x, has := r.Values["round_added_p50_median_ms"]; has {
			v, ok = x, true
		} else if x, has := r.Values["added_p50_ms"]; has {
			v, ok = x, true
		}
	}
	return v, ok
}

// gateCompare compares every (config, payload) of base's gateway c=1
// figures, in base's order, with now.
func gateCompare(base, now []BenchResult, only []string, maxReg, minDelta float64) []gateResult {
	var out []gateResult
	seen := map[string]bool{}
	for _, b := range base {
		if b.Measurement != "c1" || b.Target != "gateway" || (only != nil && !slices.Contains(only, b.Config)) {
			continue
		}
		key := b.Config + " " + b.Payload
		if seen[key] {
			continue
		}
		seen[key] = true
		r := gateResult{key: key}
		r.base, _ = addedP50(base, b.Config, b.Payload, "gateway")
		var has bool
		r.now, has = addedP50(now, b.Config, b.Payload, "gateway")
		if !has {
			out = append(out, r)
			continue
		}
		r.comparable = true
		r.ratio = safeRatio(r.now, r.base)
		fb, okb := addedP50(base, b.Config, b.Payload, "floor")
		fn, okn := addedP50(now, b.Config, b.Payload, "floor")
		if okb && okn && fb > 0 && fn > 0 {
			r.floorBase, r.floorNow = fb, fn
			r.ratio /= math.Max(1, fn/fb)
		}
		// The regression in milliseconds at the baseline's machine speed.
		delta := r.ratio*r.base - r.base
		r.regressed = r.ratio > 1+maxReg && delta > minDelta
		out = append(out, r)
	}
	return out
}

// safeRatio is a/b, with a baseline at or below zero (the gateway as fast
// as direct) compared as if it were 1 µs.
func safeRatio(a, b float64) float64 {
	b = math.Max(b, 0.001)
	return math.Max(a, 0) / b
}
