package sqlstore

import (
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "record new migrations in testdata/migrations.golden")

// TestMigrationsAppendOnly fails when a recorded migration changes: released
// steps are never edited, only new ones appended (STYLE.md habit 9). Run
// with -update after appending a step to record its hash.
func TestMigrationsAppendOnly(t *testing.T) {
	var b strings.Builder
	b.WriteString("# version kind sha256 — written by go test -update; never edit a line, only append\n")
	for _, kind := range []string{"sqlite", "postgres"} {
		for i, m := range Migrations(kind) {
			sum := sha256.Sum256([]byte(m))
			fmt.Fprintf(&b, "%d %s %s\n", i+1, kind, hex.EncodeToString(sum[:]))
		}
	}
	path := filepath.Join("testdata", "migrations.golden")
	want, err := os.ReadFile(path)
	if err != nil && !*update {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	got := b.String()
	if *update {
		// Only appends are allowed: every recorded line must still hold.
		for _, line := range strings.Split(string(want), "\n") {
			if line != "" && !strings.Contains(got, line+"\n") {
				t.Fatalf("refusing to update: recorded migration changed: %s", line)
			}
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	for i, line := range strings.Split(string(want), "\n") {
		if line != "" && !strings.Contains(got, line+"\n") {
			t.Errorf("%s:%d: released migration changed or removed: %s", path, i+1, line)
		}
	}
	if got != string(want) {
		for _, line := range strings.Split(got, "\n") {
			if line != "" && !strings.Contains(string(want), line+"\n") {
				t.Errorf("migration not recorded in %s: %s (run go test -update)", path, line)
			}
		}
	}
}

func TestMigrationsRendering(t *testing.T) {
	text := regexp.MustCompile(`(?m)^\t[a-z_0-9]+ TEXT\b(.*)$`)
	for _, kind := range []string{"sqlite", "postgres"} {
		for i, m := range Migrations(kind) {
			if strings.Contains(m, "{{") {
				t.Errorf("%s migration %d keeps a marker", kind, i+1)
			}
			for _, col := range text.FindAllStringSubmatch(m, -1) {
				collated := strings.HasPrefix(col[1], ` COLLATE "C"`)
				if collated != (kind == "postgres") {
					t.Errorf("%s migration %d: %q", kind, i+1, col[0])
				}
			}
		}
	}
	if !strings.Contains(Migrations("sqlite")[0], "WITHOUT ROWID") || strings.Contains(Migrations("postgres")[0], "ROWID") {
		t.Error("WITHOUT ROWID marker rendered wrongly")
	}
}

func TestHelpers(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain", "plain"}, {"50%", `50\%`}, {"a_b", `a\_b`}, {`back\slash`, `back\\slash`},
	} {
		if got := escapeLike(tc.in); got != tc.want {
			t.Errorf("escapeLike(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	for _, tc := range []struct {
		limit, offset int
		want          string
		args          int
	}{
		{0, 0, "", 0}, {10, 0, " LIMIT $1", 1}, {10, 5, " LIMIT $1 OFFSET $2", 2}, {0, 5, " LIMIT $1 OFFSET $2", 2},
	} {
		var p params
		if got := limitOffset(&p, tc.limit, tc.offset); got != tc.want || len(p.args) != tc.args {
			t.Errorf("limitOffset(%d, %d) = %q with %d args", tc.limit, tc.offset, got, len(p.args))
		}
	}
	for _, tc := range []struct {
		channel, payload string
		ok               bool
	}{
		{"rules_changed", "", true}, {"_x9", "p", true}, {"", "", false}, {"9x", "", false}, {"a-b", "", false},
		{"UPPER", "", false}, {strings.Repeat("a", 64), "", false}, {"ok", strings.Repeat("p", 7001), false},
	} {
		if err := checkChannel(tc.channel, tc.payload); (err == nil) != tc.ok {
			t.Errorf("checkChannel(%q, %d bytes) = %v", tc.channel, len(tc.payload), err)
		}
	}
	var b Batch
	b.Insert("a", []string{"x"}, [][]any{{1}})
	b.Exec("UPDATE z")
	b.Insert("b", []string{"x"}, [][]any{{2}})
	b.Insert("a", []string{"x"}, [][]any{{3}, {4}})
	b.Insert("a", []string{"x"}, nil)
	c := coalesce(&b)
	if len(c.Items) != 3 || c.Items[0].Table != "a" || len(c.Items[0].Rows) != 3 || c.Items[1].SQL != "UPDATE z" || c.Items[2].Table != "b" {
		t.Errorf("coalesce = %+v", c.Items)
	}
	if len(b.Items[0].Rows) != 1 {
		t.Error("coalesce changed its input")
	}
}
