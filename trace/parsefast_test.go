package trace

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// TestPlain8 checks the 8-byte skip of the string scanner against the
// byte-by-byte rule: every byte value at every position, among plain
// bytes and among random ones.
func TestPlain8(t *testing.T) {
	plain := func(c byte) bool { return c >= 0x20 && c < 0x80 && c != '"' && c != '\\' }
	check := func(w [8]byte) {
		want := true
		for _, c := range w {
			want = want && plain(c)
		}
		if got := plain8(binary.LittleEndian.Uint64(w[:])); got != want {
			t.Fatalf("plain8(%q) = %v, want %v", w[:], got, want)
		}
	}
	for _, fill := range []byte{'a', ' ', 0x7f, '!', '#', '[', ']'} {
		for pos := range 8 {
			for c := range 256 {
				var w [8]byte
				for i := range w {
					w[i] = fill
				}
				w[pos] = byte(c)
				check(w)
			}
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 200000 {
		var w [8]byte
		for i := range w {
			if r.IntN(4) == 0 {
				w[i] = byte(r.IntN(256))
			} else {
				w[i] = byte(0x20 + r.IntN(0x60))
			}
		}
		check(w)
	}
}
