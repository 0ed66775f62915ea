package detect

import (
	"encoding/json"
	"os"
	"testing"
)

// gitleaks' own literal examples (testdata/gitleaks-examples.json, made by
// rules/extract_examples.go): every true positive is found (under its rule
// or, where a reference type covers the span, under that type) and no
// false positive is reported under its rule. Rules absent from the default
// configuration are skipped.
func TestGitleaksExamples(t *testing.T) {
	b, err := os.ReadFile("testdata/gitleaks-examples.json")
	if err != nil {
		t.Fatal(err)
	}
	var rules []struct {
		Rule string   `json:"rule"`
		TPs  []string `json:"tps"`
		FPs  []string `json:"fps"`
	}
	if err := json.Unmarshal(b, &rules); err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, r := range DefaultSecrets().rules {
		known[r.typ] = true
	}
	reference := map[string]bool{"GITHUB_TOKEN": true, "AWS_ACCESS_KEY": true, "AZURE_STORAGE_KEY": true, "SLACK_TOKEN": true}
	tps, fps := 0, 0
	for _, r := range rules {
		typ := secretTypeName(r.Rule)
		if !known[typ] {
			continue
		}
		for _, s := range r.TPs {
			tps++
			found := false
			for _, m := range Secrets(s) {
				found = found || m.Type == typ || reference[m.Type]
			}
			if !found {
				t.Errorf("%s: true positive not found: %q (got %v)", r.Rule, s, Types(Secrets(s)))
			}
		}
		for _, s := range r.FPs {
			fps++
			for _, m := range Secrets(s) {
				if m.Type == typ {
					t.Errorf("%s: false positive reported: %q", r.Rule, s)
				}
			}
		}
	}
	if tps < 80 || fps < 250 {
		t.Errorf("only %d true and %d false positives checked; the examples file looks truncated", tps, fps)
	}
	t.Logf("%d true positives found, %d false positives not reported", tps, fps)
}
