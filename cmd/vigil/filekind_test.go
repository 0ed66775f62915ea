package main

import (
	"io"
	"os"
	"strings"
	"testing"
	"time"
)

func TestSniffFile(t *testing.T) {
	pretty, err := os.ReadFile("testdata/kinds/trace.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name     string
		head     string
		complete bool
		want     fileKind
	}{
		{"pretty event list", string(pretty), true, kindTrace},
		{"pretty event list longer than the head", string(pretty[:40]), false, kindTrace},
		{"pretty object with messages", "{\n  \"messages\": [\n {\"role\": \"user\"}]\n}\n", true, kindTrace},
		{"one-line trace", `[{"role": "user", "content": "x"}]` + "\n", true, kindOneLine},
		{"one-line trace object", `{"messages": []}`, true, kindOneLine},
		{"dataset", "[{\"role\": \"user\"}]\n[]\n", true, kindDataset},
		{"dataset with its metadata line", "{\"metadata\": {}}\n{\"index\": 0, \"messages\": []}\n", true, kindDataset},
		{"dataset longer than the head", `{"messages": []}` + "\n" + `{"messa`, false, kindDataset},
		{"event lines", "{\"role\": \"user\", \"content\": \"a\"}\n{\"role\": \"assistant\", \"content\": \"b\"}\n", true, kindEventLines},
		{"event lines after a metadata line", "{\"metadata\": {}}\n{\"role\": \"user\"}\n", true, kindEventLines},
		{"a single event", `{"role": "user"}`, true, kindUnknown},
		{"pretty but invalid", "[\n {\"role\": \"user\"},\n", true, kindUnknown},
		{"pretty object without messages", "{\n \"a\": 1\n}", true, kindUnknown},
		{"not JSON", "hello\nworld\n", true, kindUnknown},
		{"empty", " \n", true, kindUnknown},
	} {
		if got := sniffFile([]byte(tt.head), tt.complete); got != tt.want {
			t.Errorf("%s: sniffFile = %d, want %d", tt.name, got, tt.want)
		}
	}
}

// FuzzSniffFile: sniffing never panics, and what it calls a dataset or a
// multi-line trace is one.
func FuzzSniffFile(f *testing.F) {
	for _, s := range []string{"[\n{}\n]", "{\"messages\": []}\n[]\n", "{\"role\": \"user\"}\n{\"role\": \"x\"}", "{\"metadata\": {}}\n", "[", "\n\n{"} {
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, head string, complete bool) {
		kind := sniffFile([]byte(head), complete)
		if complete && kind == kindTrace && strings.Count(strings.TrimSpace(head), "\n") == 0 {
			t.Errorf("sniffFile(%q) = kindTrace for a single line", head)
		}
	})
}

