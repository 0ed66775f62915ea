// Package builtin is the standard library of the Vigil policy language: the
// value model (spec §6), the single table of built-in functions and modules
// (spec §13.1–13.2), and the registry through which detectors (package
// detect) plug in (spec §13.3–13.4).
//
// Goals: one table, Builtins, that the loader (through a Universe built from
// it), the evaluator and the documentation all read; a small registration
// API for detectors that work on strings and report code-point ranges; and a
// clear "not configured" answer for model-backed detectors.
//
// Non-goals: parsing, name resolution and evaluation of policies (packages
// syntax, check, eval); the detectors themselves (package detect).
package builtin

import (
	"context"
	"fmt"
	"io"
	"sort"
	"sync"
	"time"
)

// Need says what a built-in requires to run (the "Needs" column of spec §13.3).
type Need int

// Needs of built-ins.
const (
	// NeedNone: implemented by Vigil itself, always available.
	NeedNone Need = iota
	// NeedProvider: ML, network or external; available only when a provider
	// is registered (Available reports it) — otherwise using it is the load
	// error of spec §13.4.
	NeedProvider
)

// Param describes one parameter of a built-in.
type Param struct {
	Name     string
	Optional bool // may be omitted (has a default)
}

// Builtin is one entry of the table: a function callable from policies.
type Builtin struct {
	// Name as written in policies, e.g. "secrets".
	Name string
	// Modules that export the name besides invariant.builtins (for core
	// built-ins) — e.g. {"invariant.detectors", "invariant.detectors.secrets"}.
	// A core built-in (Core true) is also visible without import.
	Modules []string
	// Core marks the built-ins of spec §13.1 that need no import.
	Core bool
	// Params are the positional-or-keyword parameters in order.
	Params []Param
	// Variadic accepts any number of extra positional arguments (print, text,
	// min, max, Violation).
	Variadic bool
	// AnyKwargs accepts arbitrary keyword arguments (Violation).
	AnyKwargs bool
	// Doc is one line of documentation.
	Doc string
	// Marks says the function marks ranges in its string arguments.
	Marks bool
	// Need says what it needs; Config names the setting that provides it
	// (e.g. "detectors.base_url") for the load error of spec §13.4.
	Need   Need
	Config string
	// Available reports whether a provider is configured; nil means
	// available. Consulted at load time only for NeedProvider built-ins.
	Available func() bool
	// Result is the static type of the result when known ("bool", "int",
	// "float", "str", "list", "dict"; "" unknown), for the loader's
	// "line is not a boolean" warning. Regex marks a function whose first
	// argument is a regular expression (match, find).
	Result string
	Regex  bool
	// Cache marks results as cacheable for the lifetime of a policy
	// (spec §13.5): expensive or non-deterministic functions. Model-backed
	// built-ins (NeedProvider) are always cached.
	Cache bool
	// Impl runs the function. Nil means "declared but not implemented in
	// this build" (a load error when used, like an unavailable detector).
	Impl Func
}

// Func implements a built-in. It returns the result or a *RuntimeError
// (another error is reported as detector_error).
type Func func(c *Call) (Value, error)

// Call is one invocation of a built-in.
type Call struct {
	Ctx    context.Context
	Name   string
	Args   []Value // positional arguments, locations kept
	Kwargs *Dict   // keyword arguments, nil when none
	Env    *Env
	// mark records a mark; nil drops marks.
	mark func(at *Path, start, end int)
}

// NewCall returns a Call whose marks go to mark (nil drops them).
func NewCall(ctx context.Context, name string, args []Value, kwargs *Dict, env *Env, mark func(at *Path, start, end int)) *Call {
	if env == nil {
		env = DefaultEnv()
	}
	return &Call{Ctx: ctx, Name: name, Args: args, Kwargs: kwargs, Env: env, mark: mark}
}

// Mark marks code points [start, end) of the string value s if s is located
// (spec §11.3); marks on unlocated strings are dropped.
func (c *Call) Mark(s Value, start, end int) {
	if c.mark == nil {
		return
	}
	if at := At(s); at != nil {
		c.mark(at, start, end)
	}
}

// Arg returns the argument for parameter i of the builtin (positional or by
// keyword name), or def when it was not given.
func (c *Call) Arg(b *Builtin, i int, def Value) Value {
	if i < len(c.Args) {
		return c.Args[i]
	}
	if c.Kwargs != nil && b != nil && i < len(b.Params) {
		if v, ok := c.Kwargs.Get(b.Params[i].Name); ok {
			return v
		}
	}
	return def
}

