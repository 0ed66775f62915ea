package policy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vigilhq/vigil/policy"
	"github.com/vigilhq/vigil/trace"
)

// Hostile policies (issue 17): rules that enumerate huge numbers of
// bindings or build huge values must stop with budget_exceeded under the
// default budgets while the other rules go on. Each case runs in a child
// process (this test binary re-executed) under a heap watchdog, so a
// regression fails the test in a second instead of eating the machine.

const (
	// hostileHeapLimit is the heap a hostile case may reach before the
	// watchdog fails it; the default budgets keep every case far below.
	hostileHeapLimit = 768 << 20
	// hostileTimeout bounds a child process.
	hostileTimeout = 60 * time.Second
)

// freeVars returns a rule with n free Message variables and the body
// 1 == 1 (spec §10.2: one violation per combination).
func freeVars(n int) string {
	var b strings.Builder
	b.WriteString("raise \"many\" if:\n")
	for i := range n {
		fmt.Fprintf(&b, "    (m%d: Message)\n", i)
	}
	b.WriteString("    1 == 1\n")
	return b.String()
}

// lastRule is appended to every hostile policy: it must still report one
// violation per message after the hostile rule stopped.
const lastRule = "\nraise \"each\" if:\n    (m: Message)\n"

func messages(n int, content func(i int) string) *trace.Trace {
	evs := make([]string, n)
	for i := range evs {
		evs[i] = fmt.Sprintf(`{"role": "user", "content": %q}`, content(i))
	}
	tr, err := trace.Decode([]byte("[" + strings.Join(evs, ",") + "]"))
	if err != nil {
		panic(err)
	}
	return tr
}

type hostileCase struct {
	name string
	src  string // the hostile rule (rule 0); lastRule is appended
	opts policy.Options
	msgs int // trace of this many messages "m0", "m1", ...
	// want is a substring of rule 0's budget_exceeded message
	want string
	// run selects the entry point: "" Analyze, "pending", "monitor"
	run string
}

