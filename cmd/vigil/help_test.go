package main

import (
	"regexp"
	"strings"
	"testing"
)

// designDocRx matches citations of the design documents (shared/spec/…,
// "policy-language §7.4", "spec/ledger.md"), which a user of the
// repository does not have; user-facing text cites docs/ instead.
var designDocRx = regexp.MustCompile(`shared/|spec/|§|policy-language|explorer-api|gateway\.md|ledger\.md|web-ui\.md`)

// TestHelpCitesNoDesignDocs runs every command's and subcommand's -h and
// fails on a citation of the design documents (issue 11 item 2).
func TestHelpCitesNoDesignDocs(t *testing.T) {
	nested := map[string][]string{
		"findings": {"list", "show", "accept", "dismiss", "reopen"},
		"keys":     {"create", "list", "revoke"},
		"receipts": {"canon", "sign", "verify"},
		"trace":    {"lint", "get"},
	}
	calls := [][]string{{"--help"}}
	for name := range commands {
		calls = append(calls, []string{name, "-h"})
		for _, sub := range nested[name] {
			calls = append(calls, []string{name, sub, "-h"})
		}
	}
	for name := range nested {
		if _, ok := commands[name]; !ok {
			t.Errorf("nested help table names %q, which is not a command", name)
		}
	}
	for _, args := range calls {
		_, stdout, stderr := runVigil(t, "", args...)
		text := stdout + stderr
		if strings.TrimSpace(text) == "" {
			t.Errorf("vigil %s printed nothing", strings.Join(args, " "))
		}
		for i, line := range strings.Split(text, "\n") {
			if designDocRx.MatchString(line) {
				t.Errorf("vigil %s, line %d cites a design document: %s", strings.Join(args, " "), i+1, line)
			}
		}
	}
}
