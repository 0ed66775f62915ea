package ledger

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// FuzzVerifyStream checks the streaming verifier against the plain path
// (Parse the whole input, then VerifyChain): the same inputs are rejected
// and the same results come out, whatever the reads look like.
func FuzzVerifyStream(f *testing.F) {
	for _, c := range verifyCases(f) {
		f.Add([]byte(c.chain))
	}
	f.Add([]byte("\xef\xbb\xbf[]"))
	f.Add([]byte(`{"receipts":[],"x":[{"y":"]"}]}`))
	f.Add([]byte(`[] `))
	f.Fuzz(func(t *testing.T, in []byte) {
		res, _, err := VerifyStream(iotest.OneByteReader(bytes.NewReader(in)), VerifyOptions{Workers: 2})
		want, wantErr := sliceVerify(verifyCase{chain: string(in)})
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("stream err %v, plain err %v", err, wantErr)
		}
		if err != nil {
			if !errors.Is(err, ErrBadInput) {
				t.Fatalf("error %v does not wrap ErrBadInput", err)
			}
			return
		}
		if asJSON(res) != asJSON(want) {
			t.Fatalf("stream %s, plain %s", asJSON(res), asJSON(want))
		}
	})
}

func TestVerifyStreamReads(t *testing.T) {
	b, _ := specChain(t)
	pub := PublicOf(mustKey(t, specSeed))
	readers := map[string]io.Reader{
		"one_byte":   iotest.OneByteReader(bytes.NewReader(b)),
		"half":       iotest.HalfReader(bytes.NewReader(b)),
		"data_err":   iotest.DataErrReader(bytes.NewReader(b)),
		"whitespace": io.MultiReader(strings.NewReader(strings.Repeat(" ", 300<<10)), bytes.NewReader(b)),
	}
	for name, r := range readers {
		res, info, err := VerifyStream(r, VerifyOptions{PublicKey: pub})
		if err != nil || !res.Valid || info.Receipts != 3 {
			t.Errorf("%s: %+v %+v %v", name, res, info, err)
		}
	}
	boom := errors.New("disk on fire")
	_, _, err := VerifyStream(io.MultiReader(bytes.NewReader(b[:500]), iotest.ErrReader(boom)), VerifyOptions{})
	if !errors.Is(err, boom) || !errors.Is(err, ErrBadInput) {
		t.Fatalf("read error: %v", err)
	}
}

// TestVerifyStreamLarge streams a chain bigger than the read buffer with
// a receipt larger than it, and a broken receipt deep inside.
func TestVerifyStreamLarge(t *testing.T) {
	key := mustKey(t, specSeed)
	var buf bytes.Buffer
	buf.WriteByte('[')
	var tail Tail
	for i := range 2000 {
		a := benchAction(i)
		if i == 1000 {
			a.Input = strings.Repeat("x", 600<<10) // one receipt bigger than the buffer
		}
		r, err := Append(tail, a, key)
		if err != nil {
			t.Fatal(err)
		}
		raw := r.Raw
		if i == 1500 {
			raw = bytes.Replace(raw, []byte("A-1500"), []byte("A-15OO"), 1)
		}
		if i > 0 {
			buf.WriteString(",\n")
		}
		buf.Write(raw)
		tail = r.Tail()
	}
	buf.WriteByte(']')
	res, info, err := VerifyStream(&buf, VerifyOptions{PublicKey: PublicOf(key)})
	if err != nil || info.Receipts != 2000 || asJSON(res.Errors) != `[{"index":1500,"reason":"hash_mismatch"}]` {
		t.Fatalf("%v %+v %s", err, info, asJSON(res.Errors))
	}
}
