package trace

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

// readAll reads every entry, returning a dump of what was read and the
// error lines.
func readAll(t *testing.T, in string) (dump string, errs []string, out []*Entry, md *Object) {
	t.Helper()
	r := NewReader(strings.NewReader(in))
	var b strings.Builder
	for {
		e, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			errs = append(errs, err.Error())
			if e == nil {
				break
			}
		}
		out = append(out, e)
		fmt.Fprintf(&b, "line %d form=%d", e.Line, e.Form)
		if e.HasIndex {
			fmt.Fprintf(&b, " index=%d", e.Index)
		}
		if e.Name != "" {
			fmt.Fprintf(&b, " name=%q", e.Name)
		}
		if e.HierarchyPath != nil {
			fmt.Fprintf(&b, " path=%q", e.HierarchyPath)
		}
		fmt.Fprintf(&b, " events=%d", len(e.Trace.Events))
		if e.Trace.Metadata != nil {
			fmt.Fprintf(&b, " metadata=%s", Marshal(e.Trace.Metadata))
		}
		for _, a := range e.Annotations {
			fmt.Fprintf(&b, " ann(%s@%s)", a.Content, a.Address)
		}
		b.WriteByte('\n')
	}
	return b.String(), errs, out, r.Metadata()
}

func TestJSONLReader(t *testing.T) {
	tests := []struct {
		name string
		in   string
		dump string
		errs []string
	}{
		{
			name: "raw_lists",
			in: `{"metadata": {"description": "demo"}}
[{"role": "user", "content": "hi"}]

[{"metadata": {"run": 2}}, {"role": "user", "content": "yo"}, {"role": "assistant", "content": "hey"}]
`,
			dump: "line 2 form=0 events=1\nline 4 form=0 events=2 metadata={\"run\":2}\n",
		},
		{
			name: "annotated",
			in: `{"index": 0, "name": "Run 0", "hierarchy_path": ["a", "b"], "messages": [{"role": "user", "content": "hi"}], "metadata": {"x": 1}, "annotations": [{"content": "note", "address": "messages.0.content:0-2", "extra_metadata": {"source": "user"}}]}
{"index": 5, "messages": [], "annotations": []}`,
			dump: "line 1 form=1 index=0 name=\"Run 0\" path=[\"a\" \"b\"] events=1 metadata={\"x\":1} ann(note@messages.0.content:0-2)\nline 2 form=1 index=5 events=0\n",
		},
		{
			name: "metadata_twice",
			in:   "{\"metadata\": {}}\n{\"metadata\": {}}\n",
			errs: []string{"line 2: invalid dataset: The metadata row can appear at most once in the file."},
		},
		{
			name: "metadata_not_first",
			in:   "[]\n{\"metadata\": {}}\n",
			dump: "line 1 form=0 events=0\n",
			errs: []string{"line 2: invalid dataset: The metadata row must be the first row in the file."},
		},
		{
			name: "mixed_forms",
			in:   "[]\n{\"messages\": []}\n",
			dump: "line 1 form=0 events=0\n",
			errs: []string{"line 2: invalid dataset: The file cannot contain both raw event lists and annotated event lists."},
		},
		{
			name: "index_inconsistent",
			in:   "{\"index\": 1, \"messages\": []}\n{\"messages\": []}\n",
			dump: "line 1 form=1 index=1 events=0\n",
			errs: []string{"line 2: invalid dataset: The 'index' key is inconsistently present — found in some events but missing in others."},
		},
		{
			name: "index_duplicate",
			in:   "{\"index\": 1, \"messages\": []}\n{\"index\": 1, \"messages\": []}\n",
			dump: "line 1 form=1 index=1 events=0\n",
			errs: []string{"line 2: invalid dataset: Duplicate index found: 1 in the file."},
		},
		{
			name: "index_not_int",
			in:   "{\"index\": 1.5, \"messages\": []}\n",
			errs: []string{"line 1: invalid dataset: Invalid index found: 1.5 in the file. Index must be an integer."},
		},
		{
			name: "bad_annotation",
			in:   "{\"messages\": [], \"annotations\": [{\"content\": \"x\"}]}\n",
			errs: []string{`line 1: invalid dataset: Failed to parse annotation: {"content":"x"}`},
		},
		{
			name: "syntax_error_names_line",
			in:   "[]\n[{\"role\": \"user\",]\n[]\n",
			dump: "line 1 form=0 events=0\n",
			errs: []string{"line 2: 1:18: unexpected ']' in object, want a string key"},
		},
		{
			name: "invalid_trace_continues",
			in:   "[{\"role\": 1}]\n[{\"role\": \"user\", \"content\": \"ok\"}]\n",
			dump: "line 1 form=0 events=1\nline 2 form=0 events=1\n",
			errs: []string{`line 1: events[0].role: "role" is number, want a string (line 1, col 11)`},
		},
		{
			name: "metadata_element_errors_ignored",
			in:   "[{\"metadata\": {\"a\": 1}}, {\"role\": \"user\", \"tool_calls\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"arguments\": \"x\"}}]}]\n",
			dump: "line 1 form=0 events=1 metadata={\"a\":1}\n",
		},
		{
			name: "dataset_metadata_not_object",
			in:   "{\"metadata\": [1]}\n",
			errs: []string{`line 1: invalid dataset: dataset "metadata" is array, want an object`},
		},
		{
			name: "id_not_string",
			in:   "{\"id\": 7, \"messages\": []}\n",
			errs: []string{`line 1: invalid dataset: "id" is number, want a string`},
		},
		{
			name: "name_not_string",
			in:   "{\"name\": [], \"messages\": []}\n",
			errs: []string{`line 1: invalid dataset: "name" is array, want a string`},
		},
		{
			name: "hierarchy_path_not_list",
			in:   "{\"hierarchy_path\": \"a/b\", \"messages\": []}\n",
			errs: []string{`line 1: invalid dataset: "hierarchy_path" is string, want an array of strings`},
		},
		{
			name: "hierarchy_path_element",
			in:   "{\"hierarchy_path\": [\"a\", 2], \"messages\": []}\n",
			errs: []string{`line 1: invalid dataset: "hierarchy_path"[1] is number, want a string`},
		},
		{
			name: "annotations_not_list",
			in:   "{\"messages\": [], \"annotations\": {}}\n",
			errs: []string{`line 1: invalid dataset: "annotations" is object, want an array`},
		},
		{
			name: "annotation_content_json",
			in:   "{\"messages\": [], \"annotations\": [{\"content\": {\"a\": 1}, \"address\": \"<root>\"}]}\n",
			dump: "line 1 form=1 events=0 ann({\"a\":1}@<root>)\n",
		},
		{
			name: "messages_not_list",
			in:   "{\"messages\": 3}\n",
			errs: []string{`line 1: messages: "messages" is number, want an array of events (line 1, col 14)`},
		},
		{
			name: "scalar_line",
			in:   "42\n",
			errs: []string{"line 1: invalid dataset: line is number, want an event list or an object"},
		},
		{
			name: "object_without_messages",
			in:   "{\"foo\": 1}\n",
			errs: []string{`line 1: invalid dataset: an object line needs "messages" (a trace) or "metadata" (the dataset line)`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dump, errs, _, _ := readAll(t, tt.in)
			if dump != tt.dump {
				t.Errorf("dump:\n%s\nwant:\n%s", dump, tt.dump)
			}
			if strings.Join(errs, "\n") != strings.Join(tt.errs, "\n") {
				t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(errs, "\n"), strings.Join(tt.errs, "\n"))
			}
		})
	}
}

