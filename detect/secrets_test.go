package detect

import (
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
)

func TestSecrets(t *testing.T) {
	tests := []struct {
		name string
		text string
		want []string
	}{
		{"github token", "my key is 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, how about yours?", []string{"GITHUB_TOKEN"}},
		{"github token too short", "my key is ghp_wWPw5k4aXcaT4fcnZwJUVFk6LO0pINUx, how about yours?", nil},
		{"aws and slack", "my key is AKIAIOSFODNN7EXAMPLE and Bob's key is xoxb-123456789012-1234567890123-1234567890123-1234567890123.",
			[]string{"AWS_ACCESS_KEY", "SLACK_TOKEN"}},
		{"aws assignment", `aws_secret_access_key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"`, []string{"AWS_ACCESS_KEY"}},
		{"aws assignment newline breaks it", "aws_secret_access_key = \n\"wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\"", nil},
		{"azure", "DefaultEndpointsProtocol=https;AccountName=x;AccountKey=" + strings.Repeat("Ab9+", 22) + ";", []string{"AZURE_STORAGE_KEY"}},
		{"slack webhook", "post to https://hooks.slack.com/services/T0000/B0000/XXXXXXXX now", []string{"SLACK_TOKEN"}},
		{"slack case-insensitive", "XOXP-1-abc", []string{"SLACK_TOKEN"}},
		{"order is type order then left to right", "xoxb-1-a ghp_" + strings.Repeat("a", 36) + " xoxb-2-b",
			[]string{"GITHUB_TOKEN", "SLACK_TOKEN", "SLACK_TOKEN"}},
		{"gitlab pat from gitleaks", "token: glpat-" + "Xk4r9ZpQ2mW7vB1nC8dT", []string{"GITLAB_PAT"}},
		{"stripe from gitleaks", `stripe = "sk_live_` + "4eC39HqLyjWDarjtT1zdp7dc" + `"`, []string{"STRIPE_ACCESS_TOKEN"}},
		{"private key", "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM9Oi6Z5Bqo7cJ3kN8xXoI1l7pZt5wYxn\nq8L0n2K4x7w1Zp9yT3rV6uB8cD2eF5gH7iJ9kL1mN3oP5qR7sT9uV1wX3yZ5aB7cD9e\n-----END RSA PRIVATE KEY-----", []string{"PRIVATE_KEY"}},
		{"builtin span not reported twice", "ghp_" + "Rk7Qm2Xz9Lw4Vb8Nc1Ty6Hp3Js5Df0Ga2Ke9U", []string{"GITHUB_TOKEN"}},
		{"gitleaks allow signature", `stripe = "sk_live_4eC39HqLyjWDarjtT1zdp7dc" // gitleaks:allow`, nil},
		{"low entropy generic", `password = "aaaaaaaaaaaaaaaa"`, nil},
		{"generic api key", `api_key = "Zq8Lk2Vn5Rt1Xw9Bm4Hj7Cp3"`, []string{"GENERIC_API_KEY"}},
		{"openai from gitleaks", "OPENAI_API_KEY=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\n", []string{"OPENAI_API_KEY"}},
		{"anthropic from gitleaks", "key: sk-ant-api03-Ty4Qwb8DwkNhFdnXsiVpzz63FfkCzJr4i0B3JrTAwR4y9ojfljoQoaF1LlqsajAIxNKu8iS2G8NPRVdD53X83RZJzzzzgAA\n", []string{"ANTHROPIC_API_KEY"}},
		{"npm from gitleaks", "//registry.npmjs.org/:_authToken=npm_4zdmen2khvdgaj8gxbenyjqwx4hh5344tfjg\n", []string{"NPM_ACCESS_TOKEN"}},
		{"gcp from gitleaks", `"apiKey": "AIzaVvVqE1SkHbn88HxjSI6bWHtP3fS2qHx6kwX"`, []string{"GCP_API_KEY"}},
		{"sendgrid from gitleaks", "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 ", []string{"SENDGRID_API_TOKEN"}},
		{"twilio from gitleaks", "sid SK3c6f5da2cec255404e4fb440034d6608", []string{"TWILIO_API_KEY"}},
		{"slack bot token is the reference type only", "xoxb-1234567890123-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", []string{"SLACK_TOKEN"}},
		{"gitleaks allowlisted example key", "gcp AIzaSyabcdefghijklmnopqrstuvwxyz1234567 ", nil},
		{"configuration findings in rule order", "stripe = \"sk_live_4eC39HqLyjWDarjtT1zdp7dc\"\napi_key = 'Zq8Lk2Vn5Rt1Xw9Bm4Hj7Cp3'\n",
			[]string{"GENERIC_API_KEY", "STRIPE_ACCESS_TOKEN"}},
		{"prose with keywords", "The key to the house is under the mat; the token of thanks was a cake.", nil},
		{"non-ASCII before match", "clé: ghp_" + strings.Repeat("b", 36), []string{"GITHUB_TOKEN"}},
		{"empty", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Types(Secrets(tt.text))
			if len(got) == 0 {
				got = nil
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Secrets(%q) = %q, want %q", tt.text, got, tt.want)
			}
		})
	}
}

