package policy

import (
	"sync"

	"github.com/vigilhq/vigil/policy/builtin"
	"github.com/vigilhq/vigil/policy/check"
)

// universe is the standard library as the loader (package check) sees it,
// built from the builtin table (with the detectors registered so far).
type universe struct {
	*check.Table
	overrides map[string]*builtin.Builtin
}

// capabilityDetector names the detector that provides a conditional
// capability: a policy-level replacement of it provides the capability.
var capabilityDetector = map[string]string{
	builtin.CapPIIPerson: "pii", builtin.CapPIILocation: "pii",
	builtin.CapModerated: "moderated", builtin.CapInjectionModel: "prompt_injection",
}

// Capability implements check.Universe from builtin's capabilities.
func (u universe) Capability(name string) (string, bool) {
	if _, ok := u.overrides[capabilityDetector[name]]; ok {
		return "", true
	}
	return builtin.Capability(name)
}

var (
	universeMu   sync.Mutex
	universeSig  int
	universeMemo check.Universe
)

// Universe returns the check.Universe of the built-ins registered now. It
// is rebuilt when a built-in has been registered since the last call.
func Universe() check.Universe {
	all := builtin.All()
	sig := len(all)
	for _, b := range all {
		if b.Impl != nil {
			sig += 1 << 16
		}
		if b.Need == builtin.NeedProvider && b.Usable() == nil {
			sig += 1 << 24
		}
	}
	universeMu.Lock()
	defer universeMu.Unlock()
	if universeMemo != nil && sig == universeSig {
		return universeMemo
	}
	universeMemo, universeSig = buildUniverse(all, nil), sig
	return universeMemo
}

// universeWith is the Universe of the registered built-ins with overrides.
func universeWith(overrides map[string]*builtin.Builtin) check.Universe {
	all := builtin.All()
	for i, b := range all {
		if o, ok := overrides[b.Name]; ok {
			all[i] = o
		}
	}
	return buildUniverse(all, overrides)
}

func symbol(b *builtin.Builtin) *check.Symbol {
	s := &check.Symbol{Kind: check.SymFunc, Name: b.Name, Variadic: b.Variadic, AnyKwargs: b.AnyKwargs,
		Result: b.Result, Regex: b.Regex, Detector: !b.Core}
	for _, p := range b.Params {
		s.Params = append(s.Params, check.Param{Name: p.Name, Optional: p.Optional})
	}
	if err := b.Usable(); err != nil {
		s.Missing = b.Config
		if s.Missing == "" {
			s.Missing = "detectors (import package detect)"
		}
	}
	return s
}

func buildUniverse(all []*builtin.Builtin, overrides map[string]*builtin.Builtin) check.Universe {
	t := &check.Table{Builtins: map[string]*check.Symbol{}, Exports: map[string]map[string]*check.Symbol{},
		Regex: func(p string) error { _, err := builtin.Regexp(p); return err }}
	syms := map[string]*check.Symbol{}
	for _, b := range all {
		s := symbol(b)
		syms[b.Name] = s
		if b.Core {
			t.Builtins[b.Name] = s
		}
	}
	for _, n := range builtin.TypeNames {
		syms[n] = &check.Symbol{Kind: check.SymType, Name: n}
		t.Builtins[n] = syms[n]
	}
	syms["forall"] = &check.Symbol{Kind: check.SymQuantifier, Name: "forall"}
	syms["count"] = &check.Symbol{Kind: check.SymQuantifier, Name: "count"}
	t.Builtins["input"] = &check.Symbol{Kind: check.SymValue, Name: "input"}
	for m := range builtin.Modules {
		names, _ := builtin.ModuleExports(m)
		ex := map[string]*check.Symbol{}
		for _, n := range names {
			if s, ok := syms[n]; ok {
				ex[n] = s
			}
		}
		t.Exports[m] = ex
	}
	return universe{t, overrides}
}