func TestJSONLErrorsMatch(t *testing.T) {
	_, err := NewReader(strings.NewReader("[]\n{\"messages\": []}\n")).Next()
	if err != nil {
		t.Fatal(err)
	}
	r := NewReader(strings.NewReader("[]\n{\"messages\": []}\n"))
	r.Next()
	_, err = r.Next()
	var le *LineError
	if !errors.Is(err, ErrDataset) || !errors.As(err, &le) || le.Line != 2 {
		t.Errorf("err = %v, want a LineError at line 2 matching ErrDataset", err)
	}
	if _, err2 := r.Next(); err2 != err {
		t.Errorf("reader did not stop: %v", err2)
	}
	r = NewReader(strings.NewReader("[1,\n"))
	if _, err := r.Next(); !errors.Is(err, ErrSyntax) {
		t.Errorf("err = %v, want ErrSyntax", err)
	}
	r = NewReader(strings.NewReader(strings.Repeat("x", 100) + "\n"))
	r.MaxLineBytes = 10
	if _, err := r.Next(); !errors.Is(err, ErrDataset) || !strings.Contains(err.Error(), "longer than 10 bytes") {
		t.Errorf("err = %v, want a line-length error", err)
	}
	// A line of exactly MaxLineBytes (its newline not counted) is accepted.
	for _, in := range []string{"[        ]\n", "[        ]"} {
		r = NewReader(strings.NewReader(in))
		r.MaxLineBytes = 10
		if e, err := r.Next(); err != nil || e == nil {
			t.Errorf("%q with MaxLineBytes 10: %v, want the entry", in, err)
		}
	}
}

