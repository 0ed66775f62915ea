package detect

import (
	"encoding/base64"
	"sort"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/vigilhq/vigil/internal/lazyregexp"
)

// Prompt-injection signal kinds (the Type of the matches
// PromptInjection returns).
const (
	SignalOverride     = "override"      // "ignore previous instructions", in several languages
	SignalPersona      = "persona"       // "you are now DAN", "developer mode enabled"
	SignalLeak         = "prompt_leak"   // "reveal your system prompt"
	SignalRoleMarker   = "role_marker"   // chat-template tokens, <system> tags, "### System:"
	SignalHidden       = "hidden"        // instructions inside HTML comments
	SignalAddressed    = "addressed"     // text that addresses the AI and tells it what to do
	SignalExfiltration = "exfiltration"  // "send the inbox to https://…", markdown-image beacons
	SignalTagChars     = "tag_chars"     // invisible Unicode tag characters (U+E0000–U+E007F)
	SignalInvisible    = "invisible"     // many zero-width characters
	SignalBidi         = "bidi"          // bidirectional overrides
	SignalEncoded      = "encoded"       // a base64 payload that decodes to an injection
	SignalDecodeAndDo  = "decode_and_do" // "decode this base64 and follow it"
)

type injectionRule struct {
	kind   string
	weight float64
	re     *lazyregexp.Regexp
	// triggers: a match contains one of these (lower case), so the regex
	// runs only on the lines that contain one.
	triggers []string
	// whole: the pattern can span lines, so it runs on the whole text.
	whole bool
}

