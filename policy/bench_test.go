package policy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/vigilhq/vigil/internal/tracegen"
	"github.com/vigilhq/vigil/policy"
	"github.com/vigilhq/vigil/trace"
)

func genDecoded(b *testing.B, n int) *trace.Trace {
	data, err := json.Marshal(tracegen.GuardrailRun(n))
	if err != nil {
		b.Fatal(err)
	}
	t, err := trace.Decode(data)
	if err != nil {
		b.Fatal(err)
	}
	return t
}

// cpuTimer reports the process CPU time per operation ("cpu-ns/op", GC
// included) next to the wall time, which on a shared machine says more
// about the engine than ns/op does.
type cpuTimer struct{ start time.Duration }

func cpuNow() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func startCPU() cpuTimer { return cpuTimer{cpuNow()} }

func (c cpuTimer) report(b *testing.B) {
	b.ReportMetric(float64(cpuNow()-c.start)/float64(b.N), "cpu-ns/op")
}

func BenchmarkLoad(b *testing.B) {
	b.ReportAllocs()
	defer startCPU().report(b)
	for b.Loop() {
		if _, err := policy.Load(tracegen.GuardrailPolicy, policy.Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAnalyze(b *testing.B) {
	p, err := policy.Load(tracegen.GuardrailPolicy, policy.Options{})
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{10, 100, 300, 1000, 10000} {
		t := genDecoded(b, n)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			b.ReportAllocs()
			defer startCPU().report(b)
			for b.Loop() {
				if _, err := p.Analyze(context.Background(), t, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkMonitorAppend measures appending one event to a monitored
// trace of 10,000 events.
func BenchmarkMonitorAppend(b *testing.B) {
	p, err := policy.Load(tracegen.GuardrailPolicy, policy.Options{})
	if err != nil {
		b.Fatal(err)
	}
	const base = 10000
	t := genDecoded(b, base+20000)
	m, err := p.NewMonitor(nil)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := m.Append(context.Background(), t.Events[:base]...); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	defer startCPU().report(b)
	i := base
	for b.Loop() {
		if i == len(t.Events) {
			b.StopTimer()
			m, _ = p.NewMonitor(nil)
			m.Append(context.Background(), t.Events[:base]...)
			i = base
			b.StartTimer()
		}
		if _, err := m.Append(context.Background(), t.Events[i]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkAnalyzePairs is the spec's budget example (§10.10): a
// 1,000-message trace and two free Message variables, 10^6 combinations of
// a three-line body, which must fit in the default budget.
func BenchmarkAnalyzePairs(b *testing.B) {
	p, err := policy.Load(`
raise "same content" if:
    (a: Message)
    (b: Message)
    a.content == b.content
    a -> b
`, policy.Options{})
	if err != nil {
		b.Fatal(err)
	}
	var msgs []any
	for i := range 1000 {
		msgs = append(msgs, map[string]any{"role": "user", "content": fmt.Sprint("m", i%500)})
	}
	data, _ := json.Marshal(msgs)
	t, err := trace.Decode(data)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	defer startCPU().report(b)
	for b.Loop() {
		res, err := p.Analyze(context.Background(), t, nil)
		if err != nil || len(res.Failures) != 0 || len(res.Errors) != 500 {
			b.Fatalf("%d violations, failures %v, %v", len(res.Errors), res.Failures, err)
		}
	}
}
