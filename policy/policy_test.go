package policy_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/vigilhq/vigil/internal/tracegen"
	"github.com/vigilhq/vigil/policy"
	"github.com/vigilhq/vigil/policy/builtin"
	"github.com/vigilhq/vigil/trace"
)

func mustLoad(t testing.TB, src string, opts policy.Options) *policy.Policy {
	t.Helper()
	p, err := policy.Load(src, opts)
	if err != nil {
		t.Fatalf("load:\n%s\n%v", src, err)
	}
	return p
}

func mustTrace(t testing.TB, js string) *trace.Trace {
	t.Helper()
	tr, err := trace.Decode([]byte(js))
	if err != nil {
		t.Fatalf("decode %s: %v", js, err)
	}
	return tr
}

const twoMessages = `[{"role": "user", "content": "hello"}, {"role": "assistant", "content": "abc"}]`

// TestExpressions checks Python semantics of operators, methods and
// built-ins: every expression must be exactly True.
func TestExpressions(t *testing.T) {
	exprs := []string{
		`-7 % 3 == 2`, `7 % -3 == -2`, `2 ** 3 ** 2 == 512`, `-2 ** 2 == -4`, `2 ** -1 == 0.5`, `7 / 2 == 3.5`, `1 + 2 * 3 - 4 == 3`,
		`1 == 1.0 == True`, `not 1 == 2`, `3 > 2 > 1`, `not (1 < 2 > 3)`, `True or False and False`,
		`(1, 2) != [1, 2]`, `(1,) == tuple([1])`, `() == tuple()`, `[1, 2] + [3] == [1, 2, 3]`, `"ab" * 2 == "abab"`, `2 * [0] == [0, 0]`,
		`"ß".upper() == "SS"`, `"ﬁ".upper() == "FI"`, `"ΑΣ".lower() == "ας"`, `"İ".lower() == "i̇"`, `"ABC".lower() == "abc"`, `"  a b  ".strip() == "a b"`, `"xxaxx".strip("x") == "a"`,
		`" a  b ".split() == ["a", "b"]`, `"a,b,,c".split(",") == ["a", "b", "", "c"]`, `"a,b,c".split(",", 1) == ["a", "b,c"]`,
		`"a\nb\r\nc".splitlines() == ["a", "b", "c"]`, `"-".join(["a", "b"]) == "a-b"`, `"{} {x} {{}}".format(1, x=2) == "1 2 {}"`,
		`{"a": 1, "b": 2}.keys() == ["a", "b"]`, `{"a": 1}.items() == [("a", 1)]`, `{"a": 1}.get("z", 5) == 5`, `{"keys": 1}.keys == 1`,
		`'{"a": 1}'.a == 1`, `"123".lower() == "123"`, `len("héllo") == 5`, `"abc"[-1] == "c"`, `[1, 2, 3][0] == 1`,
		`min([3, 1, 2]) == 1`, `max(1, 5, 3) == 5`, `sum([1, 2.5]) == 3.5`, `sum([1], 10) == 11`, `any([0, "", "x"])`, `all([])`, `empty([])`, `not empty("a")`,
		`match("a+", "aaab")`, `not match("b", "ab")`, `find(r"\d+", "a1b22") == ["1", "22"]`, `json_loads("[1, 2.0, null]") == [1, 2.0, None]`,
		`"a" in ["a", "b"]`, `"k" in {"k": 1}`, `"x" not in "abc"`, `[True, False] == (["a", "z"] in "abc")`, `None is None`, `1 is not True`, `True is True`,
		`["a", "b"] contains_only ["a", "b", "c"]`, `not (["a", "z"] contains_only ["a"])`, `"aab" contains_only "ab"`, `[] contains_only []`,
		`(1 if True else 2) == 1`, `("a" or "b") == "a"`, `(0 and 1) == 0`, `[x * 2 for x in [1, 2, 3] if x > 1] == [4, 6]`,
		`f"{1 + 1}-{'a'}" == "2-a"`, `f"{[1, 'a']}" == "[1, 'a']"`, `f"{1.0}|{1e16}|{1e-05}|{None}" == "1.0|1e+16|1e-05|None"`,
		`text(["a", ["b"]]) == ["a", "b"]`, `image("data:image/png;base64,AA") == ["data:image/png;base64,AA"]`,
		`2 ** 100 == 1267650600228229401496703205376`, `9223372036854775807 + 1 == 9223372036854775808`, `-(-9223372036854775807 - 1) == 9223372036854775808`,
		`(2 ** 64) % 10 == 6`, `2 ** 64 > 1.5`, `2 ** 64 == 18446744073709551616.0`, `f"{2 ** 70}" == "1180591620717411303424"`, `2 ** 64 / 2 ** 63 == 2.0`,
		`json_loads("123456789012345678901234567890") == 123456789012345678901234567890`, `-2 ** 63 - 1 < -9223372036854775808`, `sum([2 ** 63, 2 ** 63]) == 2 ** 64`,
		`9007199254740993 != 9007199254740992.0`, `9007199254740993 > 9007199254740992.0`, `9007199254740992.0 < 9007199254740993`,
		`max(9007199254740992.0, 9007199254740993) == 9007199254740993`, `9007199254740992 == 9007199254740992.0`, `9007199254740993 in [1, 9007199254740993]`,
		`not (9007199254740993 in [9007199254740992.0])`, `not ((1e308 * 10 - 1e308 * 10) <= 1)`, `not ((1e308 * 10 - 1e308 * 10) >= 1)`,
		`2.0 ** (1e308 * 10) == 1e308 * 10`, `0.5 ** -(1e308 * 10) == 1e308 * 10`, `(-8.0) ** 2.0 == 64.0`, `(-2) ** -1 == -0.5`,
		`max(2 ** 64, 1) == 2 ** 64`, `(2 ** 64 - 2 ** 64) == 0`, `not (2 ** 64 - 2 ** 64)`,
		`should_allow_rbac(None, "public", "bob", {"bob": ["u"]}, {"u": {"public": True}})`,
	}
	for _, e := range exprs {
		src := "from invariant.access_control import should_allow_rbac\nraise \"x\" if:\n    " + e + "\n"
		p, err := policy.Load(src, policy.Options{})
		if err != nil {
			t.Errorf("%s: load: %v", e, err)
			continue
		}
		res, err := p.Analyze(context.Background(), mustTrace(t, `[]`), nil)
		if err != nil {
			t.Errorf("%s: %v", e, err)
			continue
		}
		if len(res.Errors) != 1 || len(res.Failures) != 0 {
			t.Errorf("%s: not True (errors %d, failures %+v)", e, len(res.Errors), res.Failures)
		}
	}
}

