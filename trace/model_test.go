package trace

import (
	"errors"
	"testing"
)

func TestObject(t *testing.T) {
	o := NewObject("a", Number("1"), "b", "x", "a", true)
	if v, _ := o.Get("a"); v != true {
		t.Errorf("Get returns %v, want the last duplicate", v)
	}
	o.Set("b", "y")
	o.Set("c", nil)
	if got := string(Marshal(o)); got != `{"a":1,"b":"y","a":true,"c":null}` {
		t.Errorf("after Set: %s", got)
	}
	c := Clone(o).(*Object)
	o.Delete("a")
	if got := string(Marshal(o)); got != `{"b":"y","c":null}` {
		t.Errorf("after Delete: %s", got)
	}
	if got := string(Marshal(c)); got != `{"a":1,"b":"y","a":true,"c":null}` {
		t.Errorf("clone changed: %s", got)
	}
	if !Equal(c, Clone(c)) || Equal(c, o) || Equal(Number("1"), Number("1.0")) || !Equal([]Value{nil, "x"}, []Value{nil, "x"}) {
		t.Error("Equal is wrong")
	}
	var nilObj *Object
	if nilObj.Len() != 0 || nilObj.Has("x") || nilObj.Keys() != nil {
		t.Error("nil object is not empty")
	}
	if got := o.Keys(); len(got) != 2 || got[0] != "b" {
		t.Errorf("Keys = %v", got)
	}
}

func TestNumber(t *testing.T) {
	tests := []struct {
		n     Number
		isInt bool
		i     int64
		iok   bool
		f     float64
	}{
		{"42", true, 42, true, 42},
		{"-0", true, 0, true, 0},
		{"1.50", false, 0, false, 1.5},
		{"1e3", false, 0, false, 1000},
		{"123456789012345678901234", true, 0, false, 1.2345678901234568e23},
	}
	for _, tt := range tests {
		i, ok := tt.n.Int64()
		if tt.n.IsInt() != tt.isInt || ok != tt.iok || (ok && i != tt.i) || tt.n.Float64() != tt.f {
			t.Errorf("%s: IsInt=%v Int64=%d,%v Float64=%v", tt.n, tt.n.IsInt(), i, ok, tt.n.Float64())
		}
	}
}

func TestTypeName(t *testing.T) {
	for v, want := range map[any]string{"s": "string", true: "boolean", Number("1"): "number", 1.5: "invalid"} {
		if got := TypeName(v); got != want {
			t.Errorf("TypeName(%#v) = %s, want %s", v, got, want)
		}
	}
	if TypeName(nil) != "null" || TypeName([]Value{}) != "array" || TypeName(&Object{}) != "object" {
		t.Error("TypeName of null, array or object is wrong")
	}
}

func TestNewEventAndFromValue(t *testing.T) {
	e, err := NewEvent(NewObject("role", "assistant", "content", "hi", "tool_calls", []Value{
		NewObject("id", "c1", "type", "function", "function", NewObject("name", "f", "arguments", `{"x": 1}`)),
	}))
	if err != nil {
		t.Fatal(err)
	}
	if e.Kind != KindMessage || e.Content.Texts()[0] != "hi" || e.ToolCalls[0].Function.Args().Len() != 1 {
		t.Errorf("event = %s", Marshal(e.Raw))
	}
	// The stored form got the decoded arguments too.
	if got := string(Marshal(e.Raw)); got != `{"role":"assistant","content":"hi","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":{"x":1}}}]}` {
		t.Errorf("stored = %s", got)
	}
	if v, ok := e.Get("content"); !ok || v != "hi" {
		t.Errorf("Get(content) = %v, %v", v, ok)
	}
	_, err = NewEvent(NewObject("role", Number("1")))
	var el ErrorList
	if !errors.As(err, &el) || len(el) != 1 || el[0].Path != "events[0].role" || el[0].Line != 0 {
		t.Errorf("NewEvent error = %#v", err)
	}
	tr, err := FromValue([]Value{NewObject("role", "user", "content", []Value{NewObject("text", "a"), NewObject("type", "image_url", "image_url", "u")})})
	if err != nil || tr.Form != FormList || len(tr.Events) != 1 {
		t.Fatalf("FromValue = %v, %v", tr, err)
	}
	if got := tr.Events[0].Content.Texts(); len(got) != 1 || got[0] != "a" {
		t.Errorf("Texts = %v", got)
	}
	if _, err := FromValue("x"); !errors.Is(err, ErrInvalidTrace) {
		t.Errorf("FromValue(string) err = %v", err)
	}
}