func TestSecretsOffsetsAreCodePoints(t *testing.T) {
	text := "ééé ghp_" + strings.Repeat("c", 36)
	ms := Secrets(text)
	if len(ms) != 1 || ms[0].Start != 4 || ms[0].End != 44 {
		t.Fatalf("got %+v, want one match at 4-44", ms)
	}
}

// The windowed search must find what a whole-text search finds.
func TestSecretsWindowsMatchWholeText(t *testing.T) {
	defer func(n int) { anchoredMinHits = n }(anchoredMinHits)
	anchoredMinHits = 0
	s := compiledDefault(t)
	texts := []string{
		benchCorpus(t, "prose")[:6000],
		"config:\n  api_key: \"Zq8Lk2Vn5Rt1Xw9Bm4Hj7Cp3\"\n  token = 'ghp_" + strings.Repeat("x", 36) + "'\n",
		"export STRIPE_SECRET_KEY=sk_live_4eC39HqLyjWDarjtT1zdp7dc\nAUTH_TOKEN:\n   \"Zq8Lk2Vn5Rt1Xw9Bm4Hj7Cp3/abc+def=\"\nkeyring := \"x\"\npassword => 'correct-horse-battery-staple'\n",
		"line\n" + strings.Repeat("x", 300) + " api_key = \"" + strings.Repeat("Zq8Lk2Vn5Rt1Xw9Bm4Hj7Cp3", 30) + "\"\nmore",
		"-----BEGIN PRIVATE KEY-----\n" + strings.Repeat("MIIEpAIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM9Oi6Z5Bqo7cJ3kN8xXo\n", 40) + "-----END PRIVATE KEY-----",
	}
	// gitleaks' own examples.
	var ex []struct {
		TPs []string `json:"tps"`
		FPs []string `json:"fps"`
	}
	b, err := os.ReadFile("testdata/gitleaks-examples.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &ex); err != nil {
		t.Fatal(err)
	}
	var all []string
	for _, e := range ex {
		all = append(all, e.TPs...)
		all = append(all, e.FPs...)
	}
	// Each alone, and in small groups (so matches meet other rules'
	// keywords and line breaks) without making the whole-text reference
	// search, the slow part, too long.
	texts = append(texts, all...)
	for i := 0; i < len(all); i += 8 {
		texts = append(texts, strings.Join(all[i:min(i+8, len(all))], "\n"))
	}
	for i, text := range texts {
		// Rules with no keyword in the text are not searched at all.
		ruleHits := map[int][]keywordHit{}
		for _, h := range s.kw.scan(text, nil) {
			for _, ri := range s.kwRules[h.Word] {
				ruleHits[ri] = append(ruleHits[ri], h)
			}
		}
		for ri, r := range s.rules {
			hits := ruleHits[ri]
			if len(r.keywords) == 0 || len(hits) == 0 {
				continue
			}
			want := r.re.FindAllStringIndex(text, -1)
			// Windows alone, then with the assignment prefilters.
			r2 := &secretRule{secretRuleSpec: secretRuleSpec{typ: r.typ, keywords: r.keywords, span: r.span}, re: r.re}
			for _, rule := range []*secretRule{r2, r} {
				got := s.findNear(rule, text, hits)
				if len(got) == 0 && len(want) == 0 {
					continue
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("text %d rule %s (prefilters %v): windows %v, whole text %v", i, r.typ, rule == r, got, want)
				}
			}
		}
	}
}

