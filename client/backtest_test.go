package client

import (
	"bufio"
	"io"
	"strings"
	"testing"
)

// sseCases are SSE texts and the data of their events.
var sseCases = []struct {
	name, in string
	want     []string
	err      bool // the stream ends inside an event
}{
	{"one", "data: {\"a\":1}\n\n", []string{`{"a":1}`}, false},
	{"two_crlf", "data: 1\r\n\r\ndata: 2\r\n\r\n", []string{"1", "2"}, false},
	{"no_space", "data:x\n\n", []string{"x"}, false},
	{"multi_line", "data: a\ndata: b\n\n", []string{"a\nb"}, false},
	{"fields_and_comments", ": hello\nevent: frame\nid: 3\ndata: x\nretry: 10\n\n", []string{"x"}, false},
	{"blank_lines_between", "\n\ndata: x\n\n\n\ndata: y\n\n", []string{"x", "y"}, false},
	{"empty", "", nil, false},
	{"cut_in_event", "data: x\n", nil, true},
	{"cut_in_line", "data: {\"a\"", nil, true},
	{"empty_data", "data:\n\n", []string{""}, false},
}

func readAllSSE(in string) ([]string, error) {
	rd := bufio.NewReader(strings.NewReader(in))
	var out []string
	for {
		d, err := readSSEData(rd)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, string(d))
	}
}

func TestReadSSEData(t *testing.T) {
	for _, tc := range sseCases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readAllSSE(tc.in)
			if (err != nil) != tc.err || !tc.err && strings.Join(got, "|") != strings.Join(tc.want, "|") || len(got) != len(tc.want) && !tc.err {
				t.Errorf("readSSEData(%q) = %q, %v; want %q (error %v)", tc.in, got, err, tc.want, tc.err)
			}
		})
	}
}

// FuzzReadSSEData: any input ends in events and io.EOF or an error,
// never a panic or a loop; an event written as data lines reads back.
func FuzzReadSSEData(f *testing.F) {
	for _, tc := range sseCases {
		f.Add(tc.in)
	}
	f.Fuzz(func(t *testing.T, in string) {
		readAllSSE(in)
		if strings.ContainsAny(in, "\r\n") {
			return
		}
		got, err := readAllSSE("data: " + in + "\n\n")
		if err != nil || len(got) != 1 || got[0] != in {
			t.Errorf("data %q read back as %q, %v", in, got, err)
		}
	})
}
