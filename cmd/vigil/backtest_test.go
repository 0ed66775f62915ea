package main

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/vigilhq/vigil/client"
)

var updateBacktest = flag.Bool("update-backtest", false, "rewrite testdata/backtest/*.golden")

// backtestServer starts a server holding dataset "bt" of five one-message
// traces and returns a directory with the policies of the tests.
func backtestServer(t *testing.T) string {
	t.Helper()
	url, _ := newInProcessServer(t)
	t.Setenv("VIGIL_URL", url)
	t.Setenv("VIGIL_API_KEY", testKey)
	req := client.PushRequest{Dataset: "bt"}
	for _, c := range []string{"fine", "bad", "bad and worse", "worse", "fine again"} {
		req.Messages = append(req.Messages, []any{map[string]any{"role": "user", "content": c}})
	}
	if _, err := client.New(url, testKey).Push(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, src := range map[string]string{
		"bad.policy":    "raise \"bad word\" if:\n    (msg: Message)\n    \"bad\" in msg.content\n",
		"worse.policy":  "raise \"worse word\" if:\n    (msg: Message)\n    \"worse\" in msg.content\n",
		"needle.policy": "raise \"needle\" if:\n    (msg: Message)\n    input.needle in msg.content\n",
		"broken.policy": "raise \"x\" if:\n    (msg: Message\n",
		"clean.policy":  "raise \"never\" if:\n    (msg: Message)\n    \"zzz\" in msg.content\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// variable parts of the output: times, rates and trace ids.
var backtestVolatile = regexp.MustCompile(`(time +)[0-9.]+m?s|in [0-9.]+m?s \([0-9,]+ traces/s\)|"duration_ms":[0-9]+|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

func TestBacktestCommand(t *testing.T) {
	dir := backtestServer(t)
	cases := []struct {
		name string
		args []string
		code int
	}{
		{"triggered", []string{"--policy", "bad.policy"}, 1},
		{"clean", []string{"--policy", "clean.policy"}, 0},
		{"param", []string{"--policy", "needle.policy", "--param", "needle=fine", "-q"}, 1},
		{"missing_param", []string{"--policy", "needle.policy", "-q"}, 2},
		{"compare", []string{"--policy", "bad.policy", "--compare-to", "worse.policy", "-q"}, 1},
		{"compare_same", []string{"--policy", "bad.policy", "--compare-to", "bad.policy", "-q"}, 0},
		{"json", []string{"--policy", "bad.policy", "--format", "json", "--limit", "2", "-q"}, 1},
		{"broken", []string{"--policy", "broken.policy"}, 2},
		{"broken_baseline", []string{"--policy", "bad.policy", "--compare-to", "broken.policy"}, 2},
		{"no_policy", nil, 2},
		{"unknown_dataset", []string{"--policy", "bad.policy", "--dataset", "nope"}, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Chdir(dir)
			args := append([]string{"backtest"}, tc.args...)
			if !strings.Contains(strings.Join(tc.args, " "), "--dataset") {
				args = append(args, "--dataset", "bt")
			}
			code, out, errs := runVigil(t, "", args...)
			got := backtestVolatile.ReplaceAllStringFunc("exit "+strconv.Itoa(code)+"\n-- stdout --\n"+out+"-- stderr --\n"+errs, func(s string) string {
				switch {
				case strings.HasPrefix(s, "time"):
					return strings.TrimRight(s, "0123456789.ms") + "T"
				case strings.HasPrefix(s, "in "):
					return "in T (R traces/s)"
				case strings.HasPrefix(s, `"duration_ms"`):
					return `"duration_ms":T`
				}
				return "ID"
			})
			golden := filepath.Join(testDir, "testdata", "backtest", tc.name+".golden")
			if *updateBacktest {
				os.MkdirAll(filepath.Dir(golden), 0o755)
				os.WriteFile(golden, []byte(got), 0o644)
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("vigil %s:\n%s\nwant:\n%s", strings.Join(args, " "), got, want)
			}
			if code != tc.code {
				t.Errorf("exit %d, want %d", code, tc.code)
			}
		})
	}
}

// testDir is the package directory (the subtests change directory).
var testDir, _ = os.Getwd()
