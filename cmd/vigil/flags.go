package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
)

// errHelpShown is returned after -h printed a command's help; run exits 0.
var errHelpShown = errors.New("help shown")

// newFlagSet returns a FlagSet for a subcommand whose -h output is
// "Usage: vigil <usage>", the description, then the flags.
func newFlagSet(name, usageLine, description string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: vigil %s\n\n%s\n", usageLine, description)
		hasFlags := false
		fs.VisitAll(func(*flag.Flag) { hasFlags = true })
		if hasFlags {
			fmt.Fprintln(stderr, "\nFlags:")
			fs.PrintDefaults()
		}
	}
	return fs
}

// parseFlags parses args allowing flags before and after positional
// arguments ("vigil trace get FILE --x" and "vigil trace get --x FILE").
// It returns the positional arguments. -h yields errHelpShown; any other
// flag error is a usage error (exit 2) already printed by the FlagSet.
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, errHelpShown
			}
			return nil, exitCode(2, "")
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}