var hostileCases = []hostileCase{
	// 3^20 bindings ran 339 s under a 2 s budget and grew to 23 GB
	{name: "issue_17_free20_timeout", src: freeVars(20), msgs: 3, opts: policy.Options{WallTime: 2 * time.Second}, want: "more than 10000 violations"},
	// 3^12 = 531,441 violations were printed with no budget_exceeded
	{name: "issue_17_free12_timeout", src: freeVars(12), msgs: 3, opts: policy.Options{WallTime: 100 * time.Millisecond}, want: "more than 10000 violations"},
	// with --max-steps 100000 this ran out of memory: binding spends steps
	{name: "issue_17_free14_max_steps", src: freeVars(14), msgs: 3, opts: policy.Options{MaxSteps: 100_000, MaxViolations: -1}, want: "budget of 100000 steps"},
	// binding alone, with every other budget off, still polls the clock
	{name: "issue_17_free20_wall_time_only", src: freeVars(20), msgs: 3, opts: policy.Options{WallTime: 200 * time.Millisecond, MaxSteps: 1 << 62, MaxViolations: 1 << 40}, want: "wall-time budget"},
	{name: "issue_17_free12_pending", src: freeVars(12), msgs: 3, run: "pending", want: "more than 10000 violations"},
	{name: "issue_17_free12_monitor", src: freeVars(12), msgs: 3, run: "monitor", want: "more than 10000 violations"},
	// ["x" * 1000000] * 1000 then a comprehension over it used 2 GB
	{name: "issue_17_comprehension_over_big_list", msgs: 3, want: "bytes of values",
		src: "raise \"big\" if:\n    (m: Message)\n    l := [\"x\" * 1000000] * 1000\n    len([s + \"y\" for s in l]) > 0\n"},
	{name: "issue_17_join_of_big_list", msgs: 3, want: "bytes per value",
		src: "raise \"big\" if:\n    (m: Message)\n    l := [\"x\" * 1000000] * 1000\n    len(\"\".join(l)) > 0\n"},
	{name: "issue_17_fstring_of_big_list", msgs: 3, want: "bytes per value",
		src: "raise \"big\" if:\n    (m: Message)\n    l := [\"x\" * 1000000] * 1000\n    len(f\"{l}\") > 0\n"},
	{name: "issue_17_format_of_big_string", msgs: 3, want: "bytes per value",
		src: "raise \"big\" if:\n    (m: Message)\n    s := \"x\" * 10000000\n    len(\"{0}{0}{0}{0}\".format(s)) > 0\n"},
	{name: "issue_17_doubling_strings", msgs: 3, want: "bytes per value",
		src: "raise \"big\" if:\n    (m: Message)\n    a := \"x\" * 10000000\n    b := a + a\n    len(b) > 0\n"},
	{name: "issue_17_repeat_over_value_budget", msgs: 3, want: "bytes per value",
		src: "raise \"big\" if:\n    (m: Message)\n    len(m.content * 100000000) > 0\n"},
	{name: "issue_17_violation_args", msgs: 3, want: "bytes of values",
		src: "raise PolicyViolation(\"big\", data=l) if:\n    (a: Message)\n    (b: Message)\n    (c: Message)\n    l := [\"x\" * 1000000] * 15\n"},
	{name: "issue_17_violation_args_nested", msgs: 3, want: "bytes of values",
		src: "raise PolicyViolation(\"big\", data=[l] * 1000) if:\n    (a: Message)\n    l := [\"x\" * 1000000] * 1000\n"},
	{name: "issue_17_text_of_nested_list", msgs: 3, want: "bytes of values",
		src: "raise \"big\" if:\n    (m: Message)\n    l := [[\"x\" * 1000000] * 1000] * 1000\n    len(text(l)) > 0\n"},
	{name: "issue_17_detector_on_big_list", msgs: 3, want: "bytes of values",
		src: "from invariant.detectors import secrets\n\nraise \"big\" if:\n    (m: Message)\n    l := [m.content + \"x\" * 1000000] * 1000\n    len(secrets(l)) >= 0\n"},
	{name: "issue_17_print_of_big_list", msgs: 3, want: "bytes per value", opts: policy.Options{Debug: io.Discard},
		src: "raise \"big\" if:\n    (m: Message)\n    l := [\"x\" * 1000000] * 1000\n    print(l)\n"},
	// nesting repeated lists: cheap in memory, 10^9 elements to compare
	{name: "issue_17_nested_repetition_compare", msgs: 3, want: "bytes per value",
		src: "raise \"big\" if:\n    (m: Message)\n    l := [[\"x\"] * 1000] * 1000\n    [l] * 1000 == [l] * 1000\n"},
	{name: "issue_17_nested_literal_compare", msgs: 3, want: "bytes per value",
		src: "raise \"big\" if:\n    (m: Message)\n    l := [[\"x\"] * 1000] * 1000\n    a := [l, l, l, l, l, l, l, l, l, l]\n    b := [a, a, a, a, a, a, a, a, a, a]\n    b == b\n"},
	// a key_error message per pair: distinct failures are capped too
	{name: "issue_17_distinct_failures", msgs: 150, want: "more than 10000 distinct failures",
		src: "raise \"k\" if:\n    (a: Message)\n    (b: Message)\n    {\"x\": 1}[a.content + b.content] == 1\n"},
}

func TestHostilePolicies(t *testing.T) {
	if name := os.Getenv("VIGIL_HOSTILE_CASE"); name != "" {
		i := slices.IndexFunc(hostileCases, func(c hostileCase) bool { return c.name == name })
		if i < 0 {
			t.Fatalf("no hostile case %q", name)
		}
		runHostile(t, hostileCases[i])
		return
	}
	if testing.Short() {
		t.Skip("hostile policies run in child processes; skipped with -short")
	}
	for _, hc := range hostileCases {
		t.Run(hc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), hostileTimeout)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHostilePolicies$", "-test.v")
			cmd.Env = append(os.Environ(), "VIGIL_HOSTILE_CASE="+hc.name)
			out, err := cmd.CombinedOutput()
			if err != nil || !strings.Contains(string(out), "--- PASS: TestHostilePolicies") {
				t.Fatalf("child: %v\n%s", err, out)
			}
		})
	}
}

