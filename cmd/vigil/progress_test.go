package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestScanJSONLLine(t *testing.T) {
	for _, tt := range []struct {
		name, line string
		want       lineStats
	}{
		{"event list", `[{"role": "user"}, {"role": "assistant", "content": "a, b ] }"}]`, lineStats{trace: true, events: 2}},
		{"empty event list", ` [ ] `, lineStats{trace: true}},
		{"trace object", `{"index": 3, "name": "x", "messages": [{"role": "user", "content": "[1, 2]"}, [], {}], "metadata": {"messages": [1]}}`, lineStats{trace: true, events: 3, hasIndex: true}},
		{"escaped quotes in strings", `{"name": "a\"b\\", "messages": [{"content": "\"],["}]}`, lineStats{trace: true, events: 1}},
		{"dataset line", `{"metadata": {"index": 1, "messages": []}}`, lineStats{}},
		{"messages not a list", `{"messages": "no"}`, lineStats{}},
		{"scalars", `{"index": -1.5e3, "ok": true, "n": null, "messages": [1, "2", false]}`, lineStats{trace: true, events: 3, hasIndex: true}},
		{"blank", "\n", lineStats{}},
		{"truncated", `{"index": 1, "messages": [{"role": "us`, lineStats{trace: true, events: 1, hasIndex: true}},
		{"not JSON", `hello`, lineStats{}},
	} {
		if got := counts(scanJSONLLine([]byte(tt.line))); got != tt.want {
			t.Errorf("%s: scanJSONLLine(%q) = %+v, want %+v", tt.name, tt.line, got, tt.want)
		}
	}
}

// counts is st without the index span (TestDropIndex checks that).
func counts(st lineStats) lineStats {
	st.indexStart, st.indexEnd = 0, 0
	return st
}

