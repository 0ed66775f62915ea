package syntax

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"golang.org/x/tools/txtar"
)

var update = flag.Bool("update", false, "rewrite the -- ast -- sections of testdata/parse/*.txtar")

// marker is an inline expectation `# ERROR "rx"` or `# WARNING "rx"`.
type marker struct {
	line int
	kind string
	rx   *regexp.Regexp
	used bool
}

// The regular expression is the text between the quotes, taken literally
// (as in go/parser's error tests); it cannot contain a double quote.
var markerRx = regexp.MustCompile(`#\s*(ERROR|WARNING)\s+"([^"]*)"`)

// markers extracts the inline expectations of a policy text.
func markers(t *testing.T, text string) []*marker {
	t.Helper()
	var ms []*marker
	for i, line := range strings.Split(text, "\n") {
		for _, m := range markerRx.FindAllStringSubmatch(line, -1) {
			rx, err := regexp.Compile(m[2])
			if err != nil {
				t.Fatalf("line %d: bad marker %s: %v", i+1, m[0], err)
			}
			ms = append(ms, &marker{line: i + 1, kind: m[1], rx: rx})
		}
	}
	return ms
}

// lastLine returns the number of the last non-empty line.
func lastLine(text string) int {
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	return len(lines)
}

// checkMarkers matches errors (kind "ERROR") or warnings against markers:
// each must match a marker of its line (an error past the last line matches
// the markers of the last line) and every marker must be used.
func checkMarkers(t *testing.T, text string, ms []*marker, kind string, errs ErrorList) {
	t.Helper()
	last := lastLine(text)
	for _, e := range errs {
		line := e.Position().Line
		if line > last {
			line = last
		}
		found := false
		for _, m := range ms {
			if m.kind == kind && m.line == line && !m.used && m.rx.MatchString(e.Msg) {
				m.used, found = true, true
				break
			}
		}
		if !found {
			t.Errorf("unexpected %s %s", strings.ToLower(kind), e.Short())
		}
	}
	for _, m := range ms {
		if m.kind == kind && !m.used {
			t.Errorf("line %d: missing %s matching %q", m.line, strings.ToLower(kind), m.rx)
		}
	}
}

func section(a *txtar.Archive, name string) (string, bool) {
	for _, f := range a.Files {
		if f.Name == name {
			return string(f.Data), true
		}
	}
	return "", false
}

func TestParseGolden(t *testing.T) {
	files, err := filepath.Glob("../testdata/parse/*.txtar")
	if err != nil || len(files) == 0 {
		t.Fatalf("no test files: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txtar"), func(t *testing.T) {
			a, err := txtar.ParseFile(file)
			if err != nil {
				t.Fatal(err)
			}
			text, ok := section(a, "policy")
			if !ok {
				t.Fatal("no -- policy -- section")
			}
			f, err := ParseString("policy", text)
			var errs ErrorList
			if err != nil {
				errs = err.(ErrorList)
			}
			ms := markers(t, text)
			checkMarkers(t, text, ms, "ERROR", errs)
			checkMarkers(t, text, ms, "WARNING", f.Warnings)
			got := Dump(f)
			want, ok := section(a, "ast")
			if *update {
				if ok {
					for i := range a.Files {
						if a.Files[i].Name == "ast" {
							a.Files[i].Data = []byte(got)
						}
					}
				} else {
					a.Files = append(a.Files, txtar.File{Name: "ast", Data: []byte(got)})
				}
				if err := os.WriteFile(file, txtar.Format(a), 0o644); err != nil {
					t.Fatal(err)
				}
			} else if !ok {
				t.Errorf("no -- ast -- section (run with -update)")
			} else if got != want {
				t.Errorf("AST mismatch\n--- got\n%s--- want\n%s", got, want)
			}
			if err == nil {
				checkNodePositions(t, f, f.Source.Len())
				roundTrip(t, f)
			}
		})
	}
}

// roundTrip checks that Format(f) parses back to the same tree.
func roundTrip(t *testing.T, f *File) {
	t.Helper()
	out := Format(f)
	g, err := ParseString("formatted", out)
	if err != nil {
		t.Fatalf("formatted policy does not parse: %v\n%s", err, out)
	}
	if a, b := Dump(f), Dump(g); a != b {
		t.Fatalf("round trip changed the tree\n--- before\n%s--- after\n%s--- formatted\n%s", a, b, out)
	}
}

