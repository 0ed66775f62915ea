package policy_test

// Reference-level versions of the always-built-in detectors the
// conformance suite calls (secrets, unicode, copyright, html_code), used
// only when package detect has not registered its own. They follow spec
// §13.3 closely enough for the suite; the real ones live in package detect.

import (
	"regexp"
	"strings"
	"unicode"

	"golang.org/x/net/html"

	"github.com/vigilhq/vigil/policy/builtin"
)

func registerIfMissing(name string, impl builtin.Func) {
	if b, ok := builtin.Lookup(name); ok && b.Impl != nil {
		return
	}
	builtin.Register(builtin.Builtin{Name: name, Impl: impl})
}

var refSecrets = []struct {
	name string
	re   *regexp.Regexp
}{
	{"GITHUB_TOKEN", regexp.MustCompile(`(ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9_]{36}`)},
	{"AWS_ACCESS_KEY", regexp.MustCompile(`(?:A3T[A-Z0-9]|ABIA|ACCA|AKIA|ASIA)[0-9A-Z]{16}`)},
	{"AZURE_STORAGE_KEY", regexp.MustCompile(`AccountKey=[a-zA-Z0-9+/=]{88}`)},
	{"SLACK_TOKEN", regexp.MustCompile(`(?i)xox[abposr]-(?:\d+-)+[a-z0-9]+`)},
}

var unicodeCats = []struct {
	name string
	tab  *unicode.RangeTable
}{
	{"Lu", unicode.Lu}, {"Ll", unicode.Ll}, {"Lt", unicode.Lt}, {"Lm", unicode.Lm}, {"Lo", unicode.Lo},
	{"Mn", unicode.Mn}, {"Mc", unicode.Mc}, {"Me", unicode.Me}, {"Nd", unicode.Nd}, {"Nl", unicode.Nl}, {"No", unicode.No},
	{"Pc", unicode.Pc}, {"Pd", unicode.Pd}, {"Ps", unicode.Ps}, {"Pe", unicode.Pe}, {"Pi", unicode.Pi}, {"Pf", unicode.Pf}, {"Po", unicode.Po},
	{"Sm", unicode.Sm}, {"Sc", unicode.Sc}, {"Sk", unicode.Sk}, {"So", unicode.So},
	{"Zs", unicode.Zs}, {"Zl", unicode.Zl}, {"Zp", unicode.Zp},
	{"Cc", unicode.Cc}, {"Cf", unicode.Cf}, {"Co", unicode.Co}, {"Cs", unicode.Cs},
}

func category(r rune) string {
	for _, c := range unicodeCats {
		if unicode.Is(c.tab, r) {
			return c.name
		}
	}
	return "Cn"
}

func init() {
	registerIfMissing("secrets", builtin.TextDetector(func(c *builtin.Call, s string) ([]builtin.Match, error) {
		var out []builtin.Match
		for _, sec := range refSecrets {
			for range sec.re.FindAllStringIndex(s, -1) {
				out = append(out, builtin.Match{Label: sec.name})
			}
		}
		return out, nil
	}, false))
	registerIfMissing("unicode", func(c *builtin.Call) (builtin.Value, error) {
		var allowed map[string]bool
		if len(c.Args) > 1 || c.Kwargs != nil {
			b, _ := builtin.Lookup("unicode")
			if cats, ok := builtin.Elements(c.Arg(b, 1, nil)); ok {
				allowed = map[string]bool{}
				for _, x := range cats {
					allowed[builtin.Str(x)] = true
				}
			}
		}
		out := []builtin.Value{}
		for _, s := range builtin.Texts(c.Args[0]) {
			seen := map[string]bool{}
			i := 0
			for _, r := range builtin.Str(s) {
				cat := category(r)
				if allowed == nil || allowed[cat] {
					if !seen[cat] {
						seen[cat] = true
						out = append(out, cat)
					}
					c.Mark(s, i, i+1)
				}
				i++
			}
		}
		return out, nil
	})
	registerIfMissing("copyright", builtin.TextDetector(func(c *builtin.Call, s string) ([]builtin.Match, error) {
		if strings.Contains(s, "Copyright (C)") || strings.Contains(s, "Copyright ©") {
			return []builtin.Match{{Label: "COPYRIGHT"}}, nil
		}
		return nil, nil
	}, false))
	registerIfMissing("html_code", func(c *builtin.Call) (builtin.Value, error) {
		alts, links := []builtin.Value{}, []builtin.Value{}
		seen := map[string]bool{}
		for _, s := range builtin.Texts(c.Args[0]) {
			z := html.NewTokenizer(strings.NewReader(builtin.Str(s)))
			for {
				tt := z.Next()
				if tt == html.ErrorToken {
					break
				}
				if tt != html.StartTagToken && tt != html.SelfClosingTagToken {
					continue
				}
				t := z.Token()
				for _, a := range t.Attr {
					if t.Data == "img" && a.Key == "alt" {
						alts = append(alts, a.Val)
					}
					if t.Data == "a" && a.Key == "href" && !seen[a.Val] {
						seen[a.Val] = true
						links = append(links, a.Val)
					}
				}
			}
			for _, u := range builtin.Links(builtin.Str(s), seen) {
				links = append(links, u)
			}
		}
		return &builtin.Record{Type: "HTMLData", Fields: []builtin.Field{{Name: "alt_texts", Value: alts}, {Name: "links", Value: links}}}, nil
	})
}
