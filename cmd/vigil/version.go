package main

import (
	"context"
	"fmt"
	"io"

	"github.com/vigilhq/vigil/internal/buildinfo"
)

// version, when set at build time with -ldflags "-X main.version=v1.2.3",
// replaces the module version of the build information.
var version = "dev"

func init() {
	register(command{name: "version", summary: "print the version of vigil", run: runVersion})
	register(command{name: "help", summary: "list commands, or show a command's help", run: runHelp})
}

func runVersion(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("version", "version", "Print the version of vigil, the commit it was built from and the Go toolchain\n"+
		"that built it, as GET /api/v1/version reports them (\"dev\" and \"commit unknown\"\n"+
		"for a build without version control information).", stderr)
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "vigil %s\n", buildinfo.Read(version))
	return nil
}

func runHelp(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		usage(stdout)
		return nil
	}
	c, ok := commands[args[0]]
	if !ok || args[0] == "help" {
		return fmt.Errorf("help: unknown command %q", args[0])
	}
	// Each command prints its own help for -h.
	return c.run(ctx, append(append([]string{}, args[1:]...), "-h"), stdin, stdout, stdout)
}