// TestFormatRoundTrip covers the printer's delicate cases.
func TestFormatRoundTrip(t *testing.T) {
	for _, text := range []string{
		"X := (1).real\n",
		"X := (1.5).y\n",
		"X := 1 .y\n",
		"X := {tool: tool}\n",
		"X := (tool:f,)\n",
		"raise tool if:\n    tool:\n        tool\n",
		"X := -(-1) ** -2\n",
		"X := (a < b) < c\n",
		"X := [x for x in (a if b else c) if (d if e else f)]\n",
		"X := f(*, <A>, k=<B>)\n",
		"X := not not a in b\n",
		"p(tool: Tool) := (x: T)\n",
		"X :=\n    1\n",
		"X := f\"{a}{{b}}\" + '''c\n  d'''\n",
	} {
		f, err := ParseString("", text)
		if err != nil {
			t.Errorf("%q: %v", text, err)
			continue
		}
		roundTrip(t, f)
	}
}

// TestPositions checks the extent of a node of every kind.
func TestPositions(t *testing.T) {
	text := `from invariant import Message as M
X := [1, 2.5, "s", f"a{b}c", (x,), {k: v}, {1}, [y for y in z if w], -1 ** 2, a if b else c]
p(m: Message) := m.role[0] == "user"
raise PolicyViolation("x", m, k=1) if:
    (m: Message) -> (c: ToolCall)
    c is not tool:f({a: <EMAIL_ADDRESS>, b: *})
    n := len(m.content)
    not forall:
        (o: ToolOutput)
`
	f, err := ParseString("", text)
	if err != nil {
		t.Fatal(err)
	}
	checkNodePositions(t, f, f.Source.Len())
	want := map[string]bool{
		"from invariant import Message as M": true, "Message as M": true, "invariant": true,
		`[1, 2.5, "s", f"a{b}c", (x,), {k: v}, {1}, [y for y in z if w], -1 ** 2, a if b else c]`: true,
		`f"a{b}c"`: true, "(x,)": true, "{k: v}": true, "k: v": true, "{1}": true, "[y for y in z if w]": true,
		"-1 ** 2": true, "1 ** 2": true, "a if b else c": true,
		`p(m: Message) := m.role[0] == "user"`: true, "m: Message": true, `m.role[0] == "user"`: true, "m.role[0]": true, "m.role": true,
		`PolicyViolation("x", m, k=1)`: true, "k=1": true,
		"(m: Message) -> (c: ToolCall)": true, "(m: Message)": true,
		"c is not tool:f({a: <EMAIL_ADDRESS>, b: *})": true, "tool:f({a: <EMAIL_ADDRESS>, b: *})": true,
		"<EMAIL_ADDRESS>": true, "*": true, "n := len(m.content)": true, "len(m.content)": true,
		"not forall:\n        (o: ToolOutput)": true, "(o: ToolOutput)": true,
	}
	Inspect(f, func(n Node) bool {
		if n != nil {
			delete(want, f.Source.Snippet(n.Pos(), n.End()))
		}
		return true
	})
	for w := range want {
		t.Errorf("no node spans %q", w)
	}
}

// TestWholeFileDedent checks spec §2.1: indenting every line of a policy
// (as in a host-language string) changes nothing, strings included.
func TestWholeFileDedent(t *testing.T) {
	policies := seedPolicies(t)
	policies = append(policies,
		"X := \"\"\"abc\ndef\n  ghi\"\"\"\n",
		"X := \"\"\"\n    a\n      b\n    \"\"\"\n",
		"X := \"ab\\\ncd\"\n",
		"X := f\"\"\"{a}\nb {c}\n\"\"\"\n",
		"X := r'''x\n\ty'''\n",
	)
	for _, text := range policies {
		want, err := ParseString("", text)
		if err != nil || strings.HasPrefix(text, "\uFEFF") {
			continue
		}
		for _, indent := range []string{"    ", "\t", "  \t "} {
			var b strings.Builder
			for _, line := range strings.SplitAfter(text, "\n") {
				if strings.TrimSpace(line) != "" {
					b.WriteString(indent)
				}
				b.WriteString(line)
			}
			got, err := ParseString("", b.String())
			if err != nil {
				t.Errorf("indented by %q: %v\n%s", indent, err, b.String())
				continue
			}
			if Dump(got) != Dump(want) {
				t.Errorf("indented by %q: tree differs\n--- got\n%s--- want\n%s", indent, Dump(got), Dump(want))
			}
		}
	}
}
