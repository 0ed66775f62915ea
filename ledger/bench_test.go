package ledger

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
	"time"
)

// benchAction is a typical receipt: a tool call with a small input and output.
func benchAction(i int) Action {
	ts := int64(1767225600000 + i)
	return Action{
		ID: fmt.Sprintf("01KDVDNA00BVPG%012d", i), SessionID: "01KDVDN90RBSAH00000000005B", Agent: "agent/refund-bot",
		Action: "tool_call", Timestamp: &ts,
		Input:  map[string]any{"tool": "orders.lookup", "orderId": fmt.Sprintf("A-%d", i), "note": "Tom & Jerry <tj@example.com>"},
		Output: map[string]any{"status": "shipped", "total": 42.5, "items": []any{1.0, 2.0, 3.0}},
	}
}

// BenchmarkSign measures Append with a key (hash + Ed25519 signature +
// emitted JSON) on one core.
func BenchmarkSign(b *testing.B) {
	key := mustKey(b, specSeed)
	actions := make([]Action, 1024)
	for i := range actions {
		actions[i] = benchAction(i)
	}
	var tail Tail
	b.ReportAllocs()
	b.ResetTimer()
	cpu := processCPU()
	for i := 0; i < b.N; i++ {
		r, err := Append(tail, actions[i%len(actions)], key)
		if err != nil {
			b.Fatal(err)
		}
		tail = r.Tail()
	}
	reportRate(b, b.N, cpu)
}

var (
	chain100kOnce sync.Once
	chain100k     []byte
)

// benchChain returns a signed 100,000-receipt chain as one JSON array.
func benchChain(b *testing.B) []byte {
	chain100kOnce.Do(func() {
		key := mustKey(b, specSeed)
		var buf bytes.Buffer
		buf.WriteByte('[')
		var tail Tail
		for i := range 100_000 {
			r, err := Append(tail, benchAction(i), key)
			if err != nil {
				b.Fatal(err)
			}
			if i > 0 {
				buf.WriteByte(',')
			}
			buf.Write(r.Raw)
			tail = r.Tail()
		}
		buf.WriteByte(']')
		chain100k = buf.Bytes()
	})
	return chain100k
}

// BenchmarkVerifyStream100k verifies a signed 100,000-receipt chain the way
// `vigil receipts verify` does: streamed, signatures on all cores.
func BenchmarkVerifyStream100k(b *testing.B) {
	data := benchChain(b)
	pub := PublicOf(mustKey(b, specSeed))
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	cpu := processCPU()
	for i := 0; i < b.N; i++ {
		res, info, err := VerifyStream(bytes.NewReader(data), VerifyOptions{PublicKey: pub})
		if err != nil || !res.Valid || info.Receipts != 100_000 {
			b.Fatalf("%v %+v", err, res.Errors[:min(3, len(res.Errors))])
		}
	}
	reportRate(b, b.N*100_000, cpu)
}

// BenchmarkVerifyChain100k verifies 100,000 parsed receipts (the store's
// path), signatures on all cores.
func BenchmarkVerifyChain100k(b *testing.B) {
	data := benchChain(b)
	v, err := Parse(data)
	if err != nil {
		b.Fatal(err)
	}
	var rs []*Receipt
	for _, x := range v.([]any) {
		r, err := ReceiptFromValue(x)
		if err != nil {
			b.Fatal(err)
		}
		rs = append(rs, r)
	}
	pub := PublicOf(mustKey(b, specSeed))
	b.ResetTimer()
	cpu := processCPU()
	for i := 0; i < b.N; i++ {
		res, err := VerifyChain(rs, VerifyOptions{PublicKey: pub})
		if err != nil || !res.Valid {
			b.Fatal(err)
		}
	}
	reportRate(b, b.N*100_000, cpu)
}

// reportRate reports receipts/s (wall clock) and cpu-µs/receipt (process
// CPU time since cpu, which stays meaningful on a loaded machine).
func reportRate(b *testing.B, receipts int, cpu time.Duration) {
	b.ReportMetric(float64(receipts)/b.Elapsed().Seconds(), "receipts/s")
	if used := processCPU() - cpu; used > 0 {
		b.ReportMetric(float64(used.Microseconds())/float64(receipts), "cpu-µs/receipt")
	}
}

// BenchmarkCanonicalize parses and canonicalizes one receipt-sized document.
func BenchmarkCanonicalize(b *testing.B) {
	_, rs := specChain(b)
	in := []byte(rs[0])
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := Canonicalize(in); err != nil {
			b.Fatal(err)
		}
	}
}