// compiledDefault returns a scanner of the default rules with every rule
// compiled (DefaultSecrets itself compiles rules as keywords occur).
func compiledDefault(tb testing.TB) *SecretScanner {
	tb.Helper()
	s := newSecretScanner("rules/gitleaks.toml", defaultSecretConfig)
	if err := s.compileAll(); err != nil {
		tb.Fatal(err)
	}
	return s
}

// TestDefaultSecretsCompile compiles every rule and global allowlist of
// the embedded configuration: DefaultSecrets compiles them only when a
// text holds their keywords, and a rule that failed there would find
// nothing.
func TestDefaultSecretsCompile(t *testing.T) {
	s := compiledDefault(t)
	for _, r := range s.rules {
		if r.re == nil {
			t.Errorf("rule %s (%s) not compiled", r.typ, r.where)
		}
	}
	if len(s.global) == 0 {
		t.Error("the global allowlist was not compiled")
	}
}

// TestSecretsCompileLazily: a scan compiles only the rules whose keywords
// occur in the text, each once, also when scans run concurrently (run
// with -race); a text with no keyword compiles nothing.
func TestSecretsCompileLazily(t *testing.T) {
	s := newSecretScanner("rules/gitleaks.toml", defaultSecretConfig)
	compiled := func() []string {
		var out []string
		for _, r := range s.rules {
			if r.re != nil {
				out = append(out, r.typ)
			}
		}
		return out
	}
	if ms := s.Scan("nothing to see here, just words"); len(ms) != 0 || len(compiled()) != 0 {
		t.Fatalf("clean text: matches %v, compiled %v; want none", ms, compiled())
	}
	text := "token ghp_" + strings.Repeat("a1", 18) + " and gitlab glpat-Zq8Lk2Vn5Rt1Xw9Bm4Hj"
	var wg sync.WaitGroup
	results := make([][]Match, 8)
	for i := range results {
		wg.Go(func() { results[i] = s.Scan(text) })
	}
	wg.Wait()
	for i, ms := range results {
		if got := strings.Join(Types(ms), " "); got != "GITHUB_TOKEN GITLAB_PAT" {
			t.Errorf("scan %d found %q, want GITHUB_TOKEN GITLAB_PAT", i, got)
		}
	}
	got := compiled()
	if len(got) == 0 || len(got) > 10 {
		t.Errorf("compiled %d rules %v; want those with keywords ghp_, glpat- (and a few more at most)", len(got), got)
	}
	if s.global != nil && len(got) == 0 {
		t.Error("global allowlist compiled before any rule")
	}
	// The assignment prefilter compiles only for texts with many keyword
	// occurrences; findings that overlap a reference finding do not need
	// the rule's allowlists.
	generic := func() *secretRule {
		for _, r := range s.rules {
			if r.typ == "GENERIC_API_KEY" {
				return r
			}
		}
		t.Fatal("no GENERIC_API_KEY rule")
		return nil
	}()
	s.Scan("AWS_ACCESS_KEY_ID=AKIAZ7VQ3XKP4MBL2NWE")
	if generic.re == nil || generic.anchored != nil || generic.allow != nil {
		t.Errorf("one key assignment overlapping a reference finding: compiled %v, anchored %v, allowlists %v; want compiled only", generic.re != nil, generic.anchored != nil, generic.allow != nil)
	}
	many := strings.Repeat("api_key = 'Zq8Lk2Vn5Rt1Xw9Bm4Hj7Cp3'\n", anchoredMinHits)
	if got := Distinct(s.Scan(many)); len(got) != 1 || got[0] != "GENERIC_API_KEY" {
		t.Errorf("key assignments: found %v, want GENERIC_API_KEY", got)
	}
	if generic.anchored == nil || generic.allow == nil {
		t.Errorf("%d key assignments: anchored %v, allowlists %v; want both compiled", anchoredMinHits, generic.anchored != nil, generic.allow != nil)
	}
}

func TestSecretRulesLoad(t *testing.T) {
	s := DefaultSecrets()
	if n := len(s.rules); n != 6+217 || len(s.Skipped) != 5 {
		t.Errorf("%d rules loaded, %d skipped; want 6 reference patterns + 217 gitleaks rules, 5 skipped", n, len(s.Skipped))
	}
	for _, sk := range s.Skipped {
		if !strings.Contains(sk, "file paths") && !strings.Contains(sk, "no regex") {
			t.Errorf("unexpected skip %q", sk)
		}
	}
}

