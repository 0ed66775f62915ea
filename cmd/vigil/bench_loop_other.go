//go:build !linux

package main

import (
	"io"
	"net"
)

// newRawSocket: raw system calls are used on Linux only.
func newRawSocket(net.Conn) io.ReadWriter { return nil }

// newSleeper: time.Sleep elsewhere.
func newSleeper() sleeper { return nil }
