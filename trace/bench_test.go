package trace

import (
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"
)

// cpuNow is the process's user+system CPU time: on a shared machine CPU
// per op is steadier than wall time per op.
func cpuNow() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports CPU nanoseconds per op since start.
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(cpuNow()-start)/float64(b.N), "cpu-ns/op")
}

// genTrace returns a realistic trace of about size bytes: user and
// assistant messages, tool calls with object and string arguments, tool
// outputs with multi-line text, chunked content and non-ASCII text.
func genTrace(size int) []byte {
	var b strings.Builder
	b.WriteString("[\n")
	for i := 0; b.Len() < size; i++ {
		if i > 0 {
			b.WriteString(",\n")
		}
		switch i % 4 {
		case 0:
			fmt.Fprintf(&b, `{"role": "user", "content": "Please summarise the emails from this week (%d) — café, naïve, 東京.", "metadata": {"ts": %d}}`, i, 1700000000+i)
		case 1:
			fmt.Fprintf(&b, `{"role": "assistant", "content": null, "tool_calls": [{"id": "call_%d", "type": "function", "function": {"name": "get_inbox", "arguments": {"n": 10, "folder": "INBOX", "unread": true}}}, {"id": "call_%db", "type": "function", "function": {"name": "search", "arguments": "{\"q\": \"invoice\", \"limit\": 5}"}}]}`, i, i)
		case 2:
			fmt.Fprintf(&b, `{"role": "tool", "tool_call_id": "call_%d", "content": "1. Subject: Hello\nFrom: alice@example.com\nDate: 2024-01-01\n2. Subject: Meeting \"Q3\"\nFrom: bob@example.com\nBody: Let's meet at 10:00 to discuss the roadmap and the budget for next year."}`, i-1)
		case 3:
			b.WriteString(`{"role": "assistant", "content": [{"type": "text", "text": "You have 2 new emails: one from Alice and one from Bob about the Q3 meeting."}, {"type": "image_url", "image_url": {"url": "https://example.com/chart.png"}}]}`)
		}
	}
	b.WriteString("\n]\n")
	return []byte(b.String())
}

var benchTrace = genTrace(1 << 20)

// BenchmarkDecode measures Decode (parse + normalise) of a 1 MB trace.
func BenchmarkDecode(b *testing.B) {
	b.SetBytes(int64(len(benchTrace)))
	b.ReportAllocs()
	defer reportCPU(b, cpuNow())
	for b.Loop() {
		if _, err := Decode(benchTrace); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeBaselineMaps is the baseline BenchmarkDecode must reach
// 80% of: json.Unmarshal of the same bytes into []map[string]any.
func BenchmarkDecodeBaselineMaps(b *testing.B) {
	b.SetBytes(int64(len(benchTrace)))
	b.ReportAllocs()
	for b.Loop() {
		var v []map[string]any
		if err := json.Unmarshal(benchTrace, &v); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncode measures Encode of the decoded 1 MB trace.
func BenchmarkEncode(b *testing.B) {
	t, err := Decode(benchTrace)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(benchTrace)))
	b.ReportAllocs()
	buf := make([]byte, 0, len(benchTrace))
	for b.Loop() {
		buf = t.AppendJSON(buf[:0])
	}
}

// BenchmarkFlatten measures Flatten of the decoded 1 MB trace.
func BenchmarkFlatten(b *testing.B) {
	t, err := Decode(benchTrace)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		t.Flatten()
	}
}

// BenchmarkDecodeManyProblems decodes a 1 MB trace in which every tool
// call has non-JSON arguments (a warning each) and every tenth event has
// an error: locating all of them costs one extra pass, not one per problem.
func BenchmarkDecodeManyProblems(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("[")
	for i := 0; sb.Len() < 1<<20; i++ {
		if i > 0 {
			sb.WriteString(",\n")
		}
		if i%10 == 0 {
			fmt.Fprintf(&sb, `{"role": %d}`, i)
			continue
		}
		fmt.Fprintf(&sb, `{"role": "assistant", "tool_calls": [{"id": "%d", "type": "function", "function": {"name": "f", "arguments": "not json %d"}}]}`, i, i)
	}
	sb.WriteString("]")
	data := []byte(sb.String())
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		t, err := Decode(data)
		if err == nil || len(t.Warnings) < 1000 || t.Warnings[len(t.Warnings)-1].Line == 0 {
			b.Fatal("want errors and located warnings")
		}
	}
}
