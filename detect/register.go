package detect

// This file plugs the detectors into the policy language's registry
// (policy/builtin). It only converts values: every detector is a plain
// function of this package, tested on its own.

import (
	"github.com/vigilhq/vigil/policy/builtin"
)

func init() {
	builtin.Register(builtin.Builtin{Name: "secrets", Impl: builtin.TextDetector(textFunc(Secrets), false)})
	builtin.Register(builtin.Builtin{Name: "unicode", Marks: true, Impl: fnUnicode})
	builtin.Register(builtin.Builtin{Name: "copyright", Impl: fnCopyright})
	builtin.Register(builtin.Builtin{Name: "python_code", Impl: fnPythonCode})
	builtin.Register(builtin.Builtin{Name: "html_code", Impl: fnHTMLCode})
}

// textFunc adapts a detector to builtin.TextDetector.
func textFunc(f func(string) []Match) builtin.TextFunc {
	return func(_ *builtin.Call, text string) ([]builtin.Match, error) {
		return toBuiltinMatches(f(text)), nil
	}
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
	b, _ := builtin.Lookup(c.Name)
	v := builtin.Strip(c.Arg(b, i, nil))
	if v == nil {
		return nil, false, nil
	}
	els, ok := builtin.Elements(v)
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
	var all PythonCodeResult
	seen := map[string]bool{}
	for _, s := range texts {
		r := PythonCode(builtin.Str(s))
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

func fnHTMLCode(c *builtin.Call) (builtin.Value, error) {
	texts, err := dataArg(c)
	if err != nil {
		return nil, err
	}
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
