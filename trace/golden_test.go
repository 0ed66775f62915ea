package trace

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/tools/txtar"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// TestDecodeGolden runs testdata/decode/*.txtar. Each case has
// input.json and the expected outcome:
//
//	want.json   Encode of the decoded trace (absent: Decode must fail
//	            before producing a trace)
//	want.err    the error text, one problem per line ("" when valid)
//	want.warn   the warnings, one per line (absent when none)
//	want.flat   the flattened sequence, one item per line (valid traces)
//
// go test ./trace -run TestDecodeGolden -update rewrites the want files.
func TestDecodeGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/decode/*.txtar")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden files: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txtar"), func(t *testing.T) {
			ar, err := txtar.ParseFile(file)
			if err != nil {
				t.Fatal(err)
			}
			input := section(ar, "input.json")
			if input == nil {
				t.Fatal("no input.json section")
			}
			tr, derr := Decode(input)
			got := map[string]string{}
			if derr != nil {
				got["want.err"] = derr.Error() + "\n"
			} else {
				got["want.err"] = ""
			}
			if tr != nil {
				got["want.json"] = string(tr.Encode()) + "\n"
				var w strings.Builder
				for _, wn := range tr.Warnings {
					fmt.Fprintln(&w, wn)
				}
				if w.Len() > 0 {
					got["want.warn"] = w.String()
				}
				if derr == nil {
					got["want.flat"] = dumpFlat(tr)
				}
				// The stored form must be stable: decoding it again gives
				// the same bytes.
				tr2, err2 := Decode(tr.Encode())
				if (err2 == nil) != (derr == nil) {
					t.Errorf("re-decode error = %v, first decode error = %v", err2, derr)
				}
				if tr2 != nil && !bytes.Equal(tr2.Encode(), tr.Encode()) {
					t.Errorf("decode→encode→decode not stable:\n%s\n%s", tr.Encode(), tr2.Encode())
				}
			}
			if *update {
				var files []txtar.File
				for _, f := range ar.Files {
					if !strings.HasPrefix(f.Name, "want.") {
						files = append(files, f)
					}
				}
				for _, name := range []string{"want.json", "want.err", "want.warn", "want.flat"} {
					if s, ok := got[name]; ok {
						files = append(files, txtar.File{Name: name, Data: []byte(s)})
					}
				}
				ar.Files = files
				if err := os.WriteFile(file, txtar.Format(ar), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			for _, name := range []string{"want.json", "want.err", "want.warn", "want.flat"} {
				want := section(ar, name)
				g, ok := got[name]
				if want == nil && !ok {
					continue
				}
				if want == nil {
					t.Errorf("missing section %s; got:\n%s", name, g)
					continue
				}
				if string(want) != g {
					t.Errorf("%s:\ngot:\n%s\nwant:\n%s", name, g, want)
				}
			}
		})
	}
}

func section(ar *txtar.Archive, name string) []byte {
	for _, f := range ar.Files {
		if f.Name == name {
			return f.Data
		}
	}
	return nil
}

// dumpFlat renders the flattened sequence for golden files.
func dumpFlat(tr *Trace) string {
	var b strings.Builder
	for _, it := range tr.Flatten() {
		fmt.Fprintf(&b, "%s #%d %s", it.Kind, it.Index, it.Address)
		if it.Stored.String() != it.Address.String() {
			fmt.Fprintf(&b, " stored=%s", it.Stored)
		}
		switch it.Kind {
		case ItemMessage:
			fmt.Fprintf(&b, " role=%s content=%s", it.Event.Role, dumpContent(it.Event.Content))
			if it.Event.NullToolCalls {
				b.WriteString(" tool_calls=null")
			}
		case ItemToolOutput:
			fmt.Fprintf(&b, " tool_call_id=%s linked=%d content=%s", dumpStr(it.ToolCallID), it.Linked, dumpContent(it.Event.Content))
		case ItemToolCall:
			fmt.Fprintf(&b, " id=%s type=%s name=%s args=%s", dumpStr(it.Call.ID), it.Call.Type, it.Call.Function.Name, Marshal(it.Call.Function.Arguments))
		case ItemTool:
			fmt.Fprintf(&b, " name=%s description=%q params=%s", it.Tool.Name, it.Tool.Description, dumpParams(it.Tool.Parameters))
		}
		if s := it.Server(); s != nil {
			fmt.Fprintf(&b, " server=%s", *s)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func dumpStr(s *string) string {
	if s == nil {
		return "None"
	}
	return fmt.Sprintf("%q", *s)
}

func dumpContent(c Content) string {
	switch c.Kind {
	case ContentAbsent, ContentNull:
		return "None"
	case ContentText:
		return fmt.Sprintf("%q", c.Text)
	case ContentObject:
		return string(Marshal(c.Object))
	case ContentChunks:
		var parts []string
		for _, ch := range c.Chunks {
			switch ch.Kind {
			case ChunkText:
				parts = append(parts, fmt.Sprintf("%s:%q", ch.Type, ch.Text))
			case ChunkImage:
				parts = append(parts, fmt.Sprintf("%s:<%s>", ch.Type, ch.ImageURL))
			default:
				parts = append(parts, "dict:"+string(Marshal(ch.Raw)))
			}
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	return "invalid"
}

func dumpParams(ps []*ToolParameter) string {
	var parts []string
	for _, p := range ps {
		s := p.Name + ":" + p.Type
		if len(p.Types) > 0 {
			s = p.Name + ":" + strings.Join(p.Types, "|")
		}
		if p.Required {
			s += "!"
		}
		if p.Enum != nil {
			s += "enum" + string(Marshal(p.Enum))
		}
		if p.Items != nil {
			s += " items(" + dumpParams([]*ToolParameter{p.Items}) + ")"
		}
		if p.Properties != nil {
			s += " {" + dumpParams(p.Properties) + "}"
		}
		if p.AdditionalProperties != nil {
			s += fmt.Sprintf(" additional=%v", *p.AdditionalProperties)
		}
		parts = append(parts, s)
	}
	return "[" + strings.Join(parts, " ") + "]"
}
