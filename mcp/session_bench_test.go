package mcp

import (
	"context"
	"strconv"
	"testing"
)

// BenchmarkSessionCall is the engine's cost of one guarded tools/call
// round trip (request checked, result checked), in a session that grows
// with b.N: with incremental monitors the cost per call stays flat.
//
//	go test ./mcp -run '^$' -bench SessionCall -benchtime 20000x
func BenchmarkSessionCall(b *testing.B) {
	r, err := LoadRule("g", "rule", "raise \"no rm\" if:\n    (call: ToolCall)\n    \"rm -rf\" in call.function.arguments.text\n", "block")
	if err != nil {
		b.Fatal(err)
	}
	out, err := LoadRule("o", "out", "raise \"secret\" if:\n    (out: ToolOutput)\n    \"SECRET\" in out.content\n", "block")
	if err != nil {
		b.Fatal(err)
	}
	s := NewSession(Options{Guard: &Guard{Rules: []*Rule{r, out}}})
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		id := strconv.Itoa(i + 1)
		fwd, reply := s.FromClient(ctx, []byte(`{"jsonrpc":"2.0","id":`+id+`,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}`))
		if fwd == nil || reply != nil {
			b.Fatalf("call %d blocked", i)
		}
		s.FromServer(ctx, []byte(`{"jsonrpc":"2.0","id":`+id+`,"result":{"content":[{"type":"text","text":"hello"}]}}`))
	}
}

// BenchmarkSessionPassthrough is the cost of one tools/call round trip
// in a session with no rule to apply: with a Guard that has no rules
// (events still built and kept for checks) and with none (the stdio
// wrapper without rules or dataset: nothing but the pin verdicts).
//
//	go test ./mcp -run '^$' -bench SessionPassthrough -benchtime 20000x -benchmem
func BenchmarkSessionPassthrough(b *testing.B) {
	for _, c := range []struct {
		name  string
		guard *Guard
	}{{"empty-guard", &Guard{}}, {"no-guard", nil}} {
		b.Run(c.name, func(b *testing.B) {
			s := NewSession(Options{Guard: c.guard})
			ctx := context.Background()
			b.ReportAllocs()
			for i := range b.N {
				id := strconv.Itoa(i + 1)
				fwd, reply := s.FromClient(ctx, []byte(`{"jsonrpc":"2.0","id":`+id+`,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}`))
				if fwd == nil || reply != nil {
					b.Fatalf("call %d blocked", i)
				}
				s.FromServer(ctx, []byte(`{"jsonrpc":"2.0","id":`+id+`,"result":{"content":[{"type":"text","text":"hello"}]}}`))
			}
		})
	}
}