func TestErrorsMatch(t *testing.T) {
	_, err := Decode([]byte(`[{"role": 1}, 2]`))
	if !errors.Is(err, ErrInvalidTrace) || errors.Is(err, ErrSyntax) {
		t.Errorf("err = %v", err)
	}
	var one *Error
	if !errors.As(err, &one) || one.Path != "events[0].role" || one.Line != 1 || one.Col != 11 {
		t.Errorf("first error = %#v", one)
	}
	_, err = Decode([]byte("[\n  {\"role\": \"x\"}\n  {}]"))
	var se *SyntaxError
	if !errors.As(err, &se) || !errors.Is(err, ErrSyntax) || se.Line != 3 || se.Col != 3 || se.Offset != 20 {
		t.Errorf("syntax error = %#v", err)
	}
	if (ErrorList{}).Err() != nil {
		t.Error("empty ErrorList.Err() is not nil")
	}
}

func TestItemServerAndKinds(t *testing.T) {
	tr, err := Decode([]byte(`[{"tools": [{"name": "t", "metadata": {"server": "own"}}, {"name": "u"}], "metadata": {"server": "el"}},
		{"type": "function", "metadata": {"server": "bare"}, "function": {"name": "f"}},
		{"role": "tool", "content": "x"}]`))
	if err != nil {
		t.Fatal(err)
	}
	items := tr.Flatten()
	want := []struct {
		kind   ItemKind
		server string
	}{{ItemTool, "own"}, {ItemTool, "el"}, {ItemToolCall, "bare"}, {ItemToolOutput, ""}}
	if len(items) != len(want) {
		t.Fatalf("%d items", len(items))
	}
	for i, w := range want {
		s := ""
		if p := items[i].Server(); p != nil {
			s = *p
		}
		if items[i].Kind != w.kind || s != w.server {
			t.Errorf("item %d = %s server %q, want %s %q", i, items[i].Kind, s, w.kind, w.server)
		}
	}
	if items[3].Linked != 2 || items[3].ToolCallID != nil {
		t.Errorf("output linked to %d", items[3].Linked)
	}
	if ItemTool.String() != "Tool" || KindTools.String() != "tools" || Kind(99).String() != "invalid" {
		t.Error("kind names")
	}
}

func TestAppend(t *testing.T) {
	whole := `[{"tools": [{"name": "a"}, {"name": "b"}]}, {"role": "user", "content": "hi"},
		{"role": "assistant", "tool_calls": [{"id": "1", "type": "function", "function": {"name": "f", "arguments": "bad"}}]},
		{"role": "tool", "content": "out"}]`
	want, err := Decode([]byte(whole))
	if err != nil {
		t.Fatal(err)
	}
	// Decoding a prefix and appending the rest gives the same trace,
	// warnings and flattening.
	got, err := Decode([]byte(`[{"tools": [{"name": "a"}, {"name": "b"}]}]`))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range want.Events[1:] {
		if err := got.Append(Clone(e.Raw)); err != nil {
			t.Fatal(err)
		}
	}
	if string(got.Encode()) != string(want.Encode()) {
		t.Errorf("encode differs:\n%s\n%s", got.Encode(), want.Encode())
	}
	if len(got.Warnings) != 1 || got.Warnings[0].Msg != want.Warnings[0].Msg || got.Warnings[0].Path != want.Warnings[0].Path {
		t.Errorf("warnings = %v, want %v", got.Warnings, want.Warnings)
	}
	if a, b := dumpFlat(got), dumpFlat(want); a != b {
		t.Errorf("flatten differs:\n%s\n%s", a, b)
	}
	err = got.Append(NewObject("role", Number("3")), "x")
	var el ErrorList
	if !errors.As(err, &el) || len(el) != 2 || el[0].Path != "events[4].role" || el[1].Path != "events[5]" || len(got.Events) != 6 {
		t.Errorf("Append errors = %v (%d events)", err, len(got.Events))
	}
}