// TestRuntimeErrors checks that each runtime error is a failure of the
// right kind and position, and that other rules still run.
func TestRuntimeErrors(t *testing.T) {
	tests := []struct {
		line string
		kind string
		col  int
	}{
		{`1 / 0 == 1`, "zero_division", 7},
		{`1 % 0 == 1`, "zero_division", 7},
		{`"a" < 1`, "type_error", 9},
		{`json_loads("{") == 1`, "json_error", 5},
		{`match("(", "x")`, "regex_error", 5},
		{`[1][5] == 1`, "key_error", 8},
		{`[1][2 ** 70] == 1`, "key_error", 8},
		{`(-8) ** 0.5 == 1`, "value_error", 10},
		{`(-8.0) ** -0.5 == 1`, "value_error", 12},
		{`"abc"[-2 ** 64] == 1`, "key_error", 10},
		{`{"a": 1}["b"] == 1`, "key_error", 13},
		{`max([]) == 1`, "value_error", 5},
		{`len(1) == 1`, "type_error", 5},
		{`"abc".replace("a", "b") == 1`, "attribute_error", 11},
		{`None.x == 1`, "attribute_error", 10},
		{`"a".lower(1) == 1`, "type_error", 5},
		{`"a" + 1 == 1`, "type_error", 9},
		{`1 in "abc"`, "type_error", 7},
		{`"{:>3}".format(1) == 1`, "value_error", 5},
		{`"{}{0}".format(1, 2) == 1`, "value_error", 5},
		{`"{0}{}".format(1, 2) == 1`, "value_error", 5},
	}
	for _, tt := range tests {
		src := "raise \"x\" if:\n    " + tt.line + "\nraise \"y\" if:\n    1 == 1\n"
		p := mustLoad(t, src, policy.Options{})
		res, err := p.Analyze(context.Background(), mustTrace(t, `[]`), nil)
		if err != nil {
			t.Fatalf("%s: %v", tt.line, err)
		}
		if len(res.Errors) != 1 || res.Errors[0].Message != "y" {
			t.Errorf("%s: errors %+v, want only rule 1", tt.line, res.Errors)
		}
		want := policy.Failure{Rule: 0, Line: 2, Column: tt.col, Kind: tt.kind}
		if len(res.Failures) != 1 {
			t.Errorf("%s: failures %+v, want one %s", tt.line, res.Failures, tt.kind)
			continue
		}
		got := res.Failures[0]
		got.Message = ""
		if got != want {
			t.Errorf("%s: failure %+v, want %+v (message %q)", tt.line, got, want, res.Failures[0].Message)
		}
	}
}

func TestFailuresDedupAndIsolation(t *testing.T) {
	p := mustLoad(t, `
raise "x" if:
    (m: Message)
    print(m.invalid_attr)

raise PolicyViolation("role", m) if:
    (m: Message)
    m.role == "assistant"
`, policy.Options{})
	res, err := p.Analyze(context.Background(), mustTrace(t, twoMessages), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Failures) != 1 || res.Failures[0].Kind != "attribute_error" || !strings.Contains(res.Failures[0].Message, "available: role, content, tool_calls, metadata") {
		t.Errorf("failures = %+v", res.Failures)
	}
	if len(res.Errors) != 1 || res.Errors[0].Key != "(1, (1,))" {
		t.Errorf("errors = %+v", res.Errors)
	}
}

