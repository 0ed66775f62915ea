package vigil_test

// docs_test checks every policy example of the user documentation
// (docs/*.md and README.md), so the documentation cannot drift from the
// engine.
//
// Rules, so that the documents stay plain to read:
//   - Every ```python block is a policy: it must load with policy.Load.
//     Write fragments that are not whole policies as ```text.
//   - HTML comments on the lines just before the fence give directives:
//     <!-- policy: load-error "TEXT" --> (loading must fail with an error
//     containing TEXT) and <!-- policy: params {"NAME": VALUE} --> (the
//     input.NAME parameters of the analysis).
//   - The first ```json block after a policy (before the next policy or
//     heading) that holds a JSON array, or an object with "messages", is
//     its trace: the policy is run on it and must not fail to analyse.
//   - The next ```json block that holds an object with "errors" is the
//     expected result, the object `vigil check --format json` prints. Only
//     what it states is compared: the number of violations, and for each
//     the members given (key, args, kwargs, ranges); failures and warnings
//     when present.
//   - The ```sh blocks of docs/api.md are run against a server
//     (TestDocsAPIExamples); those of the other documents are not run.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/vigilhq/vigil/detect" // registers the detectors the examples call
	"github.com/vigilhq/vigil/policy"
)

// docBlock is one fenced block of a markdown file.
type docBlock struct {
	file       string
	line       int // line of the opening fence
	lang       string
	text       string
	directives []string // "load-error ..." and "params ..." from <!-- policy: ... -->
	section    int      // headings seen before the block
}

func (b docBlock) pos() string { return fmt.Sprintf("%s:%d", b.file, b.line) }

// parseDocBlocks returns the fenced blocks of a markdown text.
func parseDocBlocks(file, text string) []docBlock {
	var blocks []docBlock
	var cur *docBlock
	var body strings.Builder
	var pending []string // directives seen since the last non-comment line
	section := 0
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if cur != nil {
			if trimmed == "```" {
				cur.text = body.String()
				blocks = append(blocks, *cur)
				cur = nil
				continue
			}
			body.WriteString(line)
			body.WriteByte('\n')
			continue
		}
		switch {
		case strings.HasPrefix(trimmed, "```"):
			cur = &docBlock{file: file, line: n, lang: strings.TrimSpace(strings.TrimPrefix(trimmed, "```")),
				directives: pending, section: section}
			body.Reset()
			pending = nil
		case strings.HasPrefix(trimmed, "<!-- policy:") && strings.HasSuffix(trimmed, "-->"):
			d := strings.TrimSuffix(strings.TrimPrefix(trimmed, "<!-- policy:"), "-->")
			pending = append(pending, strings.TrimSpace(d))
		case trimmed == "":
		default:
			pending = nil
			if strings.HasPrefix(trimmed, "#") {
				section++
			}
		}
	}
	return blocks
}

// docExample is a policy block with its optional trace and expected result.
type docExample struct {
	policy        docBlock
	trace, result *docBlock
}

// docExamples groups the blocks of one file into examples.
func docExamples(blocks []docBlock) []docExample {
	var out []docExample
	for i, b := range blocks {
		if b.lang != "python" {
			continue
		}
		ex := docExample{policy: b}
		for j := i + 1; j < len(blocks); j++ {
			nb := blocks[j]
			if nb.lang == "python" || nb.section != b.section {
				break
			}
			if nb.lang != "json" {
				continue
			}
			var v any
			if json.Unmarshal([]byte(nb.text), &v) != nil {
				continue
			}
			switch x := v.(type) {
			case []any:
				if ex.trace == nil {
					ex.trace = &blocks[j]
				}
			case map[string]any:
				if _, ok := x["messages"]; ok && ex.trace == nil {
					ex.trace = &blocks[j]
				} else if _, ok := x["errors"]; ok && ex.trace != nil && ex.result == nil {
					ex.result = &blocks[j]
				}
			}
			if ex.result != nil {
				break
			}
		}
		out = append(out, ex)
	}
	return out
}

func TestDocsParse(t *testing.T) {
	md := "# A\n<!-- policy: params {\"x\": 1} -->\n```python\nraise \"x\" if:\n    1 == 1\n```\ntext\n```json\n[]\n```\n" +
		"```json\n{\"errors\": []}\n```\n# B\n```json\n[]\n```\n```python\nraise \"y\" if:\n    1 == 1\n```\n"
	ex := docExamples(parseDocBlocks("t.md", md))
	if len(ex) != 2 {
		t.Fatalf("examples = %d, want 2", len(ex))
	}
	if ex[0].policy.line != 3 || len(ex[0].policy.directives) != 1 || ex[0].trace == nil || ex[0].result == nil {
		t.Errorf("first example = %+v", ex[0])
	}
	if ex[1].trace != nil {
		t.Errorf("a trace in an earlier section was paired with a later policy: %+v", ex[1])
	}
}

