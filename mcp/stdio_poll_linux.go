package mcp

import (
	"io"
	"os"
	"syscall"
)

// pollableReader returns the wrapper's stdin as a File that the
// runtime's network poller watches, when it is a pipe or a socket (an
// MCP client's), and a function that undoes it. Every pipe the wrapper
// reads then parks its goroutine in the poller instead of a thread in
// read(2): with GOMAXPROCS=1 (the wrapper pinned to one core,
// spec/gateway.md §11) a thread blocked in a system call has its P taken
// back by the runtime's monitor, which then polls every 20 µs for as long
// as the wait lasts and makes the woken thread wait for a P again; with
// no thread in a system call the monitor sleeps and one thread waits in
// epoll for both directions. Other readers (a terminal, a file, a test's
// io.Pipe) are returned as they are.
func pollableReader(r io.Reader) (io.Reader, func()) {
	f, ok := r.(*os.File)
	if !ok {
		return r, func() {}
	}
	fi, err := f.Stat()
	if err != nil || fi.Mode()&(os.ModeNamedPipe|os.ModeSocket) == 0 {
		return r, func() {}
	}
	sc, err := f.SyscallConn()
	if err != nil {
		return r, func() {}
	}
	fd, flags := -1, 0
	if cerr := sc.Control(func(x uintptr) {
		fl, _, errno := syscall.Syscall(syscall.SYS_FCNTL, x, syscall.F_GETFL, 0)
		if errno != 0 {
			return
		}
		flags = int(fl)
		if d, derr := syscall.Dup(int(x)); derr == nil {
			fd = d
		}
	}); cerr != nil || fd < 0 {
		return r, func() {}
	}
	// O_NONBLOCK belongs to the open file, shared with the original
	// descriptor: restored when the wrapper is done.
	if err := syscall.SetNonblock(fd, true); err != nil {
		syscall.Close(fd)
		return r, func() {}
	}
	nf := os.NewFile(uintptr(fd), f.Name())
	return nf, func() {
		_ = nf.Close()
		if flags&syscall.O_NONBLOCK == 0 {
			_ = sc.Control(func(x uintptr) { _ = syscall.SetNonblock(int(x), false) })
		}
	}
}
