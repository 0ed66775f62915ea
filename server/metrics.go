package server

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vigilhq/vigil/monitor"
)

// This file writes the Prometheus text exposition format (version 0.0.4)
// by hand: counters and histograms with bounded label sets, plus a few Go
// runtime and process gauges. No client library.

// Metrics is the server's metric registry. The zero value is not usable;
// use newMetrics.
type Metrics struct {
	start time.Time

	mu       sync.Mutex
	counters map[string]*counterVec // by family name
	hists    map[string]*histVec
	order    []string // family names in registration order
	help     map[string]string
	// monitor returns the monitor pool's counters; nil when this process
	// runs no pool.
	monitor func() monitor.Stats
}

// monitorFamilies are the vigil_monitor_* counter families, each one of
// monitor.Stats's counters.
var monitorFamilies = []struct {
	name, help string
	value      func(monitor.Stats) int64
}{
	{"vigil_monitor_jobs_total", "Monitor jobs completed (evaluated, or nothing to do).", func(s monitor.Stats) int64 { return s.Jobs }},
	{"vigil_monitor_evaluations_total", "Guardrail evaluations the monitors ran.", func(s monitor.Stats) int64 { return s.Evaluations }},
	{"vigil_monitor_findings_total", "Findings the monitors wrote (new or updated).", func(s monitor.Stats) int64 { return s.Findings }},
	{"vigil_monitor_rule_errors_total", "Monitor evaluations that failed or reported rule failures (budget, run-time error, rule that does not load).", func(s monitor.Stats) int64 { return s.RuleErrors }},
	{"vigil_monitor_invalid_traces_total", "Monitor jobs whose trace the engine could not normalise.", func(s monitor.Stats) int64 { return s.InvalidTraces }},
	{"vigil_monitor_retries_total", "Monitor jobs put back after a store error.", func(s monitor.Stats) int64 { return s.Retries }},
	{"vigil_monitor_dropped_total", "Monitor jobs given up after their last attempt.", func(s monitor.Stats) int64 { return s.Dropped }},
}

type counterVec struct {
	labels []string
	mu     sync.Mutex
	vals   map[string]*atomic.Uint64 // by joined label values
}

type histVec struct {
	labels  []string
	buckets []float64
	mu      sync.Mutex
	vals    map[string]*histogram
}

type histogram struct {
	mu     sync.Mutex
	counts []uint64 // per bucket, not cumulative
	sum    float64
	count  uint64
}

// defBuckets are latency buckets in seconds.
var defBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// newMetrics returns the registry; monitorStats, when non-nil, adds the
// vigil_monitor_* families.
func newMetrics(monitorStats func() monitor.Stats) *Metrics {
	m := &Metrics{
		monitor:  monitorStats,
		start:    time.Now(),
		counters: map[string]*counterVec{},
		hists:    map[string]*histVec{},
		help:     map[string]string{},
	}
	m.counter("vigil_http_requests_total", "HTTP requests by route pattern, method and status code.", "route", "method", "code")
	m.histogram("vigil_http_request_duration_seconds", "HTTP request duration by route pattern.", defBuckets, "route")
	m.counter("vigil_ingest_traces_total", "Traces ingested by source.", "source")
	m.counter("vigil_ingest_messages_total", "Messages (events) ingested by source.", "source")
	m.counter("vigil_http_rejected_total", "Requests and connections answered 429 by admission control, by limit (body_memory, connections).", "limit")
	return m
}

func (m *Metrics) counter(name, help string, labels ...string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.counters[name] = &counterVec{labels: labels, vals: map[string]*atomic.Uint64{}}
	m.help[name] = help
	m.order = append(m.order, name)
}

func (m *Metrics) histogram(name, help string, buckets []float64, labels ...string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.hists[name] = &histVec{labels: labels, buckets: buckets, vals: map[string]*histogram{}}
	m.help[name] = help
	m.order = append(m.order, name)
}

// Add adds n to the counter family name with the given label values (in
// the order the family declared them). Unknown families are ignored.
func (m *Metrics) Add(name string, n uint64, labelValues ...string) {
	if v := m.counterCell(name, labelValues...); v != nil {
		v.Add(n)
	}
}

// counterCell returns the value of counter family name with the given
// label values, created at zero if need be (it then shows in Write); nil
// for an unknown family. A caller that counts often keeps the cell and
// adds to it, saving Add's lookups.
func (m *Metrics) counterCell(name string, labelValues ...string) *atomic.Uint64 {
	m.mu.Lock()
	c := m.counters[name]
	m.mu.Unlock()
	if c == nil {
		return nil
	}
	key := strings.Join(labelValues, "\xff")
	c.mu.Lock()
	v := c.vals[key]
	if v == nil {
		v = new(atomic.Uint64)
		c.vals[key] = v
	}
	c.mu.Unlock()
	return v
}

// Observe records value in the histogram family name.
func (m *Metrics) Observe(name string, value float64, labelValues ...string) {
	if v, buckets := m.histCell(name, labelValues...); v != nil {
		v.observe(buckets, value)
	}
}

