package detect

import (
	"encoding/base64"
	"regexp"
	"strings"
	"unicode/utf8"
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
	re     *regexp.Regexp
}

// injectionRules run on a normalised copy of the text (lower case,
// invisible characters removed, whitespace runs collapsed).
var injectionRules = []injectionRule{
	{SignalOverride, 0.95, regexp.MustCompile(`\b(?:ignore|disregard|forget|skip|bypass|override|neglect|do not follow|don't follow|stop following|pay no attention to)\b[^.\n]{0,40}?\b(?:previous|prior|above|preceding|earlier|former|initial|original|all|any|your|the)\b[^.\n]{0,30}?\b(?:instructions?|prompts?|rules|directions|guidelines|commands|directives|constraints|programming|system prompt)\b`)},
	{SignalOverride, 0.95, regexp.MustCompile(`\b(?:forget|disregard) (?:everything|all) (?:you were|you've been|you have been|i) (?:told|said|given)`)},
	{SignalOverride, 0.95, regexp.MustCompile(`\b(?:ignorier(?:e|en sie|t)?|vergiss|vergessen sie)\s+(?:alle\s+)?(?:vorherigen|bisherigen|obigen|vorigen|deine|ihre)\s+(?:anweisungen|instruktionen|befehle|regeln)`)},
	{SignalOverride, 0.95, regexp.MustCompile(`\b(?:ignore[zr]?|oublie[zr]?)\s+(?:toutes\s+)?(?:les\s+|tes\s+|vos\s+)?(?:instructions|consignes|règles)(?:\s+(?:précédentes|antérieures|ci-dessus))?`)},
	{SignalOverride, 0.95, regexp.MustCompile(`\b(?:ignora(?:r)?|olvida(?:r)?)\s+(?:todas\s+)?(?:las\s+|tus\s+)?instrucciones(?:\s+(?:anteriores|previas))?`)},
	{SignalOverride, 0.95, regexp.MustCompile(`\b(?:ignora|dimentica)\s+(?:tutte\s+)?(?:le\s+)?istruzioni\s+(?:precedenti|sopra)`)},
	{SignalOverride, 0.95, regexp.MustCompile(`\b(?:ignor[ea]|esqueça)\s+(?:todas\s+)?(?:as\s+)?instruções\s+(?:anteriores|acima)`)},
	{SignalOverride, 0.95, regexp.MustCompile(`\bnegeer\s+(?:alle\s+)?(?:vorige|eerdere|voorgaande)\s+instructies`)},
	{SignalOverride, 0.95, regexp.MustCompile(`\bzignoruj\s+(?:wszystkie\s+)?(?:poprzednie\s+)?instrukcje`)},
	{SignalOverride, 0.95, regexp.MustCompile(`önceki\s+(?:tüm\s+)?talimatları\s+(?:yok\s+say|görmezden\s+gel)`)},
	{SignalOverride, 0.95, regexp.MustCompile(`(?:игнорируй(?:те)?|забудь(?:те)?)\s+(?:все\s+)?(?:предыдущие\s+)?(?:инструкции|указания)`)},
	{SignalOverride, 0.95, regexp.MustCompile(`(?:忽略|无视|忽视|忘记)(?:之前|以上|上面|先前|前面)?(?:的)?(?:所有)?(?:指令|指示|说明|规则|提示)`)},
	{SignalOverride, 0.95, regexp.MustCompile(`(?:以前|前|上記)の(?:すべての)?(?:指示|命令|指令)を(?:無視|忘れ)`)},
	{SignalOverride, 0.95, regexp.MustCompile(`(?:이전|위의|앞의)\s*(?:모든\s*)?(?:지시|지침|명령)(?:을|를|사항을)?\s*무시`)},
	{SignalPersona, 0.95, regexp.MustCompile(`\byou are (?:now|going to)\b[^.\n]{0,40}?\b(?:dan|unrestricted|jailbroken|unfiltered|free of|no longer bound|without (?:any )?(?:restrictions|limits|filters|rules))`)},
	{SignalPersona, 0.9, regexp.MustCompile(`\b(?:do anything now|developer mode (?:enabled|on|activated)|jailbreak(?:ed)? mode|you are jailbroken)\b`)},
	{SignalPersona, 0.9, regexp.MustCompile(`\b(?:pretend|act|behave)\b[^.\n]{0,20}?\b(?:to be|as if|as though|like|as)\b[^.\n]{0,40}?\b(?:no|without|any) (?:restrictions|rules|filters|guidelines|limits)`)},
	{SignalPersona, 0.9, regexp.MustCompile(`\b(?:act as|become|you are now) an? (?:unfiltered|unrestricted|uncensored) (?:ai|model|assistant|chatbot)`)},
	{SignalLeak, 0.9, regexp.MustCompile(`\b(?:reveal|print|show|output|repeat|leak|display|tell me|give me)\b[^.\n]{0,30}?\b(?:your|the)\b[^.\n]{0,20}?\b(?:system prompt|initial prompt|hidden instructions|instructions above|original instructions|secret instructions)`)},
	{SignalLeak, 0.9, regexp.MustCompile(`\brepeat the (?:instructions|text|words) above\b`)},
	{SignalRoleMarker, 0.9, regexp.MustCompile(`<\|(?:im_start|im_end|system|assistant|user|endoftext|begin_of_text|start_header_id|end_header_id|eot_id)\|>|\[/?inst\]|<</?sys>>`)},
	{SignalRoleMarker, 0.9, regexp.MustCompile(`\bbegin (?:system|admin|developer) (?:prompt|instructions)\b|\[system\]\(#`)},
	{SignalRoleMarker, 0.7, regexp.MustCompile(`</?(?:system|instructions?|admin|developer)>`)},
	{SignalRoleMarker, 0.5, regexp.MustCompile(`(?m)^\s*(?:###\s*)?(?:system|developer)\s*(?:message|prompt|override)?\s*:\s*(?:the|you|ignore|new|all|reveal)`)},
	{SignalRoleMarker, 0.5, regexp.MustCompile(`\b(?:new|updated|revised) (?:instructions|rules|task|policy)\s*:`)},
	{SignalHidden, 0.7, regexp.MustCompile(`<!--[^>]{0,300}?\b(?:ignore|instructions?|assistant|ai|you must|do not tell|recommend)\b[^>]{0,300}?-->`)},
	{SignalAddressed, 0.7, regexp.MustCompile(`\b(?:ai|assistant|agent|model|chatgpt|claude|llm|chatbot)\b[^.\n]{0,25}?(?:,|:)\s*(?:please\s+|kindly\s+)?(?:ignore|forward|send|email|delete|execute|run|call|transfer|disregard|you must)\b`)},
	{SignalAddressed, 0.7, regexp.MustCompile(`\b(?:note to|attention|if you are) (?:the |an? )?(?:ai|assistant|agent|llm|language model|ai model)\b`)},
	{SignalAddressed, 0.5, regexp.MustCompile(`\b(?:important|attention|urgent)\b[^\n]{0,80}?\b(?:ai|assistant|agent|model)\b[^\n]{0,40}?\b(?:must|should|need to|have to)\b`)},
	{SignalAddressed, 0.6, regexp.MustCompile(`\b(?:before|instead of|when|while) (?:answering|replying|summari[sz]ing|responding|reading)\b[^.\n]{0,60}?\b(?:send|include|call|override|ignore|email)\b`)},
	{SignalExfiltration, 0.75, regexp.MustCompile(`\b(?:send|forward|email|post|upload|exfiltrate|transfer|leak)\b[^.\n]{0,60}?\b(?:password|credentials|api key|secret|token|private key|ssh key|inbox|conversation|chat history|emails|(?:all|every|each) (?:the )?(?:files|data|emails?|messages?|documents?))\b[^.\n]{0,60}?(?:https?://|[\w.-]+@[\w.-]+\.\w|attacker|evil)`)},
	{SignalExfiltration, 0.9, regexp.MustCompile(`!\[[^\]]{0,100}\]\(https?://[^)\s]{1,200}\?[^)\s]{0,200}(?:\{|\$\{|%7b)`)},
	{SignalExfiltration, 0.6, regexp.MustCompile(`!\[[^\]]{0,100}\]\(https?://[^)\s]{1,200}\?[^)\s]{0,200}(?:data|q|d|info)=`)},
	{SignalExfiltration, 0.5, regexp.MustCompile(`\b(?:rm -rf /|curl [^\s|]+ ?\| ?(?:ba)?sh|cat ~/\.ssh/|id_rsa\b|\.ssh/id_)`)},
	{SignalDecodeAndDo, 0.9, regexp.MustCompile(`\bdecode\b[^\n]{0,40}?\b(?:base64|rot13|hex|base32)\b[^\n]{0,60}?\b(?:follow|execute|run|obey|do what it says|comply|instructions)\b`)},
	{SignalDecodeAndDo, 0.9, regexp.MustCompile(`\b(?:base64|rot13|hex)\b[^\n]{0,30}?\b(?:text|string|payload|message)?[^\n]{0,30}?\band (?:follow|execute|obey) (?:it|them|the instructions|what it says)`)},
}