// docFiles are the documents whose policy examples are checked.
func docFiles(t *testing.T) []string {
	files, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append(files, "README.md")
}

func TestDocsPolicies(t *testing.T) {
	n := 0
	for _, f := range docFiles(t) {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, ex := range docExamples(parseDocBlocks(filepath.ToSlash(f), string(src))) {
			n++
			t.Run(ex.policy.pos(), func(t *testing.T) { checkDocExample(t, ex) })
		}
	}
	if n == 0 {
		t.Fatal("no ```python policy examples found in docs/*.md and README.md")
	}
}

func checkDocExample(t *testing.T, ex docExample) {
	pos := ex.policy.pos()
	var wantLoadErr string
	var params map[string]any
	for _, d := range ex.policy.directives {
		verb, arg, _ := strings.Cut(d, " ")
		switch verb {
		case "load-error":
			if err := json.Unmarshal([]byte(arg), &wantLoadErr); err != nil {
				t.Fatalf("%s: load-error wants a quoted text: %v", pos, err)
			}
		case "params":
			if err := json.Unmarshal([]byte(arg), &params); err != nil {
				t.Fatalf("%s: params wants a JSON object: %v", pos, err)
			}
		default:
			t.Fatalf("%s: unknown directive %q", pos, d)
		}
	}
	p, err := policy.Load(ex.policy.text, policy.Options{Name: pos})
	if wantLoadErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantLoadErr) {
			t.Fatalf("%s: load error = %v, want one containing %q", pos, err, wantLoadErr)
		}
		if ex.trace != nil {
			t.Fatalf("%s: a policy that must not load has a trace at %s", pos, ex.trace.pos())
		}
		return
	}
	if err != nil {
		t.Fatalf("%s: policy does not load:\n%v", pos, err)
	}
	if ex.trace == nil {
		return
	}
	tr, err := policy.DecodeTrace([]byte(ex.trace.text))
	if err != nil {
		t.Fatalf("%s: trace: %v", ex.trace.pos(), err)
	}
	res, err := p.Analyze(context.Background(), tr, params)
	if err != nil {
		var ae *policy.AnalysisError
		if errors.As(err, &ae) {
			t.Fatalf("%s: analysis error on the trace of %s: %v", pos, ex.trace.pos(), ae)
		}
		t.Fatalf("%s: analysis of %s: %v", pos, ex.trace.pos(), err)
	}
	if ex.result == nil {
		return
	}
	gotJSON, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var got, want map[string]any
	if err := json.Unmarshal(gotJSON, &got); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(ex.result.text), &want); err != nil {
		t.Fatalf("%s: %v", ex.result.pos(), err)
	}
	for _, member := range []string{"errors", "failures"} {
		w, ok := want[member]
		if !ok {
			continue
		}
		if err := subsetList(member, w, got[member]); err != nil {
			t.Errorf("%s: result of %s differs from %s: %v\ngot %s", pos, ex.trace.pos(), ex.result.pos(), err, gotJSON)
		}
	}
	if w, ok := want["warnings"]; ok && !reflect.DeepEqual(w, orEmpty(got["warnings"])) {
		t.Errorf("%s: warnings = %v, want %v (%s)", pos, got["warnings"], w, ex.result.pos())
	}
}

// subsetList compares two JSON lists of objects: the same length, and each
// member the wanted object states equal in the one got.
func subsetList(name string, want, got any) error {
	w, _ := want.([]any)
	g, _ := orEmpty(got).([]any)
	if len(w) != len(g) {
		return fmt.Errorf("%d %s, want %d", len(g), name, len(w))
	}
	for i := range w {
		wo, _ := w[i].(map[string]any)
		gobj, _ := g[i].(map[string]any)
		for k, wv := range wo {
			if gv := gobj[k]; !reflect.DeepEqual(wv, gv) {
				return fmt.Errorf("%s[%d].%s = %v, want %v", name, i, k, gv, wv)
			}
		}
	}
	return nil
}

func orEmpty(v any) any {
	if v == nil {
		return []any{}
	}
	return v
}

