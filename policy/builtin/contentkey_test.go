package builtin

import (
	"math"
	"testing"
)

// checkJSONForm fails unless appendJSONForm writes form as
// marshalNoEscape does.
func checkJSONForm(t *testing.T, form any) {
	t.Helper()
	want, err := marshalNoEscape(form)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := appendJSONForm(nil, form)
	if !ok {
		t.Fatalf("%#v: not written", form)
	}
	if string(got) != string(want) {
		t.Fatalf("%#v:\n got %s\nwant %s", form, got, want)
	}
}

func TestAppendJSONForm(t *testing.T) {
	strs := []string{"", "plain", `q"b\s/`, "<a href='x'>&amp;</a>", "\x00\x01\b\f\n\r\t\x1f\x7f", "é 日本 😀", "\u2028\u2029", "\xff\xfe bad", "\xed\xa0\x80"}
	floats := []float64{0, math.Copysign(0, -1), 1.5, -2, 1e20, 1e21, 1e-6, 1e-7, 5e-324, 1.7976931348623157e308, 0.1 + 0.2}
	for _, s := range strs {
		checkJSONForm(t, s)
		checkJSONForm(t, OrderedMap{{s, s}, {"k", []any{s, nil, true}}})
	}
	for _, f := range floats {
		checkJSONForm(t, f)
	}
	checkJSONForm(t, []any{int64(-7), int64(math.MaxInt64), false, nil, OrderedMap{}, []any{}, []any(nil), OrderedMap{{"x", OrderedMap{{"y", 2.5}}}}})
	// What the fast writer does not know goes to encoding/json.
	if _, ok := appendJSONForm(nil, math.Inf(1)); ok {
		t.Error("Inf written")
	}
	if _, ok := appendJSONForm(nil, []any{struct{}{}}); ok {
		t.Error("struct written")
	}
}

func FuzzAppendJSONForm(f *testing.F) {
	f.Add("<k>", "v\u2028\xff", 1e-7, int64(3))
	f.Fuzz(func(t *testing.T, k, v string, x float64, n int64) {
		if math.IsInf(x, 0) || math.IsNaN(x) {
			x = 0
		}
		checkJSONForm(t, OrderedMap{{k, v}, {v, []any{x, n, k}}})
	})
}

// TestContentKey checks keys of equal content are equal and of different
// content differ.
func TestContentKey(t *testing.T) {
	a := ContentKey([]Value{"x", int64(1), 2.5, nil})
	if b := ContentKey([]Value{"x", int64(1), 2.5, nil}); a != b {
		t.Errorf("equal lists: %q, %q", a, b)
	}
	if b := ContentKey([]Value{"x", int64(1), 2.5}); a == b {
		t.Errorf("different lists: both %q", a)
	}
	if k := ContentKey("a<b"); k != `str:"a<b"` {
		t.Errorf("string key %q", k)
	}
}
