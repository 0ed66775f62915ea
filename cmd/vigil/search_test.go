package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSearchCommand(t *testing.T) {
	url, _ := newInProcessServer(t)
	t.Setenv("VIGIL_URL", url)
	t.Setenv("VIGIL_API_KEY", testKey)
	in := filepath.Join(t.TempDir(), "in.jsonl")
	os.WriteFile(in, []byte(`{"index": 0, "name": "first", "messages": [{"role": "user", "content": "Hello there"}], "metadata": {"env": "prod"}, "annotations": []}
{"index": 1, "name": "second", "messages": [{"role": "user", "content": "hello again"}], "metadata": {"env": "dev"}, "annotations": [{"content": "c", "address": "messages.0.content:0-3"}]}
`), 0o644)
	if code, out, errs := runVigil(t, "", "import", in, "--dataset", "cli", "-q"); code != 0 {
		t.Fatalf("import: %d %s %s", code, out, errs)
	}

	code, out, errs := runVigil(t, "", "search", "hello meta:env=prod", "--dataset", "cli")
	want := "admin/cli#0  "
	if code != 0 || !strings.HasPrefix(out, want) || !strings.Contains(out, `messages.0.content:0-5  "hello"`) ||
		!strings.Contains(out, "1 matching traces (1 shown); query: hello meta:env=prod") {
		t.Errorf("search text: %d %q %q", code, out, errs)
	}

	code, out, _ = runVigil(t, "", "search", "--format", "json", "--", "-is:annotated")
	var res struct {
		Total  int `json:"total"`
		Traces []struct {
			Name string `json:"name"`
		} `json:"traces"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.Total != 1 || res.Traces[0].Name != "first" {
		t.Errorf("search json: %d %s", code, out)
	}

	code, out, errs = runVigil(t, "", "search", "hello (world")
	if code != 1 || !strings.Contains(errs, "position 6") || !strings.Contains(errs, "\n        ^") {
		t.Errorf("invalid query: %d %q %q", code, out, errs)
	}
	for _, args := range [][]string{{"search"}, {"search", "a", "b"}, {"search", "x", "--format", "xml"}, {"search", "x", "--limit", "0"}} {
		if code, _, _ := runVigil(t, "", args...); code != 2 {
			t.Errorf("%q: exit %d, want 2", args, code)
		}
	}
}
