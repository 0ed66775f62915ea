package detect

// This file plugs the detectors into the policy language's registry
// (policy/builtin). It only converts values: every detector is a plain
// function of this package, tested on its own.

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/vigilhq/vigil/policy/builtin"
)

func init() {
	builtin.Register(builtin.Builtin{Name: "secrets", Impl: builtin.TextDetector(cachedText("secrets", Secrets), false)})
	builtin.Register(builtin.Builtin{Name: "unicode", Marks: true, Impl: fnUnicode})
	builtin.Register(builtin.Builtin{Name: "copyright", Impl: fnCopyright})
	builtin.Register(builtin.Builtin{Name: "python_code", Impl: fnPythonCode})
	builtin.Register(builtin.Builtin{Name: "html_code", Impl: fnHTMLCode})
	// pii and prompt_injection may ask a model: the engine caches their
	// results for a policy's lifetime (§13.5). fuzzy_contains is not
	// cached there, because its fallback warning belongs to each analysis.
	builtin.Register(builtin.Builtin{Name: "pii", Marks: true, Cache: true, Impl: fnPII})
	builtin.Register(builtin.Builtin{Name: "prompt_injection", Cache: true, Impl: fnPromptInjection})
	builtin.Register(builtin.Builtin{Name: "fuzzy_contains", Marks: true, Impl: fnFuzzyContains})
	builtin.Register(builtin.Builtin{Name: "moderated", Marks: true, Impl: fnModerated,
		Available: func() bool { return CurrentProviders().Moderator != nil }})
	builtin.Register(builtin.Builtin{Name: "is_similar", Impl: fnIsSimilar,
		Available: func() bool { return CurrentProviders().Embedder != nil }})
	builtin.Register(builtin.Builtin{Name: "embedding_similarity", Impl: fnEmbeddingSimilarity,
		Available: func() bool { return CurrentProviders().Embedder != nil }})
	builtin.Register(builtin.Builtin{Name: "llm", Impl: fnLLM,
		Available: func() bool { return CurrentProviders().LLM != nil }})
	builtin.Register(builtin.Builtin{Name: "llm_confirm", Impl: fnLLMConfirm,
		Available: func() bool { return CurrentProviders().LLM != nil }})
	publishCapabilities(CurrentProviders())
}

// publishCapabilities tells the loader which conditional capabilities
// (§13.4: <PERSON>, <LOCATION>, <MODERATED>, prompt_injection with a
// model) have a provider.
func publishCapabilities(p *Providers) {
	publishPIICapabilities(p)
	builtin.SetCapability(builtin.CapModerated, p.Moderator != nil)
	builtin.SetCapability(builtin.CapInjectionModel, p.Injection != nil)
}

// Results of the offline detectors are cached across calls (and so
// across the Checks of a Monitor) for texts of at least cacheMinBytes;
// shorter texts are cheaper to scan than to hash.
const cacheMinBytes = 256

// ResultCache holds the offline detectors' results, keyed by detector,
// arguments and text hash (policy-language §13.5).
var ResultCache = NewCache(4096)

// cachedMatches returns f's matches for text, from ResultCache when text
// is long enough. The returned slice is shared: callers must not modify it.
func cachedMatches(name, args, text string, f func() []Match) []Match {
	if len(text) < cacheMinBytes {
		return f()
	}
	v, _ := ResultCache.Do(name, args, text, func() (any, error) { return f(), nil })
	return v.([]Match)
}

// cachedText adapts a detector to builtin.TextDetector, with caching.
func cachedText(name string, f func(string) []Match) builtin.TextFunc {
	return func(_ *builtin.Call, text string) ([]builtin.Match, error) {
		return toBuiltinMatches(cachedMatches(name, "", text, func() []Match { return f(text) })), nil
	}
}

func unavailable(name string) error {
	return builtin.Errorf(builtin.DetectorUnavailable, "detector %s has no provider (configure %s)", name, ConfigKey)
}

func providerError(name string, err error) error {
	return &builtin.RuntimeError{Kind: builtin.DetectorError, Msg: fmt.Sprintf("%s: %v", name, err), Err: err}
}

// arg returns argument i (positional or keyword) of the call, unlocated,
// or def.
func arg(c *builtin.Call, i int, def builtin.Value) builtin.Value {
	b, _ := builtin.Lookup(c.Name)
	return builtin.Strip(c.Arg(b, i, def))
}

