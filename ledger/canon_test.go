package ledger

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/tools/txtar"
)

var update = flag.Bool("update", false, "rewrite the golden .want sections in testdata/vectors")

// canonCase is one case of testdata/vectors/canon.txtar.
type canonCase struct {
	name  string
	input []byte
	want  []byte // the `receipts canon` output: canonical line, hash line
	err   string // for error cases: a substring of the error
}

func loadCanonVectors(t testing.TB) (*txtar.Archive, []canonCase) {
	t.Helper()
	path := filepath.Join("testdata", "vectors", "canon.txtar")
	ar, err := txtar.ParseFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cases []canonCase
	idx := map[string]int{}
	for _, f := range ar.Files {
		name, ext, _ := strings.Cut(f.Name, ".")
		i, ok := idx[name]
		if !ok {
			i = len(cases)
			idx[name] = i
			cases = append(cases, canonCase{name: name})
		}
		switch ext {
		case "json":
			cases[i].input = f.Data
		case "want":
			cases[i].want = f.Data
		case "err":
			cases[i].err = strings.TrimSpace(string(f.Data))
		default:
			t.Fatalf("%s: unknown section %q", path, f.Name)
		}
	}
	return ar, cases
}

// canonOutput is what `vigil receipts canon` prints for a canonical form.
func canonOutput(c []byte) []byte {
	return []byte(string(c) + "\n" + HashBytes(c) + "\n")
}

