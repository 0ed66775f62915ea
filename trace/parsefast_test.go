package trace

import (
	"encoding/binary"
	"errors"
	"math/bits"
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
		first := 8
		for i, c := range w {
			if !plain(c) {
				first = i
				break
			}
		}
		if got := bits.TrailingZeros64(special8(binary.LittleEndian.Uint64(w[:]))) >> 3; got != first {
			t.Fatalf("special8(%q) points at byte %d, want %d", w[:], got, first)
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

// TestParseSlabs: values scanned through the scratch stacks come out
// whole and independent (appending to one never writes into another),
// and the path of an invalid string counts only its own array's elements
// when a nested array before it was complete and one around it failed.
func TestParseSlabs(t *testing.T) {
	doc := `{"a": [1, [2, 3], {"b": [4, {"c": 5, "d": [6]}], "e": 7}], "f": {}, "g": [], "h": [8, 9, 10, 11, 12]}`
	v, err := ParseValue([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(AppendValue(nil, v)); got != `{"a":[1,[2,3],{"b":[4,{"c":5,"d":[6]}],"e":7}],"f":{},"g":[],"h":[8,9,10,11,12]}` {
		t.Fatalf("round trip: %s", got)
	}
	o := v.(*Object)
	a, _ := o.Get("a")
	inner := a.([]Value)[1].([]Value)
	_ = append(inner, "x") // must not overwrite the element after it
	o.Members[0].Value.([]Value)[2].(*Object).Set("z", true)
	if got := string(AppendValue(nil, v)); got != `{"a":[1,[2,3],{"b":[4,{"c":5,"d":[6]}],"e":7,"z":true}],"f":{},"g":[],"h":[8,9,10,11,12]}` {
		t.Fatalf("after appends: %s", got)
	}
	_, err = ParseValue([]byte("[[1, 2], [3, [4, \"\xff\"]]]"))
	var se *SyntaxError
	if !errors.As(err, &se) || se.Path != "$[1][1][1]" {
		t.Fatalf("nested invalid UTF-8: %v", err)
	}
}