func floatArg(c *builtin.Call, i int, name string, def float64) (float64, error) {
	v := arg(c, i, nil)
	if v == nil {
		return def, nil
	}
	if n, f, isFloat, ok := builtin.Number(v); ok {
		if isFloat {
			return f, nil
		}
		return float64(n), nil
	}
	return 0, builtin.Errorf(builtin.TypeError, "%s(): %s must be a number, not %s", c.Name, name, builtin.TypeName(v))
}

func stringArg(c *builtin.Call, i int, name, def string) (string, bool, error) {
	v := arg(c, i, nil)
	if v == nil {
		return def, false, nil
	}
	s, ok := v.(string)
	if !ok {
		return "", false, builtin.Errorf(builtin.TypeError, "%s(): %s must be a str, not %s", c.Name, name, builtin.TypeName(v))
	}
	return s, true, nil
}

func runeLen(s string) int { return utf8.RuneCountInString(s) }

func ctxOf(c *builtin.Call) context.Context {
	if c.Ctx != nil {
		return c.Ctx
	}
	return context.Background()
}

func toBuiltinMatches(ms []Match) []builtin.Match {
	out := make([]builtin.Match, len(ms))
	for i, m := range ms {
		out[i] = builtin.Match{Start: m.Start, End: m.End, Label: m.Type}
	}
	return out
}

func strList(xs []string) []builtin.Value {
	out := make([]builtin.Value, len(xs))
	for i, x := range xs {
		out[i] = x
	}
	return out
}

// stringsArg reads an optional list-of-strings argument; nil when absent
// or None.
func stringsArg(c *builtin.Call, name string, i int) ([]string, bool, error) {
	v := arg(c, i, nil)
	if v == nil {
		return nil, false, nil
	}
	els, ok := builtin.Elements(v)
	if builtin.IsStr(v) {
		ok = false // its code points are not names: entities="EMAIL" matched nothing
	}
	if !ok {
		return nil, false, builtin.Errorf(builtin.TypeError, "%s(): %s must be a list of strings, not %s", c.Name, name, builtin.TypeName(v))
	}
	out := make([]string, 0, len(els))
	for _, e := range els {
		s, ok := builtin.Strip(e).(string)
		if !ok {
			return nil, false, builtin.Errorf(builtin.TypeError, "%s(): %s must be a list of strings, found %s", c.Name, name, builtin.TypeName(e))
		}
		out = append(out, s)
	}
	return out, true, nil
}

func dataArg(c *builtin.Call) ([]builtin.Value, error) {
	if len(c.Args) == 0 {
		return nil, builtin.Errorf(builtin.TypeError, "%s() missing required argument 'data'", c.Name)
	}
	return builtin.Texts(c.Args[0]), nil
}

func fnUnicode(c *builtin.Call) (builtin.Value, error) {
	texts, err := dataArg(c)
	if err != nil {
		return nil, err
	}
	cats, given, err := stringsArg(c, "categories", 1)
	if err != nil {
		return nil, err
	}
	if given && cats == nil {
		cats = []string{}
	}
	out := []builtin.Value{}
	for _, s := range texts {
		ms := Unicode(builtin.Str(s), cats)
		for _, m := range ms {
			c.Mark(s, m.Start, m.End)
		}
		out = append(out, strList(Distinct(ms))...)
	}
	return out, nil
}

func fnCopyright(c *builtin.Call) (builtin.Value, error) {
	texts, err := dataArg(c)
	if err != nil {
		return nil, err
	}
	out := []builtin.Value{}
	for _, s := range texts {
		out = append(out, strList(Copyright(builtin.Str(s)))...)
	}
	return out, nil
}

func fnPythonCode(c *builtin.Call) (builtin.Value, error) {
	texts, err := dataArg(c)
	if err != nil {
		return nil, err
	}
	ipython := builtin.Truthy(arg(c, 1, false))
	var all PythonCodeResult
	seen := map[string]bool{}
	for _, s := range texts {
		src := builtin.Str(s)
		if ipython {
			src = IPythonPreprocess(src)
		}
		var r PythonCodeResult
		if len(src) >= cacheMinBytes {
			v, _ := ResultCache.Do("python_code", "", src, func() (any, error) { return PythonCode(src), nil })
			r = v.(PythonCodeResult)
		} else {
			r = PythonCode(src)
		}
		all.Imports = append(all.Imports, r.Imports...)
		all.Builtins = append(all.Builtins, r.Builtins...)
		for _, f := range r.FunctionCalls {
			if !seen[f] {
				seen[f] = true
				all.FunctionCalls = append(all.FunctionCalls, f)
			}
		}
		if r.SyntaxError && !all.SyntaxError {
			all.SyntaxError = true
			all.SyntaxErrorMessage = r.SyntaxErrorMessage
		}
	}
	var exc builtin.Value
	if all.SyntaxError {
		exc = all.SyntaxErrorMessage
	}
	return &builtin.Record{Type: "PythonCodeResult", Fields: []builtin.Field{
		{Name: "imports", Value: strList(all.Imports)},
		{Name: "builtins", Value: strList(all.Builtins)},
		{Name: "function_calls", Value: strList(all.FunctionCalls)},
		{Name: "syntax_error", Value: all.SyntaxError},
		{Name: "syntax_error_exception", Value: exc},
	}}, nil
}

