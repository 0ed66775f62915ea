package mcp_test

import (
	"context"
	"os"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/vigilhq/vigil/mcp"
)

// nonblocking reports whether f's open file has O_NONBLOCK.
func nonblocking(t *testing.T, f *os.File) bool {
	t.Helper()
	sc, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var fl uintptr
	var errno syscall.Errno
	if err := sc.Control(func(fd uintptr) { fl, _, errno = syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_GETFL, 0) }); err != nil || errno != 0 {
		t.Fatal(err, errno)
	}
	return fl&syscall.O_NONBLOCK != 0
}

// With real pipes as stdin and stdout (the wrapper's stdin then waits in
// the runtime's poller), calls go through, the wrapper returns when the
// server exits even though the client keeps its end open, and stdin is
// left in the blocking mode it had.
func TestStdioOSPipes(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cr, cw, err := os.Pipe() // client → wrapper
	if err != nil {
		t.Fatal(err)
	}
	wr, ww, err := os.Pipe() // wrapper → client
	if err != nil {
		t.Fatal(err)
	}
	defer cw.Close()
	defer wr.Close()
	_ = cr.Fd() // blocking, as a process's inherited stdin is
	code := make(chan int, 1)
	go func() {
		c, err := mcp.RunStdio(context.Background(), mcp.StdioConfig{Command: []string{exe, "-test.run=^$"}, Stdin: cr, Stdout: ww,
			Stderr: &syncBuffer{}, Env: serverEnv(), Grace: time.Second, NoSignals: true})
		if err != nil {
			t.Errorf("RunStdio: %v", err)
		}
		ww.Close()
		code <- c
	}()
	c := sdk.NewClient(&sdk.Implementation{Name: "test-client", Version: "0.1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &sdk.IOTransport{Reader: wr, Writer: cw}, nil)
	if err != nil {
		t.Fatalf("connect through the wrapper: %v", err)
	}
	for i := range 20 {
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
		if err != nil || res.IsError {
			t.Fatalf("call %d: %v %+v", i, err, res)
		}
	}
	if !nonblocking(t, cr) {
		t.Error("the wrapper's stdin is not polled while it runs")
	}
	// The server exits; the client's end of stdin stays open.
	_, _ = cs.CallTool(ctx, &sdk.CallToolParams{Name: "crash"})
	select {
	case got := <-code:
		if got != 3 {
			t.Errorf("exit status %d, want the server's 3", got)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the wrapper did not return after the server exited")
	}
	if nonblocking(t, cr) {
		t.Error("the wrapper's stdin was left in non-blocking mode")
	}
}
