package detect

import (
	_ "embed"
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
)

// The four secret types of the reference (policy-language §13.3), in
// their reporting order. Their patterns are the reference's, translated
// to RE2: Python's Unicode \d is \p{Nd}; the lazy quantifiers keep their
// meaning under Go's leftmost-first matching.
var builtinSecretRules = []struct {
	typ      string
	pattern  string
	keywords []string
}{
	{"GITHUB_TOKEN", `(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9_]{36}`, []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_"}},
	{"AWS_ACCESS_KEY", `(?:A3T[A-Z0-9]|ABIA|ACCA|AKIA|ASIA)[0-9A-Z]{16}`, []string{"a3t", "abia", "acca", "akia", "asia"}},
	{"AWS_ACCESS_KEY", `(?i)aws.{0,20}?(?:key|pwd|pw|password|pass|token).{0,20}?['"][0-9a-zA-Z/+]{40}['"]`, []string{"aws"}},
	{"AZURE_STORAGE_KEY", `AccountKey=[a-zA-Z0-9+/=]{88}`, []string{"accountkey="}},
	{"SLACK_TOKEN", `(?i)xox[abposr]-(?:\p{Nd}+-)+[a-z0-9]+`, []string{"xox"}},
	{"SLACK_TOKEN", `https://hooks\.slack\.com/services/T[a-zA-Z0-9_]+/B[a-zA-Z0-9_]+/[a-zA-Z0-9_]+`, []string{"hooks.slack.com"}},
}

// gitleaksTOML is gitleaks' default rule configuration (v8.30.1,
// config/gitleaks.toml, MIT licence: rules/LICENSE.gitleaks).
//
//go:embed rules/gitleaks.toml
var gitleaksTOML string

// gitleaksAllowSignature on a line suppresses gitleaks-rule findings on
// it, as in gitleaks.
const gitleaksAllowSignature = "gitleaks:allow"

// A secretRule is read from the configuration eagerly (its keywords feed
// the prefilter) but compiled lazily: compile builds its regexes, its
// allowlists and its span the first time a keyword of the rule occurs in
// a scanned text, once. Compiling all of gitleaks' rules takes ~40 ms of
// CPU, which every `vigil check` paid on its first secrets() call.
type secretRule struct {
	typ         string // reported type name
	pattern     string // the regex, uncompiled
	keywords    []string
	entropy     float64
	secretGroup int
	builtin     bool // one of the reference's four types
	generic     bool // a gitleaks generic-* rule: yields to specific findings
	// assign is set for rules of gitleaks' "keyword, then an assignment
	// operator" template: a keyword occurrence not followed by an operator
	// within the template's reach cannot start a match.
	assign bool
	// where locates the rule in its configuration for errors
	// ("rules[3] (gitlab-pat)"); allowSrc are its allowlist tables.
	where    string
	allowSrc []tomlTable

	once sync.Once
	err  error // of compile; nil once compiled
	// Set by compile:
	re    *regexp.Regexp
	allow []secretAllowlist
	// anchored is the rule's regex without its lazy `(?i)[\w.-]{0,50}?`
	// prefix, anchored: it must match at the keyword for the rule to match
	// there (a necessary condition, cheap to test).
	anchored *regexp.Regexp
	span     regexSpan // bounds of a match, for windowed search
}

// compile compiles the rule (configuration name in errors) on the first
// call and returns that call's error on every call. It is safe for
// concurrent use.
func (r *secretRule) compile(name string) error {
	r.once.Do(func() { r.err = r.build(name) })
	return r.err
}

func (r *secretRule) build(name string) error {
	re, err := regexp.Compile(r.pattern)
	if err != nil {
		return fmt.Errorf("%s: %s.regex: %w", name, r.where, err)
	}
	if r.secretGroup > re.NumSubexp() {
		return fmt.Errorf("%s: %s.secretGroup: %d is not a group of the regex", name, r.where, r.secretGroup)
	}
	for j, g := range r.allowSrc {
		a, use, err := compileAllowlist(name, fmt.Sprintf("%s.allowlists[%d]", r.where, j), g)
		if err != nil {
			return err
		}
		if use {
			r.allow = append(r.allow, a)
		}
	}
	r.span = spanOf(r.pattern, r.keywords)
	if r.assign && strings.HasPrefix(r.pattern, assignPrefix) {
		if a, err := regexp.Compile(`(?i)^(?:` + r.pattern[len(assignPrefix):] + `)`); err == nil {
			r.anchored = a
		}
	}
	r.re = re
	return nil
}

// assignPrefix starts gitleaks' generated "keyword = secret" rules.
const assignPrefix = `(?i)[\w.-]{0,50}?`

// assignTemplate is the part of gitleaks' generated rules between the
// keyword and the operator.
const assignTemplate = `(?:[ \t\w.-]{0,20})[\s'"]{0,3}(?:=|>|:{1,3}=|\|\||:|=>|\?=|,)`

type secretAllowlist struct {
	target    string // "secret" (default), "match" or "line"
	regexes   []*regexp.Regexp
	stopwords []string // lower-case
	and       bool     // condition = "AND": regexes and stopwords must both hold
}

// SecretScanner finds secrets: the reference's four types, then the rules
// of a gitleaks-format configuration. It is safe for concurrent use.
type SecretScanner struct {
	name    string // of the configuration, for errors
	rules   []*secretRule
	kw      *keywordSet
	kwRules [][]int // keyword index -> rule indexes
	always  []int   // rules without keywords
	// global are the configuration's global allowlists, compiled from
	// globalSrc (with their locations) by globalOnce when a configuration
	// rule first finds something.
	globalSrc  []globalAllowlist
	globalOnce sync.Once
	global     []secretAllowlist
	globalErr  error
	// Skipped lists the ids of configuration rules that cannot apply to
	// free text (rules restricted to file paths), with the reason.
	Skipped []string
}

type globalAllowlist struct {
	where string
	t     tomlTable
}

// NewSecretScanner compiles the four reference types plus the rules of a
// gitleaks TOML configuration src (named name in errors); an empty src
// gives the four types only. Every regex is compiled here, so an error in
// any of them is returned.
func NewSecretScanner(name, src string) (*SecretScanner, error) {
	s, err := newSecretScanner(name, src)
	if err != nil {
		return nil, err
	}
	if err := s.compileAll(); err != nil {
		return nil, err
	}
	return s, nil
}

// compileAll compiles the global allowlists and every rule, returning
// the first error in configuration order.
func (s *SecretScanner) compileAll() error {
	if err := s.globalAllowlists(); err != nil {
		return err
	}
	for _, r := range s.rules {
		if err := r.compile(s.name); err != nil {
			return err
		}
	}
	return nil
}

// globalAllowlists compiles the global allowlists on the first call.
func (s *SecretScanner) globalAllowlists() error {
	s.globalOnce.Do(func() {
		for _, g := range s.globalSrc {
			a, use, err := compileAllowlist(s.name, g.where, g.t)
			if err != nil {
				s.globalErr = err
				return
			}
			if use {
				s.global = append(s.global, a)
			}
		}
	})
	return s.globalErr
}

// newSecretScanner reads the configuration and builds the keyword
// prefilter; the rules compile on first use.
func newSecretScanner(name, src string) (*SecretScanner, error) {
	s := &SecretScanner{name: name}
	for _, b := range builtinSecretRules {
		s.rules = append(s.rules, &secretRule{typ: b.typ, pattern: b.pattern, keywords: b.keywords, builtin: true, where: "reference pattern " + b.typ})
	}
	if src != "" {
		if err := s.loadGitleaks(name, src); err != nil {
			return nil, err
		}
	}
	var words []string
	index := map[string]int{}
	for ri, r := range s.rules {
		if len(r.keywords) == 0 {
			s.always = append(s.always, ri)
			continue
		}
		for _, w := range r.keywords {
			w = strings.ToLower(w)
			wi, ok := index[w]
			if !ok {
				wi = len(words)
				index[w] = wi
				words = append(words, w)
				s.kwRules = append(s.kwRules, nil)
			}
			s.kwRules[wi] = append(s.kwRules[wi], ri)
		}
	}
	s.kw = newKeywordSet(words)
	return s, nil
}

var (
	defaultSecretsOnce sync.Once
	defaultSecrets     *SecretScanner
)

// DefaultSecrets returns the scanner with the four reference types and
// gitleaks' default rules. The configuration is read on the first call;
// each rule compiles when a text first holds one of its keywords
// (TestDefaultSecretsCompile compiles them all).
func DefaultSecrets() *SecretScanner {
	defaultSecretsOnce.Do(func() {
		s, err := newSecretScanner("rules/gitleaks.toml", gitleaksTOML)
		if err != nil {
			// The embedded file is part of the build and tested.
			panic(fmt.Sprintf("detect: embedded gitleaks rules: %v", err))
		}
		defaultSecrets = s
	})
	return defaultSecrets
}

// Secrets scans text with DefaultSecrets. The policy function
// secrets(data) is Types(Secrets(s)) for each string s of data.
func Secrets(text string) []Match { return DefaultSecrets().Scan(text) }

// secretTypeName turns a gitleaks rule id into a type name:
// "gitlab-pat" -> "GITLAB_PAT".
func secretTypeName(id string) string {
	return strings.ReplaceAll(strings.ToUpper(id), "-", "_")
}

func (s *SecretScanner) loadGitleaks(name, src string) error {
	doc, err := parseTOML(name, src)
	if err != nil {
		return fmt.Errorf("load secret rules: %w", err)
	}
	if g, ok := doc["allowlist"].(tomlTable); ok {
		s.globalSrc = append(s.globalSrc, globalAllowlist{"allowlist", g})
	}
	if gs, ok := doc["allowlists"].([]tomlTable); ok {
		for i, g := range gs {
			s.globalSrc = append(s.globalSrc, globalAllowlist{fmt.Sprintf("allowlists[%d]", i), g})
		}
	}
	rules, _ := doc["rules"].([]tomlTable)
	for i, t := range rules {
		where := fmt.Sprintf("rules[%d]", i)
		id, _ := t["id"].(string)
		if id == "" {
			return fmt.Errorf("%s: %s: missing id", name, where)
		}
		where = fmt.Sprintf("rules[%d] (%s)", i, id)
		if _, ok := t["path"]; ok {
			s.Skipped = append(s.Skipped, id+": restricted to file paths")
			continue
		}
		pat, _ := t["regex"].(string)
		if pat == "" {
			s.Skipped = append(s.Skipped, id+": no regex")
			continue
		}
		r := &secretRule{typ: secretTypeName(id), pattern: pat, where: where, generic: strings.Contains(id, "generic"), assign: strings.Contains(pat, assignTemplate)}
		switch e := t["entropy"].(type) {
		case float64:
			r.entropy = e
		case int64:
			r.entropy = float64(e)
		}
		if g, ok := t["secretGroup"].(int64); ok {
			if g < 0 || g > math.MaxInt32 {
				return fmt.Errorf("%s: %s.secretGroup: %d is not a group of the regex", name, where, g)
			}
			r.secretGroup = int(g) // checked against the regex by compile
		}
		if kws, ok := t["keywords"].([]any); ok {
			for _, k := range kws {
				if ks, ok := k.(string); ok && ks != "" {
					r.keywords = append(r.keywords, strings.ToLower(ks))
				}
			}
		}
		r.allowSrc, _ = t["allowlists"].([]tomlTable)
		s.rules = append(s.rules, r)
	}
	return nil
}

// compileAllowlist compiles a gitleaks allowlist. use is false when the
// list can never apply to free text (it needs paths or commits).
func compileAllowlist(name, where string, t tomlTable) (a secretAllowlist, use bool, err error) {
	_, hasPaths := t["paths"]
	_, hasCommits := t["commits"]
	cond, _ := t["condition"].(string)
	a.and = strings.EqualFold(cond, "AND")
	if a.and && (hasPaths || hasCommits) {
		return a, false, nil
	}
	a.target, _ = t["regexTarget"].(string)
	if rs, ok := t["regexes"].([]any); ok {
		for k, r := range rs {
			p, _ := r.(string)
			re, err := regexp.Compile(p)
			if err != nil {
				return a, false, fmt.Errorf("%s: %s.regexes[%d]: %w", name, where, k, err)
			}
			a.regexes = append(a.regexes, re)
		}
	}
	if ws, ok := t["stopwords"].([]any); ok {
		for _, w := range ws {
			if s, ok := w.(string); ok && s != "" {
				a.stopwords = append(a.stopwords, strings.ToLower(s))
			}
		}
	}
	return a, len(a.regexes) > 0 || len(a.stopwords) > 0, nil
}

func (a *secretAllowlist) allows(secret, match, line string) bool {
	target := secret
	switch a.target {
	case "match":
		target = match
	case "line":
		target = line
	}
	regexOK := false
	if target != "" {
		for _, re := range a.regexes {
			if re.MatchString(target) {
				regexOK = true
				break
			}
		}
	}
	stopOK := false
	if len(a.stopwords) > 0 && secret != "" {
		ls := strings.ToLower(secret)
		for _, w := range a.stopwords {
			if strings.Contains(ls, w) {
				stopOK = true
				break
			}
		}
	}
	if a.and {
		return (len(a.regexes) == 0 || regexOK) && (len(a.stopwords) == 0 || stopOK)
	}
	return regexOK || stopOK
}

// shannonEntropy is gitleaks' entropy: over code points, divided by the
// byte length (as gitleaks computes it).
func shannonEntropy(data string) float64 {
	if data == "" {
		return 0
	}
	var ascii [128]int
	var other map[rune]int
	for _, c := range data {
		if c < 128 {
			ascii[c]++
		} else {
			if other == nil {
				other = map[rune]int{}
			}
			other[c]++
		}
	}
	inv := 1 / float64(len(data))
	e := 0.0
	add := func(n int) {
		if n > 0 {
			f := float64(n) * inv
			e -= f * math.Log2(f)
		}
	}
	for _, n := range ascii {
		add(n)
	}
	for _, n := range other {
		add(n)
	}
	return e
}

// lineAround returns the line(s) of text containing [start, end).
func lineAround(text string, start, end int) string {
	ls := strings.LastIndexByte(text[:start], '\n') + 1
	le := strings.IndexByte(text[end:], '\n')
	if le < 0 {
		le = len(text)
	} else {
		le += end
	}
	return text[ls:le]
}

// Scan returns the secrets in text: the reference's four types first (in
// type order, then pattern order, then left to right), then the
// configuration's rules in rule order. A configuration finding that
// overlaps a reference finding is dropped, and a generic-rule finding that
// overlaps any other finding is dropped. Offsets are code points.
func (s *SecretScanner) Scan(text string) []Match {
	if text == "" {
		return nil
	}
	hits := s.kw.scan(text, nil)
	if len(hits) == 0 && len(s.always) == 0 {
		return nil
	}
	// Pair each hit with the rules it triggers, grouped by rule (stable,
	// so each rule's hits stay in text order).
	type ruleHit struct {
		ri int
		h  keywordHit
	}
	var pairs []ruleHit
	for _, h := range hits {
		for _, ri := range s.kwRules[h.Word] {
			pairs = append(pairs, ruleHit{ri, h})
		}
	}
	for _, ri := range s.always {
		pairs = append(pairs, ruleHit{ri: ri, h: keywordHit{Word: -1}})
	}
	slices.SortStableFunc(pairs, func(a, b ruleHit) int { return a.ri - b.ri })
	var out []Match
	var builtinSpans, specificSpans [][2]int
	overlaps := func(spans [][2]int, a, b int) bool {
		for _, sp := range spans {
			if a < sp[1] && sp[0] < b {
				return true
			}
		}
		return false
	}
	// Configuration findings with their rule index: they are reported in
	// rule order, after the reference types.
	type finding struct {
		m  Match
		ri int
	}
	var cfg, generic []finding
	var ruleHits []keywordHit
	for p := 0; p < len(pairs); {
		ri := pairs[p].ri
		r := s.rules[ri]
		ruleHits = ruleHits[:0]
		for ; p < len(pairs) && pairs[p].ri == ri; p++ {
			ruleHits = append(ruleHits, pairs[p].h)
		}
		// A rule that does not compile finds nothing. Only the default
		// scanner's rules compile here (NewSecretScanner compiles all of
		// its rules up front), and a test compiles every one of those.
		if r.compile(s.name) != nil {
			continue
		}
		var locs [][]int
		if len(r.keywords) == 0 {
			locs = r.re.FindAllStringIndex(text, -1)
		} else {
			locs = s.findNear(r, text, ruleHits)
		}
		for _, loc := range locs {
			start, end := loc[0], loc[1]
			if r.builtin {
				out = append(out, Match{Type: r.typ, Start: start, End: end, Score: 1})
				builtinSpans = append(builtinSpans, [2]int{start, end})
				continue
			}
			match := strings.Trim(text[start:end], "\n")
			if match == "" {
				continue
			}
			start += strings.Index(text[start:end], match)
			end = start + len(match)
			if overlaps(builtinSpans, start, end) {
				continue
			}
			// As gitleaks does, the secret is the rule's group in a match
			// of the regex against the match text alone.
			secret := match
			if r.re.NumSubexp() > 0 {
				if groups := r.re.FindStringSubmatch(match); len(groups) > 1 {
					if r.secretGroup > 0 {
						secret = groups[r.secretGroup]
					} else {
						for _, g := range groups[1:] {
							if g != "" {
								secret = g
								break
							}
						}
					}
				}
			}
			if r.entropy != 0 && shannonEntropy(secret) <= r.entropy {
				continue
			}
			line := lineAround(text, start, end)
			if strings.Contains(line, gitleaksAllowSignature) {
				continue
			}
			allowed := false
			if s.globalAllowlists() != nil {
				continue // as a rule that does not compile: nothing found
			}
			for i := range s.global {
				if s.global[i].allows(secret, match, line) {
					allowed = true
					break
				}
			}
			for i := 0; !allowed && i < len(r.allow); i++ {
				allowed = r.allow[i].allows(secret, match, line)
			}
			if allowed {
				continue
			}
			m := Match{Type: r.typ, Start: start, End: end, Score: 1}
			if r.generic {
				generic = append(generic, finding{m, ri})
				continue
			}
			specificSpans = append(specificSpans, [2]int{start, end})
			cfg = append(cfg, finding{m, ri})
		}
	}
	for _, g := range generic {
		if !overlaps(specificSpans, g.m.Start, g.m.End) {
			cfg = append(cfg, g)
		}
	}
	sort.SliceStable(cfg, func(i, j int) bool { return cfg[i].ri < cfg[j].ri })
	for _, f := range cfg {
		out = append(out, f.m)
	}
	byteMatchesToRunes(text, out)
	return out
}
