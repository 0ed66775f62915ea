package convert

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/tools/txtar"

	"github.com/vigilhq/vigil/trace"
)

// spanFromJSON reads the test form of a span: {"name", "attrs": {...},
// "resource": {...}, "events": [{"name", "attrs"}]}; times are fixed
// (start 2026-01-01T00:00:00Z, end one second later, events at start).
func spanFromJSON(data []byte) (*OTelSpan, error) {
	v, err := trace.ParseValue(data)
	if err != nil {
		return nil, err
	}
	o, _ := v.(*trace.Object)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := &OTelSpan{TraceID: "0102", SpanID: "0a0b", Name: str(o, "name"), Start: t0, End: t0.Add(time.Second)}
	toMap := func(v trace.Value) map[string]trace.Value {
		m := map[string]trace.Value{}
		if ob, ok := v.(*trace.Object); ok {
			for _, mem := range ob.Members {
				m[mem.Key] = mem.Value
			}
		}
		return m
	}
	a, _ := o.Get("attrs")
	s.Attrs = toMap(a)
	r, _ := o.Get("resource")
	s.Resource = toMap(r)
	evs, _ := o.Get("events")
	list, _ := evs.([]trace.Value)
	for _, e := range list {
		eo, _ := e.(*trace.Object)
		ea, _ := eo.Get("attrs")
		body, _ := eo.Get("body")
		s.Events = append(s.Events, OTelEvent{Name: str(eo, "name"), Time: t0, Attrs: toMap(ea), Body: body})
	}
	return s, nil
}

// resultText is the golden form of a result: kind and metadata on the
// first lines, then input, output, tool output and guardrails, one
// event per line.
func resultText(r *OTelResult) string {
	var b strings.Builder
	meta := trace.NewObject("kind", r.Kind.String(), "relevant", r.Relevant, "conversation", r.Conversation, "model", r.Model,
		"provider", r.Provider, "agent", r.AgentName)
	if r.HasUsage {
		meta.Set("usage", []trace.Value{trace.Number(strconv.FormatInt(r.InputTokens, 10)), trace.Number(strconv.FormatInt(r.OutputTokens, 10))})
	}
	if len(r.FinishReasons) > 0 {
		var fr []trace.Value
		for _, f := range r.FinishReasons {
			fr = append(fr, f)
		}
		meta.Set("finish_reasons", fr)
	}
	b.Write(trace.Marshal(meta))
	b.WriteByte('\n')
	section := func(name string, evs []*trace.Object) {
		if len(evs) == 0 {
			return
		}
		b.WriteString("# " + name + "\n")
		for _, e := range evs {
			b.Write(trace.Marshal(e))
			b.WriteByte('\n')
		}
	}
	section("input", r.Input)
	section("output", r.Output)
	if r.ToolOutput != nil {
		section("tool output", []*trace.Object{r.ToolOutput})
	}
	section("guardrails", r.Guardrails)
	return b.String()
}

// TestOTelGolden runs testdata/otel/*.txtar: span.json is mapped with
// FromOTelSpan; want.txt is the result (resultText), want.err the error.
func TestOTelGolden(t *testing.T) {
	files, _ := filepath.Glob("testdata/otel/*.txtar")
	if len(files) == 0 {
		t.Fatal("no golden files")
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txtar"), func(t *testing.T) {
			ar, err := txtar.ParseFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var src []byte
			for _, f := range ar.Files {
				if f.Name == "span.json" {
					src = f.Data
				}
			}
			s, err := spanFromJSON(src)
			if err != nil {
				t.Fatalf("span.json: %v", err)
			}
			got := map[string]string{}
			r, err := FromOTelSpan(s)
			if err != nil {
				got["want.err"] = err.Error() + "\n"
			} else {
				got["want.txt"] = resultText(r)
			}
			if *update {
				var keep []txtar.File
				for _, f := range ar.Files {
					if !strings.HasPrefix(f.Name, "want.") {
						keep = append(keep, f)
					}
				}
				for _, n := range []string{"want.txt", "want.err"} {
					if s, ok := got[n]; ok {
						keep = append(keep, txtar.File{Name: n, Data: []byte(s)})
					}
				}
				ar.Files = keep
				if err := os.WriteFile(file, txtar.Format(ar), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			seen := 0
			for _, f := range ar.Files {
				if !strings.HasPrefix(f.Name, "want.") {
					continue
				}
				seen++
				if got[f.Name] != string(f.Data) {
					t.Errorf("%s:\ngot:\n%s\nwant:\n%s", f.Name, got[f.Name], f.Data)
				}
			}
			if seen != len(got) {
				t.Errorf("got %v, the file has %d want sections", got, seen)
			}
		})
	}
}

// FuzzOTelSpan: no span makes FromOTelSpan panic (its recover turns a
// panic into a "cannot map" error, which fails here).
func FuzzOTelSpan(f *testing.F) {
	files, _ := filepath.Glob("testdata/otel/*.txtar")
	for _, file := range files {
		ar, err := txtar.ParseFile(file)
		if err != nil {
			f.Fatal(err)
		}
		for _, fl := range ar.Files {
			if fl.Name == "span.json" {
				f.Add(fl.Data)
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := spanFromJSON(data)
		if err != nil {
			return
		}
		if _, err := FromOTelSpan(s); err != nil && strings.Contains(err.Error(), "cannot map:") {
			t.Fatal(err)
		}
	})
}
