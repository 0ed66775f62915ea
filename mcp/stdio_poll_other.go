//go:build !linux

package mcp

import "io"

// pollableReader returns r as it is (see the Linux version).
func pollableReader(r io.Reader) (io.Reader, func()) { return r, func() {} }
