package detect

import (
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

// gitleaksAllowSignature on a line suppresses gitleaks-rule findings on
// it, as in gitleaks.
const gitleaksAllowSignature = "gitleaks:allow"

// secretRuleSpec is a rule as its configuration states it, not
// compiled. The default rules are a generated table of these
// (secrets_table.go, with their spans computed); other configurations
// are read from TOML (readSecretConfig).
type secretRuleSpec struct {
	typ         string   // reported type name
	pattern     string   // the regex, uncompiled
	keywords    []string // lower case
	entropy     float64
	secretGroup int
	builtin     bool // one of the reference's four types
	generic     bool // a gitleaks generic-* rule: yields to specific findings
	// assign is set for rules of gitleaks' "keyword, then an assignment
	// operator" template: a keyword occurrence not followed by an operator
	// within the template's reach cannot start a match.
	assign bool
	// where locates the rule in its configuration for errors
	// ("rules[3] (gitlab-pat)").
	where      string
	allowlists []allowlistSpec
	// span bounds a match, for windowed search: spanOf(pattern,
	// keywords), computed by compile unless spanKnown.
	span      regexSpan
	spanKnown bool
}

// allowlistSpec is a gitleaks allowlist as configured, not compiled.
type allowlistSpec struct {
	where     string // location for errors ("allowlist", "rules[3] (x).allowlists[0]")
	target    string // "secret" (default), "match" or "line"
	regexes   []string
	stopwords []string // lower case
	and       bool     // condition = "AND": regexes and stopwords must both hold
}

// secretConfig is a scanner's configuration: its rules in reporting
// order (the reference's types first), its global allowlists, and the
// rules skipped because they cannot apply to free text.
type secretConfig struct {
	rules   []secretRuleSpec
	global  []allowlistSpec
	skipped []string
}

// A secretRule is compiled lazily: its keywords feed the scanner's
// prefilter, and compile builds its regex the first time a keyword of the
// rule occurs in a scanned text, once (its allowlists and its anchored
// prefilter later still, when needed). Compiling all of gitleaks' rules
// takes ~40 ms of CPU, which every `vigil check` paid on its first
// secrets() call.
type secretRule struct {
	secretRuleSpec

	once sync.Once
	err  error          // of compile; nil once compiled
	re   *regexp.Regexp // set by compile

	// The allowlists compile when a finding of the rule first needs them
	// (most candidates fall to an overlap or the entropy test first).
	allowOnce sync.Once
	allowErr  error
	allow     []secretAllowlist

	// anchored is the rule's regex without its lazy `(?i)[\w.-]{0,50}?`
	// prefix, anchored: it must match at the keyword for the rule to match
	// there (a necessary condition, cheap to test). It compiles when a
	// text first has anchoredMinHits occurrences of the rule's keywords.
	anchoredOnce sync.Once
	anchored     *regexp.Regexp
}

// anchoredMinHits is the number of keyword occurrences from which a text
// is searched with the anchored prefilter: below it, compiling the
// prefilter costs more than the windows it saves. Tests set it to 0.
var anchoredMinHits = 8

// anchoredRegexp returns the rule's anchored prefilter, or nil when the
// rule has none.
func (r *secretRule) anchoredRegexp() *regexp.Regexp {
	if !r.assign || !strings.HasPrefix(r.pattern, assignPrefix) {
		return nil
	}
	r.anchoredOnce.Do(func() {
		if a, err := regexp.Compile(`(?i)^(?:` + r.pattern[len(assignPrefix):] + `)`); err == nil {
			r.anchored = a
		}
	})
	return r.anchored
}

// compileAllowlists compiles the rule's allowlists on the first call
// and returns that call's error on every call.
func (r *secretRule) compileAllowlists(name string) error {
	r.allowOnce.Do(func() {
		for i := range r.allowlists {
			a, err := r.allowlists[i].compile(name)
			if err != nil {
				r.allowErr = err
				return
			}
			r.allow = append(r.allow, a)
		}
	})
	return r.allowErr
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
	if !r.spanKnown {
		r.span, r.spanKnown = spanOf(r.pattern, r.keywords), true
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
	// globalSrc by globalOnce when a configuration rule first finds
	// something.
	globalSrc  []allowlistSpec
	globalOnce sync.Once
	global     []secretAllowlist
	globalErr  error
	// Skipped lists the ids of configuration rules that cannot apply to
	// free text (rules restricted to file paths), with the reason.
	Skipped []string
}

// NewSecretScanner compiles the four reference types plus the rules of a
// gitleaks TOML configuration src (named name in errors); an empty src
// gives the four types only. Every regex is compiled here, so an error in
// any of them is returned.
func NewSecretScanner(name, src string) (*SecretScanner, error) {
	cfg, err := readSecretConfig(name, src)
	if err != nil {
		return nil, err
	}
	s := newSecretScanner(name, cfg)
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
		if err := r.compileAllowlists(s.name); err != nil {
			return err
		}
		r.anchoredRegexp()
	}
	return nil
}

// globalAllowlists compiles the global allowlists on the first call.
func (s *SecretScanner) globalAllowlists() error {
	s.globalOnce.Do(func() {
		for i := range s.globalSrc {
			a, err := s.globalSrc[i].compile(s.name)
			if err != nil {
				s.globalErr = err
				return
			}
			s.global = append(s.global, a)
		}
	})
	return s.globalErr
}

// newSecretScanner returns a scanner of cfg (named name in errors) with
// its keyword prefilter built; the rules compile on first use.
func newSecretScanner(name string, cfg secretConfig) *SecretScanner {
	s := &SecretScanner{name: name, globalSrc: cfg.global, Skipped: slices.Clone(cfg.skipped)}
	rules := make([]secretRule, len(cfg.rules))
	s.rules = make([]*secretRule, len(cfg.rules))
	for i := range cfg.rules {
		rules[i].secretRuleSpec = cfg.rules[i]
		s.rules[i] = &rules[i]
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
	return s
}

var (
	defaultSecretsOnce sync.Once
	defaultSecrets     *SecretScanner
)

// DefaultSecrets returns the scanner with the four reference types and
// gitleaks' default rules (rules/gitleaks.toml, compiled into the
// generated table defaultSecretConfig, so nothing is parsed at run time).
// It is built on the first call; each rule compiles when a text first
// holds one of its keywords (TestDefaultSecretsCompile compiles them all).
func DefaultSecrets() *SecretScanner {
	defaultSecretsOnce.Do(func() {
		defaultSecrets = newSecretScanner("rules/gitleaks.toml", defaultSecretConfig)
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

// readSecretConfig returns the reference's types followed by the rules
// of a gitleaks TOML configuration src (named name in errors); an empty
// src gives the reference's types only. Nothing is compiled.
func readSecretConfig(name, src string) (secretConfig, error) {
	var cfg secretConfig
	for _, b := range builtinSecretRules {
		cfg.rules = append(cfg.rules, secretRuleSpec{typ: b.typ, pattern: b.pattern, keywords: b.keywords, builtin: true, where: "reference pattern " + b.typ})
	}
	if src == "" {
		return cfg, nil
	}
	doc, err := parseTOML(name, src)
	if err != nil {
		return cfg, fmt.Errorf("load secret rules: %w", err)
	}
	if g, ok := doc["allowlist"].(tomlTable); ok {
		if a, use := allowlistFromTOML("allowlist", g); use {
			cfg.global = append(cfg.global, a)
		}
	}
	if gs, ok := doc["allowlists"].([]tomlTable); ok {
		for i, g := range gs {
			if a, use := allowlistFromTOML(fmt.Sprintf("allowlists[%d]", i), g); use {
				cfg.global = append(cfg.global, a)
			}
		}
	}
	rules, _ := doc["rules"].([]tomlTable)
	for i, t := range rules {
		where := fmt.Sprintf("rules[%d]", i)
		id, _ := t["id"].(string)
		if id == "" {
			return cfg, fmt.Errorf("%s: %s: missing id", name, where)
		}
		where = fmt.Sprintf("rules[%d] (%s)", i, id)
		if _, ok := t["path"]; ok {
			cfg.skipped = append(cfg.skipped, id+": restricted to file paths")
			continue
		}
		pat, _ := t["regex"].(string)
		if pat == "" {
			cfg.skipped = append(cfg.skipped, id+": no regex")
			continue
		}
		r := secretRuleSpec{typ: secretTypeName(id), pattern: pat, where: where, generic: strings.Contains(id, "generic"), assign: strings.Contains(pat, assignTemplate)}
		switch e := t["entropy"].(type) {
		case float64:
			r.entropy = e
		case int64:
			r.entropy = float64(e)
		}
		if g, ok := t["secretGroup"].(int64); ok {
			if g < 0 || g > math.MaxInt32 {
				return cfg, fmt.Errorf("%s: %s.secretGroup: %d is not a group of the regex", name, where, g)
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
		if als, ok := t["allowlists"].([]tomlTable); ok {
			for j, g := range als {
				if a, use := allowlistFromTOML(fmt.Sprintf("%s.allowlists[%d]", where, j), g); use {
					r.allowlists = append(r.allowlists, a)
				}
			}
		}
		cfg.rules = append(cfg.rules, r)
	}
	return cfg, nil
}

// allowlistFromTOML reads a gitleaks allowlist table. use is false when
// the list can never apply to free text (it needs paths or commits) or
// is empty.
func allowlistFromTOML(where string, t tomlTable) (a allowlistSpec, use bool) {
	_, hasPaths := t["paths"]
	_, hasCommits := t["commits"]
	cond, _ := t["condition"].(string)
	a.where = where
	a.and = strings.EqualFold(cond, "AND")
	if a.and && (hasPaths || hasCommits) {
		return a, false
	}
	a.target, _ = t["regexTarget"].(string)
	if rs, ok := t["regexes"].([]any); ok {
		for _, r := range rs {
			p, _ := r.(string)
			a.regexes = append(a.regexes, p)
		}
	}
	if ws, ok := t["stopwords"].([]any); ok {
		for _, w := range ws {
			if s, ok := w.(string); ok && s != "" {
				a.stopwords = append(a.stopwords, strings.ToLower(s))
			}
		}
	}
	return a, len(a.regexes) > 0 || len(a.stopwords) > 0
}

// compile compiles the allowlist's regexes (configuration name in
// errors).
func (a *allowlistSpec) compile(name string) (secretAllowlist, error) {
	out := secretAllowlist{target: a.target, stopwords: a.stopwords, and: a.and}
	for k, p := range a.regexes {
		re, err := regexp.Compile(p)
		if err != nil {
			return out, fmt.Errorf("%s: %s.regexes[%d]: %w", name, a.where, k, err)
		}
		out.regexes = append(out.regexes, re)
	}
	return out, nil
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
			if !allowed && r.compileAllowlists(s.name) != nil {
				continue
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
