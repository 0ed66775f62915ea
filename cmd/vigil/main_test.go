package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// runVigil runs the vigil command line in-process and returns the exit
// code, stdout and stderr.
func runVigil(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, strings.NewReader(stdin), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func TestDispatch(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantCode int
		stdout   string
		stderr   string
	}{
		{"no args", nil, 2, "", "Usage: vigil <command>"},
		{"help", []string{"help"}, 0, "Commands:", ""},
		{"help flag", []string{"--help"}, 0, "Commands:", ""},
		{"version", []string{"version"}, 0, "vigil ", ""},
		{"unknown with suggestion", []string{"chek"}, 2, "", `Did you mean "check"?`},
		{"help of a command", []string{"help", "check"}, 0, "Usage: vigil check", ""},
		{"help of unknown", []string{"help", "nope"}, 2, "", "unknown command"},
		{"command -h", []string{"version", "-h"}, 0, "", "Usage: vigil version"},
		{"bad flag", []string{"version", "--nope"}, 2, "", "flag provided but not defined"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runVigil(t, "", tt.args...)
			if code != tt.wantCode {
				t.Errorf("exit %d, want %d (stderr %q)", code, tt.wantCode, errOut)
			}
			if !strings.Contains(out, tt.stdout) {
				t.Errorf("stdout %q does not contain %q", out, tt.stdout)
			}
			if !strings.Contains(errOut, tt.stderr) {
				t.Errorf("stderr %q does not contain %q", errOut, tt.stderr)
			}
		})
	}
}

func TestEditDistance(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		want int
	}{{"", "", 0}, {"check", "chek", 1}, {"serve", "SERVE", 0}, {"abc", "xyz", 3}, {"trace", "tracer", 1}} {
		if got := editDistance(tt.a, tt.b); got != tt.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}
