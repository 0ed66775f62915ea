package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// BenchmarkCheckProcess runs the vigil binary as a whole process on one
// core (GOMAXPROCS=1): `vigil check --dataset` over a 32 MiB dataset of
// agent-style traces with a rule calling pii() for all types, the same
// with a rule that calls no detector, and `vigil version`. Besides the
// wall-clock MB/s it reports cpu-MB/s, the dataset size over the
// process's user+system CPU time, which is what one core delivers on a
// machine shared with other work.
func BenchmarkCheckProcess(b *testing.B) {
	dir := b.TempDir()
	bin := filepath.Join(dir, "vigil")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	data := filepath.Join(dir, "dataset.jsonl")
	size := writeAgentDataset(b, data, 32<<20)
	policies := map[string]string{
		"pii":    "from invariant.detectors import pii\n\nraise \"pii\" if:\n    (m: Message)\n    any(pii(m.content))\n",
		"no-pii": "raise \"x\" if:\n    (m: Message)\n    \"zzzz\" in m.content\n",
	}
	for _, name := range []string{"pii", "no-pii"} {
		pol := filepath.Join(dir, name+".pol")
		if err := os.WriteFile(pol, []byte(policies[name]), 0o644); err != nil {
			b.Fatal(err)
		}
		b.Run("dataset-"+name, func(b *testing.B) {
			b.SetBytes(size)
			runProcess(b, size, bin, "check", "--policy", pol, "--dataset", data, "--format", "json")
		})
	}
	b.Run("version", func(b *testing.B) { runProcess(b, 0, bin, "version") })
}

func runProcess(b *testing.B, size int64, bin string, args ...string) {
	var cpu float64
	for b.Loop() {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "GOMAXPROCS=1")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil && cmd.ProcessState.ExitCode() > 1 {
			b.Fatalf("%v: %v\n%s", args, err, stderr.Bytes())
		}
		cpu += (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds()
	}
	if size > 0 && cpu > 0 {
		b.ReportMetric(float64(size)*float64(b.N)/cpu/1e6, "cpu-MB/s")
	}
	b.ReportMetric(cpu/float64(b.N)*1e3, "cpu-ms/op")
}

// writeAgentDataset writes JSONL traces of chat turns, tool calls and
// tool outputs whose texts mix prose, names, places, e-mail addresses and
// phone numbers, until the file has at least size bytes; it returns the
// size written.
func writeAgentDataset(b *testing.B, path string, size int) int64 {
	people := []string{"Angela Merkel", "Priya Natarajan", "Kwame Asante", "Hiroshi Tanaka", "Ana Souza", "Lena Fischer", "Omar Haddad", "Olga Petrova", "Wei Zhang", "Sofia Hernández"}
	places := []string{"Berlin", "Lisbon", "Nairobi", "Mumbai", "São Paulo", "Toronto", "Kraków", "Seoul", "Cairo", "Melbourne"}
	prose := "The quarterly report covers revenue, churn and the hiring plan; the appendix lists every open risk with its owner and due date. "
	var buf bytes.Buffer
	for i := 0; buf.Len() < size; i++ {
		p, q := people[i%len(people)], places[(i/3)%len(places)]
		user := fmt.Sprintf("Please email %s in %s about order %d. %s", p, q, 4000+i, strings.Repeat(prose, 2))
		out := fmt.Sprintf(`{"customer": {"name": %q, "email": "user%d@example.com", "phone": "+44 20 7946 %04d", "city": %q}, "notes": %q}`, p, i, i%10000, q, prose)
		tr := []any{
			map[string]any{"role": "user", "content": user},
			map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": "c1", "type": "function",
				"function": map[string]any{"name": "lookup_customer", "arguments": fmt.Sprintf(`{"query": %q}`, p)}}}},
			map[string]any{"role": "tool", "tool_call_id": "c1", "content": out},
			map[string]any{"role": "assistant", "content": "I found the customer record and drafted the e-mail. " + prose},
		}
		line, err := json.Marshal(tr)
		if err != nil {
			b.Fatal(err)
		}
		buf.Write(append(line, '\n'))
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		b.Fatal(err)
	}
	return int64(buf.Len())
}