// TestDocsConfigExamples loads every ```yaml block of docs/configuration.md
// as a configuration file with the vigil binary ("vigil check --config F
// -h" reads the file, then prints help).
func TestDocsConfigExamples(t *testing.T) {
	src, err := os.ReadFile("docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	var yamls []docBlock
	for _, b := range parseDocBlocks("docs/configuration.md", string(src)) {
		if b.lang == "yaml" {
			yamls = append(yamls, b)
		}
	}
	if len(yamls) == 0 {
		t.Fatal("docs/configuration.md has no ```yaml example")
	}
	bin := buildVigil(t)
	for _, b := range yamls {
		f := filepath.Join(t.TempDir(), "vigil.yaml")
		if err := os.WriteFile(f, []byte(b.text), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "check", "--config", f, "-h")
		cmd.Env = append(os.Environ(), "VIGIL_CONFIG=", "HOME="+t.TempDir())
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s: the example does not load: %v\n%s", b.pos(), err, out)
		}
	}
}

// envName matches the environment variables Vigil reads, as the code spells
// them (a string literal) and as the documents do.
var envName = regexp.MustCompile(`VIGIL_[A-Z0-9_]*[A-Z0-9]`)

// TestDocsEnvironment checks that docs/configuration.md lists every VIGIL_*
// variable the code reads, and that the documents name none it does not.
func TestDocsEnvironment(t *testing.T) {
	inCode := map[string]string{} // name -> a file that reads it
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "testdata", "bench", "internal", "docs", "examples":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range regexp.MustCompile(`"(VIGIL_[A-Z0-9_]+)"`).FindAllSubmatch(src, -1) {
			// Knobs of the test suite and benchmarks are not user settings.
			if n := string(m[1]); !strings.HasPrefix(n, "VIGIL_TEST_") && !strings.HasPrefix(n, "VIGIL_BENCH_") {
				inCode[n] = path
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile("docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, n := range envName.FindAllString(string(cfg), -1) {
		documented[n] = true
	}
	for n, file := range inCode {
		if !documented[n] {
			t.Errorf("%s reads %s, which docs/configuration.md does not document", file, n)
		}
	}
	for _, f := range docFiles(t) {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range envName.FindAllString(string(src), -1) {
			if _, ok := inCode[n]; !ok {
				t.Errorf("%s names %s, which no code reads", f, n)
			}
		}
	}
}

// designRef matches a citation of the design documents, which users of the
// repository do not have.
var designRef = regexp.MustCompile(`shared/|spec/|§|DESIGN\.md|STYLE\.md|explorer-api|policy-language|ledger\.md|gateway\.md`)

// TestDocsCiteNoDesignDocuments checks that README.md, docs/*.md and every
// command's help cite the user documentation, not the design documents.
func TestDocsCiteNoDesignDocuments(t *testing.T) {
	for _, f := range docFiles(t) {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(src), "\n") {
			if m := designRef.FindString(line); m != "" {
				t.Errorf("%s:%d cites the design documents (%q): %s", f, i+1, m, line)
			}
		}
	}
	bin := buildVigil(t)
	list, err := exec.Command(bin, "help").Output()
	if err != nil {
		t.Fatalf("vigil help: %v", err)
	}
	helps := [][]string{{"help"}}
	for _, line := range strings.Split(string(list), "\n") {
		if f := strings.Fields(line); len(f) > 1 && strings.HasPrefix(line, "  ") {
			helps = append(helps, []string{f[0], "-h"})
		}
	}
	if len(helps) < 5 {
		t.Fatalf("vigil help lists %d commands:\n%s", len(helps)-1, list)
	}
	helps = append(helps, []string{"receipts", "canon", "-h"}, []string{"receipts", "sign", "-h"},
		[]string{"receipts", "verify", "-h"}, []string{"trace", "lint", "-h"}, []string{"trace", "get", "-h"})
	for _, args := range helps {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "VIGIL_CONFIG=", "HOME="+t.TempDir())
		out, _ := cmd.CombinedOutput()
		if len(out) == 0 {
			t.Errorf("vigil %s printed nothing", strings.Join(args, " "))
		}
		if m := designRef.FindString(string(out)); m != "" {
			t.Errorf("vigil %s cites the design documents (%q):\n%s", strings.Join(args, " "), m, out)
		}
	}
}

// vigilBin is the binary buildVigil built once for this package's tests.
var vigilBin struct {
	once      sync.Once
	dir, path string
	err       error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if vigilBin.dir != "" {
		os.RemoveAll(vigilBin.dir)
	}
	os.Exit(code)
}

