package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/vigilhq/vigil/client"
)

// vigil findings: the review queue against a running server
// (docs/api.md, "Findings, review queue and evals"): list, show, and the review transitions
// accept, dismiss and reopen.

func init() {
	register(command{name: "findings", summary: "list, show and review findings on a server", run: runFindings})
}

const findingsUsage = `Usage: vigil findings <subcommand> [flags]

Read and review the findings a server's guardrails raised. The server and key
come from --url and --api-key (default $VIGIL_URL, $VIGIL_API_KEY).

Subcommands:
  list [--queue] [--run ID] [--status S,...] [--severity S,...] [--monitor ID] [--limit N] [--json]
                      list findings (with --queue: the open ones, critical first)
  show ID             print one finding as JSON
  accept ID [--note TEXT]    accept an open finding (a waiver: it no longer fails evals)
  dismiss ID [--note TEXT]   dismiss an open finding (a false positive)
  reopen ID [--note TEXT]    reopen an accepted or dismissed finding

Run 'vigil findings <subcommand> -h' for its flags.
`

func runFindings(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, findingsUsage)
		return exitCode(2, "")
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, findingsUsage)
		return nil
	case "list":
		return runFindingsList(ctx, args[1:], stdout, stderr)
	case "show":
		return runFindingsShow(ctx, args[1:], stdout, stderr)
	case "accept":
		return runFindingsReview(ctx, "accept", client.FindingAccepted, args[1:], stdout, stderr)
	case "dismiss":
		return runFindingsReview(ctx, "dismiss", client.FindingDismissed, args[1:], stdout, stderr)
	case "reopen":
		return runFindingsReview(ctx, "reopen", client.FindingOpen, args[1:], stdout, stderr)
	}
	fmt.Fprint(stderr, findingsUsage)
	return exitCode(2, fmt.Sprintf("findings: unknown subcommand %q", args[0]))
}

// splitList splits a comma-separated flag value ("" = nil).
func splitList(v string) []string {
	if v == "" {
		return nil
	}
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func runFindingsList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("findings list", "findings list [--queue] [--run ID] [--status S,...] [--severity S,...] [--monitor ID] [--limit N] [--json] [--url URL] [--api-key KEY]",
		"List findings, oldest first: a table, or one JSON object per line with --json. With --queue,\nthe review queue: open findings, critical first, then oldest first.", stderr)
	var sf serverFlags
	sf.register(fs)
	queue := fs.Bool("queue", false, "the review queue (open findings, critical first)")
	run := fs.String("run", "", "only the findings of this run (trace id)")
	status := fs.String("status", "", "only these statuses: open, accepted, dismissed (comma-separated)")
	severity := fs.String("severity", "", "only these severities: info, warn, critical (comma-separated)")
	monitor := fs.String("monitor", "", "only the findings of this monitor (guardrail id)")
	limit := fs.Int("limit", 0, "print at most N findings (default all)")
	asJSON := fs.Bool("json", false, "one JSON object per line instead of a table")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return fmt.Errorf("findings list: unexpected argument %q", pos[0])
	}
	if *queue && *status != "" {
		return errors.New("findings list: --queue lists open findings only; leave out --status")
	}
	if *limit < 0 {
		return errors.New("findings list: --limit must be 0 (all) or more")
	}
	c, err := sf.client()
	if err != nil {
		return fmt.Errorf("findings list: %w", err)
	}
	f := client.FindingFilter{RunID: *run, MonitorID: *monitor, Status: splitList(*status), Severity: splitList(*severity), Limit: 1000}
	var all []client.Finding
	for {
		if *limit > 0 {
			f.Limit = min(1000, *limit-len(all))
		}
		var page *client.FindingPage
		if *queue {
			page, err = c.ReviewQueue(ctx, f)
		} else {
			page, err = c.Findings(ctx, f)
		}
		if err != nil {
			return fmt.Errorf("findings list: %w", err)
		}
		all = append(all, page.Findings...)
		if page.NextCursor == nil || (*limit > 0 && len(all) >= *limit) {
			break
		}
		f.Cursor = *page.NextCursor
	}
	if *asJSON {
		for _, fd := range all {
			if err := writeJSONLine(stdout, fd); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSEVERITY\tSTATUS\tSCORE\tCREATED\tRUN\tMONITOR\tTITLE")
	for _, fd := range all {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", fd.ID, fd.Severity, fd.Status, strconv.FormatFloat(fd.Score, 'f', -1, 64),
			time.UnixMilli(fd.CreatedAt).UTC().Format("2006-01-02 15:04:05"), fd.RunID, cmpOr(fd.Monitor, fd.MonitorID), oneLine(fd.Title, 80))
	}
	return tw.Flush()
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// oneLine keeps a table cell on one line and at most n runes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// findingArg parses the flags of a subcommand taking one finding ID.
func findingArg(name, usageLine, description string, args []string, stderr io.Writer, note *string) (*client.Client, string, error) {
	fs := newFlagSet("findings "+name, usageLine, description, stderr)
	var sf serverFlags
	sf.register(fs)
	if note != nil {
		fs.StringVar(note, "note", "", "why (kept in the finding's history)")
	}
	pos, err := parseFlags(fs, args)
	if err != nil {
		return nil, "", err
	}
	if len(pos) != 1 {
		return nil, "", fmt.Errorf("findings %s: want exactly one finding ID", name)
	}
	c, err := sf.client()
	if err != nil {
		return nil, "", fmt.Errorf("findings %s: %w", name, err)
	}
	return c, pos[0], nil
}

func runFindingsShow(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c, id, err := findingArg("show", "findings show ID [--url URL] [--api-key KEY]",
		"Print finding ID as one line of JSON (its citations, context and review history included).", args, stderr, nil)
	if err != nil {
		return err
	}
	f, err := c.GetFinding(ctx, id)
	if err != nil {
		return fmt.Errorf("findings show %s: %w", id, err)
	}
	return writeJSONLine(stdout, f)
}

func runFindingsReview(ctx context.Context, verb, to string, args []string, stdout, stderr io.Writer) error {
	var note string
	desc := map[string]string{
		"accept":  "Accept open finding ID: a known or allowed behaviour (a waiver); it no longer fails evals.",
		"dismiss": "Dismiss open finding ID as a false positive.",
		"reopen":  "Reopen an accepted or dismissed finding ID.",
	}[verb]
	c, id, err := findingArg(verb, "findings "+verb+" ID [--note TEXT] [--url URL] [--api-key KEY]",
		desc+" Prints the finding as one line of JSON.", args, stderr, &note)
	if err != nil {
		return err
	}
	f, err := c.ReviewFinding(ctx, id, to, note)
	var ae *client.APIError
	if errors.As(err, &ae) && ae.StatusCode == 409 {
		return fmt.Errorf("findings %s %s: %s", verb, id, detailAfter(ae.Detail, id+": "))
	}
	if err != nil {
		return fmt.Errorf("findings %s %s: %w", verb, id, err)
	}
	return writeJSONLine(stdout, f)
}

// detailAfter is the part of an API error detail after sep (the whole
// detail when sep is absent).
func detailAfter(detail, sep string) string {
	if _, after, ok := strings.Cut(detail, sep); ok {
		return after
	}
	return detail
}
