package ask

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vigilhq/vigil/search"
)

var update = flag.Bool("update", false, "rewrite testdata/plans.golden")

var planTools = []string{"browse_url", "get_inbox", "issue_refund", "lookup_order", "read_file", "send_email", "transfer_funds", "web_search", "write_file", "bash"}

var planVoc = Vocabulary{Tools: planTools, ArgumentKeys: []string{"amount", "body", "command", "content", "currency", "folder", "iban",
	"limit", "order_id", "path", "query", "reference", "subject", "to", "url"}}

var planNow = time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)

// planQuestions are the questions of the plan golden file.
var planQuestions = []string{
	"which runs sent e-mail outside example.com this week, and did anyone approve them?",
	"which refunds were issued in the last 3 days?",
	"did any run look up an order?",
	`what did the user say about "supply contract" yesterday?`,
	"meta:team=payments which runs paid invoices?",
	"tool:web_search after:-1d",
	"which tool calls failed with an error today?",
	"which findings were dismissed as false positives?",
	"which annotations mention data exfiltration?",
	"which url was visited for naples pizza?",
	`meta:name="run 12" AND OR ( -`,
	"what did the assistant answer?",
}

// TestPlanGolden compares the plans of planQuestions with
// testdata/plans.golden (go test -run TestPlanGolden -update rewrites it).
func TestPlanGolden(t *testing.T) {
	var b strings.Builder
	for _, q := range planQuestions {
		p, err := MakePlan(q, planVoc, planNow)
		b.WriteString("# " + q + "\n")
		if err != nil {
			b.WriteString("error: " + err.Error() + "\n\n")
			continue
		}
		j, _ := json.MarshalIndent(p, "", "  ")
		b.Write(j)
		b.WriteString("\nquery: " + p.Query() + "\nstrict: " + p.strictQuery() + "\n\n")
	}
	path := filepath.Join("testdata", "plans.golden")
	if *update {
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if b.String() != string(want) {
		t.Errorf("plans differ from %s (rerun with -update and review the diff):\n%s", path, b.String())
	}
}

func TestPlanCases(t *testing.T) {
	tests := []struct {
		q       string
		filters []string
		tools   []string
		terms   []string
		excl    []string
		roles   []string
	}{
		{q: "which runs sent e-mail outside example.com?", filters: []string{"tool:send_email", `"send_email"`}, tools: []string{"send_email"}, excl: []string{"example.com"}},
		{q: "did any run use the bash tool?", filters: []string{"tool:bash", `"bash"`}, tools: []string{"bash"}},
		{q: "what did the assistant say about Lisbon?", terms: []string{"lisbon"}, roles: []string{"assistant"}},
		{q: "runs that called my_custom_tool", filters: []string{"tool:my_custom_tool", `"my_custom_tool"`}, tools: []string{"my_custom_tool"}},
		{q: "who read /etc/passwd?", terms: []string{"/etc/passwd"}},
		{q: "which runs ran bash in the last 2 days?", filters: []string{"after:-2d", "tool:bash", `"bash"`}, tools: []string{"bash"}},
		{q: "yesterday", filters: []string{"after:2026-11-19", "before:2026-11-20"}},
		{q: `"order 10422" refunded`},
		{q: "which refunds?", terms: []string{"issue_refund"}},
	}
	for _, tt := range tests {
		p, err := MakePlan(tt.q, planVoc, planNow)
		if err != nil {
			t.Errorf("%q: %v", tt.q, err)
			continue
		}
		check := func(what string, got, want []string) {
			if strings.Join(got, "|") != strings.Join(want, "|") {
				t.Errorf("%q: %s %q, want %q", tt.q, what, got, want)
			}
		}
		check("filters", p.Filters, tt.filters)
		check("tools", p.Tools, tt.tools)
		check("terms", p.Terms, tt.terms)
		check("excluded", p.Excluded, tt.excl)
		check("roles", p.Roles, tt.roles)
	}
}

// FuzzMakePlan: any question either gives an error or a plan whose
// searches parse; nothing panics.
func FuzzMakePlan(f *testing.F) {
	for _, q := range planQuestions {
		f.Add(q)
	}
	for _, q := range []string{"", `"`, `“unterminated`, `meta:"a b"=`, "tool:", "-(", "OR OR", "last 999999999999 days", "e-mails\x00", "\xff\xfe"} {
		f.Add(q)
	}
	f.Fuzz(func(t *testing.T, q string) {
		p, err := MakePlan(q, planVoc, planNow)
		if err != nil {
			return
		}
		for _, s := range []string{p.Query(), p.strictQuery(), p.errorQuery(), p.annotationQuery()} {
			if _, err := search.Parse(s); err != nil {
				t.Fatalf("question %q: search %q does not parse: %v", q, s, err)
			}
		}
	})
}

// FuzzParseModelAnswer: the model's final text is decoded or refused
// with an error; QuoteMatches never panics on what it holds.
func FuzzParseModelAnswer(f *testing.F) {
	for _, s := range []string{`{"answer":"x [1]","citations":[{"trace_id":"t","address":"messages.0.content","quote":"q"}]}`,
		"```json\n{\"answer\":\"a\",\"citations\":[]}\n```", "plain text", `{"answer": 5}`, `{"citations": [null]}`, "```\n{", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := parseModelAnswer(s)
		if err != nil {
			return
		}
		for _, c := range a.Citations {
			QuoteMatches(c.Quote, c.Address)
		}
	})
}
