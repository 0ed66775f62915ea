package detect

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestCompareCompromise scores the compromise NLP library's people() and
// places() on the names corpus beside the offline recogniser, and fails
// unless the offline recogniser has the better text-level F1 for both
// types. It needs node: set VIGIL_TEST_COMPROMISE to a directory whose
// node_modules holds compromise, or to "install" to have npm install the
// version of testdata/compare/package.json into a temporary directory.
func TestCompareCompromise(t *testing.T) {
	dir := os.Getenv("VIGIL_TEST_COMPROMISE")
	if dir == "" {
		t.Skip("set VIGIL_TEST_COMPROMISE to a directory with node_modules/compromise, or to \"install\", to compare with compromise")
	}
	script, err := filepath.Abs("testdata/compare/compromise.js")
	if err != nil {
		t.Fatal(err)
	}
	if dir == "install" {
		dir = t.TempDir()
		pkg, err := os.ReadFile("testdata/compare/package.json")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "package.json"), pkg, 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("npm", "install", "--no-audit", "--no-fund", "--ignore-scripts")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm install compromise: %v\n%s", err, out)
		}
	}
	texts := readCorpus(t, "testdata/pii-corpus/corpus.txt")
	var in bytes.Buffer
	for _, ct := range texts {
		b, _ := json.Marshal(map[string]string{"text": ct.text})
		in.Write(append(b, '\n'))
	}
	cmd := exec.Command("node", script)
	cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(dir, "node_modules"))
	cmd.Stdin = &in
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node compromise.js: %v\n%s", err, stderr.Bytes())
	}
	var theirs [][]Match
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var ms []struct {
			Type       string
			Start, End int
		}
		if err := json.Unmarshal(sc.Bytes(), &ms); err != nil {
			t.Fatalf("compromise.js output line %d: %v", len(theirs)+1, err)
		}
		var row []Match
		for _, m := range ms {
			row = append(row, Match{Type: m.Type, Start: m.Start, End: m.End, Score: 1})
		}
		theirs = append(theirs, row)
	}
	if len(theirs) != len(texts) {
		t.Fatalf("compromise.js answered %d texts of %d", len(theirs), len(texts))
	}
	ours := make([][]Match, len(texts))
	for i, ct := range texts {
		ours[i] = PII(ct.text, []string{EntityPerson, EntityLocation})
	}
	ourText, ourSpan := scoreCorpus(texts, ours)
	theirText, theirSpan := scoreCorpus(texts, theirs)
	for _, typ := range []string{EntityPerson, EntityLocation} {
		t.Logf("%-8s vigil      text %v | span %v", typ, ourText[typ], ourSpan[typ])
		t.Logf("%-8s compromise text %v | span %v", typ, theirText[typ], theirSpan[typ])
		if ourText[typ].f1() <= theirText[typ].f1() {
			t.Errorf("%s: text-level F1 %.3f does not beat compromise's %.3f", typ, ourText[typ].f1(), theirText[typ].f1())
		}
	}
}