// buildVigil builds ./cmd/vigil once into a temporary folder and returns
// its path.
func buildVigil(t *testing.T) string {
	t.Helper()
	vigilBin.once.Do(func() {
		if vigilBin.dir, vigilBin.err = os.MkdirTemp("", "vigil-docs-"); vigilBin.err != nil {
			return
		}
		vigilBin.path = filepath.Join(vigilBin.dir, "vigil")
		if out, err := exec.Command("go", "build", "-o", vigilBin.path, "./cmd/vigil").CombinedOutput(); err != nil {
			vigilBin.err = fmt.Errorf("go build ./cmd/vigil: %v\n%s", err, out)
		}
	})
	if vigilBin.err != nil {
		t.Fatal(vigilBin.err)
	}
	return vigilBin.path
}

// apiCommands returns the commands of the ```sh blocks of an API document:
// a line ending in a backslash, or inside an open single quote, continues
// on the next line.
func apiCommands(blocks []docBlock) []docBlock {
	var out []docBlock
	for _, b := range blocks {
		if b.lang != "sh" {
			continue
		}
		cur, start := "", 0
		for i, line := range strings.Split(b.text, "\n") {
			if cur == "" && strings.TrimSpace(line) == "" {
				continue
			}
			if cur == "" {
				start = b.line + 1 + i
				cur = line
			} else {
				cur += "\n" + line
			}
			if strings.HasSuffix(cur, `\`) || strings.Count(cur, "'")%2 == 1 {
				continue
			}
			out = append(out, docBlock{file: b.file, line: start, lang: "sh", text: strings.TrimSpace(cur)})
			cur = ""
		}
	}
	return out
}

// TestDocsAPIExamples runs the commands of docs/api.md, in order, against
// a vigil serve on a free loopback port. $VIGIL is its URL, $VIGIL_API_KEY
// its admin key, $TRACE a pushed trace and $DATASET its dataset; the
// files the examples upload are in the working directory. "export" lines
// are skipped (the test sets the environment), and every curl fails on an
// HTTP error status (-f), so each example must succeed.
func TestDocsAPIExamples(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not found: skipping the API examples", tool)
		}
	}
	src, err := os.ReadFile("docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	cmds := apiCommands(parseDocBlocks("docs/api.md", string(src)))
	if len(cmds) < 10 {
		t.Fatalf("docs/api.md has %d commands in ```sh blocks", len(cmds))
	}
	bin := buildVigil(t)
	dir := t.TempDir()
	addr := freeAddr(t)
	const key, metricsToken = "vigil-docs-admin-key-0123456789", "vigil-docs-metrics-token"
	env := append(os.Environ(),
		"PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"HOME="+dir, "VIGIL_CONFIG=", "VIGIL_URL=", "NO_COLOR=1",
		"VIGIL="+"http://"+addr, "VIGIL_API_KEY="+key, "VIGIL_METRICS_TOKEN="+metricsToken)
	srv := exec.Command(bin, "serve", "--data-dir", filepath.Join(dir, "data"), "--listen", addr)
	srv.Env = env
	var srvOut strings.Builder
	srv.Stdout, srv.Stderr = &srvOut, &srvOut
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		srv.Process.Kill()
		srv.Wait()
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("vigil serve did not start: %v\n%s", err, srvOut.String())
		}
		time.Sleep(50 * time.Millisecond)
	}

	// $TRACE and $DATASET: a pushed trace and its dataset.
	run := func(cmd string) (string, error) {
		c := exec.Command("bash", "-c", cmd)
		c.Env, c.Dir = env, dir
		out, err := c.CombinedOutput()
		return string(out), err
	}
	out, err := run(`curl -sSf -H "Authorization: Bearer $VIGIL_API_KEY" $VIGIL/api/v1/push/trace -d '{"dataset": "setup", "messages": [[{"role": "user", "content": "hi"}]]}' | jq -r '.id[0]'`)
	if err != nil {
		t.Fatalf("push the example trace: %v\n%s", err, out)
	}
	trace := strings.TrimSpace(out)
	out, err = run(`curl -sSf -H "Authorization: Bearer $VIGIL_API_KEY" $VIGIL/api/v1/trace/` + trace + ` | jq -r .dataset`)
	if err != nil {
		t.Fatalf("read the example trace: %v\n%s", err, out)
	}
	env = append(env, "TRACE="+trace, "DATASET="+strings.TrimSpace(out))
	dataset, err := os.ReadFile("examples/dataset.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"dataset.jsonl": string(dataset),
		"more.jsonl":    `{"messages": [{"role": "user", "content": "one more"}]}` + "\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range cmds {
		if strings.HasPrefix(c.text, "export ") {
			continue
		}
		cmd := c.text
		if rest, ok := strings.CutPrefix(cmd, "curl "); ok {
			cmd = "curl -sSf " + rest
		}
		if out, err := run(cmd); err != nil {
			t.Errorf("%s: %s\n%v\n%s", c.pos(), c.text, err, out)
		}
	}
}
