package web

import (
	"strconv"
	"strings"
	"testing"

	"github.com/vigilhq/vigil/server"
)

// rejoin renders the answer parts back to text, marks as [n].
func rejoin(parts []answerPart) string {
	var b strings.Builder
	for _, p := range parts {
		if p.N > 0 {
			b.WriteString("[" + strconv.Itoa(p.N) + "]")
		} else {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

func TestAnswerViewMarks(t *testing.T) {
	cites := []server.AskCitation{
		{TraceID: "t1", Address: "messages.0.content:3-7", Dataset: "runs", DatasetUser: "alice", TraceIndex: 4},
		{TraceID: "t2", Address: "messages.612.content", Dataset: "runs", DatasetUser: "alice", TraceIndex: 9},
		{TraceID: "t3", Address: "messages.0"}, // a snippet: no dataset
	}
	tests := []struct {
		name  string
		text  string
		links []string // hrefs of the marks, in order
	}{
		{"marks", "A [1] and B [2][3].", []string{"/u/alice/runs/t/4#messages.0.content%3A3-7", "/u/alice/runs/t/9?page=1#messages.612.content", "/trace/t3#messages.0"}},
		{"out of range stays text", "A [4] [0] [12345678901234567890]", nil},
		{"no marks", "plain", nil},
		{"unsupported", "x [unsupported] y [1]", []string{"/u/alice/runs/t/4#messages.0.content%3A3-7"}},
		{"empty", "", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := answerView(&server.AskAnswer{Mode: "model", Answer: tc.text, Citations: cites})
			if got := rejoin(v.Parts); got != tc.text {
				t.Errorf("parts rejoin to %q, want %q", got, tc.text)
			}
			var links []string
			for _, p := range v.Parts {
				if p.N > 0 {
					links = append(links, p.Href)
				}
			}
			if strings.Join(links, " ") != strings.Join(tc.links, " ") {
				t.Errorf("links %q, want %q", links, tc.links)
			}
		})
	}
}

// FuzzAnswerView: any answer text splits into parts that rejoin to it,
// with links only for marks of existing citations.
func FuzzAnswerView(f *testing.F) {
	for _, s := range []string{"A [1] and B [2].", "[", "[[1]]", "[99]", "x [unsupported]", "é[1]ü", "[1"} {
		f.Add(s)
	}
	cites := []server.AskCitation{{TraceID: "a", Address: "messages.0"}, {TraceID: "b", Address: "messages.1"}}
	f.Fuzz(func(t *testing.T, s string) {
		v := answerView(&server.AskAnswer{Mode: "model", Answer: s, Citations: cites})
		if got := rejoin(v.Parts); got != s {
			t.Fatalf("parts rejoin to %q, want %q", got, s)
		}
		for _, p := range v.Parts {
			if p.N > len(cites) || (p.N > 0 && p.Href == "") {
				t.Fatalf("mark %d with href %q", p.N, p.Href)
			}
		}
	})
}
