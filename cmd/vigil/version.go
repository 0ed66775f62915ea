package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3".
var version = "dev"

func init() {
	register(command{name: "version", summary: "print the version of vigil", run: runVersion})
	register(command{name: "help", summary: "list commands, or show a command's help", run: runHelp})
}

func runVersion(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("version", "version", "Print the version of vigil and the Go toolchain it was built with.", stderr)
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	v := version
	if bi, ok := debug.ReadBuildInfo(); ok && v == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		v = bi.Main.Version
	}
	fmt.Fprintf(stdout, "vigil %s (%s, %s/%s)\n", v, runtime.Version(), runtime.GOOS, runtime.GOARCH)
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