// htmlTexts is text(data) for html_code, where a ToolCall contributes its
// JSON form (policy-language §13.3).
func htmlTexts(v builtin.Value, out *[]builtin.Value) {
	switch x := builtin.Strip(v).(type) {
	case *builtin.ToolCall:
		var b strings.Builder
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(builtin.JSONForm(x)); err == nil {
			*out = append(*out, strings.TrimSuffix(b.String(), "\n"))
		}
	case []builtin.Value, builtin.Tuple:
		els, _ := builtin.Elements(v)
		for _, e := range els {
			htmlTexts(e, out)
		}
	default:
		*out = append(*out, builtin.Texts(v)...)
	}
}

func fnHTMLCode(c *builtin.Call) (builtin.Value, error) {
	if len(c.Args) == 0 {
		return nil, builtin.Errorf(builtin.TypeError, "html_code() missing required argument 'data'")
	}
	var texts []builtin.Value
	htmlTexts(c.Args[0], &texts)
	var alts, links []string
	seen := map[string]bool{}
	for _, s := range texts {
		d := HTMLCode(builtin.Str(s))
		alts = append(alts, d.AltTexts...)
		for _, l := range d.Links {
			if !seen[l] {
				seen[l] = true
				links = append(links, l)
			}
		}
	}
	return &builtin.Record{Type: "HTMLData", Fields: []builtin.Field{
		{Name: "alt_texts", Value: strList(alts)},
		{Name: "links", Value: strList(links)},
	}}, nil
}

func fnPII(c *builtin.Call) (builtin.Value, error) {
	texts, err := dataArg(c)
	if err != nil {
		return nil, err
	}
	entities, given, err := stringsArg(c, "entities", 1)
	if err != nil {
		return nil, err
	}
	if given && entities == nil {
		entities = []string{}
	}
	offline, model, rec := piiPlan(entities, given)
	out := []builtin.Value{}
	args := strings.Join(offline, "\x00")
	if offline == nil {
		args = "*"
	}
	for _, s := range texts {
		text := builtin.Str(s)
		ms := cachedMatches("pii", args, text, func() []Match { return PII(text, offline) })
		if len(model) > 0 && text != "" {
			found, err := rec.Entities(ctxOf(c), text, model)
			if err != nil {
				return nil, providerError("pii", err)
			}
			ms = mergeByStart(ms, found)
		}
		for _, m := range ms {
			if m.Score <= 0.5 {
				continue
			}
			out = append(out, m.Type)
			c.Mark(s, m.Start, m.End)
		}
	}
	return out, nil
}

