package check

import (
	"encoding/json"
	"strings"
)

// TypeNames are the type names usable in typed declarations and predicate
// parameters (spec §7.6).
var TypeNames = []string{"Function", "Image", "Message", "TextChunk", "Tool", "ToolCall", "ToolOutput", "ToolParameter", "bool", "dict", "float", "int", "list", "str"}

func isTypeName(s string) bool {
	for _, t := range TypeNames {
		if t == s {
			return true
		}
	}
	return false
}

// attr is a readable attribute of an event type and its static type.
type attr struct {
	name string
	typ  vtype
}

var (
	tyStr   = vtype{kind: tStr}
	tyDict  = vtype{kind: tDict}
	tyList  = vtype{kind: tList}
	tyBool  = vtype{kind: tBool}
	unknown = vtype{}
)

// eventAttrs lists the readable attributes of each event type (spec §7.3).
var eventAttrs = map[string][]attr{
	"Message":       {{"role", tyStr}, {"content", unknown}, {"tool_calls", unknown}, {"metadata", tyDict}},
	"ToolCall":      {{"function", vtype{kind: tEvent, event: "Function"}}, {"type", tyStr}, {"id", unknown}, {"metadata", tyDict}},
	"Function":      {{"name", tyStr}, {"arguments", unknown}},
	"ToolOutput":    {{"role", tyStr}, {"content", unknown}, {"tool_call_id", unknown}, {"metadata", tyDict}},
	"Tool":          {{"name", tyStr}, {"description", tyStr}, {"inputSchema", tyList}, {"server", unknown}},
	"ToolParameter": {{"type", tyStr}, {"name", tyStr}, {"description", tyStr}, {"required", tyBool}, {"properties", unknown}, {"additionalProperties", unknown}, {"items", unknown}, {"enum", unknown}},
	"TextChunk":     {{"type", tyStr}, {"text", tyStr}},
	"Image":         {{"type", tyStr}, {"image_url", unknown}},
}

// The methods of strings and dicts (spec §6.8).
var (
	strMethods  = []string{"format", "join", "lower", "split", "splitlines", "strip", "upper"}
	dictMethods = []string{"get", "items", "keys", "values"}
)

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func attrNames(as []attr) []string {
	names := make([]string, len(as))
	for i, a := range as {
		names[i] = a.name
	}
	return names
}

// tkind is a static type, as far as the loader can tell.
type tkind uint8

const (
	tUnknown tkind = iota
	tNone
	tBool
	tInt
	tFloat
	tStr
	tList
	tTuple
	tDict
	tEvent   // event: the type name
	tFunc    // built-in function, predicate or method
	tModule  // module value
	tPattern // tool pattern
	tType    // type name
	tQuant   // quantifier
)

var kindNames = [...]string{"unknown", "None", "bool", "int", "float", "str", "list", "tuple", "dict", "event", "function", "module", "tool pattern", "type", "quantifier"}

// vtype is what the loader knows about the value of an expression.
type vtype struct {
	kind  tkind
	event string // tEvent: the event type name
	known bool   // val holds the value, computed at load time
	val   any
	sym   *Symbol // tFunc, tModule, tType, tQuant of a built-in
}

func (t vtype) name() string {
	if t.kind == tEvent {
		return t.event
	}
	return kindNames[t.kind]
}

// typeOfName returns the static type of a variable of type name T.
func typeOfName(t string) vtype {
	switch t {
	case "str":
		return tyStr
	case "int":
		return vtype{kind: tInt}
	case "float":
		return vtype{kind: tFloat}
	case "bool":
		return tyBool
	case "list":
		return tyList
	case "dict":
		return tyDict
	case "":
		return unknown
	}
	return vtype{kind: tEvent, event: t}
}

// jsonObjectHasKey reports whether s is a JSON object with key k (the
// member access of §6.5).
func jsonObjectHasKey(s, k string) (isObject, has bool) {
	if !strings.HasPrefix(strings.TrimSpace(s), "{") {
		return false, false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal([]byte(s), &m) != nil {
		return false, false
	}
	_, has = m[k]
	return true, has
}
