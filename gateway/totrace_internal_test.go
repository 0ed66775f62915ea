package gateway

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"

	"github.com/vigilhq/vigil/trace"
)

// TestToTraceDirect checks that converting events to trace values
// directly gives the trace their JSON decodes to.
func TestToTraceDirect(t *testing.T) {
	for _, src := range []string{
		`[{"role":"user","content":"hi"}]`,
		`[{"role":"system","content":"be brief"},{"role":"user","content":[{"type":"text","text":"a <b> & c"},{"type":"image_url","image_url":{"url":"data:x"}}]}]`,
		`[{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"bash","arguments":"{\"command\":\"rm -rf /\"}"}}]},{"role":"tool","tool_call_id":"c1","content":"ok"}]`,
		`[{"role":"assistant","content":"x","n":1,"f":0.5,"big":1e21,"small":1e-7,"neg":-3,"z":0,"b":true,"l":[1,"2",null,{"k":false}]}]`,
		`[{"type":"function","function":{"name":"f","arguments":{"a":1}}}]`,
		`[{"role":"user","content":"é ü 日本 \u0000 \ud83d\ude00","zz":"last","aa":"first"}]`,
		`[{"tools":[{"type":"function","function":{"name":"f"}}]}]`,
		`[{"role":42}]`,
	} {
		var evs []event
		if err := json.Unmarshal([]byte(src), &evs); err != nil {
			t.Fatal(err)
		}
		got, gerr := toTrace(evs)
		want, werr := toTraceJSON(evs)
		if (gerr == nil) != (werr == nil) {
			t.Fatalf("%s: error %v, want %v", src, gerr, werr)
		}
		if (got == nil) != (want == nil) {
			t.Fatalf("%s: trace %v, want %v", src, got, want)
		}
		if got == nil {
			continue
		}
		if !reflect.DeepEqual(got.Events, want.Events) || got.Form != want.Form {
			gb, _ := json.Marshal(got.Events)
			wb, _ := json.Marshal(want.Events)
			t.Errorf("%s:\n got %s\nwant %s", src, gb, wb)
		}
	}
	// A value json.Unmarshal never gives takes the JSON round trip.
	evs := []event{{"role": "user", "content": "x", "n": 3}}
	got, err := toTrace(evs)
	want, _ := toTraceJSON(evs)
	if err != nil || !reflect.DeepEqual(got.Events, want.Events) {
		t.Fatalf("int value: %v", err)
	}
}

// TestAppendFloat checks the float64 literals of toTrace against
// json.Marshal's.
func TestAppendFloat(t *testing.T) {
	for _, f := range []float64{0, math.Copysign(0, -1), 1, -1, 0.5, 1.5e3, 123456789012345678, 1e20, 1e21, -1e21, 1.7976931348623157e308,
		1e-6, 9.99e-7, 1e-7, -1e-7, 5e-324, 1e-100, 0.1 + 0.2, 3.141592653589793, 2.5e-10, 1e100, 12345e-10} {
		want, err := json.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		if got := trace.AppendFloat(nil, f); string(got) != string(want) {
			t.Errorf("%v: %s, json.Marshal %s", f, got, want)
		}
	}
}

func FuzzAppendFloat(f *testing.F) {
	f.Add(1e-7)
	f.Add(1e21)
	f.Fuzz(func(t *testing.T, x float64) {
		want, err := json.Marshal(x)
		if err != nil {
			return // NaN, ±Inf: toTrace takes the round trip
		}
		if got := trace.AppendFloat(nil, x); string(got) != string(want) {
			t.Errorf("%v: %s, json.Marshal %s", x, got, want)
		}
	})
}
