package gateway_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/policy"
)

// syncBuffer is a log destination safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// wordRule forbids a word in user messages.
func wordRule(w string) string {
	return "raise \"no " + w + "\" if:\n    (msg: Message)\n    msg.role == \"user\"\n    \"" + w + "\" in msg.content\n"
}

// loadFile is the reload function vigil serve gives: the file is one
// blocking guardrail.
func loadFile(path string) func() ([]*gateway.Guardrail, error) {
	return func() ([]*gateway.Guardrail, error) {
		src, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		p, err := policy.Load(string(src), policy.Options{})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return []*gateway.Guardrail{{ID: gateway.FileRuleID, Name: gateway.FileRuleName, Content: string(src), Action: "block", Policy: p}}, nil
	}
}

// blocks reports whether a call saying text is blocked.
func (e *env) blocks(text string) bool {
	e.t.Helper()
	resp, b := e.post("/openai/chat/completions", `{"model":"m","messages":[{"role":"user","content":"`+text+`"}]}`,
		map[string]string{"Authorization": "Bearer sk"})
	if resp.StatusCode != 200 && resp.StatusCode != 400 {
		e.t.Fatalf("%d %s", resp.StatusCode, b)
	}
	return resp.StatusCode == 400 && strings.Contains(string(b), "did not pass the guardrails")
}

// eventually waits up to 5 s for cond.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting until %s", what)
}

func TestGlobalRulesReload(t *testing.T) {
	for _, how := range []string{"mtime", "sighup"} {
		t.Run(how, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "rules.gr")
			if err := os.WriteFile(path, []byte(wordRule("banana")), 0o600); err != nil {
				t.Fatal(err)
			}
			load := loadFile(path)
			first, err := load()
			if err != nil {
				t.Fatal(err)
			}
			logs := &syncBuffer{}
			e := newEnv(t, func(o *gateway.Options) {
				o.Global = first
				o.Logger = slog.New(slog.NewTextHandler(logs, nil))
			})
			interval := 10 * time.Millisecond
			hup := make(chan os.Signal, 1)
			if how == "sighup" {
				interval = time.Hour
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			e.gw.WatchGlobal(ctx, []string{path}, interval, hup, load)
			if !e.blocks("a banana split") || e.blocks("a cherry pie") {
				t.Fatal("initial rules not in force")
			}
			signal := func() {
				if how == "sighup" {
					hup <- os.Interrupt // any signal value: the channel is the trigger
				}
			}
			// A new valid version replaces the rules.
			write := func(src string) {
				t.Helper()
				// Written aside and renamed: with a 10 ms interval on a
				// loaded machine, the watcher could otherwise see the
				// truncated file for two ticks and load it (the watcher's
				// settle time is one interval, 2 s by default).
				if err := os.WriteFile(path+".new", []byte(src), 0o600); err != nil {
					t.Fatal(err)
				}
				if err := os.Rename(path+".new", path); err != nil {
					t.Fatal(err)
				}
				// Make the change visible to the mtime check even on
				// coarse file systems.
				later := time.Now().Add(time.Duration(len(src)) * time.Second)
				os.Chtimes(path, later, later)
				signal()
			}
			write(wordRule("cherry"))
			eventually(t, "the new rules apply", func() bool { return e.blocks("a cherry pie") && !e.blocks("a banana split") })
			// A version that does not load is logged; the old rules stay.
			write("raise \"broken\" if:\n    (msg: Message\n")
			eventually(t, "the bad version is logged", func() bool { return strings.Contains(logs.String(), "not reloaded") })
			if !e.blocks("a cherry pie") {
				t.Error("the previous rules were dropped after a bad reload")
			}
			if !strings.Contains(logs.String(), path) || !strings.Contains(logs.String(), "was never closed") {
				t.Errorf("the log does not say what is wrong: %s", logs.String())
			}
		})
	}
}
