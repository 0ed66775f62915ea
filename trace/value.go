package trace

import (
	"strconv"
	"strings"
)

// Value is a decoded JSON value. Its dynamic type is one of:
//
//	nil        JSON null
//	bool       true, false
//	Number     a number, as its literal text
//	string     a string
//	[]Value    an array
//	*Object    an object, members in input order
//
// Values never go through map[string]any, so key order, duplicate keys and
// number literals survive a decode→encode round trip.
type Value = any

// Number is a JSON number kept as its literal text (e.g. "1", "1.50",
// "2e21"), so that encoding writes it back unchanged. Use Int64 or Float64 to
// read it.
type Number string

// Int64 returns n as an integer and true when the literal is an integer
// (no fraction or exponent) that fits in an int64.
func (n Number) Int64() (int64, bool) {
	i, err := strconv.ParseInt(string(n), 10, 64)
	return i, err == nil
}

// Float64 returns n as the nearest float64 (±Inf on overflow).
func (n Number) Float64() float64 {
	f, _ := strconv.ParseFloat(string(n), 64)
	return f
}

// IsInt reports whether the literal has no fraction and no exponent, which
// is how the policy engine tells int from float (as Python's json does).
func (n Number) IsInt() bool {
	return !strings.ContainsAny(string(n), ".eE")
}

// Member is one key/value pair of an Object.
type Member struct {
	Key   string
	Value Value
}

// Object is a JSON object with its members in input order. Duplicate keys
// are kept (so they round-trip); Get returns the last one, as JSON.parse and
// Python's json do. The zero value is an empty object.
type Object struct {
	Members []Member
}

// NewObject returns an object with the given alternating key, value pairs.
// It panics if kv has odd length or a key is not a string (a programming
// error, never input-dependent).
func NewObject(kv ...any) *Object {
	if len(kv)%2 != 0 {
		panic("trace.NewObject: odd number of arguments")
	}
	o := &Object{Members: make([]Member, 0, len(kv)/2)}
	for i := 0; i < len(kv); i += 2 {
		o.Members = append(o.Members, Member{Key: kv[i].(string), Value: kv[i+1]})
	}
	return o
}

// Len returns the number of members.
func (o *Object) Len() int {
	if o == nil {
		return 0
	}
	return len(o.Members)
}

// Get returns the value of the last member named key.
func (o *Object) Get(key string) (Value, bool) {
	if o == nil {
		return nil, false
	}
	for i := len(o.Members) - 1; i >= 0; i-- {
		if o.Members[i].Key == key {
			return o.Members[i].Value, true
		}
	}
	return nil, false
}

// Has reports whether o has a member named key.
func (o *Object) Has(key string) bool {
	_, ok := o.Get(key)
	return ok
}

// Set replaces the value of the last member named key, or appends a member.
func (o *Object) Set(key string, v Value) {
	for i := len(o.Members) - 1; i >= 0; i-- {
		if o.Members[i].Key == key {
			o.Members[i].Value = v
			return
		}
	}
	o.Members = append(o.Members, Member{Key: key, Value: v})
}

// Delete removes every member named key.
func (o *Object) Delete(key string) {
	if o == nil {
		return
	}
	out := o.Members[:0]
	for _, m := range o.Members {
		if m.Key != key {
			out = append(out, m)
		}
	}
	clear(o.Members[len(out):])
	o.Members = out
}

// Keys returns the member keys in order (duplicates included).
func (o *Object) Keys() []string {
	if o == nil {
		return nil
	}
	keys := make([]string, len(o.Members))
	for i, m := range o.Members {
		keys[i] = m.Key
	}
	return keys
}

// Clone returns a deep copy of v. Strings are shared (they are immutable).
func Clone(v Value) Value {
	switch v := v.(type) {
	case []Value:
		out := make([]Value, len(v))
		for i, e := range v {
			out[i] = Clone(e)
		}
		return out
	case *Object:
		if v == nil {
			return v
		}
		out := &Object{Members: make([]Member, len(v.Members))}
		for i, m := range v.Members {
			out.Members[i] = Member{Key: m.Key, Value: Clone(m.Value)}
		}
		return out
	default:
		return v
	}
}

// Equal reports whether a and b are the same JSON value: same members in the
// same order, numbers compared by literal text.
func Equal(a, b Value) bool {
	switch a := a.(type) {
	case nil:
		return b == nil
	case bool:
		bb, ok := b.(bool)
		return ok && a == bb
	case Number:
		bb, ok := b.(Number)
		return ok && a == bb
	case string:
		bb, ok := b.(string)
		return ok && a == bb
	case []Value:
		bb, ok := b.([]Value)
		if !ok || len(a) != len(bb) {
			return false
		}
		for i := range a {
			if !Equal(a[i], bb[i]) {
				return false
			}
		}
		return true
	case *Object:
		bb, ok := b.(*Object)
		if !ok || a.Len() != bb.Len() {
			return false
		}
		for i := range a.Len() {
			if a.Members[i].Key != bb.Members[i].Key || !Equal(a.Members[i].Value, bb.Members[i].Value) {
				return false
			}
		}
		return true
	}
	return false
}

// TypeName returns the JSON type name of v: "null", "boolean", "number",
// "string", "array", "object" (used in error messages).
func TypeName(v Value) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case Number:
		return "number"
	case string:
		return "string"
	case []Value:
		return "array"
	case *Object:
		return "object"
	}
	return "invalid"
}