// runHostile runs one case in this (child) process under a heap watchdog.
func runHostile(t *testing.T, hc hostileCase) {
	debug.SetMemoryLimit(hostileHeapLimit) // the GC works hard before the watchdog fires
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			metrics.Read(sample)
			if h := sample[0].Value.Uint64(); h > hostileHeapLimit {
				fmt.Printf("%s: heap reached %d MiB, over the %d MiB limit\n", hc.name, h>>20, hostileHeapLimit>>20)
				os.Exit(3)
			}
		}
	}()
	tr := messages(hc.msgs, func(i int) string { return fmt.Sprintf("m%d", i) })
	p := mustLoad(t, hc.src+lastRule, hc.opts)
	ctx := context.Background()
	start := time.Now()
	var res *policy.Result
	var err error
	switch hc.run {
	case "":
		res, err = p.Analyze(ctx, tr, nil)
	case "pending":
		res, err = p.AnalyzePending(ctx, &trace.Trace{Events: tr.Events[:1]}, &trace.Trace{Events: tr.Events[1:]}, nil)
	case "monitor":
		m, merr := p.NewMonitor(nil)
		if merr != nil {
			t.Fatal(merr)
		}
		res, err = m.Append(ctx, tr.Events...)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %v, %d violations, failures %+v", hc.name, time.Since(start), len(res.Errors), res.Failures)
	var budget []policy.Failure
	each := 0
	for _, f := range res.Failures {
		if f.Kind == "budget_exceeded" {
			budget = append(budget, f)
		}
	}
	for _, v := range res.Errors {
		if v.Rule == 1 {
			each++
		}
	}
	// When the wall-time budget runs out (on a loaded machine it may run
	// out before the budget the case is about), the later rules stop too
	// (spec §10.10).
	wall := len(budget) > 0 && hc.opts.WallTime > 0 && strings.Contains(budget[0].Message, "wall-time")
	if wall {
		hc.want = "wall-time budget"
		if len(budget) != 2 || budget[1].Rule != 1 || !slices.Equal(res.Truncated, []int{0, 1}) || each != 0 {
			t.Errorf("wall time: budget failures %+v, truncated %v, %d violations of the last rule; want both rules stopped", budget, res.Truncated, each)
		}
		budget = budget[:1]
	}
	header := strings.Count(hc.src[:strings.Index(hc.src, "raise")], "\n") + 1 // the rule's line
	if len(budget) != 1 || budget[0].Rule != 0 || budget[0].Line != header || budget[0].Column != 1 || !strings.Contains(budget[0].Message, hc.want) {
		t.Errorf("budget failures %+v, want one for rule 0 at %d:1 saying %q", budget, header, hc.want)
	}
	if wall {
		return
	}
	if !slices.Equal(res.Truncated, []int{0}) {
		t.Errorf("truncated %v, want [0]", res.Truncated)
	}
	want := hc.msgs
	if hc.run == "pending" {
		want--
	}
	if each != want {
		t.Errorf("the last rule reported %d violations, want %d: the other rules go on", each, want)
	}
}

// ruleGen builds a rule from fuzz bytes: free variables, assignments and
// conditions over expressions that repeat, concatenate, join, format and
// comprehend values (the constructions a budget has to bound).
type ruleGen struct {
	data  []byte
	nfree int
	nvars int
}

func (g *ruleGen) next(n int) int {
	if len(g.data) == 0 {
		return 0
	}
	b := g.data[0]
	g.data = g.data[1:]
	return int(b) % n
}

var genNumbers = []string{"0", "1", "3", "1000", "1000000", "10 ** 9"}

func (g *ruleGen) expr(depth int) string {
	if depth > 3 {
		return g.atom()
	}
	e := func() string { return g.expr(depth + 1) }
	num := genNumbers[g.next(len(genNumbers))]
	switch g.next(14) {
	case 0:
		return e() + " * " + num
	case 1:
		return "[" + e() + "] * " + num
	case 2:
		return "[s + " + e() + " for s in " + e() + "]"
	case 3:
		return e() + " + " + e()
	case 4:
		return `"".join(` + e() + ")"
	case 5:
		return `f"{` + g.atom() + `}{` + g.atom() + `}"`
	case 6:
		return `"{0}{0}{0}".format(` + e() + ")"
	case 7:
		return e() + ".upper()"
	case 8:
		return e() + `.split(" ")`
	case 9:
		return "[" + e() + " for s in " + e() + " if s]"
	case 10:
		return "text(" + e() + ")"
	case 11:
		return "(" + e() + ", " + e() + ")"
	}
	return g.atom()
}

