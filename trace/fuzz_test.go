package trace

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/tools/txtar"
)

// addGoldenSeeds adds the input.json of every golden decode case.
func addGoldenSeeds(f *testing.F) {
	files, _ := filepath.Glob("testdata/decode/*.txtar")
	for _, file := range files {
		ar, err := txtar.ParseFile(file)
		if err != nil {
			f.Fatal(err)
		}
		if in := section(ar, "input.json"); in != nil {
			f.Add(in)
		}
	}
	f.Add(genTrace(4 << 10))
}

// FuzzDecode checks that Decode never panics, agrees with encoding/json on
// what is valid JSON and on the values, and that decode→encode→decode is
// stable.
func FuzzDecode(f *testing.F) {
	addGoldenSeeds(f)
	for _, s := range []string{`{"messages": [{"role": "user", "content": [{"text": "x"}]}]}`, `[{"tools": [{"name": "t", "inputSchema": {"properties": {"a": {"type": ["string", "null"]}}}}]}]`, `"\ud800\udc00\ud800"`, `[1e400, -0, 0.5e-3]`, `{"a":1,"a":2}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, perr := ParseValue(data)
		if !bytes.HasPrefix(data, []byte("\xef\xbb\xbf")) {
			if valid := json.Valid(data); valid != (perr == nil) {
				// encoding/json limits nesting to 10000 as well, and takes
				// invalid UTF-8 in a string (replacing it with U+FFFD),
				// which ParseValue refuses; anything else is a
				// disagreement.
				if !strings.Contains(perr.Error(), "nesting deeper") && !strings.Contains(perr.Error(), "invalid UTF-8") {
					t.Fatalf("ParseValue error = %v, json.Valid = %v", perr, valid)
				}
			}
			if perr == nil {
				d := json.NewDecoder(bytes.NewReader(data))
				d.UseNumber()
				var want any
				if err := d.Decode(&want); err == nil && !reflect.DeepEqual(toStd(v), want) {
					t.Fatalf("value differs from encoding/json:\n got %#v\nwant %#v", toStd(v), want)
				}
			}
		}
		if perr == nil {
			// Encoding a parsed value gives valid JSON that parses back equal.
			enc := Marshal(v)
			v2, err := ParseValue(enc)
			if err != nil || !Equal(v, v2) {
				t.Fatalf("value round trip: %v\n%s", err, enc)
			}
		}
		tr, err := Decode(data)
		if err != nil && !errors.Is(err, ErrSyntax) && !errors.Is(err, ErrInvalidTrace) {
			t.Fatalf("unexpected error kind: %v", err)
		}
		var list ErrorList
		if errors.As(err, &list) {
			for _, e := range list {
				if e.Offset >= 0 {
					if l, c := LineCol(data, e.Offset); l != e.Line || c != e.Col {
						t.Fatalf("%v: offset %d is %d:%d", e, e.Offset, l, c)
					}
				}
			}
		}
		if tr == nil {
			return
		}
		enc := tr.Encode()
		if !utf8.Valid(enc) {
			t.Fatalf("Encode produced invalid UTF-8")
		}
		tr2, err2 := Decode(enc)
		if tr2 == nil || (err == nil) != (err2 == nil) {
			t.Fatalf("re-decode: %v (first: %v)\n%s", err2, err, enc)
		}
		if enc2 := tr2.Encode(); !bytes.Equal(enc, enc2) {
			t.Fatalf("decode→encode→decode not stable:\n%s\n%s", enc, enc2)
		}
		if err == nil {
			items := tr.Flatten()
			for _, it := range items {
				if _, err := tr.Resolve(it.Stored); err != nil {
					t.Fatalf("stored address %s of a flattened item does not resolve: %v", it.Stored, err)
				}
			}
		}
	})
}

// toStd converts a Value to what encoding/json produces with UseNumber.
func toStd(v Value) any {
	switch v := v.(type) {
	case Number:
		return json.Number(v)
	case []Value:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = toStd(e)
		}
		return out
	case *Object:
		out := make(map[string]any, v.Len())
		for _, m := range v.Members {
			out[stdSurrogates(m.Key)] = toStd(m.Value)
		}
		return out
	}
	if str, ok := v.(string); ok {
		return stdSurrogates(str)
	}
	return v
}

// stdSurrogates replaces each lone surrogate ParseValue keeps (as WTF-8)
// with U+FFFD, as encoding/json decodes it.
func stdSurrogates(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		if _, ok := wtf8Surrogate(s[i:]); ok {
			b.WriteString("\uFFFD")
			i += 3
			continue
		}
		b.WriteByte(s[i])
		i++
	}
	return b.String()
}

// FuzzParseAddress checks that ParseAddress never panics, that String is
// a fixed point, and that resolving never panics.
func FuzzParseAddress(f *testing.F) {
	for _, s := range []string{
		"<root>", "messages.3.content:5-10", "messages.0.content:L2", "messages[2].tool_calls[0]",
		"messages.0.content.1.image_url.url:bbox-0,0.25,1,0.5", "messages.@abc.content:0-1",
		"messages.1.tool_calls.0.function.arguments.a:b:1-2", "messages.0:99999999999999999999-1",
		"messages.1.arguments.3", "messages[", "messages.@", "messages..x", "messages.0.content:L",
	} {
		f.Add(s)
	}
	tr, err := Decode([]byte(resolveTrace))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseAddress(s)
		if err != nil {
			if !errors.Is(err, ErrAddress) {
				t.Fatalf("error %v does not match ErrAddress", err)
			}
			return
		}
		b, err := ParseAddress(a.String())
		if err != nil || b.String() != a.String() {
			t.Fatalf("reparse of %q (from %q): %v, %q", a.String(), s, err, b.String())
		}
		r, err := tr.Resolve(a)
		if err == nil && (a.Selector.Kind == SelectRange || a.Selector.Kind == SelectLine) {
			str := r.Value.(string)
			if str[r.ByteStart:r.ByteEnd] != r.Text || utf8.RuneCountInString(r.Text) != r.End-r.Start {
				t.Fatalf("inconsistent resolution of %q: %+v", s, r)
			}
		}
	})
}

// FuzzJSONL checks that the reader never panics or loops, reports errors
// with a line, and that what it reads is written back and read again the
// same.
func FuzzJSONL(f *testing.F) {
	f.Add([]byte("{\"metadata\": {\"a\": 1}}\n[{\"role\": \"user\", \"content\": \"hi\"}]\n[{\"metadata\": {}}, {\"role\": \"user\"}]\n"))
	f.Add([]byte("{\"index\": 0, \"messages\": [], \"annotations\": [{\"content\": \"c\", \"address\": \"messages.0\"}]}\n{\"index\": 1, \"messages\": [{\"role\": 1}]}\n"))
	f.Add([]byte("[]\n{\"messages\": []}\n\n[1,\n{\"metadata\": {}}\n42\n"))
	f.Add([]byte("{\"index\": 1.5, \"messages\": []}\r\n{\"index\": 2, \"messages\": []}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, cont := range []bool{false, true} {
			r := NewReader(bytes.NewReader(data))
			r.ContinueOnError = cont
			r.MaxLineBytes = 1 << 16
			var entries []*Entry
			for i := 0; ; i++ {
				if i > bytes.Count(data, []byte("\n"))+2 {
					t.Fatal("reader does not terminate")
				}
				e, err := r.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					var le *LineError
					if !errors.As(err, &le) || le.Line < 1 {
						t.Fatalf("error without a line: %v", err)
					}
					if e == nil && !cont {
						break
					}
				}
				if e != nil {
					entries = append(entries, e)
				}
			}
			if cont {
				continue
			}
			// Write back what was read; reading it again gives the same lines.
			var buf bytes.Buffer
			w := NewWriter(&buf)
			if md := r.Metadata(); md != nil {
				if err := w.WriteMetadata(md); err != nil {
					t.Fatal(err)
				}
			}
			for _, e := range entries {
				if err := w.Write(e); err != nil {
					t.Fatal(err)
				}
			}
			w.Flush()
			r2 := NewReader(bytes.NewReader(buf.Bytes()))
			var buf2 bytes.Buffer
			w2 := NewWriter(&buf2)
			n := 0
			for {
				e, err := r2.Next()
				if err == io.EOF {
					break
				}
				if e == nil {
					t.Fatalf("re-read of written dataset failed: %v\n%s", err, buf.Bytes())
				}
				if n == 0 && r2.Metadata() != nil {
					w2.WriteMetadata(r2.Metadata())
				}
				w2.Write(e)
				n++
			}
			if n == 0 && r2.Metadata() != nil {
				w2.WriteMetadata(r2.Metadata())
			}
			w2.Flush()
			if n != len(entries) || !bytes.Equal(buf.Bytes(), buf2.Bytes()) {
				t.Fatalf("JSONL round trip differs:\n%s\n%s", buf.Bytes(), buf2.Bytes())
			}
		}
	})
}
