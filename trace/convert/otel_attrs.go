package convert

import (
	"cmp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/vigilhq/vigil/trace"
)

// attrs reads OTel attributes (otel.go).
type attrs map[string]trace.Value

func (a attrs) has(k string) bool {
	_, ok := a[k]
	return ok
}

func (a attrs) hasPrefix(p string) bool {
	for k := range a {
		if strings.HasPrefix(k, p) {
			return true
		}
	}
	return false
}

// str is the attribute as a string: strings as they are, numbers and
// booleans as their text, "" otherwise.
func (a attrs) str(k string) string {
	switch v := a[k].(type) {
	case string:
		return v
	case trace.Number:
		return string(v)
	case bool:
		return strconv.FormatBool(v)
	}
	return ""
}

// int is an integer attribute (a number, or a string holding one).
func (a attrs) int(k string) (int64, bool) {
	switch v := a[k].(type) {
	case trace.Number:
		if n, ok := v.Int64(); ok {
			return n, true
		}
		return int64(v.Float64()), true
	case string:
		n, err := strconv.ParseInt(v, 10, 64)
		return n, err == nil
	}
	return 0, false
}

// indices returns the distinct N of keys prefix.N.… (or prefix.N), in
// increasing order.
func (a attrs) indices(prefix string) []int {
	var out []int
	for k := range a {
		rest, ok := strings.CutPrefix(k, prefix)
		if !ok {
			continue
		}
		num, _, _ := strings.Cut(rest, ".")
		n, err := strconv.Atoi(num)
		if err != nil || n < 0 || n > 1<<20 {
			continue
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	sort.Ints(out)
	return out
}

// objectOf is attributes as an object with sorted keys.
func objectOf(m map[string]trace.Value) *trace.Object {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	o := &trace.Object{Members: make([]trace.Member, 0, len(keys))}
	for _, k := range keys {
		o.Members = append(o.Members, trace.Member{Key: k, Value: m[k]})
	}
	return o
}

// jsonish is v, or the JSON a string v holds when it starts like JSON
// ([ or {); a string that starts like JSON but does not parse is an
// error at path.
func jsonish(v trace.Value, path string) (trace.Value, error) {
	s, ok := v.(string)
	if !ok {
		return v, nil
	}
	t := strings.TrimSpace(s)
	if !strings.HasPrefix(t, "[") && !strings.HasPrefix(t, "{") {
		return v, nil
	}
	p, err := trace.ParseValue([]byte(t))
	if err != nil {
		return nil, errAt(path, "holds invalid JSON: %v", err)
	}
	return p, nil
}

func cmpOr(v ...string) string { return cmp.Or(v...) }
