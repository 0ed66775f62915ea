package store_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/vigilhq/vigil/store"
)

func TestNewID(t *testing.T) {
	re := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	before := time.Now().UnixMilli()
	prev := ""
	seen := map[string]bool{}
	for range 10000 {
		id := store.NewID()
		if !re.MatchString(id) {
			t.Fatalf("NewID() = %q, not a canonical UUIDv7", id)
		}
		if id <= prev || seen[id] {
			t.Fatalf("NewID() = %q after %q: not increasing", id, prev)
		}
		seen[id] = true
		prev = id
	}
	// The first 48 bits are the Unix time in milliseconds.
	ms, err := parseHex(strings.ReplaceAll(prev, "-", "")[:12])
	if err != nil || ms < before || ms > time.Now().UnixMilli()+5000 {
		t.Errorf("timestamp of %s = %d, want about %d (%v)", prev, ms, before, err)
	}
}

func parseHex(s string) (int64, error) {
	var v int64
	for _, c := range s {
		v <<= 4
		switch {
		case c >= '0' && c <= '9':
			v |= int64(c - '0')
		case c >= 'a' && c <= 'f':
			v |= int64(c-'a') + 10
		default:
			return 0, &json.SyntaxError{}
		}
	}
	return v, nil
}

func TestNewULID(t *testing.T) {
	re := regexp.MustCompile(`^[0-9A-HJKMNP-TV-Z]{26}$`)
	prev := ""
	for range 1000 {
		id := store.NewULID()
		if !re.MatchString(id) || id <= prev {
			t.Fatalf("NewULID() = %q after %q", id, prev)
		}
		prev = id
	}
}

func TestHashKey(t *testing.T) {
	for key, want := range map[string]string{
		"":    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
		"abc": "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
	} {
		if got := store.HashKey(key); got != want {
			t.Errorf("HashKey(%q) = %s, want %s", key, got, want)
		}
	}
}

// TestMergePatch runs the examples of RFC 7386 Appendix A.
func TestMergePatch(t *testing.T) {
	for _, tc := range []struct{ target, patch, want string }{
		{`{"a":"b"}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"b"}`, `{"b":"c"}`, `{"a":"b","b":"c"}`},
		{`{"a":"b"}`, `{"a":null}`, `{}`},
		{`{"a":"b","b":"c"}`, `{"a":null}`, `{"b":"c"}`},
		{`{"a":["b"]}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"c"}`, `{"a":["b"]}`, `{"a":["b"]}`},
		{`{"a":{"b":"c"}}`, `{"a":{"b":"d","c":null}}`, `{"a":{"b":"d"}}`},
		{`{"a":[{"b":"c"}]}`, `{"a":[1]}`, `{"a":[1]}`},
		{`["a","b"]`, `["c","d"]`, `["c","d"]`},
		{`{"a":"b"}`, `["c"]`, `["c"]`},
		{`{"a":"foo"}`, `null`, `null`},
		{`{"a":"foo"}`, `"bar"`, `"bar"`},
		{`{"e":null}`, `{"a":1}`, `{"e":null,"a":1}`},
		{`[1,2]`, `{"a":"b","c":null}`, `{"a":"b"}`},
		{`{}`, `{"a":{"bb":{"ccc":null}}}`, `{"a":{"bb":{}}}`},
		{``, `{"a":1}`, `{"a":1}`},
		{`null`, `{"a":1}`, `{"a":1}`},
	} {
		got, err := store.MergePatch(json.RawMessage(tc.target), json.RawMessage(tc.patch))
		if err != nil {
			t.Errorf("MergePatch(%s, %s): %v", tc.target, tc.patch, err)
			continue
		}
		if !jsonEqual(t, got, tc.want) {
			t.Errorf("MergePatch(%s, %s) = %s, want %s", tc.target, tc.patch, got, tc.want)
		}
	}
	for _, tc := range []struct{ target, patch, want string }{
		{`{}`, `{`, "merge patch"},
		{`{`, `{}`, "stored metadata"},
	} {
		if _, err := store.MergePatch(json.RawMessage(tc.target), json.RawMessage(tc.patch)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("MergePatch(%s, %s) error = %v, want %q", tc.target, tc.patch, err, tc.want)
		}
	}
}