// FuzzScanJSONLLine: on valid JSON the scanner agrees with encoding/json;
// on anything else it does not panic.
func FuzzScanJSONLLine(f *testing.F) {
	for _, s := range []string{`[{}, {}]`, `{"index": 0, "messages": [{"a": "]"}]}`, `{"metadata": {}}`, `{"a": "\\"}`, `[`, `{"messages": [1,`, `"x"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		got := counts(scanJSONLLine([]byte(line)))
		var v any
		if json.Unmarshal([]byte(line), &v) != nil {
			return
		}
		var want lineStats
		switch x := v.(type) {
		case []any:
			want = lineStats{trace: true, events: len(x)}
		case map[string]any:
			if m, ok := x["messages"].([]any); ok {
				want.trace, want.events = true, len(m)
			}
			_, want.hasIndex = x["index"]
		}
		if got != want && !strings.Contains(line, `\u`) && strings.Count(line, `"messages"`)+strings.Count(line, `"index"`) <= 2 {
			t.Errorf("scanJSONLLine(%q) = %+v, encoding/json says %+v", line, got, want)
		}
	})
}

func TestDropIndex(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{`{"index": 3, "name": "x", "messages": [{"index": 1}]}` + "\n", `{"name": "x", "messages": [{"index": 1}]}` + "\n"},
		{`{"messages": [], "index": 0}`, `{"messages": []}`},
		{`{"messages": [] , "index" : 0 , "metadata": {"index": 2}}`, `{"messages": [] , "metadata": {"index": 2}}`},
		{`{"index": 1}`, `{}`},
		{`{"index": 1, "index": 2, "messages": []}`, `{"messages": []}`},
		{`{"name": "a\"index\"", "index": 1}`, `{"name": "a\"index\""}`},
		{`{"index": 1, "messages": [`, `{"messages": [`}, // invalid: the server reports it
	} {
		if got := string(dropIndex([]byte(tt.in), scanJSONLLine([]byte(tt.in)))); got != tt.want {
			t.Errorf("dropIndex(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// FuzzDropIndex: on a valid object line, dropping the indices leaves valid
// JSON with the same members but "index".
func FuzzDropIndex(f *testing.F) {
	for _, s := range []string{`{"index": 1, "messages": []}`, `{"a": 1, "index": [1, {"b": "}"}]}`, `{"index":0}`, `{ "x" : "index" , "index" : null }`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		var before map[string]any
		if json.Unmarshal([]byte(line), &before) != nil || strings.Contains(line, `\u`) {
			return
		}
		out := dropIndex([]byte(line), scanJSONLLine([]byte(line)))
		var after map[string]any
		if err := json.Unmarshal(out, &after); err != nil {
			t.Fatalf("dropIndex(%q) = %q: %v", line, out, err)
		}
		delete(before, "index")
		if !reflect.DeepEqual(before, after) {
			t.Errorf("dropIndex(%q) = %q: members %v, want %v", line, out, after, before)
		}
	})
}

// TestJSONLStream: the stream passes lines through unchanged (renumbered
// when asked), lines longer than its buffer included, counts traces and
// events, and enters the server phase at the end of the input.
func TestJSONLStream(t *testing.T) {
	long := strings.Repeat("x", 300<<10)
	in := `{"metadata": {}}` + "\n" + `{"index": 0, "messages": [{"content": "` + long + `"}, {}]}` + "\n" + `{"index": 1, "messages": []}`
	for _, renumber := range []bool{false, true} {
		var errBuf bytes.Buffer
		p := newProgress(&errBuf, "import f", int64(len(in)), false)
		s := newJSONLStream(strings.NewReader(in), p)
		s.renumber, s.serverPhase = renumber, true
		out, err := io.ReadAll(s)
		if err != nil {
			t.Fatal(err)
		}
		want := in
		if renumber {
			want = `{"metadata": {}}` + "\n" + `{"messages": [{"content": "` + long + `"}, {}]}` + "\n" + `{"messages": []}`
		}
		if string(out) != want {
			t.Errorf("renumber %v: output differs from the input (len %d, want %d)", renumber, len(out), len(want))
		}
		if p.traces != 2 || p.events != 2 || p.bytes != int64(len(in)) || p.storing.IsZero() {
			t.Errorf("renumber %v: counted %d traces, %d events, %d bytes, server phase %v", renumber, p.traces, p.events, p.bytes, !p.storing.IsZero())
		}
		p.done(true)
	}
}

// TestProgressStatus renders each phase at fixed times (it was bytes only,
// with no sign of the server's part).
func TestProgressStatus(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name                    string
		totalBytes, totalTraces int64
		bytes, traces, events   int64
		at, storing             time.Duration // since start; storing 0 = still sending
		final, tty              bool
		want                    string
	}{
		{"sending a file", 4 << 20, -1, 1 << 20, 3000, 45000, 2 * time.Second, 0, false, false,
			"3,000 traces, 45,000 events, 1.0 MiB of 4.0 MiB (25%), 1,500 traces/s, ETA 6s"},
		{"sending stdin", -1, -1, 2048, 10, 20, time.Second, 0, false, false,
			"10 traces, 20 events, 2.0 KiB, 10 traces/s"},
		{"server storing", 4 << 20, -1, 4 << 20, 12000, 180000, 15 * time.Second, 2 * time.Second, false, false,
			"uploaded 4.0 MiB (12,000 traces, 180,000 events); server storing 12,000 traces… 13s"},
		{"server storing on a terminal", 4 << 20, -1, 4 << 20, 12000, 180000, 3 * time.Second, 2 * time.Second, false, true,
			"uploaded 4.0 MiB (12,000 traces, 180,000 events); ⠋ server storing 12,000 traces… 1s"},
		{"import done", 4 << 20, -1, 4 << 20, 12000, 180000, 16 * time.Second, 2 * time.Second, true, false,
			"12,000 traces, 180,000 events stored in 16s (750 traces/s; server 14s)"},
		{"export with a known total", -1, 8000, 3 << 20, 2000, 4000, time.Second, 0, false, false,
			"2,000 of 8,000 traces, 4,000 events, 3.0 MiB (25%), 2,000 traces/s, ETA 3s"},
		{"export done", -1, 8000, 12 << 20, 8000, 16000, 4 * time.Second, 0, true, false,
			"8,000 of 8,000 traces, 16,000 events, 12.0 MiB in 4s (2,000 traces/s)"},
	} {
		p := &progress{label: "x", totalBytes: tt.totalBytes, totalTraces: tt.totalTraces, tty: tt.tty, start: t0,
			bytes: tt.bytes, traces: tt.traces, events: tt.events}
		if tt.storing > 0 {
			p.storing = t0.Add(tt.storing)
		}
		if got := p.status(t0.Add(tt.at), tt.final); got != tt.want {
			t.Errorf("%s:\n got %q\nwant %q", tt.name, got, tt.want)
		}
	}
}

// TestProgressOutput: plain lines off a terminal (the server phase kept
// alive by a ticker), a redrawn line on one, nothing when quiet.
func TestProgressOutput(t *testing.T) {
	var buf syncBuffer
	p := newProgress(&buf, "import f", 100, false)
	p.interval = 10 * time.Millisecond
	p.line(100, true, 5)
	p.serverPhase()
	time.Sleep(50 * time.Millisecond)
	p.done(true)
	out := buf.String()
	if n := strings.Count(out, "server storing 1 traces"); n < 2 || !strings.Contains(out, "\nvigil: import f: 1 traces, 5 events stored in ") {
		t.Errorf("plain output (%d server lines):\n%s", n, out)
	}
	if strings.Contains(out, "\r") || strings.Contains(out, "\033") {
		t.Errorf("terminal control characters off a terminal: %q", out)
	}
	var tty bytes.Buffer
	p = newProgress(&tty, "import f", 100, false)
	p.tty = true
	p.serverPhase()
	p.done(false)
	if !strings.HasPrefix(tty.String(), "\r\033[K") || strings.Count(tty.String(), "\n") != 1 || !strings.HasSuffix(tty.String(), "\n") || strings.Contains(tty.String(), "stored in") {
		t.Errorf("terminal output %q", tty.String())
	}
	var quiet bytes.Buffer
	p = newProgress(&quiet, "import f", 100, true)
	p.line(10, true, 1)
	p.serverPhase()
	p.done(true)
	if quiet.Len() != 0 {
		t.Errorf("quiet output %q", quiet.String())
	}
}

func TestThousands(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -12000: "-12,000"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}

// BenchmarkJSONLStream measures the line scanning import and export add
// to count traces and events (and, with renumber, to drop indices), in
// bytes of JSONL per second, on 2,000 traces of 20 events.
func BenchmarkJSONLStream(b *testing.B) {
	var file bytes.Buffer
	file.WriteString(`{"metadata": {"benchmark": "stream"}}` + "\n")
	for i := range 2000 {
		file.WriteString(`{"index": ` + strconv.Itoa(i) + `, "messages": [`)
		for j := range 20 {
			if j > 0 {
				file.WriteString(", ")
			}
			file.WriteString(`{"role": "assistant", "content": "Looking up the order \"A-17\" [step ` + strconv.Itoa(j) + `]", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{\"id\": 17}"}}]}`)
		}
		file.WriteString("], \"metadata\": {\"user\": \"ann\"}}\n")
	}
	for _, renumber := range []bool{false, true} {
		b.Run(fmt.Sprintf("renumber=%v", renumber), func(b *testing.B) {
			b.SetBytes(int64(file.Len()))
			for range b.N {
				p := newProgress(io.Discard, "bench", int64(file.Len()), false)
				s := newJSONLStream(bytes.NewReader(file.Bytes()), p)
				s.renumber = renumber
				if _, err := io.Copy(io.Discard, s); err != nil {
					b.Fatal(err)
				}
				if p.traces != 2000 || p.events != 40000 {
					b.Fatalf("counted %d traces, %d events", p.traces, p.events)
				}
			}
		})
	}
}