// TestFileKindMismatch: a JSON trace where a JSONL dataset is expected, or
// the reverse, or a file of one event per line, gets one line naming the
// command or flag that fits (vigil check printed an error for each of the
// 65 lines of a pretty-printed trace).
func TestFileKindMismatch(t *testing.T) {
	const dir = "testdata/kinds/"
	const pol = "testdata/check/email.pol"
	for _, tt := range []struct {
		name   string
		args   []string
		stdin  string
		code   int
		stderr string // the whole of stderr, without "vigil: "; "" = empty
		stdout string // substring
	}{
		{"check --trace of a dataset", []string{"check", "--policy", pol, "--trace", dir + "dataset.json"}, "", 2,
			"check: " + dir + "dataset.json is a JSONL dataset (one trace per line), not a single JSON trace: use 'vigil check --dataset " + dir + "dataset.json'", ""},
		{"check --trace of event lines", []string{"check", "--policy", pol, "--trace", dir + "events.jsonl"}, "", 2,
			"check: " + dir + "events.jsonl holds one event per line (JSONL of messages), not a single JSON trace: a trace is a JSON array of events; 'jq -s . " + dir + "events.jsonl > trace.json' makes one", ""},
		{"check --dataset of a trace", []string{"check", "--policy", pol, "--dataset", dir + "trace.json"}, "", 2,
			"check: " + dir + "trace.json is a JSON trace over several lines, not a JSONL dataset (one trace per line): use 'vigil check --trace " + dir + "trace.json'", ""},
		{"check --dataset of a trace object named .jsonl", []string{"check", "--policy", pol, "--dataset", dir + "trace-object.jsonl"}, "", 2,
			"check: " + dir + "trace-object.jsonl is a JSON trace over several lines, not a JSONL dataset (one trace per line): use 'vigil check --trace " + dir + "trace-object.jsonl'", ""},
		{"check --dataset of a trace on stdin", []string{"check", "--policy", pol, "--dataset", "-"}, "[\n  {\"role\": \"user\"}\n]\n", 2,
			"check: - is a JSON trace over several lines, not a JSONL dataset (one trace per line): use 'vigil check --trace -'", ""},
		{"check --dataset of event lines", []string{"check", "--policy", pol, "--dataset", dir + "events.jsonl"}, "", 2,
			"check: " + dir + "events.jsonl holds one event per line (JSONL of messages), not a JSONL dataset (one trace per line): a trace is a JSON array of events; 'jq -s . " + dir + "events.jsonl > trace.json' makes one for 'vigil check --trace trace.json'", ""},
		{"check --trace of a trace", []string{"check", "--policy", pol, "--trace", dir + "trace.json"}, "", 0, "", "0 violation(s)"},
		{"check --dataset of a dataset", []string{"check", "--policy", pol, "--dataset", dir + "dataset.json"}, "", 0, "", "3 trace(s) checked"},
		{"one-line trace as a trace", []string{"check", "--policy", pol, "--trace", dir + "one-line.jsonl"}, "", 0, "", "0 violation(s)"},
		{"one-line trace as a dataset", []string{"check", "--policy", pol, "--dataset", dir + "one-line.jsonl"}, "", 0, "", "1 trace(s) checked"},
		{"import of a trace", []string{"import", dir + "trace.json", "--dataset", "d", "--url", "127.0.0.1:1"}, "", 2,
			"import: " + dir + "trace.json is a JSON trace over several lines, not a JSONL dataset (one trace per line): 'jq -c . " + dir + "trace.json > trace.jsonl' makes it a one-trace dataset to import", ""},
		{"import of event lines", []string{"import", "-", "--dataset", "d", "--url", "127.0.0.1:1"}, "{\"role\": \"user\"}\n{\"role\": \"assistant\"}\n", 2,
			"import: - holds one event per line (JSONL of messages), not a JSONL dataset (one trace per line): 'jq -cs . - > trace.jsonl' makes them a one-trace dataset to import", ""},
		{"lint of a trace named .jsonl", []string{"trace", "lint", "-v", dir + "trace-object.jsonl"}, "", 0,
			"trace lint: " + dir + "trace-object.jsonl is a JSON trace over several lines, not a JSONL dataset (one trace per line): checked as a JSON trace (name it .json)", "ok (4 events)"},
		{"lint of a dataset named .json", []string{"trace", "lint", "-v", dir + "dataset.json"}, "", 0,
			"trace lint: " + dir + "dataset.json is a JSONL dataset (one trace per line), not a single JSON trace: checked as a dataset (name it .jsonl)", "ok (3 traces)"},
		{"lint of event lines", []string{"trace", "lint", dir + "events.jsonl"}, "", 1, "",
			dir + "events.jsonl:1:1: " + dir + "events.jsonl holds one event per line (JSONL of messages), not a JSONL dataset (one trace per line): 'jq -s . " + dir + "events.jsonl > trace.json' makes a trace of them, 'jq -cs . " + dir + "events.jsonl > trace.jsonl' a one-trace dataset\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errs := runVigil(t, tt.stdin, tt.args...)
			want := ""
			if tt.stderr != "" {
				want = "vigil: " + tt.stderr + "\n"
			}
			if code != tt.code || errs != want || !strings.Contains(out, tt.stdout) {
				t.Errorf("exit %d, want %d\nstderr %q\n  want %q\nstdout %q, want it to contain %q", code, tt.code, errs, want, out, tt.stdout)
			}
			if tt.code == 1 && strings.Count(out, "\n") != 1 {
				t.Errorf("%d lines of problems, want 1:\n%s", strings.Count(out, "\n"), out)
			}
		})
	}
}

// TestPeekHeadStreams: sniffing a pipe reads only what it needs, so a
// dataset streamed line by line is not held up until 1 MiB or the end.
func TestPeekHeadStreams(t *testing.T) {
	for _, tt := range []struct {
		name, sent string
		want       fileKind
	}{
		{"a trace line", `{"messages": [{"role": "user"}]}` + "\n", kindOneLine},
		{"a dataset line, then a trace line", "{\"metadata\": {}}\n[{\"role\": \"user\"}]\n", kindOneLine},
		{"an event line", `{"role": "user"}` + "\n", kindEventLines},
		{"a pretty trace", "[\n  {\"role\": \"user\"}\n]\n", kindTrace},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pr, pw := io.Pipe()
			defer pw.Close()
			go pw.Write([]byte(tt.sent)) // and nothing more: the pipe stays open
			done := make(chan fileKind, 1)
			go func() {
				head, _, complete := peekHead(pr)
				done <- sniffFile(head, complete)
			}()
			select {
			case got := <-done:
				if got != tt.want && !(tt.want == kindOneLine && got == kindDataset) {
					t.Errorf("kind %d, want %d", got, tt.want)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("peekHead waited for more than the first lines of an open pipe")
			}
		})
	}
}
