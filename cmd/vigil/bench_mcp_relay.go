package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"slices"
	"sync"
)

// vigil bench relay: the hardware floor under M1 and M2. It copies bytes
// both ways and does nothing else (no parsing, no HTTP), so pinned like
// the gateway (`taskset -c 0`, GOMAXPROCS=1) it measures what one more
// process on the other core costs a round trip on the machine: below it
// no proxy can go.

func benchRelay(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	var command []string
	if i := slices.Index(args, "--"); i >= 0 {
		args, command = args[:i], args[i+1:]
	}
	fs := newFlagSet("bench relay", "bench relay --listen ADDR --upstream HOST:PORT | bench relay -- COMMAND [ARG…]",
		"Relay raw bytes, both ways, with io.Copy: over TCP from --listen to --upstream (the floor\n"+
			"under M2), or between this process's stdin/stdout and COMMAND's (the floor under M1).", stderr)
	listen := fs.String("listen", "127.0.0.1:9004", "listen address (TCP)")
	upstream := fs.String("upstream", "", "upstream address, host:port (TCP)")
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case len(command) > 0 && *upstream == "":
		return relayStdio(ctx, command, stdin, stdout, stderr)
	case len(command) == 0 && *upstream != "":
		ln, err := net.Listen("tcp", *listen)
		if err != nil {
			return fmt.Errorf("bench relay: %w", err)
		}
		fmt.Fprintf(stderr, "vigil bench relay: listening on http://%s (raw TCP to %s)\n", ln.Addr(), *upstream)
		return relayTCP(ctx, ln, *upstream)
	default:
		return exitCode(2, "bench relay: give --upstream (TCP) or -- COMMAND (stdio), not both")
	}
}

// relayTCP accepts connections on ln and copies each both ways to a new
// connection to upstream, until ctx ends.
func relayTCP(ctx context.Context, ln net.Listener, upstream string) error {
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("bench relay: accept: %w", err)
		}
		go func() {
			defer c.Close()
			u, err := net.Dial("tcp", upstream)
			if err != nil {
				return
			}
			defer u.Close()
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = io.Copy(u, c)
				if tc, ok := u.(*net.TCPConn); ok {
					_ = tc.CloseWrite()
				}
			}()
			_, _ = io.Copy(c, u)
			c.Close()
			wg.Wait()
		}()
	}
}

// relayStdio starts command and copies stdin to its stdin and its stdout
// to stdout; it returns once the command has exited, with its status.
func relayStdio(ctx context.Context, command []string, stdin io.Reader, stdout, stderr io.Writer) error {
	cmd := exec.CommandContext(ctx, command[0], command[1:]...)
	cmd.Stderr = stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return fmt.Errorf("bench relay: %w", err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("bench relay: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("bench relay: %w", err)
	}
	go func() {
		_, _ = io.Copy(in, stdin)
		in.Close()
	}()
	_, _ = io.Copy(stdout, out)
	err = cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return exitCode(ee.ExitCode(), "")
	}
	if err != nil {
		return fmt.Errorf("bench relay: %w", err)
	}
	return nil
}
