package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/vigilhq/vigil/client"
)

// vigil evals: eval results computed by a running server (docs/api.md,
// "Findings, review queue and evals"), for a terminal or a CI step (exit 1
// when a case fails).

func init() {
	register(command{name: "evals", summary: "show eval results from a server (exit 1 when a case fails)", run: runEvals})
}

func runEvals(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("evals", "evals [--suite NAME] [--json] [--url URL] [--api-key KEY]",
		"Show eval results. A run whose metadata has \"eval\": {\"suite\": S, \"case\": C} is a case of\n"+
			"suite S; the latest run of a case passes when it has no open finding of severity warn or\n"+
			"critical (accepting or dismissing a finding can turn a failure into a pass). Prints a table\n"+
			"of cases and a line per suite, or with --json the whole result as one line of JSON.\n"+
			"Exits 1 when a case fails, 0 when every case passes (or there are none).", stderr)
	var sf serverFlags
	sf.register(fs)
	suite := fs.String("suite", "", "only this suite (default every suite)")
	asJSON := fs.Bool("json", false, "print the result as one line of JSON")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return fmt.Errorf("evals: unexpected argument %q", pos[0])
	}
	c, err := sf.client()
	if err != nil {
		return fmt.Errorf("evals: %w", err)
	}
	res, err := c.Evals(ctx, *suite)
	if err != nil {
		return fmt.Errorf("evals: %w", err)
	}
	if *asJSON {
		if err := writeJSONLine(stdout, res); err != nil {
			return err
		}
	} else if err := printEvals(stdout, res); err != nil {
		return err
	}
	for _, s := range res.Suites {
		if s.Status != "pass" {
			return exitCode(1, "")
		}
	}
	return nil
}

func printEvals(w io.Writer, res *client.EvalResults) error {
	if len(res.Results) == 0 {
		_, err := fmt.Fprintln(w, "no eval cases (runs with \"eval\": {\"suite\", \"case\"} in their metadata)")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SUITE\tCASE\tSTATUS\tRUN\tBLOCKING")
	for _, r := range res.Results {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Suite, r.Case, r.Status, r.RunID, strings.Join(r.Blocking, ","))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, s := range res.Suites {
		if _, err := fmt.Fprintf(w, "suite %s: %s (%d of %d cases passed)\n", s.Suite, s.Status, s.Passed, s.Cases); err != nil {
			return err
		}
	}
	return nil
}