func TestJSONLRoundTrip(t *testing.T) {
	inputs := []string{
		`{"metadata":{"description":"demo","policies":[]}}
[{"role":"user","content":"hi"}]
[{"metadata":{"run":2}},{"role":"user","content":"yo","timestamp":"2024-01-01"}]
`,
		`{"index":0,"name":"Run 0","messages":[{"role":"user","content":"hi"}],"metadata":{"x":1.0},"annotations":[{"content":"note","address":"messages.0","extra_metadata":{"source":"user"}}],"extra":true}
{"index":1,"messages":[{"role":"assistant","tool_calls":[{"id":"1","type":"function","function":{"name":"f","arguments":{"a":[1,2]}}}]}]}
`,
	}
	for _, in := range inputs {
		_, errs, entries, md := readAll(t, in)
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		var buf bytes.Buffer
		w := NewWriter(&buf)
		if md != nil {
			if err := w.WriteMetadata(md); err != nil {
				t.Fatal(err)
			}
		}
		for _, e := range entries {
			if err := w.Write(e); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		if buf.String() != in {
			t.Errorf("round trip:\n%s\nwant:\n%s", buf.String(), in)
		}
	}
}

func TestJSONLWriterBuilt(t *testing.T) {
	tr, err := Decode([]byte(`[{"role":"user","content":"hi"}]`))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w := NewWriter(&buf)
	if err := w.WriteMetadata(NewObject("name", "ds")); err != nil {
		t.Fatal(err)
	}
	e := &Entry{Form: EntryAnnotated, Trace: tr, Index: 3, HasIndex: true, Name: "Run 3",
		Annotations: []Annotation{{Content: "c", Address: "messages.0"}}}
	if err := w.Write(e); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(&Entry{Form: EntryRaw, Trace: tr}); !errors.Is(err, ErrDataset) {
		t.Errorf("mixed write err = %v", err)
	}
	if err := w.WriteMetadata(nil); !errors.Is(err, ErrDataset) {
		t.Errorf("late metadata err = %v", err)
	}
	w.Flush()
	want := `{"metadata":{"name":"ds"}}
{"index":3,"name":"Run 3","messages":[{"role":"user","content":"hi"}],"metadata":{},"annotations":[{"content":"c","address":"messages.0"}]}
`
	if buf.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", buf.String(), want)
	}
}

func TestJSONLContinueOnError(t *testing.T) {
	in := "[1,\n" + strings.Repeat("x", 50) + "\n{\"messages\": []}\n[{\"role\": \"user\", \"content\": \"ok\"}]\n"
	r := NewReader(strings.NewReader(in))
	r.ContinueOnError = true
	r.MaxLineBytes = 40
	var got []string
	for {
		e, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			got = append(got, err.Error())
			continue
		}
		got = append(got, fmt.Sprintf("ok line %d", e.Line))
	}
	want := []string{
		"line 1: 1:4: unexpected end of input, want a value",
		"line 2: invalid dataset: line longer than 40 bytes",
		"ok line 3",
		"line 4: invalid dataset: The file cannot contain both raw event lists and annotated event lists.",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
