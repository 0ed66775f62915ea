package monitor

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/vigilhq/vigil/policy"
	"github.com/vigilhq/vigil/policy/builtin"
	"github.com/vigilhq/vigil/store"
	"github.com/vigilhq/vigil/trace"
)

// evaluated decodes a trace and gives event i the nodes "n<i>", then
// "n<i>c<k>" per tool call.
func evaluated(t *testing.T, events string) *Evaluated {
	t.Helper()
	tr, err := trace.Decode([]byte(events))
	if err != nil {
		t.Fatal(err)
	}
	nodes := make([][]string, len(tr.Events))
	for i, e := range tr.Events {
		nodes[i] = []string{"n" + itoa(i)}
		for k := range e.ToolCalls {
			nodes[i] = append(nodes[i], "n"+itoa(i)+"c"+itoa(k))
		}
	}
	return NewEvaluated(tr, nodes)
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

const plainEvents = `[
 {"role":"user","content":"hello there"},
 {"role":"assistant","content":null,"tool_calls":[{"id":"1","type":"function","function":{"name":"a","arguments":{}}},{"id":"2","type":"function","function":{"name":"send","arguments":{"to":"x@evil.example"}}}]},
 {"role":"tool","tool_call_id":"2","content":"sent"},
 {"role":"assistant","content":"done, see messages"}
]`

// toolsEvents has a tools element at position 1 holding two tools: the
// engine numbers them 1 and 2, so the later events shift by one.
const toolsEvents = `[
 {"role":"user","content":"hi"},
 {"tools":[{"name":"t1","description":"d","inputSchema":{"type":"object","properties":{"a":{"type":"string"}}}},{"name":"t2","description":"e"}]},
 {"role":"assistant","content":"ok"}
]`

func TestNewFinding(t *testing.T) {
	src := Source{MonitorID: "g1", Monitor: "no-mail", Severity: store.SeverityInfo}
	kw := func(kvs ...builtin.KV) builtin.OrderedMap { return builtin.OrderedMap(kvs) }
	for _, tc := range []struct {
		name     string
		events   string
		src      Source
		v        policy.Violation
		key      string
		title    string
		severity string
		score    float64
		node     string
		cites    string
	}{
		{name: "defaults_from_monitor", events: plainEvents, src: src,
			v:   policy.Violation{Key: "(0, (0,))", Args: []any{"bad greeting"}, Ranges: []string{"messages.0.content:0-5"}, Message: "bad greeting"},
			key: "(0, (0,))", title: "bad greeting", severity: "info", score: 0.3, node: "n0",
			cites: `[{"nodeId":"n0","address":"messages.0.content:0-5"}]`},
		{name: "unset_monitor_severity_is_warn", events: plainEvents, src: Source{MonitorID: "g"},
			v:   policy.Violation{Key: "(0, ())", Args: []any{"x"}},
			key: "(0, ())", title: "x", severity: "warn", score: 0.6, cites: `[]`},
		{name: "kwargs_severity_and_score", events: plainEvents, src: src,
			v: policy.Violation{Key: "(1, (1,))", Args: []any{"mail"}, Kwargs: kw(builtin.KV{Key: "severity", Value: "critical"}, builtin.KV{Key: "score", Value: 0.25}),
				Ranges: []string{"messages.1.tool_calls.1.function.arguments.to:0-1"}},
			key: "(1, (1,))", title: "mail", severity: "critical", score: 0.25, node: "n1c1",
			cites: `[{"nodeId":"n1c1","address":"messages.1.tool_calls.1.function.arguments.to:0-1"}]`},
		{name: "bad_kwargs_ignored", events: plainEvents, src: src,
			v:   policy.Violation{Key: "(0, ())", Args: []any{"x"}, Kwargs: kw(builtin.KV{Key: "severity", Value: "fatal"}, builtin.KV{Key: "score", Value: 1.5})},
			key: "(0, ())", title: "x", severity: "info", score: 0.3, cites: `[]`},
		{name: "integer_score_and_severity_default_score", events: plainEvents, src: src,
			v:   policy.Violation{Key: "(0, ())", Args: []any{"x"}, Kwargs: kw(builtin.KV{Key: "score", Value: int64(1)}, builtin.KV{Key: "severity", Value: "warn"})},
			key: "(0, ())", title: "x", severity: "warn", score: 1, cites: `[]`},
		{name: "title_from_message_when_args0_not_string", events: plainEvents, src: src,
			v:   policy.Violation{Key: "(0, ())", Args: []any{int64(3)}, Message: "3"},
			key: "(0, ())", title: "3", severity: "info", score: 0.3, cites: `[]`},
		{name: "citations_merged_generalisations_dropped_sorted", events: plainEvents, src: src,
			v: policy.Violation{Key: "(0, (3, 0))", Args: []any{"x"}, Ranges: []string{
				"messages.3.content:0-4", "messages.0", "messages.0.content:6-11", "messages.3.content:0-4", "messages.10", "<root>",
				"messages.1.tool_calls.0", "messages.1"}},
			key: "(0, (3, 0))", title: "x", severity: "info", score: 0.3, node: "",
			cites: `[{"nodeId":null,"address":"<root>"},{"nodeId":"n0","address":"messages.0.content:6-11"},` +
				`{"nodeId":"n1c0","address":"messages.1.tool_calls.0"},{"nodeId":"n3","address":"messages.3.content:0-4"},` +
				`{"nodeId":null,"address":"messages.10"}]`},
		{name: "selector_does_not_hide_a_sibling_range", events: plainEvents, src: src,
			v:   policy.Violation{Key: "(0, (0,))", Args: []any{"x"}, Ranges: []string{"messages.0.content:6-11", "messages.0.content:0-5"}},
			key: "(0, (0,))", title: "x", severity: "info", score: 0.3, node: "n0",
			cites: `[{"nodeId":"n0","address":"messages.0.content:0-5"},{"nodeId":"n0","address":"messages.0.content:6-11"}]`},
		{name: "tools_element_indices_mapped_to_stored_positions", events: toolsEvents, src: src,
			v: policy.Violation{Key: "(2, (-1, 3, 2))", Args: []any{"x"}, Ranges: []string{"messages.3.content:0-2", "messages.2.description",
				"messages.1.inputSchema.0.name"}},
			key: "(2, (-1, 2, 1))", title: "x", severity: "info", score: 0.3, node: "n1",
			cites: `[{"nodeId":"n1","address":"messages.1.tools.0.inputSchema"},{"nodeId":"n1","address":"messages.1.tools.1.description"},` +
				`{"nodeId":"n2","address":"messages.2.content:0-2"}]`},
		{name: "tools_single_variable_key_keeps_trailing_comma", events: toolsEvents, src: src,
			v:   policy.Violation{Key: "(0, (3,))", Args: []any{"x"}},
			key: "(0, (2,))", title: "x", severity: "info", score: 0.3, cites: `[]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := NewFinding(tc.src, evaluated(t, tc.events), tc.v)
			if f.Key != tc.key || f.Title != tc.title || f.Severity != tc.severity || f.Score != tc.score || f.NodeID != tc.node {
				t.Errorf("finding key %q title %q severity %q score %v node %q,\nwant key %q title %q severity %q score %v node %q",
					f.Key, f.Title, f.Severity, f.Score, f.NodeID, tc.key, tc.title, tc.severity, tc.score, tc.node)
			}
			if string(f.Citations) != tc.cites {
				t.Errorf("citations\n got %s\nwant %s", f.Citations, tc.cites)
			}
			if f.MonitorID != tc.src.MonitorID || f.Monitor != tc.src.Monitor {
				t.Errorf("monitor %q %q", f.MonitorID, f.Monitor)
			}
		})
	}
}

// TestStoredKeyMalformed: keys of another shape pass through unchanged.
func TestStoredKeyMalformed(t *testing.T) {
	ev := evaluated(t, toolsEvents)
	for _, k := range []string{"", "x", "(0, (a, 3))", "(0, (3", "(0, ())", "0, (3,))"} {
		if got := ev.StoredKey(k); got != k {
			t.Errorf("StoredKey(%q) = %q", k, got)
		}
	}
}

// FuzzStoredKey: key mapping never panics, keeps keys unchanged on a
// trace whose indices are its positions, and on a trace with a tools
// element keeps the key's length in variables and its rule.
func FuzzStoredKey(f *testing.F) {
	for _, k := range []string{"(0, ())", "(0, (1,))", "(2, (-1, 3, 2))", "(0, (3", "((, ((", "(1, (99999999999999999999,))", ""} {
		f.Add(k)
	}
	plain := NewEvaluated(mustDecode(f, plainEvents), nil)
	tools := NewEvaluated(mustDecode(f, toolsEvents), nil)
	f.Fuzz(func(t *testing.T, key string) {
		if got := plain.StoredKey(key); got != key {
			t.Fatalf("plain trace: StoredKey(%q) = %q", key, got)
		}
		got := tools.StoredKey(key)
		if strings.Count(got, ",") != strings.Count(key, ",") || !strings.HasPrefix(got, strings.SplitN(key, ",", 2)[0]) {
			t.Fatalf("tools trace: StoredKey(%q) = %q", key, got)
		}
	})
}

func mustDecode(f *testing.F, events string) *trace.Trace {
	tr, err := trace.Decode([]byte(events))
	if err != nil {
		f.Fatal(err)
	}
	return tr
}