// Env is the per-analysis environment built-ins run in.
type Env struct {
	// RegexTimeout bounds each regular-expression match (default 1 s).
	RegexTimeout time.Duration
	// Debug receives print output; nil discards it.
	Debug io.Writer
	// Warn records a warning in the result (once per message); nil drops it.
	Warn func(msg string)
}

// DefaultEnv returns an Env with the defaults of spec §10.10.
func DefaultEnv() *Env { return &Env{RegexTimeout: time.Second} }

var (
	mu       sync.RWMutex
	registry = map[string]*Builtin{}
	exports  map[string]map[string]bool // module -> export set; nil when stale
)

// Builtins is the table of built-ins shipped with the engine (spec §13.1 and
// the helpers of §13.3 that Vigil implements itself). Detectors from package
// detect are added with Register. Read it through Lookup and All, which see
// registrations too.
var Builtins = []Builtin{
	{Name: "any", Result: "bool", Core: true, Params: []Param{{Name: "it"}}, Doc: "True iff some element is truthy.", Impl: fnAny},
	{Name: "all", Result: "bool", Core: true, Params: []Param{{Name: "it"}}, Doc: "True iff every element is truthy (all([]) is True).", Impl: fnAll},
	{Name: "empty", Result: "bool", Core: true, Params: []Param{{Name: "x"}}, Doc: "len(x) == 0.", Impl: fnEmpty},
	{Name: "len", Result: "int", Core: true, Params: []Param{{Name: "x"}}, Doc: "Code points of a str; size of a list, tuple, dict; chunk count of Contents.", Impl: fnLen},
	{Name: "min", Core: true, Variadic: true, Doc: "Smallest of one iterable or several arguments; empty input is value_error.", Impl: fnMin},
	{Name: "max", Core: true, Variadic: true, Doc: "Largest of one iterable or several arguments; empty input is value_error.", Impl: fnMax},
	{Name: "sum", Core: true, Params: []Param{{Name: "it"}, {Name: "start", Optional: true}}, Doc: "Numeric sum of the elements plus start (0).", Impl: fnSum},
	{Name: "tuple", Core: true, Params: []Param{{Name: "it", Optional: true}}, Doc: "A tuple of the elements.", Impl: fnTuple},
	{Name: "match", Result: "bool", Regex: true, Core: true, Params: []Param{{Name: "pattern"}, {Name: "s"}}, Doc: "True iff the Python regex matches at the start of s.", Impl: fnMatch},
	{Name: "find", Result: "list", Regex: true, Core: true, Params: []Param{{Name: "pattern"}, {Name: "s"}}, Marks: true, Doc: "All non-overlapping matches, left to right; marks each.", Impl: fnFind},
	{Name: "json_loads", Core: true, Params: []Param{{Name: "s"}}, Doc: "The parsed JSON value (no location); invalid JSON is json_error.", Impl: fnJSONLoads},
	{Name: "print", Result: "bool", Core: true, Variadic: true, Doc: "Writes the display strings to the debug output; returns True.", Impl: fnPrint},
	{Name: "tool_call", Core: true, Params: []Param{{Name: "out"}}, Doc: "The ToolCall linked to a ToolOutput, or None.", Impl: fnToolCall},
	{Name: "server", Core: true, Params: []Param{{Name: "e"}}, Doc: "The server of an event, or None.", Impl: fnServer},
	{Name: "text", Result: "list", Core: true, Modules: []string{"invariant"}, Variadic: true, Doc: "Flat list of the strings of the arguments.", Impl: fnText},
	{Name: "image", Result: "list", Core: true, Modules: []string{"invariant"}, Variadic: true, Doc: "Flat list of the image URLs of the arguments.", Impl: fnImage},
	{Name: "Violation", Core: true, Modules: []string{"invariant"}, Variadic: true, AnyKwargs: true, Doc: "A violation value for a raise head.", Impl: fnViolation},
	{Name: "PolicyViolation", Core: true, Modules: []string{"invariant"}, Variadic: true, AnyKwargs: true, Doc: "Alias of Violation.", Impl: fnViolation},
	{Name: "links", Result: "list", Modules: []string{"invariant.parsers", "invariant.parsers.html"}, Params: []Param{{Name: "data"}}, Doc: "URLs starting with http:// or https://, without repeats.", Impl: fnLinks},
	// Detectors and helpers whose implementations come from package detect
	// (Register replaces these declarations). Without one, using the name is
	// a load error.
	{Name: "secrets", Result: "list", Modules: []string{"invariant.detectors", "invariant.detectors.secrets"}, Params: []Param{{Name: "data"}}, Doc: "Secret type names, one per match."},
	{Name: "unicode", Result: "list", Modules: []string{"invariant.detectors", "invariant.detectors.prompt_injection"}, Params: []Param{{Name: "data"}, {Name: "categories", Optional: true}}, Marks: true, Doc: "Unicode general categories present; marks each code point reported."},
	{Name: "copyright", Result: "list", Modules: []string{"invariant.detectors", "invariant.detectors.copyright"}, Params: []Param{{Name: "data"}}, Doc: "License names and/or COPYRIGHT."},
	{Name: "python_code", Modules: []string{"invariant.detectors", "invariant.detectors.code"}, Params: []Param{{Name: "data"}, {Name: "ipython_mode", Optional: true}}, Doc: "PythonCodeResult: imports, builtins, function_calls, syntax_error."},
	{Name: "ipython_code", Modules: []string{"invariant.detectors", "invariant.detectors.code"}, Params: []Param{{Name: "data"}}, Need: NeedProvider, Config: "detectors.base_url", Doc: "PythonCodeResult after IPython cell preprocessing."},
	{Name: "semgrep", Result: "list", Modules: []string{"invariant.detectors", "invariant.detectors.code"}, Params: []Param{{Name: "data"}, {Name: "lang"}}, Need: NeedProvider, Config: "detectors.base_url", Doc: "List of CodeIssue."},
	{Name: "pii", Result: "list", Modules: []string{"invariant.detectors", "invariant.detectors.pii"}, Params: []Param{{Name: "data"}, {Name: "entities", Optional: true}}, Marks: true, Doc: "PII entity types found; marks each finding."},
	{Name: "moderated", Result: "bool", Modules: []string{"invariant.detectors", "invariant.detectors.moderation"}, Params: []Param{{Name: "data"}, {Name: "model", Optional: true}, {Name: "default_threshold", Optional: true}, {Name: "cat_thresholds", Optional: true}}, Marks: true, Need: NeedProvider, Config: "detectors.base_url", Doc: "True if some string is flagged."},
	{Name: "prompt_injection", Result: "bool", Modules: []string{"invariant.detectors", "invariant.detectors.prompt_injection"}, Params: []Param{{Name: "data"}, {Name: "model", Optional: true}, {Name: "threshold", Optional: true}}, Doc: "True if some string scores at least threshold."},
	{Name: "is_similar", Result: "bool", Modules: []string{"invariant.detectors", "invariant.detectors.sentence_similarity"}, Params: []Param{{Name: "data"}, {Name: "target"}, {Name: "threshold", Optional: true}}, Need: NeedProvider, Config: "detectors.base_url", Doc: "True iff an embedding similarity exceeds the threshold."},
	{Name: "embedding_similarity", Result: "float", Modules: []string{"invariant.detectors", "invariant.detectors.sentence_similarity"}, Params: []Param{{Name: "data"}, {Name: "target"}, {Name: "mode", Optional: true}}, Need: NeedProvider, Config: "detectors.base_url", Doc: "Largest (or smallest) embedding similarity."},
	{Name: "fuzzy_contains", Result: "bool", Modules: []string{"invariant.detectors", "invariant.detectors.fuzzy_matching"}, Params: []Param{{Name: "search_text"}, {Name: "query"}, {Name: "query_similarity_threshold", Optional: true}, {Name: "use_semantic", Optional: true}}, Marks: true, Doc: "True iff some substring is within the edit distance of query."},
	{Name: "html_code", Modules: []string{"invariant.parsers", "invariant.parsers.html"}, Params: []Param{{Name: "data"}}, Doc: "HTMLData with alt_texts and links."},
	{Name: "ocr", Result: "list", Modules: []string{"invariant.parsers", "invariant.parsers.ocr"}, Params: []Param{{Name: "image"}}, Need: NeedProvider, Config: "detectors.base_url", Doc: "Text lines of an image."},
	{Name: "llm", Result: "str", Modules: []string{"invariant", "invariant.llm"}, Params: []Param{{Name: "prompt"}, {Name: "system_prompt", Optional: true}, {Name: "model", Optional: true}, {Name: "temperature", Optional: true}, {Name: "max_tokens", Optional: true}}, Need: NeedProvider, Config: "detectors.base_url", Doc: "The model's answer."},
	{Name: "llm_confirm", Result: "bool", Modules: []string{"invariant", "invariant.llm"}, Params: []Param{{Name: "property_description"}, {Name: "system_prompt", Optional: true}, {Name: "model", Optional: true}}, Need: NeedProvider, Config: "detectors.base_url", Doc: "True iff the model answers yes."},
	{Name: "should_allow_rbac", Result: "bool", Modules: []string{"invariant.access_control"}, Params: []Param{{Name: "data"}, {Name: "scope"}, {Name: "user"}, {Name: "user_roles"}, {Name: "role_grants"}}, Doc: "True iff some role of user grants scope.", Impl: fnShouldAllowRBAC},
}