func TestCanonVectors(t *testing.T) {
	ar, cases := loadCanonVectors(t)
	got := map[string][]byte{}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := Canonicalize(c.input)
			if c.err != "" {
				if err == nil {
					t.Fatalf("Canonicalize(%q) = %s, want error containing %q", c.input, out, c.err)
				}
				if !strings.Contains(err.Error(), c.err) || !errors.Is(err, ErrSyntax) {
					t.Fatalf("Canonicalize(%q) error = %v, want ErrSyntax containing %q", c.input, err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Canonicalize(%q): %v", c.input, err)
			}
			got[c.name] = canonOutput(out)
			if bytes.ContainsAny(out, "\n\r") {
				t.Errorf("canonical form contains LF or CR: %q", out)
			}
			if !*update && !bytes.Equal(got[c.name], c.want) {
				t.Errorf("Canonicalize(%q)\n got %s\nwant %s", c.input, got[c.name], c.want)
			}
			// Idempotent: the canonical form is its own canonical form.
			again, err := Canonicalize(out)
			if err != nil || !bytes.Equal(again, out) {
				t.Errorf("canonical form is not a fixed point: %q -> %q, %v", out, again, err)
			}
		})
	}
	if *update {
		for i, f := range ar.Files {
			if name, ok := strings.CutSuffix(f.Name, ".want"); ok {
				ar.Files[i].Data = got[name]
			}
		}
		if err := os.WriteFile(filepath.Join("testdata", "vectors", "canon.txtar"), txtar.Format(ar), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestSpecExampleHash(t *testing.T) {
	// §2.6 states the hash; the vector file must agree with the spec text.
	in := []byte(`{"when": 1.50, "big": 12345678901234567890, "tiny": 0.00000025, "neg": -0, "sci": 2e21,
 "note": "Tom & Jerry <tj@example.com>\ttab", "ｂ": "fullwidth", "🔑": "astral", "Z": null, "list": [true, {"y": 1, "x": []}]}`)
	const want = `{"Z":null,"big":12345678901234567000,"list":[true,{"x":[],"y":1}],"neg":0,"note":"Tom & Jerry <tj@example.com>\ttab","sci":2e+21,"tiny":2.5e-7,"when":1.5,"🔑":"astral","ｂ":"fullwidth"}`
	out, err := Canonicalize(in)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != want {
		t.Fatalf("got  %s\nwant %s", out, want)
	}
	if h := HashBytes(out); h != "4c8fdf6b9bf97bfaa9ee745a1fa14823839ff6ab2ff73e7b211dcca5734720b3" {
		t.Fatalf("hash %s", h)
	}
	v, _ := Parse(in)
	if h, err := Hash(v); err != nil || h != "4c8fdf6b9bf97bfaa9ee745a1fa14823839ff6ab2ff73e7b211dcca5734720b3" {
		t.Fatalf("Hash = %s, %v", h, err)
	}
}

// Variables, so that 0.1+0.2 is float64 arithmetic, not exact constant math.
var pointOne, pointTwo = 0.1, 0.2

func TestFormatNumber(t *testing.T) {
	tests := []struct {
		in   float64
		want string
	}{
		{0, "0"}, {math.Copysign(0, -1), "0"}, {1, "1"}, {-1, "-1"},
		{100, "100"}, {1e20, "100000000000000000000"}, {1e21, "1e+21"}, {2e21, "2e+21"},
		{1.5, "1.5"}, {42.5, "42.5"}, {-42.5, "-42.5"},
		{0.25, "0.25"}, {0.000025, "0.000025"}, {0.000001, "0.000001"}, {1e-7, "1e-7"},
		{2.5e-7, "2.5e-7"}, {1.2e-8, "1.2e-8"}, {-1.2e-8, "-1.2e-8"},
		{12345678901234567890, "12345678901234567000"}, {9007199254740993, "9007199254740992"},
		{1 << 53, "9007199254740992"}, {1<<53 + 2, "9007199254740994"},
		{123456789012345680000, "123456789012345680000"},
		{pointOne + pointTwo, "0.30000000000000004"}, {1.7976931348623157e308, "1.7976931348623157e+308"},
		{5e-324, "5e-324"}, {123e-20, "1.23e-18"}, {1e100, "1e+100"},
		{math.NaN(), "null"}, {math.Inf(1), "null"}, {math.Inf(-1), "null"},
		{1767225600000, "1767225600000"}, {1767225600000.5, "1767225600000.5"},
	}
	for _, tt := range tests {
		if got := FormatNumber(tt.in); got != tt.want {
			t.Errorf("FormatNumber(%v) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

func TestParseGoOnlyCases(t *testing.T) {
	deep := strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth)
	tooDeep := strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1)
	tests := []struct {
		name    string
		in      []byte
		want    string // canonical output; "" means an error is expected
		errPart string
	}{
		{"invalid_utf8_in_string", []byte("[\"a\xffb\"]"), "", "invalid UTF-8"},
		{"overlong_utf8", []byte("[\"\xc0\xaf\"]"), "", "invalid UTF-8"},
		{"raw_surrogate_bytes", []byte("[\"\xed\xa0\x80\"]"), "", "invalid UTF-8"},
		{"invalid_utf8_after_escape", []byte("[\"\\n\xfe\"]"), "", "invalid UTF-8"},
		{"two_boms", []byte("\xef\xbb\xbf\xef\xbb\xbf1"), "", "want a value"},
		{"bom_only_once", []byte("\xef\xbb\xbf[1]"), "[1]", ""},
		{"max_depth", []byte(deep), deep, ""},
		{"too_deep", []byte(tooDeep), "", "nesting deeper"},
		{"too_deep_objects", []byte(strings.Repeat(`{"a":`, MaxDepth+1) + "1" + strings.Repeat("}", MaxDepth+1)), "", "nesting deeper"},
		{"nul_escape", []byte(`"\u0000"`), `"\u0000"`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := Canonicalize(tt.in)
			if tt.want == "" {
				if err == nil || !strings.Contains(err.Error(), tt.errPart) {
					t.Fatalf("got %q, %v; want error containing %q", out, err, tt.errPart)
				}
				var se *SyntaxError
				if !errors.As(err, &se) || se.Line < 1 || se.Col < 1 {
					t.Fatalf("error %v is not a *SyntaxError with a position", err)
				}
				return
			}
			if err != nil || string(out) != tt.want {
				t.Fatalf("got %.80q, %v; want %.80q", out, err, tt.want)
			}
		})
	}
}

func TestSyntaxErrorPosition(t *testing.T) {
	_, err := Parse([]byte("{\n  \"a\": 1,\n  \"b\": tru\n}"))
	var se *SyntaxError
	if !errors.As(err, &se) {
		t.Fatalf("err = %v", err)
	}
	if se.Line != 3 || se.Col != 8 {
		t.Fatalf("position %d:%d, want 3:8 (%v)", se.Line, se.Col, err)
	}
}

func TestMarshalGoValues(t *testing.T) {
	tests := []struct {
		name string
		in   any
		want string
	}{
		{"ints", []any{int(1), int64(-2), int32(3), uint64(1 << 60), uint32(5), float32(0.5)}, `[1,-2,3,1152921504606847000,5,0.5]`},
		{"raw_message", json.RawMessage(`{"b":1,"a":"\ud800"}`), `{"a":"\ud800","b":1}`},
		{"string_slices", map[string]any{"s": []string{"x", "<"}, "m": map[string]string{"k": "v"}}, `{"m":{"k":"v"},"s":["x","<"]}`},
		{"nan_inf", []any{math.NaN(), math.Inf(-1)}, `[null,null]`},
		{"wtf8_string", "\xed\xa0\x80", `"\ud800"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Marshal(tt.in)
			if err != nil || string(got) != tt.want {
				t.Fatalf("Marshal = %s, %v; want %s", got, err, tt.want)
			}
		})
	}
	for _, bad := range []any{"\xff", struct{}{}, map[string]any{"\xfe": 1}, []any{make(chan int)}} {
		if _, err := Marshal(bad); !errors.Is(err, ErrUnsupported) {
			t.Errorf("Marshal(%#v) error = %v, want ErrUnsupported", bad, err)
		}
	}
}

// utf16Order is the reference key order: full UTF-16 conversion.
func utf16Order(a, b string) int {
	return compareUnits(utf16Units(a), utf16Units(b))
}

func TestCompareUTF16(t *testing.T) {
	keys := []string{"", "a", "ab", "b", "ｂ", "🔑", "😀", "\ue000", "\uffff", "\u00e9", "\u07ff",
		"\xed\xa0\x80", "\xed\xb0\x80", "\xed\xa0\xbd", "\xed\xa0\xbdx", "🔑x", "a🔑", "aｂ", "10", "9", "\x7f", "\u0080"}
	for _, a := range keys {
		for _, b := range keys {
			got, want := sign(compareUTF16(a, b)), sign(utf16Order(a, b))
			if got != want {
				t.Errorf("compareUTF16(%q, %q) = %d, want %d", a, b, got, want)
			}
		}
	}
	sorted := []string{"ｂ", "a", "🔑"}
	sortKeys(sorted)
	if !slices.Equal(sorted, []string{"a", "🔑", "ｂ"}) {
		t.Errorf("sortKeys = %q, want [a 🔑 ｂ] (§11.2)", sorted)
	}
}

func sign(x int) int {
	switch {
	case x < 0:
		return -1
	case x > 0:
		return 1
	}
	return 0
}

// FuzzCanonicalize checks that Parse/Marshal never panic, that the
// canonical form is a fixed point, that Parse agrees with encoding/json on
// which inputs are valid (where the grammars coincide), and that key order
// is the UTF-16 order.
func FuzzCanonicalize(f *testing.F) {
	_, cases := loadCanonVectors(f)
	for _, c := range cases {
		f.Add(c.input)
	}
	f.Add([]byte(`{"\ud83d\udd11":1,"\uff42":2,"\ud800":3}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := Canonicalize(in)
		if err != nil {
			if !errors.Is(err, ErrSyntax) {
				t.Fatalf("error %v does not wrap ErrSyntax", err)
			}
			return
		}
		if !utf8.Valid(in) {
			t.Fatalf("accepted invalid UTF-8 %q", in)
		}
		if bytes.ContainsAny(out, "\n\r\t") {
			t.Fatalf("canonical form %q contains raw whitespace", out)
		}
		again, err := Canonicalize(out)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("not idempotent: %q -> %q -> %q (%v)", in, out, again, err)
		}
		// Equal values give equal bytes: re-marshalling the parsed value
		// (a fresh map) must give the same bytes.
		v, _ := Parse(in)
		b2, err := Marshal(v)
		if err != nil || !bytes.Equal(b2, out) {
			t.Fatalf("Marshal(Parse(x)) = %q, want %q", b2, out)
		}
		// encoding/json must accept what we accept (it is laxer, never
		// stricter, except that it rejects a BOM and huge numbers fine).
		trimmed := bytes.TrimPrefix(in, []byte("\xef\xbb\xbf"))
		if !json.Valid(trimmed) {
			t.Fatalf("accepted %q, which encoding/json rejects", in)
		}
		checkKeyOrder(t, v)
		// Equal values give equal bytes: another spelling of the same
		// value (reversed members, spaces, exponent numbers, escaped
		// non-ASCII) has the same canonical form.
		alt := altText(nil, v)
		if c2, err := Canonicalize(alt); err != nil || !bytes.Equal(c2, out) {
			t.Fatalf("other spelling %q of %q: %q, %v; want %q", alt, in, c2, err, out)
		}
	})
}

// altText writes v as JSON differently from the canonical form: members in
// reverse UTF-16 order with whitespace, numbers in exponent notation,
// every non-ASCII code unit and '/' escaped (uppercase hex).
func altText(dst []byte, v any) []byte {
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...)
	case bool:
		return strconv.AppendBool(dst, x)
	case float64:
		switch {
		case math.IsInf(x, 1):
			return append(dst, "1e999"...)
		case math.IsInf(x, -1):
			return append(dst, "-1E+999"...)
		case x == 0 && math.Signbit(x):
			return append(dst, "-0.0e5"...)
		}
		return strconv.AppendFloat(dst, x, 'E', -1, 64)
	case string:
		dst = append(dst, '"')
		for _, u := range utf16Units(x) {
			if u >= 0x20 && u < 0x7F && u != '"' && u != '\\' && u != '/' {
				dst = append(dst, byte(u))
				continue
			}
			dst = fmt.Appendf(dst, "\\u%04X", u)
		}
		return append(dst, '"')
	case []any:
		dst = append(dst, "[ "...)
		for i, e := range x {
			if i > 0 {
				dst = append(dst, " ,\n"...)
			}
			dst = altText(dst, e)
		}
		return append(dst, " ]"...)
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sortKeys(keys)
		slices.Reverse(keys)
		dst = append(dst, "{\t"...)
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ",\r\n"...)
			}
			dst = altText(dst, k)
			dst = append(dst, " : "...)
			dst = altText(dst, x[k])
		}
		return append(dst, "}"...)
	}
	panic(fmt.Sprintf("altText: %T", v))
}

func checkKeyOrder(t *testing.T, v any) {
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			checkKeyOrder(t, e)
		}
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k, e := range x {
			keys = append(keys, k)
			checkKeyOrder(t, e)
		}
		sortKeys(keys)
		for i := 1; i < len(keys); i++ {
			if utf16Order(keys[i-1], keys[i]) >= 0 {
				t.Fatalf("keys %q, %q out of UTF-16 order", keys[i-1], keys[i])
			}
		}
	}
}
