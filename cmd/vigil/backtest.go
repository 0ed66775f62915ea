package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/vigilhq/vigil/client"
)

// vigil backtest: a rule run over a dataset stored on a server
// (docs/api.md, "Backtests"), client side through package client.

func init() {
	register(command{name: "backtest", summary: "run a policy over a dataset on a server (and compare it with another)", run: runBacktest})
}

func runBacktest(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("backtest", "backtest --dataset NAME --policy FILE [--compare-to FILE] [--param NAME=VALUE] [--store] [--limit N] [--max-concurrent N] [--format text|json] [--owner USER] [--url URL] [--api-key KEY] [-q]",
		`Run the policy in FILE over every trace of dataset NAME on a server, where the traces are,
and print a summary table: traces checked, triggered, with errors and with rule failures.
Progress (traces of the total, rate, ETA) goes to stderr: redrawn on a terminal, a line every
5 s otherwise, nothing with -q.

With --compare-to, the server runs both policies and the table also shows the baseline's
count and the traces newly triggered and no longer triggered by the policy: the check
before rolling out a new version of a rule. Up to 20 of each are listed by index and id.

--store files each violation as a finding on the server (a rerun updates the same
findings). --format json prints the summary (with --compare-to, the whole comparison) as
one JSON object instead of the table.

Exit status: 0 nothing triggered (with --compare-to: nothing newly triggered), 1 traces
triggered (newly triggered), 2 a usage, server or per-trace error, 3 rule failures
(a budget exhausted) and nothing triggered.`, stderr)
	var sf serverFlags
	sf.register(fs)
	dataset := fs.String("dataset", "", "dataset name, or its id (required)")
	owner := fs.String("owner", "", "the dataset owner's username (default: the key's user)")
	policyFile := fs.String("policy", "", "policy `FILE` (required)")
	compareFile := fs.String("compare-to", "", "baseline policy `FILE` to compare with")
	params := paramFlags{}
	fs.Var(params, "param", "policy parameter `NAME=VALUE` for input.NAME (VALUE is JSON if it parses, else a string); repeatable")
	storeFindings := fs.Bool("store", false, "store the violations as findings on the server")
	limit := fs.Int("limit", 0, "check at most `N` traces, the first by index (0: all)")
	concurrent := fs.Int("max-concurrent", 0, "traces the server analyses at once (0: its CPU count)")
	format := fs.String("format", "text", "output `format`: text or json")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) != 0:
		return fmt.Errorf("backtest: unexpected argument %q", pos[0])
	case *dataset == "":
		return errors.New("backtest: --dataset is required")
	case *policyFile == "":
		return errors.New("backtest: --policy is required")
	case *format != "text" && *format != "json":
		return fmt.Errorf("backtest: --format must be text or json, not %q", *format)
	case *limit < 0 || *concurrent < 0:
		return errors.New("backtest: --limit and --max-concurrent must be 0 or more")
	}
	src, err := os.ReadFile(*policyFile)
	if err != nil {
		return fmt.Errorf("backtest: %w", err)
	}
	req := client.BacktestRequest{Policy: string(src), Parameters: params, Store: *storeFindings, Limit: *limit, MaxConcurrent: *concurrent}
	if *compareFile != "" {
		base, err := os.ReadFile(*compareFile)
		if err != nil {
			return fmt.Errorf("backtest: %w", err)
		}
		req.CompareTo = &client.BacktestRule{Policy: string(base)}
	}
	c, err := sf.client()
	if err != nil {
		return fmt.Errorf("backtest: %w", err)
	}
	d, err := resolveDataset(ctx, c, *dataset, *owner)
	if err != nil {
		return fmt.Errorf("backtest: %w", err)
	}
	if req.CompareTo != nil {
		return backtestCompare(ctx, c, d, req, *policyFile, *compareFile, *format, sf.quiet, stdout, stderr)
	}
	prog := newProgress(stderr, "backtest "+*dataset, -1, sf.quiet)
	prog.tracesOnly = true
	// The per-trace errors of the lowest indices, to show (frames come in
	// completion order).
	type traceErr struct {
		index int64
		msg   string
	}
	var traceErrs []traceErr
	sum, err := c.Backtest(ctx, d.ID, req, func(f *client.BacktestFrame) error {
		if f.Metadata != nil {
			prog.mu.Lock()
			prog.totalTraces = int64(f.Metadata.NumTraces)
			prog.mu.Unlock()
			return nil
		}
		if f.Status == "error" {
			traceErrs = append(traceErrs, traceErr{f.Index, fmt.Sprintf("trace %d (%s): %s", f.Index, f.TraceID, f.Error)})
			slices.SortFunc(traceErrs, func(a, b traceErr) int { return cmp.Compare(a.index, b.index) })
			traceErrs = traceErrs[:min(len(traceErrs), 3)]
		}
		prog.line(0, true, 0)
		return nil
	})
	prog.done(err == nil)
	if err != nil {
		return backtestError(*policyFile, "", *dataset, err)
	}
	for _, e := range traceErrs {
		fmt.Fprintf(stderr, "vigil: backtest: %s\n", e.msg)
	}
	if sum.NumErrors > len(traceErrs) {
		fmt.Fprintf(stderr, "vigil: backtest: %s more traces with errors\n", thousands(int64(sum.NumErrors-len(traceErrs))))
	}
	if *format == "json" {
		if err := writeJSONLine(stdout, map[string]any{"summary": sum}); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(stdout, "%s on dataset %s\n", *policyFile, *dataset)
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "traces checked\t%s\t\n", thousands(int64(sum.NumTraces)))
		fmt.Fprintf(tw, "triggered\t%s\t\n", thousands(int64(sum.NumTriggered)))
		fmt.Fprintf(tw, "errors\t%s\t\n", thousands(int64(sum.NumErrors)))
		fmt.Fprintf(tw, "rule failures\t%s\t\n", thousands(int64(sum.NumFailures)))
		fmt.Fprintf(tw, "time\t%s\t\n", round(time.Duration(sum.DurationMS)*time.Millisecond))
		tw.Flush()
	}
	return checkExit(sum.NumTriggered > 0, sum.NumFailures > 0, sum.NumErrors > 0)
}