// Modules lists the importable modules (spec §13.2) and the names each
// exports besides the built-ins that name the module in their Modules field.
var Modules = map[string][]string{
	"invariant":                               {"forall", "count", "Message", "ToolCall", "ToolOutput", "Function", "TextChunk", "Image", "Tool", "ToolParameter", "str", "int", "float", "bool", "list", "dict"},
	"invariant.builtins":                      nil,
	"invariant.quantifiers":                   {"forall", "count"},
	"invariant.llm":                           nil,
	"invariant.detectors":                     nil,
	"invariant.detectors.secrets":             nil,
	"invariant.detectors.copyright":           nil,
	"invariant.detectors.pii":                 nil,
	"invariant.detectors.moderation":          nil,
	"invariant.detectors.prompt_injection":    nil,
	"invariant.detectors.sentence_similarity": nil,
	"invariant.detectors.fuzzy_matching":      nil,
	"invariant.detectors.code":                nil,
	"invariant.parsers":                       nil,
	"invariant.parsers.html":                  nil,
	"invariant.parsers.ocr":                   nil,
	"invariant.access_control":                nil,
}

// TypeNames are the type names usable in declarations (spec §7.6).
var TypeNames = []string{"Message", "ToolCall", "ToolOutput", "Function", "TextChunk", "Image", "Tool", "ToolParameter", "str", "int", "float", "bool", "list", "dict"}