func (g *ruleGen) atom() string {
	switch g.next(4) {
	case 0:
		if g.nfree > 0 {
			return fmt.Sprintf("v%d.content", g.next(g.nfree))
		}
	case 1:
		if g.nvars > 0 {
			return fmt.Sprintf("x%d", g.next(g.nvars))
		}
	case 2:
		return `'ab'`
	}
	return `'x y'`
}

func (g *ruleGen) rule() string {
	var b strings.Builder
	head := `"r"`
	if g.next(4) == 0 {
		head = `PolicyViolation("r", data=` + g.expr(2) + ")"
	}
	lines := 1 + g.next(8)
	body := make([]string, 0, lines)
	for range lines {
		switch g.next(4) {
		case 0:
			body = append(body, fmt.Sprintf("(v%d: Message)", g.nfree))
			g.nfree++
		case 1:
			body = append(body, fmt.Sprintf("x%d := %s", g.nvars, g.expr(0)))
			g.nvars++
		case 2:
			body = append(body, "len("+g.expr(0)+") > "+genNumbers[g.next(len(genNumbers))])
		default:
			body = append(body, g.expr(0)+" == "+g.expr(0))
		}
	}
	// the head may only use variables declared in the body
	if strings.Contains(head, "v") && g.nfree == 0 || strings.Contains(head, "x") && g.nvars == 0 {
		head = `"r"`
	}
	fmt.Fprintf(&b, "raise %s if:\n", head)
	for _, l := range body {
		b.WriteString("    " + l + "\n")
	}
	return b.String()
}