func containsStr(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// mergeByStart merges two lists ordered by start.
func mergeByStart(a, b []Match) []Match {
	out := make([]Match, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		if j >= len(b) || i < len(a) && a[i].Start <= b[j].Start {
			out = append(out, a[i])
			i++
		} else {
			out = append(out, b[j])
			j++
		}
	}
	return out
}

func fnPromptInjection(c *builtin.Call) (builtin.Value, error) {
	texts, err := dataArg(c)
	if err != nil {
		return nil, err
	}
	model, withModel, err := stringArg(c, 1, "model", "")
	if err != nil {
		return nil, err
	}
	threshold, err := floatArg(c, 2, "threshold", 0.9)
	if err != nil {
		return nil, err
	}
	cls := CurrentProviders().Injection
	if withModel && cls == nil {
		return nil, unavailable("prompt_injection")
	}
	for _, s := range texts {
		text := builtin.Str(s)
		var score float64
		if withModel {
			score, err = cls.InjectionScore(ctxOf(c), model, text)
			if err != nil {
				return nil, providerError("prompt_injection", err)
			}
		} else {
			ms := cachedMatches("prompt_injection", "", text, func() []Match {
				return []Match{{Score: PromptInjection(text).Score}}
			})
			score = ms[0].Score
		}
		if score >= threshold {
			return true, nil
		}
	}
	return false, nil
}

const fuzzyFallbackWarning = "fuzzy_contains: semantic fallback unavailable"

func fnFuzzyContains(c *builtin.Call) (builtin.Value, error) {
	if len(c.Args) == 0 {
		return nil, builtin.Errorf(builtin.TypeError, "fuzzy_contains() missing required argument 'search_text'")
	}
	texts := builtin.Texts(c.Args[0])
	query, given, err := stringArg(c, 1, "query", "")
	if err != nil {
		return nil, err
	}
	if !given {
		return nil, builtin.Errorf(builtin.TypeError, "fuzzy_contains() missing required argument 'query'")
	}
	threshold, err := floatArg(c, 2, "query_similarity_threshold", 0.8)
	if err != nil {
		return nil, err
	}
	k, err := FuzzyDistance(query, threshold)
	if err != nil {
		return nil, builtin.Errorf(builtin.ValueError, "fuzzy_contains(): %v", err)
	}
	semantic := builtin.Truthy(arg(c, 3, true))
	found := false
	for _, s := range texts {
		r := FuzzyContains(builtin.Str(s), query, k)
		if r.Found {
			found = true
			c.Mark(s, r.Start, r.End)
		}
	}
	if found || !semantic || len(texts) == 0 {
		return found, nil
	}
	llm := CurrentProviders().LLM
	if llm == nil {
		if c.Env != nil && c.Env.Warn != nil {
			c.Env.Warn(fuzzyFallbackWarning)
		}
		return false, nil
	}
	for _, s := range texts {
		ans, err := llm.Complete(ctxOf(c), Completion{
			System: "You decide whether a text relates to a query. Answer yes or no only.",
			Prompt: "Query: " + query + "\n\nText:\n" + builtin.Str(s),
		})
		if err != nil {
			return nil, providerError("fuzzy_contains", err)
		}
		if isYes(ans) {
			found = true
			c.Mark(s, 0, runeLen(builtin.Str(s)))
		}
	}
	return found, nil
}

func isYes(ans string) bool {
	return strings.EqualFold(strings.TrimSpace(ans), "yes")
}

func fnModerated(c *builtin.Call) (builtin.Value, error) {
	mod := CurrentProviders().Moderator
	if mod == nil {
		return nil, unavailable("moderated")
	}
	texts, err := dataArg(c)
	if err != nil {
		return nil, err
	}
	model, _, err := stringArg(c, 1, "model", "")
	if err != nil {
		return nil, err
	}
	def, err := floatArg(c, 2, "default_threshold", 0.5)
	if err != nil {
		return nil, err
	}
	cats := map[string]float64{}
	if v := arg(c, 3, nil); v != nil {
		d, ok := v.(*builtin.Dict)
		if !ok {
			return nil, builtin.Errorf(builtin.TypeError, "moderated(): cat_thresholds must be a dict, not %s", builtin.TypeName(v))
		}
		for _, k := range d.Keys {
			n, f, isFloat, ok := builtin.Number(builtin.Strip(d.M[k]))
			if !ok {
				return nil, builtin.Errorf(builtin.TypeError, "moderated(): cat_thresholds[%q] must be a number", k)
			}
			if !isFloat {
				f = float64(n)
			}
			cats[k] = f
		}
	}
	flagged := false
	for _, s := range texts {
		text := builtin.Str(s)
		if text == "" {
			continue
		}
		m, err := mod.Moderate(ctxOf(c), model, text)
		if err != nil {
			return nil, providerError("moderated", err)
		}
		if ModerationFlagged(m, def, cats) {
			flagged = true
			c.Mark(s, 0, runeLen(text))
		}
	}
	return flagged, nil
}

// similarities returns the cosine similarity of every pair of a string of
// data and a string of target.
func similarities(c *builtin.Call, name string) ([]float64, error) {
	emb := CurrentProviders().Embedder
	if emb == nil {
		return nil, unavailable(name)
	}
	if len(c.Args) == 0 {
		return nil, builtin.Errorf(builtin.TypeError, "%s() missing required argument 'data'", name)
	}
	b, _ := builtin.Lookup(name)
	target := c.Arg(b, 1, nil)
	var xs, ys []string
	for _, s := range builtin.Texts(c.Args[0]) {
		xs = append(xs, builtin.Str(s))
	}
	for _, s := range builtin.Texts(target) {
		ys = append(ys, builtin.Str(s))
	}
	if len(xs) == 0 || len(ys) == 0 {
		return nil, nil
	}
	ex, err := emb.Embed(ctxOf(c), "", xs)
	if err != nil {
		return nil, providerError(name, err)
	}
	ey, err := emb.Embed(ctxOf(c), "", ys)
	if err != nil {
		return nil, providerError(name, err)
	}
	var out []float64
	for _, a := range ex {
		for _, b := range ey {
			out = append(out, Cosine(a, b))
		}
	}
	return out, nil
}

// similarityThresholds are the named thresholds of is_similar.
var similarityThresholds = map[string]float64{"might_resemble": 0.2, "same_topic": 0.5, "very_similar": 0.8}

func fnIsSimilar(c *builtin.Call) (builtin.Value, error) {
	th := 0.2
	switch v := arg(c, 2, nil).(type) {
	case nil:
	case string:
		t, ok := similarityThresholds[v]
		if !ok {
			return nil, builtin.Errorf(builtin.ValueError, "is_similar(): unknown threshold %q (want might_resemble, same_topic, very_similar or a float)", v)
		}
		th = t
	default:
		f, err := floatArg(c, 2, "threshold", 0.2)
		if err != nil {
			return nil, err
		}
		th = f
	}
	sims, err := similarities(c, "is_similar")
	if err != nil {
		return nil, err
	}
	for _, s := range sims {
		if s > th {
			return true, nil
		}
	}
	return false, nil
}

func fnEmbeddingSimilarity(c *builtin.Call) (builtin.Value, error) {
	mode, _, err := stringArg(c, 2, "mode", "max")
	if err != nil {
		return nil, err
	}
	if mode != "max" && mode != "min" {
		return nil, builtin.Errorf(builtin.ValueError, "embedding_similarity(): mode must be \"max\" or \"min\", not %q", mode)
	}
	sims, err := similarities(c, "embedding_similarity")
	if err != nil {
		return nil, err
	}
	if len(sims) == 0 {
		return 0.0, nil
	}
	best := sims[0]
	for _, s := range sims[1:] {
		if mode == "max" {
			best = math.Max(best, s)
		} else {
			best = math.Min(best, s)
		}
	}
	return best, nil
}

func fnLLM(c *builtin.Call) (builtin.Value, error) {
	llm := CurrentProviders().LLM
	if llm == nil {
		return nil, unavailable("llm")
	}
	prompt, given, err := stringArg(c, 0, "prompt", "")
	if err != nil {
		return nil, err
	}
	if !given {
		return nil, builtin.Errorf(builtin.TypeError, "llm() missing required argument 'prompt'")
	}
	system, _, err := stringArg(c, 1, "system_prompt", "You are a helpful assistant.")
	if err != nil {
		return nil, err
	}
	model, _, err := stringArg(c, 2, "model", "")
	if err != nil {
		return nil, err
	}
	temp, err := floatArg(c, 3, "temperature", 0.2)
	if err != nil {
		return nil, err
	}
	maxTok, err := floatArg(c, 4, "max_tokens", 500)
	if err != nil {
		return nil, err
	}
	ans, err := llm.Complete(ctxOf(c), Completion{System: system, Prompt: prompt, Model: model, Temperature: temp, MaxTokens: int(maxTok)})
	if err != nil {
		return nil, providerError("llm", err)
	}
	return ans, nil
}

const confirmSystemPrompt = "You are a precise binary classifier. Decide whether the statement or property the user gives holds. Answer yes or no only."

func fnLLMConfirm(c *builtin.Call) (builtin.Value, error) {
	llm := CurrentProviders().LLM
	if llm == nil {
		return nil, unavailable("llm_confirm")
	}
	prop, given, err := stringArg(c, 0, "property_description", "")
	if err != nil {
		return nil, err
	}
	if !given {
		return nil, builtin.Errorf(builtin.TypeError, "llm_confirm() missing required argument 'property_description'")
	}
	system, _, err := stringArg(c, 1, "system_prompt", confirmSystemPrompt)
	if err != nil {
		return nil, err
	}
	model, _, err := stringArg(c, 2, "model", "")
	if err != nil {
		return nil, err
	}
	ans, err := llm.Complete(ctxOf(c), Completion{System: system, Prompt: prop + "\n\nAnswer yes or no.", Model: model, MaxTokens: 5})
	if err != nil {
		return nil, providerError("llm_confirm", err)
	}
	return isYes(ans), nil
}