// backtestCompare runs the comparison and prints it.
func backtestCompare(ctx context.Context, c *client.Client, d *client.Dataset, req client.BacktestRequest, policyFile, compareFile, format string, quiet bool, stdout, stderr io.Writer) error {
	if !quiet {
		fmt.Fprintf(stderr, "vigil: backtest %s: the server is running both policies…\n", d.Name)
	}
	res, err := c.BacktestCompare(ctx, d.ID, req)
	if err != nil {
		return backtestError(policyFile, compareFile, d.Name, err)
	}
	s := res.Summary
	if format == "json" {
		if err := writeJSONLine(stdout, res); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(stdout, "%s against %s on dataset %s\n", policyFile, compareFile, d.Name)
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "\tpolicy\tbaseline\t\n")
		fmt.Fprintf(tw, "traces checked\t%s\t\t\n", thousands(int64(s.NumTraces)))
		fmt.Fprintf(tw, "triggered\t%s\t%s\t\n", thousands(int64(s.NumTriggered)), thousands(int64(s.BaselineTriggered)))
		fmt.Fprintf(tw, "newly triggered\t%s\t\t\n", thousands(int64(s.NewlyTriggered)))
		fmt.Fprintf(tw, "no longer triggered\t%s\t\t\n", thousands(int64(s.NoLongerTriggered)))
		fmt.Fprintf(tw, "errors\t%s\t\t\n", thousands(int64(s.NumErrors)))
		fmt.Fprintf(tw, "time\t%s\t\t\n", round(time.Duration(s.DurationMS)*time.Millisecond))
		tw.Flush()
		listChanged(stdout, "newly triggered", res.Traces, func(t client.BacktestComparedTrace) bool { return t.Triggered && !t.BaselineTriggered })
		listChanged(stdout, "no longer triggered", res.Traces, func(t client.BacktestComparedTrace) bool { return !t.Triggered && t.BaselineTriggered })
		if s.Truncated {
			fmt.Fprintln(stdout, "(the server listed the first 10,000 traces that triggered; the counts cover all)")
		}
	}
	return checkExit(s.NewlyTriggered > 0, false, s.NumErrors > 0)
}

// listChanged prints up to 20 traces of ts that keep holds for.
func listChanged(w io.Writer, what string, ts []client.BacktestComparedTrace, keep func(client.BacktestComparedTrace) bool) {
	n := 0
	for _, t := range ts {
		if !keep(t) {
			continue
		}
		if n == 0 {
			fmt.Fprintf(w, "%s:\n", what)
		}
		if n++; n > 20 {
			fmt.Fprintln(w, "  …")
			return
		}
		fmt.Fprintf(w, "  index %d  %s\n", t.Index, t.ID)
	}
}

// backtestError words a failed backtest: a rule that does not compile is
// the server's message with the file named where it says "policy:" or
// "compare_to:" (file:line:col, the source line and a caret).
func backtestError(policyFile, compareFile, dataset string, err error) error {
	var ae *client.APIError
	if errors.As(err, &ae) && ae.Code == "policy_invalid" {
		field, _ := ae.Body["field"].(string)
		file := policyFile
		if field == "compare_to" {
			file = compareFile
		}
		msg := strings.TrimPrefix(ae.Detail, "Invalid Policy string: ")
		if field != "" {
			msg = strings.Replace(msg, field+":", file+":", 1)
		}
		return exitCode(2, "backtest: "+msg+sourceCaret(file, ae.Body["errors"]))
	}
	return fmt.Errorf("backtest %s: %w", dataset, err)
}

// sourceCaret renders the line of file that the first of errs
// ([{line, column, message}] of a policy_invalid answer) points at, with
// a caret under the column, as vigil check shows load errors; "" when
// that cannot be done.
func sourceCaret(file string, errs any) string {
	list, _ := errs.([]any)
	if len(list) == 0 {
		return ""
	}
	first, _ := list[0].(map[string]any)
	line, _ := first["line"].(float64)
	col, _ := first["column"].(float64)
	src, err := os.ReadFile(file)
	lines := strings.Split(string(src), "\n")
	if err != nil || line < 1 || int(line) > len(lines) || col < 1 {
		return ""
	}
	text := strings.TrimRight(lines[int(line)-1], "\r")
	pad := []rune(text)[:min(int(col)-1, utf8.RuneCountInString(text))]
	for i, r := range pad {
		if r != '\t' {
			pad[i] = ' '
		}
	}
	return "\n    " + text + "\n    " + string(pad) + "^"
}
