package eval

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vigilhq/vigil/policy/builtin"
	"github.com/vigilhq/vigil/trace"
)

const modelTrace = `[
 {"tools": [{"name": "a", "inputSchema": {"properties": {"q": {"type": "string"}, "o": {"type": "object", "properties": {"k": {"type": "int"}}}}, "required": ["q"]}}, {"name": "b"}]},
 {"role": "user", "content": [{"type": "text", "text": "Describe"}, {"type": "image_url", "image_url": "data:image/png;base64,AA"}, {"foo": 1}], "metadata": {"server": "s"}},
 {"role": "assistant", "content": "ok", "tool_calls": [{"id": "1", "type": "function", "function": {"name": "f", "arguments": "{\"x\": 1}"}}, {"id": "2", "function": {"name": "g", "arguments": "not json"}}]},
 {"role": "tool", "content": "out"},
 {"type": "function", "id": "3", "function": {"name": "h"}},
 {"role": "tool", "tool_call_id": "1", "content": {"k": "v"}}
]`

func newTestModel(t *testing.T) *Model {
	t.Helper()
	tr, err := trace.Decode([]byte(modelTrace))
	if err != nil {
		t.Fatal(err)
	}
	return NewModel(tr)
}

func TestModel(t *testing.T) {
	m := newTestModel(t)
	var seq []string
	for _, e := range m.Seq {
		seq = append(seq, builtin.TypeName(e)+"@"+e.Addr().String())
	}
	want := "Tool@messages.0 Tool@messages.1 Message@messages.2 Message@messages.3 ToolCall@messages.3.tool_calls.0 ToolCall@messages.3.tool_calls.1 ToolOutput@messages.4 ToolCall@messages.5 ToolOutput@messages.6"
	if strings.Join(seq, " ") != want {
		t.Errorf("flattened sequence\n got %s\nwant %s", strings.Join(seq, " "), want)
	}
	out := m.Events[4].(*builtin.ToolOutput)
	if out.Call == nil || out.Call.ID != "2" || out.ToolCallID != "2" {
		t.Errorf("output without tool_call_id linked to %+v", out.Call)
	}
	if last := m.Events[6].(*builtin.ToolOutput); last.Call == nil || last.Call.ID != "1" {
		t.Errorf("output with tool_call_id 1 linked to %+v", last.Call)
	}
	if len(m.Warnings) != 1 || m.Warnings[0] != "invalid tool arguments at event 3" {
		t.Errorf("warnings = %q", m.Warnings)
	}
	if s := m.Events[2].(*builtin.Message).Server; s != "s" {
		t.Errorf("server = %v", s)
	}
	tool := m.Events[0].(*builtin.Tool)
	if len(tool.InputSchema) != 2 || !tool.InputSchema[0].Required || tool.InputSchema[1].Required {
		t.Errorf("parameters %+v", tool.InputSchema)
	}
	if k, ok := tool.InputSchema[1].Properties.Get("k"); !ok || k.(*builtin.ToolParameter).Type != "integer" {
		t.Errorf("nested parameter %+v", k)
	}
	if got := builtin.Display(m.Events[5].(*builtin.ToolCall).Function.Args()); got != "{}" {
		t.Errorf("missing arguments = %s", got)
	}
}

func TestSelect(t *testing.T) {
	m := newTestModel(t)
	render := func(vs []builtin.Value) string {
		var out []string
		for _, v := range vs {
			s := builtin.Repr(v)
			if at := builtin.At(v); at != nil {
				s += "@" + at.String()
			}
			out = append(out, s)
		}
		return strings.Join(out, " ")
	}
	tests := []struct{ typ, want string }{
		{"str", "'Describe'@messages.2.content.0.text 'data:image/png;base64,AA'@messages.2.content.1.image_url.url 'user'@messages.2.role " +
			"'ok'@messages.3.content 'assistant'@messages.3.role '1'@messages.3.tool_calls.0.id 'function'@messages.3.tool_calls.0.type " +
			"'2'@messages.3.tool_calls.1.id 'function'@messages.3.tool_calls.1.type 'tool'@messages.4.role 'out'@messages.4.content '2'@messages.4.tool_call_id " +
			"'3'@messages.5.id 'function'@messages.5.type 'tool'@messages.6.role 'v'@messages.6.content.k '1'@messages.6.tool_call_id"},
		{"ToolParameter", `{"type":"string","name":"q","description":"no description available","required":true,"properties":null,"additionalProperties":null,"items":null,"enum":null}@messages.0.inputSchema.0 ` +
			`{"type":"object","name":"o","description":"no description available","required":false,"properties":{"k":{"type":"integer","name":"o.k","description":"no description available","required":false,"properties":null,"additionalProperties":null,"items":null,"enum":null}},"additionalProperties":null,"items":null,"enum":null}@messages.0.inputSchema.1`},
		{"int", "1@messages.2.content.2.foo"},
		{"dict", `{'url': 'data:image/png;base64,AA'}@messages.2.content.1.image_url {'foo': 1}@messages.2.content.2 {'k': 'v'}@messages.6.content`},
		{"Function", `{"name":"f","arguments":{"x":1}}@messages.3.tool_calls.0.function {"name":"g","arguments":"not json"}@messages.3.tool_calls.1.function {"name":"h","arguments":{}}@messages.5.function`},
		{"ToolOutput", `{"metadata":{"trace_idx":4},"server":null,"role":"tool","content":"out","tool_call_id":"2"}@messages.4 {"metadata":{"trace_idx":6},"server":null,"role":"tool","content":{"k":"v"},"tool_call_id":"1"}@messages.6`},
	}
	for _, tt := range tests {
		if got := render(m.Select(tt.typ)); got != tt.want {
			t.Errorf("Select(%s)\n got %s\nwant %s", tt.typ, got, tt.want)
		}
	}
}

// TestModelLinkingLinear: linking tool outputs to calls uses an index;
// scanning back through every call for each output was quadratic (40,000
// calls and 40,000 unmatched outputs took about 30 s). Links still go to
// the most recent call with the id, null matching null.
func TestModelLinkingLinear(t *testing.T) {
	var b strings.Builder
	b.WriteString(`[{"role": "assistant", "content": null, "tool_calls": [`)
	const n = 40000
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id": "c%d", "function": {"name": "f"}}`, i)
	}
	b.WriteString(`]}`)
	for i := range n {
		fmt.Fprintf(&b, `, {"role": "tool", "tool_call_id": "x%d", "content": "o"}`, i)
	}
	b.WriteString(`, {"type": "function", "id": "c7", "function": {"name": "g"}}, {"type": "function", "id": null, "function": {"name": "h"}}`)
	b.WriteString(`, {"role": "tool", "tool_call_id": "c7", "content": "o"}, {"role": "tool", "tool_call_id": null, "content": "o"}]`)
	tr, err := trace.Decode([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	m := NewModel(tr)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("NewModel took %v", d)
	}
	evs := m.Events
	if out := evs[1].(*builtin.ToolOutput); out.Call != nil {
		t.Errorf("unmatched output linked to %+v", out.Call)
	}
	if out := evs[len(evs)-2].(*builtin.ToolOutput); out.Call == nil || out.Call.Function.Name != "g" {
		t.Errorf("output for c7 linked to %+v, want the later call g", out.Call)
	}
	if out := evs[len(evs)-1].(*builtin.ToolOutput); out.Call == nil || out.Call.Function.Name != "h" {
		t.Errorf("output with null id linked to %+v, want h", out.Call)
	}
}