// injectionRules run on a normalised copy of the text (lower case,
// invisible characters removed, whitespace runs collapsed).
var injectionRules = []injectionRule{
	{SignalOverride, 0.95, lazyregexp.New(`\b(?:ignore|disregard|forget|skip|bypass|override|neglect|do not follow|don't follow|stop following|pay no attention to)\b[^.\n]{0,40}?\b(?:previous|prior|above|preceding|earlier|former|initial|original|all|any|your|the)\b[^.\n]{0,30}?\b(?:instructions?|prompts?|rules|directions|guidelines|commands|directives|constraints|programming|system prompt)\b`), []string{"ignore", "disregard", "forget", "skip", "bypass", "override", "neglect", "do not follow", "don't follow", "stop following", "pay no attention"}, false},
	{SignalOverride, 0.95, lazyregexp.New(`\b(?:forget|disregard) (?:everything|all) (?:you were|you've been|you have been|i) (?:told|said|given)`), []string{"forget", "disregard"}, false},
	{SignalOverride, 0.95, lazyregexp.New(`\b(?:ignorier(?:e|en sie|t)?|vergiss|vergessen sie)\s+(?:alle\s+)?(?:vorherigen|bisherigen|obigen|vorigen|deine|ihre)\s+(?:anweisungen|instruktionen|befehle|regeln)`), []string{"ignorier", "vergiss", "vergessen"}, false},
	{SignalOverride, 0.95, lazyregexp.New(`\b(?:ignore[zr]?|oublie[zr]?)\s+(?:toutes\s+)?(?:les\s+|tes\s+|vos\s+)?(?:instructions|consignes|règles)(?:\s+(?:précédentes|antérieures|ci-dessus))?`), []string{"ignore", "oubli"}, false},
	{SignalOverride, 0.95, lazyregexp.New(`\b(?:ignora(?:r)?|olvida(?:r)?)\s+(?:todas\s+)?(?:las\s+|tus\s+)?instrucciones(?:\s+(?:anteriores|previas))?`), []string{"ignora", "olvida"}, false},
	{SignalOverride, 0.95, lazyregexp.New(`\b(?:ignora|dimentica)\s+(?:tutte\s+)?(?:le\s+)?istruzioni\s+(?:precedenti|sopra)`), []string{"ignora", "dimentica"}, false},
	{SignalOverride, 0.95, lazyregexp.New(`\b(?:ignor[ea]|esqueça)\s+(?:todas\s+)?(?:as\s+)?instruções\s+(?:anteriores|acima)`), []string{"ignor", "esqueça"}, false},
	{SignalOverride, 0.95, lazyregexp.New(`\bnegeer\s+(?:alle\s+)?(?:vorige|eerdere|voorgaande)\s+instructies`), []string{"negeer"}, false},
	{SignalOverride, 0.95, lazyregexp.New(`\bzignoruj\s+(?:wszystkie\s+)?(?:poprzednie\s+)?instrukcje`), []string{"zignoruj"}, false},
	{SignalOverride, 0.95, lazyregexp.New(`önceki\s+(?:tüm\s+)?talimatları\s+(?:yok\s+say|görmezden\s+gel)`), []string{"talimatları"}, false},
	{SignalOverride, 0.95, lazyregexp.New(`(?:игнорируй(?:те)?|забудь(?:те)?)\s+(?:все\s+)?(?:предыдущие\s+)?(?:инструкции|указания)`), []string{"игнорир", "забуд"}, false},
	{SignalOverride, 0.95, lazyregexp.New(`(?:忽略|无视|忽视|忘记)(?:之前|以上|上面|先前|前面)?(?:的)?(?:所有)?(?:指令|指示|说明|规则|提示)`), []string{"忽略", "无视", "忽视", "忘记"}, false},
	{SignalOverride, 0.95, lazyregexp.New(`(?:以前|前|上記)の(?:すべての)?(?:指示|命令|指令)を(?:無視|忘れ)`), []string{"無視", "忘れ"}, false},
	{SignalOverride, 0.95, lazyregexp.New(`(?:이전|위의|앞의)\s*(?:모든\s*)?(?:지시|지침|명령)(?:을|를|사항을)?\s*무시`), []string{"무시"}, false},
	{SignalPersona, 0.95, lazyregexp.New(`\byou are (?:now|going to)\b[^.\n]{0,40}?\b(?:dan|unrestricted|jailbroken|unfiltered|free of|no longer bound|without (?:any )?(?:restrictions|limits|filters|rules))`), []string{"you are now", "you are going to"}, false},
	{SignalPersona, 0.9, lazyregexp.New(`\b(?:do anything now|developer mode (?:enabled|on|activated)|jailbreak(?:ed)? mode|you are jailbroken)\b`), []string{"do anything now", "developer mode", "jailbreak", "you are jailbroken"}, false},
	{SignalPersona, 0.9, lazyregexp.New(`\b(?:pretend|act|behave)\b[^.\n]{0,20}?\b(?:to be|as if|as though|like|as)\b[^.\n]{0,40}?\b(?:no|without|any) (?:restrictions|rules|filters|guidelines|limits)`), []string{"pretend", "act", "behave"}, false},
	{SignalPersona, 0.9, lazyregexp.New(`\b(?:act as|become|you are now) an? (?:unfiltered|unrestricted|uncensored) (?:ai|model|assistant|chatbot)`), []string{"unfiltered", "unrestricted", "uncensored"}, false},
	{SignalLeak, 0.9, lazyregexp.New(`\b(?:reveal|print|show|output|repeat|leak|display|tell me|give me)\b[^.\n]{0,30}?\b(?:your|the)\b[^.\n]{0,20}?\b(?:system prompt|initial prompt|hidden instructions|instructions above|original instructions|secret instructions)`), []string{"system prompt", "initial prompt", "hidden instructions", "instructions above", "original instructions", "secret instructions"}, false},
	{SignalLeak, 0.9, lazyregexp.New(`\brepeat the (?:instructions|text|words) above\b`), []string{"repeat the"}, false},
	{SignalRoleMarker, 0.9, lazyregexp.New(`<\|(?:im_start|im_end|system|assistant|user|endoftext|begin_of_text|start_header_id|end_header_id|eot_id)\|>|\[/?inst\]|<</?sys>>`), []string{"<|", "[inst", "[/inst", "<<sys", "<</sys"}, false},
	{SignalRoleMarker, 0.9, lazyregexp.New(`\bbegin (?:system|admin|developer) (?:prompt|instructions)\b|\[system\]\(#`), []string{"begin system", "begin admin", "begin developer", "[system](#"}, false},
	{SignalRoleMarker, 0.7, lazyregexp.New(`</?(?:system|instructions?|admin|developer)>`), []string{"<system", "</system", "<instruction", "</instruction", "<admin", "</admin", "<developer", "</developer"}, false},
	{SignalRoleMarker, 0.5, lazyregexp.New(`(?m)^\s*(?:###\s*)?(?:system|developer)\s*(?:message|prompt|override)?\s*:\s*(?:the|you|ignore|new|all|reveal)`), []string{"system", "developer"}, false},
	{SignalRoleMarker, 0.5, lazyregexp.New(`\b(?:new|updated|revised) (?:instructions|rules|task|policy)\s*:`), []string{"new", "updated", "revised"}, false},
	{SignalHidden, 0.7, lazyregexp.New(`<!--[^>]{0,300}?\b(?:ignore|instructions?|assistant|ai|you must|do not tell|recommend)\b[^>]{0,300}?-->`), []string{"<!--"}, true},
	{SignalAddressed, 0.7, lazyregexp.New(`\b(?:ai|assistant|agent|model|chatgpt|claude|llm|chatbot)\b[^.\n]{0,25}?(?:,|:)\s*(?:please\s+|kindly\s+)?(?:ignore|forward|send|email|delete|execute|run|call|transfer|disregard|you must)\b`), []string{"ai", "assistant", "agent", "model", "chatgpt", "claude", "llm", "chatbot"}, false},
	{SignalAddressed, 0.7, lazyregexp.New(`\b(?:note to|attention|if you are) (?:the |an? )?(?:ai|assistant|agent|llm|language model|ai model)\b`), []string{"note to", "attention", "if you are"}, false},
	{SignalAddressed, 0.5, lazyregexp.New(`\b(?:important|attention|urgent)\b[^\n]{0,80}?\b(?:ai|assistant|agent|model)\b[^\n]{0,40}?\b(?:must|should|need to|have to)\b`), []string{"important", "attention", "urgent"}, false},
	{SignalAddressed, 0.6, lazyregexp.New(`\b(?:before|instead of|when|while) (?:answering|replying|summari[sz]ing|responding|reading)\b[^.\n]{0,60}?\b(?:send|include|call|override|ignore|email)\b`), []string{"answering", "replying", "summarizing", "summarising", "responding", "reading"}, false},
	{SignalExfiltration, 0.75, lazyregexp.New(`\b(?:send|forward|email|post|upload|exfiltrate|transfer|leak)\b[^.\n]{0,60}?\b(?:password|credentials|api key|secret|token|private key|ssh key|inbox|conversation|chat history|emails|(?:all|every|each) (?:the )?(?:files|data|emails?|messages?|documents?))\b[^.\n]{0,60}?(?:https?://|[\w.-]+@[\w.-]+\.\w|attacker|evil)`), []string{"send", "forward", "email", "post", "upload", "exfiltrate", "transfer", "leak"}, false},
	{SignalExfiltration, 0.9, lazyregexp.New(`!\[[^\]]{0,100}\]\(https?://[^)\s]{1,200}\?[^)\s]{0,200}(?:\{|\$\{|%7b)`), []string{"!["}, false},
	{SignalExfiltration, 0.6, lazyregexp.New(`!\[[^\]]{0,100}\]\(https?://[^)\s]{1,200}\?[^)\s]{0,200}(?:data|q|d|info)=`), []string{"!["}, false},
	{SignalExfiltration, 0.5, lazyregexp.New(`\b(?:rm -rf /|curl [^\s|]+ ?\| ?(?:ba)?sh|cat ~/\.ssh/|id_rsa\b|\.ssh/id_)`), []string{"rm -rf", "curl", ".ssh", "id_rsa"}, false},
	{SignalDecodeAndDo, 0.9, lazyregexp.New(`\bdecode\b[^\n]{0,40}?\b(?:base64|rot13|hex|base32)\b[^\n]{0,60}?\b(?:follow|execute|run|obey|do what it says|comply|instructions)\b`), []string{"decode"}, false},
	{SignalDecodeAndDo, 0.9, lazyregexp.New(`\b(?:base64|rot13|hex)\b[^\n]{0,30}?\b(?:text|string|payload|message)?[^\n]{0,30}?\band (?:follow|execute|obey) (?:it|them|the instructions|what it says)`), []string{"and follow", "and execute", "and obey"}, false},
}