// injectionKeywords gate the regexes: a rule set runs only when the
// normalised text contains one of these (most benign text contains none).
var injectionKeywords = []string{"ignor", "disregard", "forget", "skip", "bypass", "override", "neglect", "follow", "attention",
	"you are", "pretend", "act", "behave", "anything now", "developer", "jailbr", "unfilter", "unrestrict", "uncensor",
	"reveal", "print", "show", "output", "repeat", "leak", "display", "tell me", "give me", "<|", "[inst", "[/inst", "<<sys", "<</sys",
	"begin", "[system]", "<system", "</system", "<instruction", "</instruction", "<admin", "</admin", "<developer", "</developer",
	"system", "new ", "updated", "revised", "<!--", "ai", "assistant", "agent", "model", "chatgpt", "claude", "llm", "chatbot",
	"important", "urgent", "before", "instead", "send", "forward", "email", "post", "upload", "exfil", "transfer", "![", "rm -rf",
	"curl", "ssh", "decode", "base64", "rot13", "hex", "vergiss", "oubli", "olvid", "dimentica", "esqueça", "negeer", "zignoruj",
	"talimat", "игнорир", "забуд", "忽略", "无视", "忽视", "忘记", "無視", "忘れ", "무시"}

var injectionKW = newKeywordSet(injectionKeywords)

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
	if len(injectionKW.scan(ns, nil)) > 0 {
		for _, r := range injectionRules {
			if loc := r.re.FindStringIndex(ns); loc != nil {
				// Offsets refer to the normalised text; they are exact when
				// normalisation removed nothing, else the signal spans the text.
				if len(ns) == len(text) && ns == strings.ToLower(text) {
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

var base64RE = regexp.MustCompile(`[A-Za-z0-9+/_-]{24,}={0,2}`)

// base64Payloads returns the base64 runs of text that decode to mostly
// printable text (binary payloads such as images are skipped).
func base64Payloads(text string) []b64Payload {
	var out []b64Payload
	for _, loc := range base64RE.FindAllStringIndex(text, 20) {
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