func init() {
	for i := range Builtins {
		registry[Builtins[i].Name] = &Builtins[i]
	}
}

// Register adds or replaces a built-in (normally a detector from package
// detect, called from its init). Fields left empty in b are taken from the
// declaration of the same name in Builtins (modules, params, doc, need), so a
// detector registration may give only Name and Impl. Register is safe for
// concurrent use but is meant for init time: policies loaded earlier keep the
// implementation they resolved.
func Register(b Builtin) {
	mu.Lock()
	defer mu.Unlock()
	registry[b.Name] = merge(b, registry[b.Name])
	exports = nil
}

// Merge returns b completed from the registered declaration of the same
// name (as Register does) without registering it.
func Merge(b Builtin) *Builtin {
	mu.RLock()
	defer mu.RUnlock()
	return merge(b, registry[b.Name])
}

func merge(b Builtin, old *Builtin) *Builtin {
	if old != nil {
		if b.Modules == nil {
			b.Modules = old.Modules
		}
		if b.Params == nil {
			b.Params = old.Params
			b.Variadic = b.Variadic || old.Variadic
		}
		if b.Doc == "" {
			b.Doc = old.Doc
		}
		if b.Config == "" {
			b.Config = old.Config
			if b.Need == NeedNone {
				b.Need = old.Need
			}
		}
		b.Marks = b.Marks || old.Marks
		b.Regex = b.Regex || old.Regex
		if b.Result == "" {
			b.Result = old.Result
		}
		b.Core = b.Core || old.Core
	}
	return &b
}

// Lookup returns the built-in called name.
func Lookup(name string) (*Builtin, bool) {
	mu.RLock()
	b, ok := registry[name]
	mu.RUnlock()
	return b, ok
}