func TestSecretRulesErrors(t *testing.T) {
	tests := []struct{ src, want string }{
		{"[[rules]]\nid = \"x\"\nregex = '''(?<'''\n", "rules[0] (x).regex"},
		{"[[rules]]\nregex = 'a'\n", "missing id"},
		{"[[rules]]\nid = \"x\nregex = 'a'\n", "cfg.toml:2:6: unterminated string"},
		{"[[rules]]\nid = 'x'\nregex = 'a'\nsecretGroup = 3\n", "rules[0] (x).secretGroup"},
		{"[[rules]]\nid = 'x'\nregex = 'a'\nsecretGroup = -1\n", "rules[0] (x).secretGroup"},
		{"[[rules]]\nid = 'x'\nregex = 'a'\nkeywords = ['a']\n[[rules.allowlists]]\nregexes = ['(']\n", "rules[0] (x).allowlists[0].regexes[0]"},
		{"[allowlist]\nregexes = ['a', '[']\n", "cfg.toml: allowlist.regexes[1]"},
		{"[[rules]]\nid = 'x'\nregex = 'a'\n[[rules]]\nid = 'y'\nregex = '+'\n", "rules[1] (y).regex"},
	}
	for _, tt := range tests {
		_, err := NewSecretScanner("cfg.toml", tt.src)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("NewSecretScanner(%q) error %v, want it to contain %q", tt.src, err, tt.want)
		}
	}
	var te *tomlError
	_, err := NewSecretScanner("cfg.toml", "x = \n")
	if !errors.As(err, &te) || te.Line != 1 {
		t.Errorf("error %v: want a *tomlError on line 1", err)
	}
}

func FuzzSecrets(f *testing.F) {
	f.Add("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")
	f.Add("api_key = 'Zq8Lk2Vn5Rt1Xw9Bm4Hj7Cp3'\n")
	f.Add("aws key \"" + strings.Repeat("A", 40) + "\"")
	f.Add("é\xffxoxb-1-2")
	f.Fuzz(func(t *testing.T, s string) {
		n := len([]rune(s))
		for _, m := range Secrets(s) {
			if m.Start < 0 || m.End > n || m.Start >= m.End {
				t.Fatalf("bad range %+v in %q (len %d)", m, s, n)
			}
		}
	})
}

func FuzzTOML(f *testing.F) {
	f.Add(gitleaksTOML[:4000])
	f.Add("[a]\nb = [1, 2.5, true, 'x', \"y\\u00e9\"]\n[[c.d]]\ne = '''\nf'''\n")
	f.Fuzz(func(t *testing.T, s string) {
		parseTOML("fuzz.toml", s)
	})
}

// FuzzSecretsWindows checks the windowed search with its prefilters
// against a whole-text search, rule by rule.
func FuzzSecretsWindows(f *testing.F) {
	f.Add("api_key = 'Zq8Lk2Vn5Rt1Xw9Bm4Hj7Cp3'\nnext")
	f.Add("token: ghp_" + strings.Repeat("a", 36))
	f.Add("s.abcdefghijklmnopqrstuvwx hvs." + strings.Repeat("b", 95))
	f.Add("-----BEGIN PRIVATE KEY-----\n" + strings.Repeat("A", 70) + "\n-----END PRIVATE KEY-----")
	defer func(n int) { anchoredMinHits = n }(anchoredMinHits)
	anchoredMinHits = 0
	s := compiledDefault(f)
	f.Fuzz(func(t *testing.T, text string) {
		if len(text) > 4096 {
			return
		}
		hits := s.kw.scan(text, nil)
		for ri, r := range s.rules {
			var rh []keywordHit
			for _, h := range hits {
				for _, x := range s.kwRules[h.Word] {
					if x == ri {
						rh = append(rh, h)
					}
				}
			}
			if len(rh) == 0 || len(r.keywords) == 0 {
				continue
			}
			got := s.findNear(r, text, rh)
			want := r.re.FindAllStringIndex(text, -1)
			if len(got) == 0 && len(want) == 0 {
				continue
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("rule %s on %q: windows %v, whole text %v", r.typ, text, got, want)
			}
		}
	})
}
