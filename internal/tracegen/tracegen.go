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