// histCell returns the histogram of family name with the given label
// values, created empty if need be, and the family's buckets; nil for an
// unknown family.
func (m *Metrics) histCell(name string, labelValues ...string) (*histogram, []float64) {
	m.mu.Lock()
	h := m.hists[name]
	m.mu.Unlock()
	if h == nil {
		return nil, nil
	}
	key := strings.Join(labelValues, "\xff")
	h.mu.Lock()
	v := h.vals[key]
	if v == nil {
		v = &histogram{counts: make([]uint64, len(h.buckets))}
		h.vals[key] = v
	}
	h.mu.Unlock()
	return v, h.buckets
}

// observe records value in h, whose family has these buckets.
func (h *histogram) observe(buckets []float64, value float64) {
	i := sort.SearchFloat64s(buckets, value)
	h.mu.Lock()
	if i < len(h.counts) {
		h.counts[i]++
	}
	h.sum += value
	h.count++
	h.mu.Unlock()
}

// Write writes every family in the text exposition format.
func (m *Metrics) Write(w io.Writer) error {
	bw := bufio.NewWriter(w)
	m.mu.Lock()
	order := append([]string(nil), m.order...)
	m.mu.Unlock()
	for _, name := range order {
		m.mu.Lock()
		c, h, help := m.counters[name], m.hists[name], m.help[name]
		m.mu.Unlock()
		fmt.Fprintf(bw, "# HELP %s %s\n", name, help)
		if c != nil {
			fmt.Fprintf(bw, "# TYPE %s counter\n", name)
			c.mu.Lock()
			keys := sortedKeys(c.vals)
			for _, k := range keys {
				fmt.Fprintf(bw, "%s%s %d\n", name, labelString(c.labels, k, "", ""), c.vals[k].Load())
			}
			c.mu.Unlock()
			continue
		}
		fmt.Fprintf(bw, "# TYPE %s histogram\n", name)
		h.mu.Lock()
		keys := sortedKeys(h.vals)
		for _, k := range keys {
			v := h.vals[k]
			v.mu.Lock()
			var cum uint64
			for i, b := range h.buckets {
				cum += v.counts[i]
				fmt.Fprintf(bw, "%s_bucket%s %d\n", name, labelString(h.labels, k, "le", formatFloat(b)), cum)
			}
			fmt.Fprintf(bw, "%s_bucket%s %d\n", name, labelString(h.labels, k, "le", "+Inf"), v.count)
			fmt.Fprintf(bw, "%s_sum%s %s\n", name, labelString(h.labels, k, "", ""), formatFloat(v.sum))
			fmt.Fprintf(bw, "%s_count%s %d\n", name, labelString(h.labels, k, "", ""), v.count)
			v.mu.Unlock()
		}
		h.mu.Unlock()
	}
	m.writeMonitor(bw)
	m.writeRuntime(bw)
	return bw.Flush()
}

// writeMonitor writes the monitor pool's counters (nothing without a pool).
func (m *Metrics) writeMonitor(w io.Writer) {
	if m.monitor == nil {
		return
	}
	st := m.monitor()
	for _, f := range monitorFamilies {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s counter\n%s %d\n", f.name, f.help, f.name, f.name, f.value(st))
	}
}

func (m *Metrics) writeRuntime(w io.Writer) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	gauge := func(name, help string, v float64) {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s gauge\n%s %s\n", name, help, name, name, formatFloat(v))
	}
	counter := func(name, help string, v float64) {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s counter\n%s %s\n", name, help, name, name, formatFloat(v))
	}
	gauge("go_goroutines", "Number of goroutines that currently exist.", float64(runtime.NumGoroutine()))
	gauge("go_memstats_heap_alloc_bytes", "Bytes of allocated heap objects.", float64(ms.HeapAlloc))
	gauge("go_memstats_sys_bytes", "Bytes obtained from the OS.", float64(ms.Sys))
	counter("go_gc_cycles_total", "Completed GC cycles.", float64(ms.NumGC))
	gauge("process_start_time_seconds", "Start time of the process since the Unix epoch in seconds.", float64(m.start.Unix()))
	if rss, ok := readRSS(); ok {
		gauge("process_resident_memory_bytes", "Resident memory size in bytes.", float64(rss))
	}
}

// readRSS reads the resident set size from /proc (Linux only).
func readRSS() (int64, bool) {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0, false
	}
	pages, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return 0, false
	}
	return pages * int64(os.Getpagesize()), true
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// labelString renders {a="x",b="y"} from names and the \xff-joined values,
// plus an optional extra label (le for buckets).
func labelString(names []string, joined, extraName, extraValue string) string {
	if len(names) == 0 && extraName == "" {
		return ""
	}
	var b strings.Builder
	b.WriteByte('{')
	var vals []string
	if len(names) > 0 {
		vals = strings.Split(joined, "\xff")
	}
	for i, n := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		v := ""
		if i < len(vals) {
			v = vals[i]
		}
		fmt.Fprintf(&b, "%s=\"%s\"", n, escapeLabel(v))
	}
	if extraName != "" {
		if len(names) > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=\"%s\"", extraName, extraValue)
	}
	b.WriteByte('}')
	return b.String()
}

var labelEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)

func escapeLabel(s string) string { return labelEscaper.Replace(s) }

func formatFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "+Inf"
	case math.IsInf(f, -1):
		return "-Inf"
	case math.IsNaN(f):
		return "NaN"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}
