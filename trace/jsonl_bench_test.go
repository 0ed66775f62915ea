package trace

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// writeDataset generates an annotated JSONL dataset of about size bytes.
func writeDataset(b *testing.B, size int64) (path string, lines int) {
	b.Helper()
	path = filepath.Join(b.TempDir(), "ds.jsonl")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriter(f)
	fmt.Fprintln(w, `{"metadata": {"description": "generated"}}`)
	var n int64
	for i := 0; n < size; i++ {
		k, _ := fmt.Fprintf(w, `{"index": %d, "name": "Run %d", "messages": [{"role": "user", "content": "Summarise my inbox, please (%d)."}, {"role": "assistant", "content": null, "tool_calls": [{"id": "c%d", "type": "function", "function": {"name": "get_inbox", "arguments": "{\"n\": 10}"}}]}, {"role": "tool", "tool_call_id": "c%d", "content": "1. Subject: Hello\nFrom: alice@example.com\n2. Subject: Invoice\nFrom: billing@example.com"}, {"role": "assistant", "content": "You have two new emails, one from Alice and one invoice."}], "metadata": {"user": "u%d"}, "annotations": [{"content": "looks fine", "address": "messages.3.content:0-8"}]}`+"\n", i, i, i, i, i, i%100)
		n += int64(k)
		lines++
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	return path, lines
}

func benchmarkReader(b *testing.B, size int64) {
	path, lines := writeDataset(b, size)
	b.SetBytes(size)
	b.ReportAllocs()
	var maxHeap uint64
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	before := ms.TotalAlloc
	for b.Loop() {
		f, err := os.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		r := NewReader(f)
		n := 0
		for {
			_, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			n++
			if n%4096 == 0 {
				runtime.ReadMemStats(&ms)
				maxHeap = max(maxHeap, ms.HeapInuse)
			}
		}
		f.Close()
		if n != lines {
			b.Fatalf("read %d lines, want %d", n, lines)
		}
	}
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.TotalAlloc-before)/float64(b.N)/float64(lines), "allocB/line")
	b.ReportMetric(float64(maxHeap)/(1<<20), "maxHeapMB")
}

// BenchmarkJSONLReader10MB reads a generated 10 MB dataset; allocB/line
// and maxHeapMB must stay flat between the 10 MB and 100 MB runs.
func BenchmarkJSONLReader10MB(b *testing.B) { benchmarkReader(b, 10<<20) }

// BenchmarkJSONLReader100MB is the same over 100 MB (skipped with -short).
func BenchmarkJSONLReader100MB(b *testing.B) {
	if testing.Short() {
		b.Skip("100 MB dataset skipped in -short mode")
	}
	benchmarkReader(b, 100<<20)
}
