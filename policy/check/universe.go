package check

import "sort"

// SymbolKind says what a built-in name or module member is.
type SymbolKind int

// Kinds of symbols.
const (
	// SymFunc is a callable built-in: a function, helper or detector.
	SymFunc SymbolKind = iota
	// SymType is a type name usable in declarations (§7.6); not callable.
	SymType
	// SymQuantifier is forall or count (§10.7); usable only as a
	// quantifier line.
	SymQuantifier
	// SymModule is a module (a submodule reached through a module value).
	SymModule
	// SymValue is any other non-callable built-in value (input).
	SymValue
)

// Param is one parameter of a built-in function.
type Param struct {
	Name     string
	Optional bool // may be omitted
}

// Symbol describes a built-in name or a module member.
type Symbol struct {
	Kind SymbolKind
	// Name is the canonical name (what the table calls it), e.g. "secrets",
	// "forall", "Message"; for a module, its last component.
	Name string
	// Module is the dotted path of a SymModule.
	Module string
	// Params, Variadic and AnyKwargs give the signature of a SymFunc:
	// positional-or-keyword parameters in order, extra positional
	// arguments allowed, any keyword argument allowed.
	Params    []Param
	Variadic  bool
	AnyKwargs bool
	// Result is the static type of the result of a SymFunc when known:
	// "bool", "int", "float", "str", "list", "dict"; "" when unknown. Used
	// for the warning "line is not a boolean".
	Result string
	// Regex marks a function whose first argument is a regular expression
	// (match, find), for the regex-hostile escape warning (§2.5).
	Regex bool
	// Detector marks a detector or model-backed call: counted in
	// Cost.Detectors and weighted in Cost.Nodes.
	Detector bool
	// Missing, when not empty, says the function needs a provider that is
	// not configured and names the setting to configure (§13.4). Using it
	// is the load error "detector NAME has no provider (configure KEY)".
	Missing string
}

// Conditional capabilities a Universe is asked about (§13.4). Each names a
// need that arises only from how a detector is used.
const (
	CapPIIPerson      = "pii:PERSON"             // pii with entities naming PERSON, or <PERSON>
	CapPIILocation    = "pii:LOCATION"           // pii with entities naming LOCATION, or <LOCATION>
	CapPIIModel       = "pii:*"                  // pii with entities naming a type without a "pii:TYPE" capability
	CapModerated      = "moderated"              // <MODERATED> in a pattern
	CapInjectionModel = "prompt_injection:model" // prompt_injection with model=
)

// Universe is the standard library as the loader sees it. Implementations
// must be safe for concurrent use; Table is a ready-made one.
type Universe interface {
	// Builtin returns the symbol for a name visible without import
	// (spec §13.1), including type names and input.
	Builtin(name string) (*Symbol, bool)
	// Module reports whether path names an importable module (§13.2).
	Module(path string) bool
	// Member returns the export name of module path: a function, type,
	// quantifier or submodule.
	Member(path, name string) (*Symbol, bool)
	// Names, Members and Modules list what Builtin, Member and Module
	// accept; they are used for "did you mean" suggestions only.
	Names() []string
	Members(path string) []string
	Modules() []string
	// Capability reports whether a conditional capability (the Cap*
	// constants) is available; when it is not, config names the setting
	// that would provide it.
	Capability(name string) (config string, ok bool)
}

// RegexChecker is an optional interface of a Universe. When the Universe
// implements it, strings known at load time that are used as regular
// expressions (the first argument of a Symbol.Regex function, pattern
// strings of tool patterns) are compiled, and an invalid one is a warning:
// it stays a runtime regex_error (spec §9: the loader SHOULD warn earlier).
type RegexChecker interface {
	CheckRegex(pattern string) error
}

// Table is a Universe backed by maps. The zero value knows nothing.
type Table struct {
	// Builtins maps names visible without import to their symbols.
	Builtins map[string]*Symbol
	// Exports maps a module path to its exports. Every key is a module;
	// submodules are found by path (a member "detectors" of "invariant" is
	// the module "invariant.detectors" when that is a key).
	Exports map[string]map[string]*Symbol
	// Missing maps an unavailable conditional capability to the setting
	// that provides it; capabilities not listed are available.
	Missing map[string]string
	// Regex, when not nil, makes the Table a RegexChecker.
	Regex func(pattern string) error
}

// CheckRegex implements RegexChecker when t.Regex is set.
func (t *Table) CheckRegex(pattern string) error {
	if t.Regex == nil {
		return nil
	}
	return t.Regex(pattern)
}

// Builtin implements Universe.
func (t *Table) Builtin(name string) (*Symbol, bool) {
	s, ok := t.Builtins[name]
	return s, ok
}

// Module implements Universe.
func (t *Table) Module(path string) bool {
	_, ok := t.Exports[path]
	return ok
}

// Member implements Universe.
func (t *Table) Member(path, name string) (*Symbol, bool) {
	if s, ok := t.Exports[path][name]; ok {
		return s, true
	}
	if sub := path + "." + name; t.Module(sub) {
		return &Symbol{Kind: SymModule, Name: name, Module: sub}, true
	}
	return nil, false
}

// Names implements Universe.
func (t *Table) Names() []string { return sortedKeys(t.Builtins) }

// Members implements Universe.
func (t *Table) Members(path string) []string {
	names := sortedKeys(t.Exports[path])
	prefix := path + "."
	for m := range t.Exports {
		if len(m) > len(prefix) && m[:len(prefix)] == prefix {
			rest := m[len(prefix):]
			dot := false
			for i := 0; i < len(rest); i++ {
				if rest[i] == '.' {
					dot = true
					break
				}
			}
			if !dot {
				names = append(names, rest)
			}
		}
	}
	sort.Strings(names)
	return names
}

// Modules implements Universe.
func (t *Table) Modules() []string {
	var ms []string
	for m := range t.Exports {
		ms = append(ms, m)
	}
	sort.Strings(ms)
	return ms
}

// Capability implements Universe.
func (t *Table) Capability(name string) (string, bool) {
	if cfg, ok := t.Missing[name]; ok {
		return cfg, false
	}
	return "", true
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