func TestResultJSON(t *testing.T) {
	p := mustLoad(t, `
raise PolicyViolation(f"call {c.function.name}", c, n=1.5, ranges=[1], flag=True) if:
    (c: ToolCall)
`, policy.Options{})
	tr := mustTrace(t, `[{"role": "assistant", "content": null, "metadata": {"server": "s1"}, "tool_calls": [{"id": "7", "type": "function", "function": {"name": "f", "arguments": {"a": [1, "x"]}}}]}]`)
	res, err := p.Analyze(context.Background(), tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(res)
	want := `{"errors":[{"key":"(0, (0,))","args":["call f",{"metadata":{"trace_idx":0},"server":"s1","id":"7","type":"function","function":{"name":"f","arguments":{"a":[1,"x"]}}}],"kwargs":{"n":1.5,"flag":true},"ranges":["messages.0.tool_calls.0"]}],"failures":[],"warnings":[]}`
	if string(got) != want {
		t.Errorf("result\n got %s\nwant %s", got, want)
	}
}

func TestBudgets(t *testing.T) {
	src := `
raise "pair" if:
    (a: Message)
    (b: Message)
    a.content == b.content

raise "one" if:
    (m: Message)
    m.role == "user"
`
	var msgs []string
	for i := range 50 {
		msgs = append(msgs, fmt.Sprintf(`{"role": "user", "content": "m%d"}`, i%2))
	}
	tr := mustTrace(t, "["+strings.Join(msgs, ",")+"]")
	p := mustLoad(t, src, policy.Options{MaxSteps: 100})
	res, err := p.Analyze(context.Background(), tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	var budget int
	for _, f := range res.Failures {
		if f.Kind == "budget_exceeded" {
			budget++
			if f.Rule == 0 && (f.Line != 2 || f.Column != 1 || !strings.Contains(f.Message, "100 steps")) {
				t.Errorf("budget failure %+v", f)
			}
		}
	}
	if budget != 1 {
		t.Errorf("failures %+v, want one budget_exceeded for rule 0", res.Failures)
	}
	pairs, ones := 0, 0
	for _, v := range res.Errors {
		if v.Rule == 0 {
			pairs++
		} else {
			ones++
		}
	}
	if pairs == 0 || pairs >= 50*25 || ones != 50 {
		t.Errorf("kept %d pair violations and %d others", pairs, ones)
	}
	// a violation budget keeps the first violations
	res, err = mustLoad(t, src, policy.Options{MaxViolations: 10}).Analyze(context.Background(), tr, nil)
	if err != nil || len(res.Failures) != 2 || !strings.Contains(res.Failures[0].Message, "more than 10 violations") || len(res.Errors) != 20 {
		t.Errorf("violation budget: %d errors, failures %+v, %v", len(res.Errors), res.Failures, err)
	}
	// the default budget evaluates everything
	res, err = mustLoad(t, src, policy.Options{}).Analyze(context.Background(), tr, nil)
	if err != nil || len(res.Failures) != 0 || len(res.Errors) != 50*25+50 {
		t.Errorf("default budget: %d errors, failures %+v, %v", len(res.Errors), res.Failures, err)
	}
}

func TestWallTimeAndCancel(t *testing.T) {
	src := `
raise "slow" if:
    (a: Message)
    (b: Message)
    (c: Message)
    a.content + b.content == c.content + "zz"

raise "fast" if:
    (m: Message)
`
	var msgs []string
	for i := range 200 {
		msgs = append(msgs, fmt.Sprintf(`{"role": "user", "content": "m%d"}`, i))
	}
	tr := mustTrace(t, "["+strings.Join(msgs, ",")+"]")
	p := mustLoad(t, src, policy.Options{WallTime: 20 * time.Millisecond})
	res, err := p.Analyze(context.Background(), tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Failures) != 2 || res.Failures[0].Kind != "budget_exceeded" || res.Failures[1].Rule != 1 || !strings.Contains(res.Failures[1].Message, "wall-time") {
		t.Errorf("failures = %+v", res.Failures)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err = mustLoad(t, src, policy.Options{}).Analyze(ctx, tr, nil)
	if !errors.Is(err, policy.ErrCancelled) {
		t.Errorf("err = %v, want cancelled", err)
	}
}

func TestParameters(t *testing.T) {
	p := mustLoad(t, `
raise "x" if:
    (m: Message)
    input.word in m.content
    m.role in input.roles
`, policy.Options{})
	if got := p.Params(); strings.Join(got, ",") != "roles,word" {
		t.Errorf("params = %v", got)
	}
	tr := mustTrace(t, twoMessages)
	res, err := p.Analyze(context.Background(), tr, map[string]any{"word": "ab", "roles": []any{"assistant"}})
	if err != nil || len(res.Errors) != 1 || strings.Join(res.Errors[0].Ranges, " ") != "messages.1 messages.1.content:0-2" {
		t.Errorf("res = %+v, %v", res, err)
	}
	_, err = p.Analyze(context.Background(), tr, map[string]any{"word": "ab"})
	var ae *policy.AnalysisError
	if !errors.As(err, &ae) || !errors.Is(err, policy.ErrMissingParameter) || !strings.Contains(err.Error(), "missing policy parameter 'roles' (the policy uses input.roles)") {
		t.Errorf("err = %v", err)
	}
	_, err = p.Analyze(context.Background(), tr, map[string]any{"word": "ab", "roles": nil, "data": 1})
	if !errors.Is(err, policy.ErrReservedParameter) {
		t.Errorf("err = %v, want reserved_parameter", err)
	}
}

func TestLoadErrors(t *testing.T) {
	tests := []struct{ src, want string }{
		{"raise \"x\" if:\n    (m: Mesage)\n", "2:9: unknown type Mesage"},
		{"raise \"x\" if:\n    y == 1\n", "failed to resolve identifier y"},
		{"import os\n", "module os is not available"},
		{"from invariant.detectors import moderated\nraise \"x\" if:\n    moderated(\"a\")\n", "detector moderated has no provider (configure detectors.base_url)"},
		{"raise \"x\" if:\n    (c: ToolCall)\n    c is tool:f({a: input.x})\n", "unsupported tool pattern"},
		{"raise \"x\" if:\n    forall:\n        1 == 1\n", "failed to resolve identifier forall"},
		{"p(m: Message) := p(m)\nraise \"x\" if:\n    (m: Message)\n    p(m)\n", "recursive"},
		{"raise \"x\" if:\n    x := 1\n    x := 2\n", "x already declared"},
		{"raise \"x\" if:\n    input.data == 1\n", "input.data is reserved"},
	}
	for _, tt := range tests {
		_, err := policy.Load(tt.src, policy.Options{Name: "p.pol"})
		if err == nil || !errors.Is(err, policy.ErrLoad) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Load(%q) = %v, want error containing %q", tt.src, err, tt.want)
		}
	}
}

func TestMonitor(t *testing.T) {
	p := mustLoad(t, `
raise PolicyViolation("after inbox", call2) if:
    (call: ToolCall) -> (call2: ToolCall)
    call is tool:get_inbox
    call2 is tool:send_email

raise PolicyViolation("user says A", m) if:
    (m: Message)
    m.role == "user"
    "A" in m.content
`, policy.Options{})
	tr := mustTrace(t, `[
 {"role": "user", "content": "A1"},
 {"role": "assistant", "content": null, "tool_calls": [{"id": "1", "type": "function", "function": {"name": "get_inbox", "arguments": {}}}]},
 {"role": "tool", "content": "mail"},
 {"role": "assistant", "content": null, "tool_calls": [{"id": "2", "type": "function", "function": {"name": "send_email", "arguments": {}}}]},
 {"role": "user", "content": "A2"},
 {"role": "assistant", "content": null, "tool_calls": [{"id": "3", "type": "function", "function": {"name": "send_email", "arguments": {}}}]}]`)
	want, err := p.Analyze(context.Background(), tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := p.NewMonitor(nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range tr.Events {
		res, err := m.Append(context.Background(), e)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range res.Errors {
			got = append(got, v.Key)
		}
	}
	var all []string
	for _, v := range want.Errors {
		all = append(all, v.Key)
	}
	// Appending reports each violation once, when its last event arrives.
	if strings.Join(got, " ") != "(1, (0,)) (0, (1, 3)) (1, (4,)) (0, (1, 5))" || len(got) != len(all) {
		t.Errorf("monitor reported %v; whole analysis %v", got, all)
	}
	// Check with the same growing trace reports nothing new.
	m2, _ := p.NewMonitor(nil)
	past := &trace.Trace{Events: tr.Events[:4]}
	pending := &trace.Trace{Events: tr.Events[4:]}
	r1, _ := m2.Check(context.Background(), &trace.Trace{}, past)
	r2, _ := m2.Check(context.Background(), past, pending)
	r3, _ := m2.Check(context.Background(), past, pending)
	if len(r1.Errors) != 2 || len(r2.Errors) != 2 || len(r3.Errors) != 0 {
		t.Errorf("Check: %d, %d, %d new violations", len(r1.Errors), len(r2.Errors), len(r3.Errors))
	}
	if _, err := mustLoad(t, "raise \"x\" if:\n    input.a == 1\n", policy.Options{}).NewMonitor(nil); !errors.Is(err, policy.ErrMissingParameter) {
		t.Errorf("NewMonitor without parameter: %v", err)
	}
}

func TestInvalidTrace(t *testing.T) {
	p := mustLoad(t, "raise \"x\" if:\n    (m: Message)\n", policy.Options{})
	_, err := p.AnalyzeJSON(context.Background(), []byte(`[{"role": 1}]`), nil)
	if !errors.Is(err, policy.ErrInvalidTrace) {
		t.Errorf("err = %v, want invalid_trace", err)
	}
}

// probeCalls counts calls of the cached test built-in cached_probe, which
// marks every "x" of its argument strings.
var probeCalls int

func init() {
	builtin.Register(builtin.Builtin{Name: "cached_probe", Core: true, Cache: true, Marks: true,
		Params: []builtin.Param{{Name: "data"}}, Result: "list",
		Impl: builtin.TextDetector(func(c *builtin.Call, s string) ([]builtin.Match, error) {
			probeCalls++
			var out []builtin.Match
			for i, r := range []rune(s) {
				if r == 'x' {
					out = append(out, builtin.Match{Start: i, End: i + 1, Label: "X"})
				}
			}
			return out, nil
		}, true)})
}

func TestDetectorCache(t *testing.T) {
	p := mustLoad(t, `
raise PolicyViolation("probe", m) if:
    (m: Message)
    "X" in cached_probe(m)
`, policy.Options{})
	tr := mustTrace(t, `[{"role": "user", "content": "axbx"}, {"role": "assistant", "content": "no"}, {"role": "user", "content": "axbx"}]`)
	probeCalls = 0
	var ranges []string
	for range 2 {
		res, err := p.Analyze(context.Background(), tr, nil)
		if err != nil {
			t.Fatal(err)
		}
		ranges = nil
		for _, v := range res.Errors {
			ranges = append(ranges, strings.Join(v.Ranges, " "))
		}
	}
	// identical contents at events 0 and 2 share one call; the second
	// analysis calls nothing; marks land on each event's own content
	if probeCalls != 2 {
		t.Errorf("probe called %d times, want 2 (one per distinct argument)", probeCalls)
	}
	want := []string{"messages.0 messages.0.content:1-2 messages.0.content:3-4", "messages.2 messages.2.content:1-2 messages.2.content:3-4"}
	if strings.Join(ranges, "|") != strings.Join(want, "|") {
		t.Errorf("ranges = %q, want %q", ranges, want)
	}
}

// TestBindingOrder checks the sequential semantics of §10.2 where the
// engine binds lazily: flow tests reached after both operands are bound,
// outer variables in quantifier flows, and violation order by declaration
// order even when a later-declared variable is bound first.
func TestBindingOrder(t *testing.T) {
	tr := `[{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}, {"role": "assistant", "content": "d"}]`
	tests := []struct {
		name, src string
		keys      string
	}{
		{"flow after bound operands", `
raise "x" if:
    (a: Message)
    (b: Message)
    a.role == "user"
    b.role == "assistant"
    a -> b`, "(0, (0, 1)) (0, (0, 3)) (0, (2, 3))"},
		{"immediate flow after bound operands", `
raise "x" if:
    (a: Message)
    (b: Message)
    b.role == "assistant"
    a.role == "user"
    a ~> b`, "(0, (0, 1)) (0, (2, 3))"},
		{"declaration order wins over binding order", `
raise "x" if:
    (a: Message)
    (b: Message)
    b.role == "assistant"
    a.role == "user"`, "(0, (0, 1)) (0, (0, 3)) (0, (2, 1)) (0, (2, 3))"},
		{"string variable declared first", `
raise PolicyViolation("x", s=s) if:
    (s: str)
    (m: Message)
    m.content == "d"
    s in ["a", "c"]`, "(0, (3, -1))"},
		{"flow between outer variables in a quantifier", `
from invariant import forall
raise "x" if:
    (a: Message)
    (b: Message)
    a.role == "user"
    b.role == "assistant"
    forall:
        (c: Message)
        a -> b
    a.content == "a"`, "(0, (0, 1)) (0, (0, 3))"},
	}
	for _, tt := range tests {
		p := mustLoad(t, tt.src, policy.Options{})
		res, err := p.Analyze(context.Background(), mustTrace(t, tr), nil)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		var keys []string
		for _, v := range res.Errors {
			keys = append(keys, v.Key)
		}
		if strings.Join(keys, " ") != tt.keys {
			t.Errorf("%s: keys %v, want %s", tt.name, keys, tt.keys)
		}
	}
}

// TestConcurrentAnalyze runs one policy on several goroutines (run with
// -race): a Policy is safe for concurrent use.
func TestConcurrentAnalyze(t *testing.T) {
	p := mustLoad(t, tracegen.GuardrailPolicy, policy.Options{})
	tr := mustTrace(t, func() string { b, _ := json.Marshal(tracegen.GuardrailRun(200)); return string(b) }())
	want, err := p.Analyze(context.Background(), tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantJSON, _ := json.Marshal(want)
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			res, err := p.Analyze(context.Background(), tr, nil)
			if err == nil {
				if got, _ := json.Marshal(res); string(got) != string(wantJSON) {
					err = fmt.Errorf("concurrent result differs")
				}
			}
			errs <- err
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// TestExamplePolicies loads the example policies the README uses.
func TestExamplePolicies(t *testing.T) {
	files, err := filepath.Glob("testdata/examples/*.pol")
	if err != nil || len(files) == 0 {
		t.Fatalf("no example policies: %v", err)
	}
	for _, name := range files {
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		p, err := policy.Load(string(src), policy.Options{Name: name})
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		if len(p.Warnings) > 0 {
			t.Errorf("%s: warnings %v", name, p.Warnings)
		}
	}
}

// TestMonitorTraceDependentLine checks that a line whose value depends on
// later events (a predicate with its own free variables) is re-evaluated
// as the trace grows, even though it mentions only an old event.
func TestMonitorTraceDependentLine(t *testing.T) {
	p := mustLoad(t, `
from invariant import count
sent_after(c: ToolCall) :=
    (s: ToolCall)
    c -> s
    s is tool:send_email
    s.id == "3"

raise "user message after an inbox read and the second send" if:
    (call: ToolCall)
    (m: Message)
    call is tool:get_inbox
    sent_after(call)
    m.role == "user"
    call -> m
`, policy.Options{})
	call := func(id, name string) string {
		return `{"role": "assistant", "content": null, "tool_calls": [{"id": "` + id + `", "type": "function", "function": {"name": "` + name + `", "arguments": {}}}]}`
	}
	user := `{"role": "user", "content": "hi"}`
	tr := mustTrace(t, "["+strings.Join([]string{call("1", "get_inbox"), call("2", "send_email"), user, call("3", "send_email"), user}, ",")+"]")
	m, err := p.NewMonitor(nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range tr.Events {
		res, err := m.Append(context.Background(), e)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range res.Errors {
			got = append(got, v.Key)
		}
	}
	if strings.Join(got, " ") != "(0, (0, 4))" {
		t.Errorf("monitor reported %v, want [(0, (0, 4))]", got)
	}
}

func TestBigIntegers(t *testing.T) {
	p := mustLoad(t, `
raise PolicyViolation("big", a=c.function.arguments.a, b=c.function.arguments.a + 1) if:
    (c: ToolCall)
    c.function.arguments.a == 123456789012345678901234567890
    c is tool:f({a: 123456789012345678901234567890})
`, policy.Options{})
	tr := mustTrace(t, `[{"type": "function", "function": {"name": "f", "arguments": {"a": 123456789012345678901234567890}}}]`)
	res, err := p.Analyze(context.Background(), tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(res.Errors)
	if want := `[{"key":"(0, (0,))","args":["big"],"kwargs":{"a":123456789012345678901234567890,"b":123456789012345678901234567891},"ranges":["messages.0"]}]`; string(got) != want {
		t.Errorf("got %s\nwant %s", got, want)
	}
	// budget on sizes: huge powers are a value_error, not an allocation
	res, err = mustLoad(t, "raise \"x\" if:\n    2 ** 100000000 > 1\n", policy.Options{}).Analyze(context.Background(), tr, nil)
	if err != nil || len(res.Failures) != 1 || res.Failures[0].Kind != "value_error" {
		t.Errorf("huge power: %+v, %v", res, err)
	}
}

func init() {
	builtin.Register(builtin.Builtin{Name: "panicky_probe", Core: true, Params: []builtin.Param{{Name: "x"}}, Result: "bool",
		Impl: func(c *builtin.Call) (builtin.Value, error) {
			if builtin.Str(c.Args[0]) == "boom" {
				panic("boom")
			}
			return true, nil
		}})
}

// TestBuiltinPanic checks that a panicking built-in (detector code) fails
// only its binding, with a detector_error.
func TestBuiltinPanic(t *testing.T) {
	p := mustLoad(t, "raise PolicyViolation(\"x\", m) if:\n    (m: Message)\n    panicky_probe(m.content)\n", policy.Options{})
	res, err := p.Analyze(context.Background(), mustTrace(t, `[{"role": "user", "content": "boom"}, {"role": "user", "content": "fine"}]`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Errors) != 1 || res.Errors[0].Key != "(0, (1,))" || len(res.Failures) != 1 || res.Failures[0].Kind != "detector_error" {
		t.Errorf("result %+v", res)
	}
}

// TestDetectorOverrides gives a model-backed detector a provider for one
// policy only: it loads, runs, and other policies still need a provider.
func TestDetectorOverrides(t *testing.T) {
	src := `
from invariant.detectors import moderated
raise PolicyViolation("flagged", m) if:
    (m: Message)
    moderated(m)

raise PolicyViolation("pattern", c) if:
    (c: ToolCall)
    c is tool:post({body: <MODERATED>})
`
	if _, err := policy.Load(src, policy.Options{}); err == nil || !strings.Contains(err.Error(), "no provider (configure detectors.base_url)") {
		t.Fatalf("without a provider: %v", err)
	}
	fake := builtin.Builtin{Name: "moderated", Impl: func(c *builtin.Call) (builtin.Value, error) {
		for _, s := range builtin.Texts(c.Args[0]) {
			if strings.Contains(builtin.Str(s), "hate") {
				return true, nil
			}
		}
		return false, nil
	}}
	p := mustLoad(t, src, policy.Options{Detectors: []builtin.Builtin{fake}})
	tr := mustTrace(t, `[{"role": "user", "content": "I hate this"}, {"role": "user", "content": "fine"},
 {"role": "assistant", "content": null, "tool_calls": [{"id": "1", "type": "function", "function": {"name": "post", "arguments": {"body": "hate speech"}}}]}]`)
	res, err := p.Analyze(context.Background(), tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, v := range res.Errors {
		keys = append(keys, v.Key)
	}
	if strings.Join(keys, " ") != "(0, (0,)) (1, (2,))" || len(res.Failures) != 0 {
		t.Errorf("keys %v, failures %+v", keys, res.Failures)
	}
	if _, err := policy.Load(src, policy.Options{}); err == nil {
		t.Error("the override leaked into the registry")
	}
}

// TestInvalidPatternRegex: an invalid regular expression in a tool pattern
// loads with a warning and is a regex_error when first needed (spec §9).
func TestInvalidPatternRegex(t *testing.T) {
	p := mustLoad(t, "raise \"x\" if:\n    (c: ToolCall)\n    c is tool:f({a: \"(\"})\n", policy.Options{})
	if len(p.Warnings) == 0 || !strings.Contains(p.Warnings.Error(), "invalid regular expression") {
		t.Errorf("warnings = %v", p.Warnings)
	}
	res, err := p.Analyze(context.Background(), mustTrace(t, `[{"type": "function", "function": {"name": "f", "arguments": {"a": "x"}}}, {"type": "function", "function": {"name": "g", "arguments": {"a": "x"}}}]`), nil)
	if err != nil || len(res.Errors) != 0 || len(res.Failures) != 1 || res.Failures[0].Kind != "regex_error" || res.Failures[0].Line != 3 || res.Failures[0].Column != 21 {
		t.Errorf("result %+v, %v", res, err)
	}
}

// TestMonitorMatchesAnalyze feeds every conformance trace to a Monitor one
// element at a time: the keys it reports are those of the whole-trace
// analysis that hold an event, and for rules without quantifiers or
// predicates (whose truth cannot change as the trace grows) all of them.
func TestMonitorMatchesAnalyze(t *testing.T) {
	monotone := regexp.MustCompile(`(?m)forall|count|^\w+\(.*\)\s*:=?`)
	for _, c := range loadCases(t) {
		if c.Expected.LoadError || c.Expected.AnalysisError != "" || len(c.Requires) > 0 {
			continue
		}
		p, err := policy.Load(c.Policy, policy.Options{})
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		tr, err := policy.DecodeTrace(c.Trace)
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		whole, err := p.Analyze(context.Background(), tr, c.Parameters)
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		m, err := p.NewMonitor(c.Parameters)
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		got := map[string]bool{}
		for _, e := range tr.Events {
			res, err := m.Append(context.Background(), e)
			if err != nil {
				t.Fatalf("%s: %v", c.Name, err)
			}
			for _, v := range res.Errors {
				if got[v.Key] {
					t.Errorf("%s: %s reported twice", c.Name, v.Key)
				}
				got[v.Key] = true
			}
		}
		want := map[string]bool{}
		for _, v := range whole.Errors {
			if len(v.Events) > 0 {
				want[v.Key] = true
			}
		}
		for k := range got {
			if !want[k] {
				t.Errorf("%s: monitor reported %s, which the whole analysis does not", c.Name, k)
			}
		}
		if !monotone.MatchString(c.Policy) {
			for k := range want {
				if !got[k] {
					t.Errorf("%s: monitor missed %s", c.Name, k)
				}
			}
		}
	}
}

// TestMonitorAfterCancel: events of a cancelled Append are checked with
// the next one.
func TestMonitorAfterCancel(t *testing.T) {
	p := mustLoad(t, "raise PolicyViolation(\"x\", m) if:\n    (m: Message)\n    m.role == \"user\"\n", policy.Options{})
	tr := mustTrace(t, `[{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]`)
	m, _ := p.NewMonitor(nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := m.Append(ctx, tr.Events[0]); !errors.Is(err, policy.ErrCancelled) {
		t.Fatalf("err = %v", err)
	}
	res, err := m.Append(context.Background(), tr.Events[1])
	if err != nil || len(res.Errors) != 1 || res.Errors[0].Key != "(0, (0,))" {
		t.Errorf("after a cancelled append: %+v, %v", res, err)
	}
}

// TestRepetitionOverflow: str * n and list * n with a count whose result
// length overflows an int are a value_error (not a panic), and an empty
// sequence times a huge count is empty at once (not a 2**62-step loop).
func TestRepetitionOverflow(t *testing.T) {
	tr := mustTrace(t, `[{"role": "user", "content": "abcd"}]`)
	for _, tt := range []struct{ line, kind string }{
		{`m.content * 4611686018427387904 == ""`, "value_error"},
		{`4611686018427387904 * m.content == ""`, "value_error"},
		{`[m.content] * 4611686018427387904 == []`, "value_error"},
		{`[m.content, 1] * 4611686018427387904 == []`, "value_error"},
		{`m.content.strip("abcd") * 4611686018427387904 == ""`, ""},
		{`[] * (4611686018427387904 + len(m.content)) == []`, ""},
		{`m.content * 10 ** 30 == ""`, "value_error"},
		{`10 ** 30 * [m.content] == []`, "value_error"},
		{`m.content * -10 ** 30 == ""`, ""},
		{`-10 ** 30 * [m.content] == []`, ""},
	} {
		src := "raise \"x\" if:\n    (m: Message)\n    " + tt.line + "\n"
		p := mustLoad(t, src, policy.Options{})
		done := make(chan struct{})
		var res *policy.Result
		var err error
		go func() {
			defer close(done)
			res, err = p.Analyze(context.Background(), tr, nil)
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: still running after 10s", tt.line)
		}
		if err != nil {
			t.Errorf("%s: %v", tt.line, err)
			continue
		}
		if tt.kind == "" {
			if len(res.Errors) != 1 || len(res.Failures) != 0 {
				t.Errorf("%s: errors %+v failures %+v, want one violation", tt.line, res.Errors, res.Failures)
			}
		} else if len(res.Failures) != 1 || res.Failures[0].Kind != tt.kind {
			t.Errorf("%s: failures %+v, want one %s", tt.line, res.Failures, tt.kind)
		}
	}
}

// TestDetectorCacheUnlocatedFirst: a cached marking detector first called
// on a literal (no location, so no marks recorded) must still mark the
// trace when later called on an equal located string (caching never
// changes a result, spec §13.5).
func TestDetectorCacheUnlocatedFirst(t *testing.T) {
	p := mustLoad(t, `
raise "literal" if:
    "X" in cached_probe("axbx")
raise PolicyViolation("probe", m) if:
    (m: Message)
    "X" in cached_probe(m.content)
`, policy.Options{})
	tr := mustTrace(t, `[{"role": "user", "content": "axbx"}]`)
	for run := range 2 {
		res, err := p.Analyze(context.Background(), tr, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Errors) != 2 {
			t.Fatalf("run %d: errors %+v, want 2", run, res.Errors)
		}
		got := strings.Join(res.Errors[1].Ranges, " ")
		if want := "messages.0 messages.0.content:1-2 messages.0.content:3-4"; got != want {
			t.Errorf("run %d: ranges %s, want %s", run, got, want)
		}
	}
}

// TestPatternMinInt64: the pattern constant -9223372036854775808 (whose
// literal does not fit an int64 before the minus) matches the equal int.
func TestPatternMinInt64(t *testing.T) {
	p := mustLoad(t, "raise \"x\" if:\n    (c: ToolCall)\n    c is tool:f({a: -9223372036854775808, b: -9223372036854775809})\n", policy.Options{})
	tr := mustTrace(t, `[{"type": "function", "function": {"name": "f", "arguments": {"a": -9223372036854775808, "b": -9223372036854775809}}}]`)
	res, err := p.Analyze(context.Background(), tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Errors) != 1 || len(res.Failures) != 0 {
		t.Errorf("errors %+v failures %+v, want one violation", res.Errors, res.Failures)
	}
}

// TestDictKeyWalkLinear: indexing every key of a large trace object is
// linear; finding each key's position for its location used to scan the
// key list (100,000 keys took about 20 s within the default step budget).
func TestDictKeyWalkLinear(t *testing.T) {
	var b strings.Builder
	b.WriteString(`[{"role": "tool", "content": {`)
	for i := range 100000 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"k%d": %d`, i, i)
	}
	b.WriteString(`}}]`)
	tr := mustTrace(t, b.String())
	p := mustLoad(t, "raise PolicyViolation(\"x\", v) if:\n    (o: ToolOutput)\n    v := [o.content[k] for k in o.content.keys()][99999]\n    v == 99999\n", policy.Options{})
	start := time.Now()
	res, err := p.Analyze(context.Background(), tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 8*time.Second {
		t.Errorf("took %v (quadratic key positions?)", d)
	}
	if len(res.Errors) != 1 || len(res.Failures) != 0 {
		t.Fatalf("errors %+v failures %+v, want one violation", res.Errors, res.Failures)
	}
	if got := strings.Join(res.Errors[0].Ranges, " "); got != "messages.0 messages.0.content.k99999" {
		t.Errorf("ranges %s", got)
	}
}

// TestWallTimeInsideOneLine: the wall-time budget and cancellation also
// stop a single line that loops for long (nested comprehensions), not only
// between line evaluations.
func TestWallTimeInsideOneLine(t *testing.T) {
	src := "raise \"slow\" if:\n    L := [1] * 20000\n    len([len([1 for b in L if False]) for a in L]) > 0\n"
	tr := mustTrace(t, `[]`)
	run := func(p *policy.Policy, ctx context.Context) (*policy.Result, error) {
		type out struct {
			res *policy.Result
			err error
		}
		done := make(chan out, 1)
		start := time.Now()
		go func() {
			res, err := p.Analyze(ctx, tr, nil)
			done <- out{res, err}
		}()
		select {
		case o := <-done:
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("stopped after %v, want about 50ms", d)
			}
			return o.res, o.err
		case <-time.After(20 * time.Second):
			t.Fatal("still running 20s after a 50ms budget")
			return nil, nil
		}
	}
	res, err := run(mustLoad(t, src, policy.Options{WallTime: 50 * time.Millisecond}), context.Background())
	if err != nil || len(res.Failures) != 1 || res.Failures[0].Kind != "budget_exceeded" || !strings.Contains(res.Failures[0].Message, "wall-time") {
		t.Errorf("wall time: %+v, %v", res, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := run(mustLoad(t, src, policy.Options{}), ctx); !errors.Is(err, policy.ErrCancelled) {
		t.Errorf("cancel: err = %v, want cancelled", err)
	}
}
