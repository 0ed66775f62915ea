//go:build unix

package mcp_test

import (
	"context"
	"io"
	"os"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/vigilhq/vigil/mcp"
)

// TestStdioForwardsSIGTERM: a SIGTERM to the wrapper reaches the server,
// and the wrapper exits with the server's status (128+15 for a Go
// server the signal ends).
func TestStdioForwardsSIGTERM(t *testing.T) {
	exe, _ := os.Executable()
	cr, cw := io.Pipe()
	wr, ww := io.Pipe()
	done := make(chan int, 1)
	go func() {
		code, _ := mcp.RunStdio(context.Background(), mcp.StdioConfig{Command: []string{exe, "-test.run=^$"}, Stdin: cr, Stdout: ww,
			Stderr: io.Discard, Env: serverEnv(), Grace: 10 * time.Second})
		ww.Close()
		done <- code
	}()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "sig", Version: "1"}, nil).Connect(context.Background(), &sdk.IOTransport{Reader: wr, Writer: cw}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-done:
		if code != 128+int(syscall.SIGTERM) {
			t.Errorf("exit status %d, want %d", code, 128+int(syscall.SIGTERM))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the wrapper did not exit on SIGTERM")
	}
}
