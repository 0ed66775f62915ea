//go:build linux

package main

import (
	"io"
	"net"
	"os"
	"syscall"
	"time"
	"unsafe"
)

// rawSocket reads and writes a connection's non-blocking socket with
// raw system calls (waiting in the runtime's poller on EAGAIN). A plain
// net.Conn call tells the scheduler it enters a system call; a loopback
// TCP write runs the receiving side's network stack too and can last
// past sysmon's 20 µs tick, and then sysmon hands the only P to another
// thread and keeps polling every 20 µs: on the shared core that was a
// third of the load generator's CPU. These calls never block, so the
// goroutine may keep its P through them.
type rawSocket struct {
	c  net.Conn
	rc syscall.RawConn
}

// newRawSocket wraps c, or returns nil when c has no raw file
// descriptor.
func newRawSocket(c net.Conn) io.ReadWriter {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return &rawSocket{c: c, rc: rc}
}

func (s *rawSocket) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var n int
	var errno syscall.Errno
	err := s.rc.Read(func(fd uintptr) bool {
		r, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
		if e == syscall.EAGAIN {
			return false
		}
		if e == syscall.EINTR {
			return false // the poller reports it ready again
		}
		n, errno = int(r), e
		return true
	})
	switch {
	case err != nil:
		return 0, err
	case errno != 0:
		return 0, errno
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

func (s *rawSocket) Write(p []byte) (int, error) {
	off := 0
	var errno syscall.Errno
	err := s.rc.Write(func(fd uintptr) bool {
		for off < len(p) {
			r, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&p[off])), uintptr(len(p)-off))
			if e == syscall.EAGAIN {
				return false
			}
			if e == syscall.EINTR {
				continue
			}
			if e != 0 {
				errno = e
				return true
			}
			off += int(r)
		}
		return true
	})
	if err == nil && errno != 0 {
		err = errno
	}
	return off, err
}

// timerfdSleeper sleeps on a timerfd watched by the runtime's poller.
// time.Sleep of less than a millisecond on an idle GOMAXPROCS=1 process
// lasts a millisecond or more (the poller's epoll timeout is in whole
// milliseconds), so the open loop would send up to ~1 ms late; a timerfd
// wakes the poller at the set time.
type timerfdSleeper struct {
	f  *os.File
	fd uintptr
}

// newSleeper returns a precise sleeper, or nil (time.Sleep is used).
func newSleeper() sleeper {
	const clockMonotonic, tfdNonblock, tfdCloexec = 1, syscall.O_NONBLOCK, syscall.O_CLOEXEC
	fd, _, e := syscall.RawSyscall(syscall.SYS_TIMERFD_CREATE, clockMonotonic, tfdNonblock|tfdCloexec, 0)
	if e != 0 {
		return nil
	}
	f := os.NewFile(fd, "timerfd")
	if f == nil {
		return nil
	}
	return &timerfdSleeper{f: f, fd: fd}
}

func (s *timerfdSleeper) sleep(d time.Duration) {
	if d <= 0 {
		return
	}
	spec := [2]syscall.Timespec{{}, syscall.NsecToTimespec(int64(d))} // interval 0: once
	if _, _, e := syscall.RawSyscall6(syscall.SYS_TIMERFD_SETTIME, s.fd, 0, uintptr(unsafe.Pointer(&spec)), 0, 0, 0); e != 0 {
		time.Sleep(d)
		return
	}
	var buf [8]byte
	if _, err := s.f.Read(buf[:]); err != nil {
		time.Sleep(d)
	}
}

func (s *timerfdSleeper) close() { s.f.Close() }
