package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeTraceFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestTraceLint(t *testing.T) {
	dir := writeTraceFiles(t, map[string]string{
		"good.json": `[{"role": "user", "content": "hi"}]`,
		"bad.json": `[
  {"role": "user", "content": "hi"},
  {"role": "assistant", "tool_calls": [
    {"id": "1", "type": "function",
     "function": {"arguments": {}}}]},
  {"role": 3}
]`,
		"warn.json":   `[{"type": "function", "function": {"name": "f", "arguments": "not json"}}]`,
		"syntax.json": "[\n  {\"role\": \"user\",}\n]",
		// No extension: detected as JSONL from the content.
		"dataset": `{"metadata": {"d": 1}}
[{"role": "user", "content": "a"}]
[{"role": 1}]
{"messages": []}
[{"role": "user",]
`,
		"good.jsonl": "{\"index\": 0, \"messages\": [{\"role\": \"user\", \"content\": \"x\"}]}\n",
	})
	p := func(name string) string { return filepath.Join(dir, name) }
	tests := []struct {
		name string
		args []string
		code int
		out  string
		err  string
	}{
		{"valid", []string{"trace", "lint", p("good.json"), p("good.jsonl")}, 0, "", ""},
		{"valid_verbose", []string{"trace", "lint", "-v", p("good.json"), p("good.jsonl")}, 0,
			p("good.json") + ": ok (1 events)\n" + p("good.jsonl") + ": ok (1 traces)\n", ""},
		{"invalid", []string{"trace", "lint", p("bad.json")}, 1,
			p("bad.json") + `:5:18: events[1].tool_calls[0].function: "name" is missing` + "\n" +
				p("bad.json") + `:6:12: events[2].role: "role" is number, want a string` + "\n", ""},
		{"warning_only", []string{"trace", "lint", p("warn.json")}, 0,
			p("warn.json") + ":1:62: events[0].function.arguments: warning: invalid tool arguments at event 0\n", ""},
		{"no_warnings", []string{"trace", "lint", "-no-warnings", p("warn.json")}, 0, "", ""},
		{"syntax", []string{"trace", "lint", p("syntax.json")}, 1,
			p("syntax.json") + ":2:19: unexpected '}' after ',' (trailing comma), want a string key\n", ""},
		{"dataset", []string{"trace", "lint", p("dataset")}, 1,
			p("dataset") + `:3:11: events[0].role: "role" is number, want a string` + "\n" +
				p("dataset") + ":4:1: The file cannot contain both raw event lists and annotated event lists.\n" +
				p("dataset") + ":5:18: unexpected ']' in object, want a string key\n", ""},
		{"unreadable_wins", []string{"trace", "lint", p("bad.json"), p("missing.json")}, 2, "", "missing.json"},
		{"stdin", []string{"trace", "lint", "-"}, 1, "", ""},
		{"no_files", []string{"trace", "lint"}, 2, "", "no files given"},
		{"help", []string{"trace", "lint", "-h"}, 0, "", "Usage: vigil trace lint"},
		{"trace_help", []string{"trace", "-h"}, 0, "Subcommands:", ""},
		{"trace_no_sub", []string{"trace"}, 2, "", "Subcommands:"},
		{"trace_unknown_sub", []string{"trace", "frob"}, 2, "", `unknown subcommand "frob"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdin := ""
			if tt.name == "stdin" {
				stdin = `[{"role": 5}]`
			}
			code, out, errs := runVigil(t, stdin, tt.args...)
			if code != tt.code {
				t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.code, out, errs)
			}
			if tt.name == "unreadable_wins" || tt.name == "stdin" || tt.name == "trace_help" {
				if !strings.Contains(out, tt.out) {
					t.Errorf("stdout %q does not contain %q", out, tt.out)
				}
			} else if out != tt.out {
				t.Errorf("stdout:\n%s\nwant:\n%s", out, tt.out)
			}
			if !strings.Contains(errs, tt.err) {
				t.Errorf("stderr %q does not contain %q", errs, tt.err)
			}
		})
	}
}

func TestTraceGet(t *testing.T) {
	dir := writeTraceFiles(t, map[string]string{
		"t.json": `{"messages": [
  {"role": "user", "message_id": "m-1", "content": "héllo wörld\nline two"},
  {"role": "assistant", "tool_calls": [{"id": "1", "type": "function", "function": {"name": "send", "arguments": "{\"to\": \"a@b.example\"}"}}]}
], "metadata": {"k": 1}}`,
		"d.jsonl":    "[{\"role\": \"user\", \"content\": \"first\"}]\n[{\"role\": \"user\", \"content\": \"second\"}]\n",
		"tools.json": `[{"tools": [{"name": "a"}, {"name": "b", "inputSchema": {"properties": {"q": {}}}}]}, {"role": "user", "content": "hi"}]`,
	})
	f, d, tools := filepath.Join(dir, "t.json"), filepath.Join(dir, "d.jsonl"), filepath.Join(dir, "tools.json")
	tests := []struct {
		args []string
		code int
		out  string
		err  string
	}{
		{[]string{f, "messages.0.content:1-5"}, 0, "éllo\n", ""},
		{[]string{f, "messages.0.content:L1"}, 0, "line two\n", ""},
		{[]string{f, "messages.@m-1.role"}, 0, "user\n", ""},
		{[]string{f, "messages[1].tool_calls[0].function.arguments"}, 0, `{"to":"a@b.example"}` + "\n", ""},
		{[]string{f, "messages.1.tool_calls.0.function.arguments.to", "-json"}, 0, `"a@b.example"` + "\n", ""},
		{[]string{"-json", f, "messages.0.content:0-1"}, 0, `"h"` + "\n", ""},
		{[]string{f, "<root>"}, 0, "", ""},
		{[]string{d, "messages.0.content"}, 0, "first\n", ""},
		{[]string{d, "-n", "1", "messages.0.content"}, 0, "second\n", ""},
		{[]string{d, "-n", "5", "messages.0.content"}, 2, "", "the dataset has 2 traces"},
		{[]string{f, "messages.7"}, 1, "", "address not resolved"},
		{[]string{f, "messages.0.content:50-60"}, 1, "", "beyond the string's"},
		{[]string{f, "nope"}, 2, "", `address "nope": at offset 0`},
		{[]string{filepath.Join(dir, "missing.json"), "messages.0"}, 2, "", "no such file"},
		{[]string{f}, 2, "", "want FILE and ADDRESS"},
		{[]string{"-normalized", tools, "messages.2.content"}, 0, "hi\n", ""},
		{[]string{"-normalized", tools, "messages.1.name"}, 0, "b\n", ""},
		{[]string{"-normalized", tools, "messages.1.inputSchema.0.properties.q"}, 0, `{"properties":{"q":{}}}` + "\n", ""},
		{[]string{tools, "messages.1.content"}, 0, "hi\n", ""},
		{[]string{"-normalized", tools, "messages.3"}, 1, "", "no event has that trace index"},
	}
	for _, tt := range tests {
		code, out, errs := runVigil(t, "", append([]string{"trace", "get"}, tt.args...)...)
		if code != tt.code {
			t.Errorf("%v: exit %d, want %d (stderr %q)", tt.args, code, tt.code, errs)
		}
		if tt.out != "" && out != tt.out {
			t.Errorf("%v: stdout %q, want %q", tt.args, out, tt.out)
		}
		if !strings.Contains(errs, tt.err) {
			t.Errorf("%v: stderr %q does not contain %q", tt.args, errs, tt.err)
		}
	}
}

// TestTraceExamples keeps examples/ valid: every file lints clean.
func TestTraceExamples(t *testing.T) {
	files, _ := filepath.Glob("../../examples/*.json*")
	if len(files) < 5 {
		t.Fatalf("found %d example files, want at least 5", len(files))
	}
	code, out, errs := runVigil(t, "", append([]string{"trace", "lint", "-v"}, files...)...)
	if code != 0 || strings.Count(out, ": ok (") != len(files) {
		t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
}
