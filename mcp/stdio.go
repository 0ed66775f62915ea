package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"
)

// StdioConfig configures RunStdio.
type StdioConfig struct {
	// Command is the server's argv, started without a shell.
	Command []string
	// Session configures guardrails, pinning and recording.
	Session Options
	// Stdin, Stdout and Stderr are the wrapper's (the MCP client's pipe
	// and the log); nil means the process's own.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Env is the child's environment; nil means the wrapper's minus
	// VIGIL_API_KEY and INVARIANT_API_KEY.
	Env []string
	// Grace is the wait after closing the child's stdin before SIGTERM,
	// and again before SIGKILL (default 5 s).
	Grace time.Duration
	// NoSignals leaves SIGINT and SIGTERM alone instead of forwarding
	// them to the child (tests).
	NoSignals bool
}

// ChildEnv is env without the variables that carry Vigil keys.
func ChildEnv(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if strings.HasPrefix(kv, "VIGIL_API_KEY=") || strings.HasPrefix(kv, "INVARIANT_API_KEY=") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// lockedWriter serialises whole lines written by both directions. Each
// line goes out in one write, its newline included, so the reader wakes
// up once per message.
type lockedWriter struct {
	mu  sync.Mutex
	w   io.Writer
	buf []byte
}

// maxKeptLine is the largest line buffer a lockedWriter keeps for reuse.
const maxKeptLine = 1 << 20

func (l *lockedWriter) writeLine(b []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return writeLineBuf(l.w, &l.buf, b)
}

// writeLineBuf writes b and a newline to w in one write, through the
// reusable buffer *buf.
func writeLineBuf(w io.Writer, buf *[]byte, b []byte) error {
	line := append(append((*buf)[:0], b...), '\n')
	_, err := w.Write(line)
	if cap(line) <= maxKeptLine {
		*buf = line[:0]
	} else {
		*buf = nil
	}
	return err
}

// blockingIO puts a pipe of the wrapper in blocking mode (os.File.Fd
// does). It is used when the wrapper's stdin cannot be polled (a
// terminal): a goroutine then sleeps in read(2) for it, and mixing that
// with the runtime's network poller at GOMAXPROCS=1 makes each message
// wait for the scheduler's monitor to hand the one P back (measured:
// +270 µs added per tools/call round trip, against +130 µs with every
// pipe blocking). With stdin a pipe or socket every read goes through the
// poller instead (pollableReader).
func blockingIO(x any) {
	if f, ok := x.(*os.File); ok {
		_ = f.Fd()
	}
}

// RunStdio runs the stdio wrapper of spec/gateway.md §9.3: it starts the
// server, relays newline-delimited JSON-RPC in both directions through a
// Session (guardrails, pinning, recording), and returns the server's
// exit status once it has exited and the records are flushed (at most
// 5 s). An error is returned only when the server cannot be started.
func RunStdio(ctx context.Context, cfg StdioConfig) (int, error) {
	if len(cfg.Command) == 0 {
		return 2, errors.New("mcp run: no server command given (put it after --)")
	}
	stdin, stdout, stderr := cfg.Stdin, cfg.Stdout, cfg.Stderr
	if stdin == nil {
		stdin = os.Stdin
	}
	if stdout == nil {
		stdout = os.Stdout
	}
	if stderr == nil {
		stderr = os.Stderr
	}
	grace := cfg.Grace
	if grace <= 0 {
		grace = 5 * time.Second
	}
	log := cfg.Session.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
		cfg.Session.Logger = log
	}
	if cfg.Session.Transport == "" {
		cfg.Session.Transport = "stdio"
	}
	if cfg.Session.Upstream == "" {
		cfg.Session.Upstream = baseName(cfg.Command[0])
	}
	cmd := exec.Command(cfg.Command[0], cfg.Command[1:]...)
	cmd.Env = cfg.Env
	if cmd.Env == nil {
		cmd.Env = ChildEnv(os.Environ())
	}
	cmd.Stderr = stderr
	childIn, err := cmd.StdinPipe()
	if err != nil {
		return 1, fmt.Errorf("mcp run: %w", err)
	}
	childOut, err := cmd.StdoutPipe()
	if err != nil {
		return 1, fmt.Errorf("mcp run: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return 127, fmt.Errorf("mcp run: start %s: %w", cfg.Command[0], err)
	}
	// Both directions wait in the runtime's poller (see pollableReader)
	// unless stdin is a file the poller cannot watch (a terminal): a
	// thread then waits in read(2) for it, and for childOut too (see
	// blockingIO).
	pstdin, restore := pollableReader(stdin)
	defer restore()
	if f, ok := stdin.(*os.File); ok && pstdin == stdin {
		blockingIO(f)
		blockingIO(childOut)
	}
	stdin = pstdin
	sess := NewSession(cfg.Session)
	out := &lockedWriter{w: stdout}
	exited := make(chan struct{})

	if !cfg.NoSignals {
		sigs := make(chan os.Signal, 2)
		signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
		defer signal.Stop(sigs)
		go func() {
			for {
				select {
				case sig := <-sigs:
					_ = cmd.Process.Signal(sig)
				case <-exited:
					return
				}
			}
		}()
	}

	// Client → server.
	go func() {
		rd := bufio.NewReaderSize(stdin, 64<<10)
		var wbuf []byte
		for {
			line, tooLong, err := readLine(rd, MaxMessageBytes)
			if tooLong {
				log.Warn("mcp: message from the client over the size limit", "limit", MaxMessageBytes)
				_ = out.writeLine(errorResponse(nil, codeInvalidRequest, fmt.Sprintf("Vigil: message over the %d-byte limit", MaxMessageBytes), nil))
			} else if len(line) > 0 {
				fwd, reply := sess.FromClient(ctx, line)
				if reply != nil {
					_ = out.writeLine(reply)
				}
				if fwd != nil {
					if werr := writeLineBuf(childIn, &wbuf, fwd); werr != nil {
						log.Warn("mcp: write to the server failed", "err", werr)
					}
				}
			}
			if err != nil {
				break
			}
		}
		// EOF from the client: close the server's stdin, then escalate.
		_ = childIn.Close()
		select {
		case <-exited:
			return
		case <-time.After(grace):
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
			return
		case <-time.After(grace):
		}
		_ = cmd.Process.Kill()
	}()

	// Server → client.
	rd := bufio.NewReaderSize(childOut, 64<<10)
	for {
		line, tooLong, err := readLine(rd, MaxMessageBytes)
		if tooLong {
			log.Warn("mcp: message from the server over the size limit; dropped", "limit", MaxMessageBytes)
		} else if len(line) > 0 {
			if !looksJSON(line) {
				// Not JSON-RPC: logged and passed to stderr, so that the
				// client's protocol stream stays valid.
				log.Warn("mcp: non-JSON line from the server", "line", truncate(string(line), 200))
				_, _ = fmt.Fprintf(stderr, "%s\n", line)
			} else {
				_ = out.writeLine(sess.FromServer(ctx, line))
			}
		}
		if err != nil {
			break
		}
	}
	werr := cmd.Wait()
	close(exited)
	code := exitCode(cmd.ProcessState, werr)
	for _, r := range sess.Abort(fmt.Sprintf("Vigil: the MCP server exited (status %d) before answering", code)) {
		_ = out.writeLine(r)
	}
	cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	sess.Close(cctx)
	cancel()
	return code, nil
}

// readLine reads one line without its "\n" (and a trailing "\r"). A line
// over max bytes is consumed and reported tooLong. err is io.EOF (or the
// read error) at the end; the last line may come with it.
func readLine(rd *bufio.Reader, max int) (line []byte, tooLong bool, err error) {
	var buf []byte
	for {
		chunk, e := rd.ReadSlice('\n')
		if !tooLong {
			if len(buf)+len(chunk) > max+2 {
				tooLong, buf = true, nil
			} else {
				buf = append(buf, chunk...)
			}
		}
		if e == bufio.ErrBufferFull {
			continue
		}
		if tooLong {
			return nil, true, e
		}
		buf = bytes.TrimSuffix(buf, []byte{'\n'})
		buf = bytes.TrimSuffix(buf, []byte{'\r'})
		return buf, false, e
	}
}

func looksJSON(b []byte) bool {
	t := bytes.TrimSpace(b)
	return len(t) > 0 && (t[0] == '{' || t[0] == '[') && json.Valid(t)
}

func exitCode(ps *os.ProcessState, err error) int {
	if ps == nil {
		if err != nil {
			return 1
		}
		return 0
	}
	if c := ps.ExitCode(); c >= 0 {
		return c
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return 1
}

func baseName(cmd string) string {
	if i := strings.LastIndexAny(cmd, `/\`); i >= 0 {
		return cmd[i+1:]
	}
	return cmd
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
