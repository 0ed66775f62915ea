package check

import (
	"sync"

	"github.com/dlclark/regexp2"
)

// testUniverse is the standard library of spec §13 as a Table, for the
// tests of this package. The engine builds the real one from its builtin
// table; this one only has to agree on names, signatures and providers.
func testUniverse() *Table {
	fn := func(name, result string, params ...string) *Symbol {
		s := &Symbol{Kind: SymFunc, Name: name, Result: result}
		for _, p := range params {
			opt := false
			if p[len(p)-1] == '?' {
				p, opt = p[:len(p)-1], true
			}
			s.Params = append(s.Params, Param{Name: p, Optional: opt})
		}
		return s
	}
	variadic := func(s *Symbol) *Symbol { s.Variadic = true; return s }
	detector := func(s *Symbol) *Symbol { s.Detector = true; return s }
	missing := func(s *Symbol) *Symbol { s.Missing, s.Detector = "detectors.base_url", true; return s }
	violation := func(name string) *Symbol {
		return &Symbol{Kind: SymFunc, Name: name, Variadic: true, AnyKwargs: true}
	}
	regex := func(s *Symbol) *Symbol { s.Regex = true; return s }

	builtins := map[string]*Symbol{
		"any":             fn("any", "bool", "it"),
		"all":             fn("all", "bool", "it"),
		"empty":           fn("empty", "bool", "x"),
		"len":             fn("len", "int", "x"),
		"min":             variadic(fn("min", "")),
		"max":             variadic(fn("max", "")),
		"sum":             fn("sum", "", "it", "start?"),
		"tuple":           fn("tuple", "", "it?"),
		"match":           regex(fn("match", "bool", "pattern", "s")),
		"find":            regex(fn("find", "list", "pattern", "s")),
		"json_loads":      fn("json_loads", "", "s"),
		"print":           variadic(fn("print", "bool")),
		"tool_call":       fn("tool_call", "", "out"),
		"server":          fn("server", "", "e"),
		"text":            variadic(fn("text", "list")),
		"image":           variadic(fn("image", "list")),
		"Violation":       violation("Violation"),
		"PolicyViolation": violation("PolicyViolation"),
		"input":           {Kind: SymValue, Name: "input"},
	}
	for _, t := range TypeNames {
		builtins[t] = &Symbol{Kind: SymType, Name: t}
	}
	forall := &Symbol{Kind: SymQuantifier, Name: "forall"}
	count := &Symbol{Kind: SymQuantifier, Name: "count"}

	detectors := map[string]*Symbol{
		"secrets":              detector(fn("secrets", "list", "data")),
		"unicode":              detector(fn("unicode", "list", "data", "categories?")),
		"copyright":            detector(fn("copyright", "list", "data")),
		"python_code":          detector(fn("python_code", "", "data", "ipython_mode?")),
		"ipython_code":         missing(fn("ipython_code", "", "data")),
		"semgrep":              missing(fn("semgrep", "list", "data", "lang")),
		"pii":                  detector(fn("pii", "list", "data", "entities?")),
		"moderated":            missing(fn("moderated", "bool", "data", "model?", "default_threshold?", "cat_thresholds?")),
		"prompt_injection":     detector(fn("prompt_injection", "bool", "data", "model?", "threshold?")),
		"is_similar":           missing(fn("is_similar", "bool", "data", "target", "threshold?")),
		"embedding_similarity": missing(fn("embedding_similarity", "float", "data", "target", "mode?")),
		"fuzzy_contains":       detector(fn("fuzzy_contains", "bool", "search_text", "query", "query_similarity_threshold?", "use_semantic?")),
	}
	htmlCode := detector(fn("html_code", "", "data"))
	links := detector(fn("links", "list", "data"))
	ocr := missing(fn("ocr", "list", "image"))
	llm := missing(fn("llm", "str", "prompt", "system_prompt?", "model?", "temperature?", "max_tokens?"))
	llmConfirm := missing(fn("llm_confirm", "bool", "property_description", "system_prompt?", "model?"))
	rbac := fn("should_allow_rbac", "bool", "data", "scope", "user", "user_roles", "role_grants")

	inv := map[string]*Symbol{
		"forall": forall, "count": count,
		"Violation": builtins["Violation"], "PolicyViolation": builtins["PolicyViolation"],
		"text": builtins["text"], "image": builtins["image"], "llm": llm, "llm_confirm": llmConfirm,
	}
	for _, t := range TypeNames {
		inv[t] = builtins[t]
	}
	pick := func(m map[string]*Symbol, names ...string) map[string]*Symbol {
		out := map[string]*Symbol{}
		for _, n := range names {
			out[n] = m[n]
		}
		return out
	}
	bi := map[string]*Symbol{}
	for n, s := range builtins {
		if s.Kind == SymFunc {
			bi[n] = s
		}
	}
	return &Table{
		Builtins: builtins,
		Exports: map[string]map[string]*Symbol{
			"invariant":                               inv,
			"invariant.builtins":                      bi,
			"invariant.quantifiers":                   {"forall": forall, "count": count},
			"invariant.llm":                           {"llm": llm, "llm_confirm": llmConfirm},
			"invariant.detectors":                     detectors,
			"invariant.detectors.secrets":             pick(detectors, "secrets"),
			"invariant.detectors.copyright":           pick(detectors, "copyright"),
			"invariant.detectors.pii":                 pick(detectors, "pii"),
			"invariant.detectors.moderation":          pick(detectors, "moderated"),
			"invariant.detectors.prompt_injection":    pick(detectors, "prompt_injection", "unicode"),
			"invariant.detectors.sentence_similarity": pick(detectors, "is_similar", "embedding_similarity"),
			"invariant.detectors.fuzzy_matching":      pick(detectors, "fuzzy_contains"),
			"invariant.detectors.code":                pick(detectors, "python_code", "ipython_code", "semgrep"),
			"invariant.parsers":                       {"html_code": htmlCode, "links": links, "ocr": ocr},
			"invariant.parsers.html":                  {"html_code": htmlCode, "links": links},
			"invariant.parsers.ocr":                   {"ocr": ocr},
			"invariant.access_control":                {"should_allow_rbac": rbac},
		},
		Regex: func(p string) error {
			// Cached, as the engine's compiler caches.
			if err, ok := regexCache.Load(p); ok {
				return err.(regexResult).err
			}
			_, err := regexp2.Compile(p, regexp2.Unicode)
			regexCache.Store(p, regexResult{err})
			return err
		},
		Missing: map[string]string{
			CapPIIPerson:      "detectors.base_url",
			CapPIILocation:    "detectors.base_url",
			CapModerated:      "detectors.base_url",
			CapInjectionModel: "detectors.base_url",
		},
	}
}

type regexResult struct{ err error }

var regexCache sync.Map