// FuzzBudgets runs random rules (src, or when it is empty a rule that
// ruleGen builds from data) on a small trace with small budgets: every analysis ends within its
// wall-time budget plus a margin, and allocates at most a small multiple
// of its memory budget plus a margin for the engine's own bookkeeping.
// The seeds (the hostile cases and a few generated rules) run in the
// normal suite.
func FuzzBudgets(f *testing.F) {
	for _, seed := range []string{
		"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00",
		"\x01\x07\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00",
		"\x01\x03\x01\x00\x04\x01\x02\x02\x02\x02\x02\x02\x02\x03\x02\x02\x02",
		"\x00\x03\x01\x01\x04\x00\x02\x01\x04\x02\x01\x00\x01\x03\x04\x05\x02\x02\x02",
		"\x00\x02\x01\x02\x05\x05\x02\x02\x02\x02\x01\x02\x05\x02\x02\x02",
		"\x00\x04\x01\x04\x09\x02\x02\x03\x02\x02\x02\x02\x02\x02\x02",
	} {
		f.Add([]byte(seed), "")
	}
	for _, hc := range hostileCases {
		f.Add([]byte(nil), hc.src)
	}
	tr := messages(3, func(i int) string { return strings.Repeat("ab ", i+1) })
	opts := policy.Options{MaxSteps: 20_000, WallTime: 100 * time.Millisecond, RegexTimeout: 50 * time.Millisecond,
		MaxViolations: 100, MaxValueSize: 1 << 20, MaxAlloc: 8 << 20}
	const (
		timeMargin = time.Second
		allocBound = 4*(8<<20) + 64<<20
	)
	f.Fuzz(func(t *testing.T, data []byte, src string) {
		if src == "" {
			src = (&ruleGen{data: data}).rule()
		}
		src += lastRule
		p, err := policy.Load(src, opts)
		if err != nil {
			return // the generator may use a name before its declaration
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		start := time.Now()
		res, err := p.Analyze(context.Background(), tr, nil)
		elapsed := time.Since(start)
		runtime.ReadMemStats(&after)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		if elapsed > opts.WallTime+timeMargin {
			t.Errorf("%s: ran %v, over its wall-time budget %v plus %v", src, elapsed, opts.WallTime, timeMargin)
		}
		if a := after.TotalAlloc - before.TotalAlloc; a > allocBound {
			t.Errorf("%s: allocated %d MiB, over %d MiB (memory budget %d MiB)", src, a>>20, allocBound>>20, opts.MaxAlloc>>20)
		}
		for _, f := range res.Failures {
			if f.Kind == "budget_exceeded" && !slices.Contains(res.Truncated, f.Rule) {
				t.Errorf("%s: rule %d stopped by a budget is not listed in truncated %v", src, f.Rule, res.Truncated)
			}
		}
	})
}

// TestBudgetOptions checks that each budget of Options is configurable,
// that a negative value turns it off, and that a result with no rule cut
// short has no "truncated" member.
func TestBudgetOptions(t *testing.T) {
	tr := messages(3, func(i int) string { return fmt.Sprintf("m%d", i) })
	tests := []struct {
		name  string
		line  string
		opts  policy.Options
		want  string // substring of rule 0's failure message; "" none
		kind  string // of that failure; "" means budget_exceeded
		kept  int    // violations of rule 0
		trunc bool
	}{
		{name: "value size", line: "len(m.content * 2000) > 0", opts: policy.Options{MaxValueSize: 1000}, want: "over its budget of 1000 bytes per value", trunc: true},
		{name: "value size off", line: `len("".join(["x" * 10000000, "y" * 10000000])) > 0`, opts: policy.Options{MaxValueSize: -1, MaxAlloc: -1}, kept: 3},
		// with no budget, the fixed repetition limits (16 MiB, 2^20 elements) still hold
		{name: "value size off keeps repetition limit", line: `len("x" * 20000000) > 0`, opts: policy.Options{MaxValueSize: -1, MaxAlloc: -1}, kind: "value_error", want: "repetition too large"},
		{name: "value size default", line: `len("x" * 20000000) > 0`, want: "over its budget of 16777216 bytes per value", trunc: true},
		{name: "memory", line: "len(m.content * 3000) > 0", opts: policy.Options{MaxAlloc: 10000}, want: "more than 10000 bytes of values", kept: 1, trunc: true},
		{name: "violations", line: "(n: Message)", opts: policy.Options{MaxViolations: 5}, want: "more than 5 violations; the first 5 are kept", kept: 5, trunc: true},
		{name: "violations off", line: "(n: Message)", opts: policy.Options{MaxViolations: -1}, kept: 9},
		{name: "within budgets", line: `len(m.content * 3000) == 6000`, kept: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustLoad(t, "raise \"x\" if:\n    (m: Message)\n    "+tt.line+"\n"+lastRule, tt.opts)
			res, err := p.Analyze(context.Background(), tr, nil)
			if err != nil {
				t.Fatal(err)
			}
			kept, last := 0, 0
			for _, v := range res.Errors {
				if v.Rule == 0 {
					kept++
				} else {
					last++
				}
			}
			var msgs []string
			for _, f := range res.Failures {
				msgs = append(msgs, f.Kind+": "+f.Message)
			}
			kind := "budget_exceeded: "
			if tt.kind != "" {
				kind = tt.kind + ": "
			}
			switch {
			case tt.want == "" && len(msgs) > 0:
				t.Errorf("failures %q, want none", msgs)
			case tt.want != "" && (len(msgs) != 1 || !strings.HasPrefix(msgs[0], kind) || !strings.Contains(msgs[0], tt.want)):
				t.Errorf("failures %q, want one %ssaying %q", msgs, kind, tt.want)
			}
			if kept != tt.kept || last != 3 {
				t.Errorf("violations: %d of rule 0, %d of rule 1; want %d and 3", kept, last, tt.kept)
			}
			if got := slices.Equal(res.Truncated, []int{0}); got != tt.trunc || !tt.trunc && res.Truncated != nil {
				t.Errorf("truncated %v, want rule 0 truncated: %v", res.Truncated, tt.trunc)
			}
			js, err := json.Marshal(res)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(js), `"truncated"`) != tt.trunc {
				t.Errorf("JSON %s: want \"truncated\" only when a rule was cut short", js)
			}
		})
	}
}