// All returns every built-in, sorted by name.
func All() []*Builtin {
	mu.RLock()
	out := make([]*Builtin, 0, len(registry))
	for _, b := range registry {
		out = append(out, b)
	}
	mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// ModuleExports returns the names module exports, and whether the module
// exists. invariant.builtins exports every core built-in.
func ModuleExports(module string) ([]string, bool) {
	extra, ok := Modules[module]
	if !ok {
		return nil, false
	}
	names := append([]string(nil), extra...)
	for _, b := range All() {
		if module == "invariant.builtins" && b.Core {
			names = append(names, b.Name)
			continue
		}
		for _, m := range b.Modules {
			if m == module {
				names = append(names, b.Name)
				break
			}
		}
	}
	return names, true
}

// Conditional capabilities (spec §13.4): needs that arise from how a
// detector is used rather than from calling it.
const (
	CapPIIPerson      = "pii:PERSON"             // pii with entities naming PERSON, or <PERSON>
	CapPIILocation    = "pii:LOCATION"           // pii with entities naming LOCATION, or <LOCATION>
	CapModerated      = "moderated"              // <MODERATED> in a pattern
	CapInjectionModel = "prompt_injection:model" // prompt_injection with model=
	// CapPIIModel: an entity recogniser that answers pii entity types
	// with no capability "pii:TYPE" of their own.
	CapPIIModel = "pii:*"
)

var capabilities = map[string]bool{}

// SetCapability records whether a conditional capability (the Cap*
// constants) has a provider. Package detect calls it when a model provider
// is configured; without a call the capability is missing.
func SetCapability(name string, available bool) {
	mu.Lock()
	capabilities[name] = available
	mu.Unlock()
}

// Capability reports whether a conditional capability is available, and
// otherwise the setting that would provide it.
func Capability(name string) (config string, ok bool) {
	mu.RLock()
	defer mu.RUnlock()
	if capabilities[name] {
		return "", true
	}
	return "detectors.base_url", false
}

// Exports reports whether module exists and whether it exports name. It
// is the fast form of ModuleExports.
func Exports(module, name string) (moduleExists, exported bool) {
	mu.RLock()
	ex := exports
	mu.RUnlock()
	if ex == nil {
		ex = map[string]map[string]bool{}
		for m := range Modules {
			names, _ := ModuleExports(m)
			set := make(map[string]bool, len(names))
			for _, n := range names {
				set[n] = true
			}
			ex[m] = set
		}
		mu.Lock()
		exports = ex
		mu.Unlock()
	}
	set, ok := ex[module]
	return ok, set[name]
}

// Usable reports whether the built-in can be used in a policy loaded now: nil,
// or the load error of spec §13.4 ("detector NAME has no provider (configure
// KEY)"), or an error saying the detector is not part of this build.
func (b *Builtin) Usable() error {
	if b.Need == NeedProvider && (b.Available == nil || !b.Available()) {
		return NoProviderError(b.Name, b.Config)
	}
	if b.Impl == nil {
		return fmt.Errorf("detector %s is not available in this build (register package detect)", b.Name)
	}
	return nil
}

// CheckArity reports a wrong number of arguments or an unknown keyword, as a
// type_error.
func (b *Builtin) CheckArity(npos int, kwnames []string) error {
	if !b.Variadic && npos > len(b.Params) {
		return Errorf(TypeError, "%s() takes at most %d arguments (%d given)", b.Name, len(b.Params), npos)
	}
	given := make(map[string]bool, len(kwnames))
	for _, k := range kwnames {
		idx := -1
		for i, p := range b.Params {
			if p.Name == k {
				idx = i
			}
		}
		if idx < 0 && !b.AnyKwargs {
			return Errorf(TypeError, "%s() got an unexpected keyword argument '%s'", b.Name, k)
		}
		if idx >= 0 && idx < npos {
			return Errorf(TypeError, "%s() got multiple values for argument '%s'", b.Name, k)
		}
		given[k] = true
	}
	for i, p := range b.Params {
		if !p.Optional && i >= npos && !given[p.Name] {
			return Errorf(TypeError, "%s() missing required argument '%s'", b.Name, p.Name)
		}
	}
	return nil
}

// Match is one finding of a string detector: code points [Start, End) of
// the string it scanned, with a label (e.g. "GITHUB_TOKEN", "Cf").
type Match struct {
	Start, End int
	Label      string
}

// TextFunc is the shape of a detector that scans one string at a time:
// it receives the string and the call (for keyword arguments and context)
// and returns its matches in report order.
type TextFunc func(c *Call, text string) ([]Match, error)

// TextDetector returns an Impl that applies f to every string of
// text(data) (the first argument) in turn and returns the list of labels of
// all matches, concatenated. When mark is true every match is marked in its
// string (spec §11.3).
func TextDetector(f TextFunc, mark bool) Func {
	return func(c *Call) (Value, error) {
		if len(c.Args) == 0 {
			return nil, Errorf(TypeError, "%s() missing required argument 'data'", c.Name)
		}
		var out []Value
		for _, s := range Texts(c.Args[0]) {
			ms, err := f(c, Str(s))
			if err != nil {
				return nil, err
			}
			for _, m := range ms {
				out = append(out, m.Label)
				if mark {
					c.Mark(s, m.Start, m.End)
				}
			}
		}
		if out == nil {
			out = []Value{}
		}
		return out, nil
	}
}