// TestMergePatchKeepsNumbers: numbers the patch does not touch, and those
// it sets, keep their digits (decoding to float64 rounded integers above
// 2^53, so a PATCH of one key silently changed another).
func TestMergePatchKeepsNumbers(t *testing.T) {
	got, err := store.MergePatch(json.RawMessage(`{"id":12345678901234567890,"n":{"big":9007199254740993},"x":1}`),
		json.RawMessage(`{"x":2,"y":1.000000000000000000001,"n":{"z":9007199254740995}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`12345678901234567890`, `9007199254740993`, `9007199254740995`, `1.000000000000000000001`, `"x":2`} {
		if !strings.Contains(string(got), want) {
			t.Errorf("MergePatch = %s, lost %s", got, want)
		}
	}
}

func TestMergeMetadataErrors(t *testing.T) {
	if _, err := store.MergeMetadata(json.RawMessage(`[1]`), nil, false); err == nil || !strings.Contains(err.Error(), "stored metadata") {
		t.Errorf("MergeMetadata on an array: %v", err)
	}
	got, err := store.MergeMetadata(json.RawMessage(`null`), map[string]json.RawMessage{"a": json.RawMessage(`1`)}, true)
	if err != nil || !jsonEqual(t, got, `{"a":1}`) {
		t.Errorf("MergeMetadata on null = %s, %v", got, err)
	}
}

func TestMergeShallow(t *testing.T) {
	got, err := store.MergeShallow(json.RawMessage(`{"a":{"x":1},"b":2}`), map[string]json.RawMessage{"a": json.RawMessage(`{"y":2}`), "c": json.RawMessage(`null`)})
	if err != nil || !jsonEqual(t, got, `{"a":{"y":2},"b":2,"c":null}`) {
		t.Errorf("MergeShallow = %s, %v", got, err)
	}
	if _, err := store.MergeShallow(json.RawMessage(`"s"`), nil); err == nil {
		t.Error("MergeShallow on a string succeeded")
	}
}

func TestAnnotationSourceStatus(t *testing.T) {
	for _, tc := range []struct{ extra, source, status string }{
		{``, "", ""},
		{`null`, "", ""},
		{`{"source":"analyzer","status":"accepted"}`, "analyzer", "accepted"},
		{`{"source":3,"status":["x"]}`, "", ""},
		{`not json`, "", ""},
		{`{"Source":"x"}`, "", ""},
	} {
		if got := store.AnnotationSource(json.RawMessage(tc.extra)); got != tc.source {
			t.Errorf("AnnotationSource(%s) = %q, want %q", tc.extra, got, tc.source)
		}
		if got := store.AnnotationStatus(json.RawMessage(tc.extra)); got != tc.status {
			t.Errorf("AnnotationStatus(%s) = %q, want %q", tc.extra, got, tc.status)
		}
	}
}

func TestSessionStatus(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		s    store.Session
		want string
	}{
		{store.Session{}, "open"},
		{store.Session{ClosedAt: &now}, "closed"},
		{store.Session{TamperedAt: &now}, "tampered"},
		{store.Session{ClosedAt: &now, TamperedAt: &now}, "tampered"},
	} {
		if got := tc.s.Status(); got != tc.want {
			t.Errorf("Status() = %q, want %q", got, tc.want)
		}
	}
}

// FuzzMergePatch checks that merging never panics, that a result is valid
// JSON, and that a merge patch is idempotent (RFC 7386 §1).
func FuzzMergePatch(f *testing.F) {
	for _, s := range [][2]string{
		{`{"a":"b"}`, `{"a":null}`}, {`{"a":{"b":"c"}}`, `{"a":{"b":"d","c":null}}`}, {`[1]`, `{"a":[1]}`},
		{`{}`, `{"a":{"bb":{"ccc":null}}}`}, {`null`, `"x"`}, {`{"\u0000":1e400}`, `{"":{}}`},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, target, patch string) {
		once, err := store.MergePatch(json.RawMessage(target), json.RawMessage(patch))
		if err != nil {
			return
		}
		if !json.Valid(once) {
			t.Fatalf("MergePatch(%q, %q) = %q: invalid JSON", target, patch, once)
		}
		twice, err := store.MergePatch(once, json.RawMessage(patch))
		if err != nil {
			t.Fatalf("second MergePatch(%q, %q): %v", once, patch, err)
		}
		if !jsonEqual(t, twice, string(once)) {
			t.Fatalf("not idempotent: %s then %s", once, twice)
		}
	})
}

// FuzzMergeMetadata checks the dataset-metadata merge: no panic, an object
// comes out, system keys survive replace_all, and replace_all leaves no key
// outside the patch.
func FuzzMergeMetadata(f *testing.F) {
	f.Add(`{"created_on":"x","a":1}`, `{"b":2,"a":null}`, false)
	f.Add(`{"created_on":"x","a":1}`, `{"b":2}`, true)
	f.Add(`{}`, `{"created_on":"y"}`, true)
	f.Fuzz(func(t *testing.T, cur, patchText string, replaceAll bool) {
		var patch map[string]json.RawMessage
		if json.Unmarshal([]byte(patchText), &patch) != nil {
			return
		}
		out, err := store.MergeMetadata(json.RawMessage(cur), patch, replaceAll)
		if err != nil {
			return
		}
		var got, before map[string]json.RawMessage
		if err := json.Unmarshal(out, &got); err != nil || got == nil {
			t.Fatalf("MergeMetadata = %q: not an object (%v)", out, err)
		}
		_ = json.Unmarshal([]byte(cur), &before)
		for k, v := range got {
			if string(v) == "null" && (patch[k] != nil || !replaceAll) && string(before[k]) != "null" {
				t.Fatalf("key %q set to null", k)
			}
			if replaceAll && k != "created_on" {
				if _, ok := patch[k]; !ok {
					t.Fatalf("replace_all kept %q, not in the patch", k)
				}
			}
		}
		if v, ok := before["created_on"]; ok && replaceAll && string(got["created_on"]) != string(v) && json.Valid(v) {
			if !jsonEqual(t, got["created_on"], string(v)) {
				t.Fatalf("replace_all changed created_on from %s to %s", v, got["created_on"])
			}
		}
	})
}

func jsonEqual(t testing.TB, got json.RawMessage, want string) bool {
	t.Helper()
	// Numbers compare by their digits (json.Number): the merges keep them
	// as written, including ones float64 cannot hold (1e400).
	decode := func(b []byte) (any, error) {
		d := json.NewDecoder(bytes.NewReader(b))
		d.UseNumber()
		var v any
		err := d.Decode(&v)
		return v, err
	}
	g, err := decode(got)
	if err != nil {
		t.Fatalf("result %q: %v", got, err)
	}
	w, err := decode([]byte(want))
	if err != nil {
		t.Fatalf("want %q: %v", want, err)
	}
	return reflect.DeepEqual(g, w)
}