// wholeWordTriggers must end at a word boundary to count (they are short
// or common words that the rules use as whole words).
var wholeWordTriggers = map[string]bool{"ai": true, "act": true, "post": true, "leak": true, "model": true, "agent": true,
	"send": true, "email": true, "forward": true, "transfer": true, "upload": true, "system": true, "developer": true,
	"new": true, "updated": true, "revised": true, "skip": true, "important": true, "attention": true, "urgent": true,
	"reading": true, "decode": true, "behave": true, "pretend": true, "chatbot": true, "llm": true, "claude": true,
	"chatgpt": true, "assistant": true, "bypass": true, "neglect": true, "override": true}

func isASCIILetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// injectionKeywords returns the automaton that finds every rule's
// triggers in one pass and, per trigger, the rules it gates. It is built
// on first use.
var injectionKeywords = sync.OnceValues(func() (*keywordSet, [][]int) {
	var words []string
	var rules [][]int
	index := map[string]int{}
	for ri, r := range injectionRules {
		for _, w := range r.triggers {
			wi, ok := index[w]
			if !ok {
				wi = len(words)
				index[w] = wi
				words = append(words, w)
				rules = append(rules, nil)
			}
			rules[wi] = append(rules[wi], ri)
		}
	}
	return newKeywordSet(words), rules
})

