// Command vigil is the single Vigil binary: guardrails, trace store, gateway and proof.
//
// main.go holds only the dispatcher. Each subcommand lives in its own file and
// registers itself in init with register; run is the testable entry point.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"

	"github.com/vigilhq/vigil/client"
)

// command is one vigil subcommand.
type command struct {
	name    string // as typed after "vigil"
	summary string // one line for "vigil help"
	// run executes the subcommand with the arguments after its name. It
	// returns an exitError to choose a non-zero exit code other than 2;
	// any other error is printed as "vigil: <err>" and exits 2.
	run func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error
}

var commands = map[string]command{}

// register adds a subcommand; subcommand files call it from init.
func register(c command) {
	if _, dup := commands[c.name]; dup {
		panic("vigil: duplicate command " + c.name)
	}
	commands[c.name] = c
}

// exitError carries an exit code. A nil-message exitError exits silently.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// exitCode returns an error that makes vigil exit with code, printing msg
// (if non-empty) on stderr.
func exitCode(code int, msg string) error { return &exitError{code: code, msg: msg} }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes the vigil command line args (without the program name) and
// returns the process exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	name := args[0]
	switch name {
	case "-h", "--help", "-help":
		name = "help"
	case "-v", "--version", "-version":
		name = "version"
	}
	c, ok := commands[name]
	if !ok {
		fmt.Fprintf(stderr, "vigil: unknown command %q\n", name)
		if s := suggest(name); s != "" {
			fmt.Fprintf(stderr, "Did you mean %q?\n", s)
		}
		fmt.Fprintln(stderr, "Run 'vigil help' for the list of commands.")
		return 2
	}
	err := c.run(ctx, args[1:], stdin, stdout, stderr)
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.msg != "" {
			fmt.Fprintf(stderr, "vigil: %s\n", ee.msg)
		}
		return ee.code
	}
	if errors.Is(err, errHelpShown) {
		return 0
	}
	fmt.Fprintf(stderr, "vigil: %v\n", err)
	if hint := errorHint(err); hint != "" {
		fmt.Fprintln(stderr, hint)
	}
	return 2
}

// errorHint returns what a user can do about err, or "": a server that
// refused the API key (401) names where the key comes from and how to
// make one.
func errorHint(err error) string {
	var ae *client.APIError
	if errors.As(err, &ae) && ae.StatusCode == http.StatusUnauthorized {
		return "The server did not accept the API key: pass --api-key or set VIGIL_API_KEY to a key of that server.\n" +
			"Lost it? 'vigil keys create' (with the server's --data-dir or --db) makes a new admin key."
	}
	return ""
}

// usage prints the command list.
func usage(w io.Writer) {
	fmt.Fprintln(w, "Vigil makes AI agents observable, guardrailed and provable.")
	fmt.Fprintln(w, "\nUsage: vigil <command> [flags] [arguments]\n\nCommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nRun 'vigil <command> -h' for a command's flags.")
}

// suggest returns the registered command closest to name, or "".
func suggest(name string) string {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	return closest(name, names)
}

// closest returns the candidate nearest to s within edit distance 2, or "".
func closest(s string, candidates []string) string {
	best, bestD := "", 3
	for _, c := range candidates {
		if d := editDistance(s, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	ra, rb := []rune(strings.ToLower(a)), []rune(strings.ToLower(b))
	prev := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur := make([]int, len(rb)+1)
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(rb)]
}