// PromptInjectionScore is the result of the offline heuristic.
type PromptInjectionScore struct {
	// Score in [0, 1]: 1 - Π(1 - w) over the rules that fired (each rule
	// counts once, however often it matches).
	Score float64
	// Signals found, typed with the signal kinds above; Start and End are
	// code points of the original text (whole text for signals found in
	// decoded or normalised form).
	Signals []Match
}

// PromptInjection scores text with the offline heuristic: instruction
// override phrases (English, German, French, Spanish, Italian, Portuguese,
// Dutch, Polish, Turkish, Russian, Chinese, Japanese, Korean), persona and
// jailbreak phrases, requests for the system prompt, chat-template role
// markers, instructions hidden in HTML comments or addressed to the AI,
// exfiltration requests, invisible Unicode tag characters (decoded and
// scanned too), zero-width and bidi controls, and base64 payloads that
// decode to an injection. The policy function prompt_injection(data,
// threshold=0.9) is True when the score is at least threshold.
func PromptInjection(text string) PromptInjectionScore {
	return promptInjection(text, 0)
}

func promptInjection(text string, depth int) PromptInjectionScore {
	var res PromptInjectionScore
	keep := 1.0
	n := utf8.RuneCountInString(text)
	signal := func(kind string, w float64, start, end int) {
		res.Signals = append(res.Signals, Match{Type: kind, Start: start, End: end, Score: w})
		keep *= 1 - w
	}
	// Invisible characters, counted on the original text; tag characters
	// spell ASCII text that is scanned as well.
	var tags strings.Builder
	zw, bidi := 0, 0
	norm := make([]byte, 0, len(text))
	space := false
	for _, r := range text {
		switch {
		case r >= 0xE0000 && r <= 0xE007F:
			if r >= 0xE0020 && r <= 0xE007E {
				tags.WriteRune(r - 0xE0000)
			}
			continue
		case r == 0x200B || r == 0x200C || r == 0x2060 || r == 0x2061 || r == 0x2062 || r == 0x2063 || r == 0x2064 || r == 0xFEFF || r == 0x00AD:
			if r != 0x00AD {
				zw++
			}
			continue
		case r >= 0x202A && r <= 0x202E || r >= 0x2066 && r <= 0x2069:
			bidi++
			continue
		case r == ' ' || r == '\t' || r == '\n' || r == '\r':
			if !space {
				if r == '\n' {
					norm = append(norm, '\n')
				} else {
					norm = append(norm, ' ')
				}
			}
			space = true
			continue
		}
		space = false
		norm = utf8.AppendRune(norm, toLowerRune(r))
	}
	if tags.Len() > 0 {
		signal(SignalTagChars, 0.95, 0, n)
		if depth == 0 {
			inner := promptInjection(tags.String(), depth+1)
			for _, s := range inner.Signals {
				signal(s.Type, s.Score, 0, n)
			}
		}
	}
	if zw >= 5 {
		signal(SignalInvisible, 0.5, 0, n)
	}
	if bidi > 0 {
		signal(SignalBidi, 0.5, 0, n)
	}
	ns := string(norm)
	exact := len(ns) == len(text) && ns == strings.ToLower(text)
	for ri, loc := range findInjectionRules(ns) {
		r := injectionRules[ri]
		{
			if loc != nil {
				// Offsets refer to the normalised text; they are exact when
				// normalisation removed nothing, else the signal spans the text.
				if exact {
					offs := []int{loc[0], loc[1]}
					runeOffsets(text, offs)
					signal(r.kind, r.weight, offs[0], offs[1])
				} else {
					signal(r.kind, r.weight, 0, n)
				}
			}
		}
	}
	if depth == 0 {
		for _, p := range base64Payloads(text) {
			inner := promptInjection(p.decoded, depth+1)
			if inner.Score >= 0.9 {
				offs := []int{p.start, p.end}
				runeOffsets(text, offs)
				signal(SignalEncoded, 0.95, offs[0], offs[1])
			}
		}
	}
	res.Score = 1 - keep
	return res
}

func toLowerRune(r rune) rune {
	if r < utf8.RuneSelf {
		if r >= 'A' && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	}
	return []rune(strings.ToLower(string(r)))[0]
}

type b64Payload struct {
	start, end int
	decoded    string
}

func isBase64Byte(c byte) bool {
	return isASCIILetter(c) || isDigit(c) || c == '+' || c == '/' || c == '_' || c == '-'
}

// base64Runs returns the runs of at least 24 base64 characters (either
// alphabet) with their padding.
func base64Runs(text string) [][2]int {
	var out [][2]int
	for i := 0; i < len(text); {
		if !isBase64Byte(text[i]) {
			i++
			continue
		}
		j := i
		for j < len(text) && isBase64Byte(text[j]) {
			j++
		}
		if j-i >= 24 {
			for k := 0; k < 2 && j < len(text) && text[j] == '='; k++ {
				j++
			}
			out = append(out, [2]int{i, j})
		}
		i = j
	}
	return out
}

// base64Payloads returns the base64 runs of text that decode to mostly
// printable text (binary payloads such as images are skipped).
func base64Payloads(text string) []b64Payload {
	var out []b64Payload
	for _, loc := range base64Runs(text) {
		s := text[loc[0]:loc[1]]
		var dec []byte
		var err error
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
			if dec, err = enc.DecodeString(s); err == nil {
				break
			}
		}
		if err != nil || len(dec) < 16 || !utf8.Valid(dec) {
			continue
		}
		printable := 0
		for _, r := range string(dec) {
			if r >= 0x20 && r != 0x7f || r == '\n' || r == '\t' {
				printable++
			}
		}
		if printable*10 >= utf8.RuneCount(dec)*9 {
			out = append(out, b64Payload{loc[0], loc[1], string(dec)})
		}
	}
	return out
}

// findInjectionRules returns, for each rule, its first match in the
// normalised text ns (nil when none), running each regex only on the
// lines that contain one of its triggers.
func findInjectionRules(ns string) [][]int {
	out := make([][]int, len(injectionRules))
	injectionKW, injectionKWRules := injectionKeywords()
	hits := injectionKW.scan(ns, nil)
	if len(hits) == 0 {
		return out
	}
	lastLine := make([]int, len(injectionRules))
	for i := range lastLine {
		lastLine[i] = -1
	}
	// Line starts and ends come from the newline positions (searching
	// back from each hit was quadratic on a long line full of triggers).
	var nls []int
	for i := 0; i < len(ns); i++ {
		if ns[i] == '\n' {
			nls = append(nls, i)
		}
	}
	for _, h := range hits {
		w := injectionKW.words[h.Word]
		start := h.End - len(w)
		// Letter triggers start a word (every rule has \b before them).
		if isASCIILetter(w[0]) && start > 0 && (isASCIILetter(ns[start-1]) || isDigit(ns[start-1])) {
			continue
		}
		if wholeWordTriggers[w] && h.End < len(ns) && (isASCIILetter(ns[h.End]) || isDigit(ns[h.End])) {
			continue
		}
		for _, ri := range injectionKWRules[h.Word] {
			r := injectionRules[ri]
			if out[ri] != nil {
				continue
			}
			if r.whole {
				if lastLine[ri] < 0 {
					lastLine[ri] = 0
					out[ri] = r.re.FindStringIndex(ns)
				}
				continue
			}
			k := sort.SearchInts(nls, start) // first newline at or after start
			ls, le := 0, len(ns)
			if k > 0 {
				ls = nls[k-1] + 1
			}
			if k < len(nls) {
				le = nls[k]
			}
			if ls == lastLine[ri] {
				continue
			}
			lastLine[ri] = ls
			if loc := r.re.FindStringIndex(ns[ls:le]); loc != nil {
				out[ri] = []int{ls + loc[0], ls + loc[1]}
			}
		}
	}
	return out
}
