package detect

// The offline PERSON and LOCATION recogniser: gazetteer look-ups
// (package detect/internal/gazetteer) weighed with context rules. It runs
// inside PII's single pass over the text: PII calls scanNames at each
// token that starts with a capital letter or a letter of a script without
// case, and continues after the run of words scanNames consumed.
//
// Evidence for a name: a title (Dr., Ms., Herr), a greeting or signature
// ("Dear", "Regards,"), "my name is", a JSON or form key such as "name",
// a speech verb after it ("said"), a known given name followed by a known
// or unknown surname. Evidence for a place: a country, region or large
// city name, a preposition before it ("in", "from", "to"), a ", Country"
// after it, a location key, a street-address shape. Evidence against:
// ordinary English words at a sentence start, month and weekday names,
// code identifiers (camelCase, snake_case, a call, a dotted path),
// organisation suffixes (Inc, GmbH), all-capital words.

import (
	"context"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/vigilhq/vigil/detect/internal/gazetteer"
)

// OfflineNames is the built-in EntityRecognizer of PERSON and LOCATION.
// PII uses it whenever no EntityRecognizer is installed; it needs no
// network and loads its tables on first use.
type OfflineNames struct{}

// Entities implements EntityRecognizer. Types other than PERSON and
// LOCATION are ignored; offsets are code points.
func (OfflineNames) Entities(_ context.Context, text string, types []string) ([]Match, error) {
	var want []string
	for _, t := range types {
		if t == EntityPerson || t == EntityLocation {
			want = append(want, t)
		}
	}
	if len(want) == 0 {
		return nil, nil
	}
	return PII(text, want), nil
}

// Limits that keep a pathological text linear: a run of capitalised
// words is cut after maxRunWords words, and a word longer than
// maxNameBytes is never looked up.
const (
	maxRunWords  = 8
	maxNameBytes = 64
)

// word is one word of a capitalised run, in byte offsets.
type word struct {
	start, end int
	key        string // lower case
	f          gazetteer.Flags
	title      bool // Dr, Mrs, Herr... (a trailing '.' is inside end)
	particle   bool // van, de, bin... (lower case inside a name)
	hyphen     bool // in no list, shaped like "Ji-hoon" (hyphenGiven)
	cls        wordClass
}

func (w word) common() bool {
	return w.f&gazetteer.Common != 0 || (w.cls&cStopWords != 0) || (w.cls&cMoreStopWords != 0)
}

// stop: never a name by itself.
func (w word) stop() bool {
	return (w.cls&cStopWords != 0) || (w.cls&cMoreStopWords != 0) || (w.cls&cTechWords != 0)
}

// nameLike: could be part of a person's name.
func (w word) nameLike() bool {
	return !w.title && (w.particle || w.f.Person() || (w.f == 0 && !w.stop()))
}

// givenName: a known given name (or a name of either kind).
func (w word) givenName() bool { return w.f&(gazetteer.Given|gazetteer.Name) != 0 }

// hyphenGiven: the shape of a romanised Korean or Chinese given name in
// no list, two syllables joined by a hyphen, the second in lower case
// ("Ji-hoon", "Seo-yeon", "Xiao-ming").
func hyphenGiven(raw string) bool {
	i := strings.IndexByte(raw, '-')
	if i < 1 || i > 5 || len(raw)-i-1 < 2 || len(raw)-i-1 > 5 || !(raw[i+1] >= 'a' && raw[i+1] <= 'z') {
		return false
	}
	for j := 0; j < len(raw); j++ {
		if c := raw[j]; j != i && !(c >= 'a' && c <= 'z' || j == 0 && c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}

// surnameLike: a known name of any kind, or a small town's name (many
// surnames are), not an ordinary word.
func (w word) surnameLike() bool {
	return w.f.Person() || w.f&(gazetteer.City|gazetteer.Country|gazetteer.Region|gazetteer.BigCity) == gazetteer.City && !w.common()
}

// unknownName: a capitalised word in no list, not a stop word.
func (w word) unknownName() bool {
	return w.f&^gazetteer.MultiStart == 0 && !w.stop() && !w.title && !w.particle && utf8.RuneCountInString(w.key) >= 2
}

// titlesList: titles before a name (Dr., Herr, Sra.), in lower case.
var titlesList = words("mr", "mrs", "ms", "miss", "mx", "dr", "prof", "professor", "sir", "dame", "madam", "madame",
	"herr", "frau", "fräulein", "mme", "mlle", "monsieur", "sr", "sra", "srta", "señor", "señora", "senhor", "senhora",
	"dott", "dottore", "dottoressa", "sig", "signor", "signora", "don", "doña", "dona", "mevrouw", "meneer", "dhr", "mevr",
	"pan", "pani", "gospodin", "gospodja", "капитан", "господин", "госпожа", "sheikh", "shri", "smt", "sri", "ustadh",
	"rev", "fr", "capt", "captain", "col", "gen", "lt", "sgt", "officer", "detective", "judge", "senator", "president",
	"chancellor", "minister", "mayor", "governor", "ambassador", "rabbi", "imam", "father", "sister", "brother", "uncle", "aunt")

// particlesList: lower-case words inside names (van, de, bin).
var particlesList = words("de", "da", "das", "do", "dos", "del", "della", "di", "du", "la", "le", "van", "von", "der", "den",
	"ter", "ten", "bin", "ibn", "bint", "al", "el", "zu", "y", "e", "af", "av", "mac", "st")

// stopWordsList are capitalised words that are never a name by themselves:
// months, weekdays, greetings, pronouns and technical words that are also
// given names or places in some list.
var stopWordsList = words(
	"january", "february", "march", "april", "may", "june", "july", "august", "september", "october", "november", "december",
	"jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec",
	"monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday", "mon", "tue", "wed", "thu", "fri", "sat", "sun",
	"hi", "hello", "hey", "dear", "thanks", "thank", "cheers", "regards", "best", "sincerely", "yours", "welcome", "greetings",
	"i", "you", "he", "she", "we", "they", "it", "me", "my", "our", "your", "the", "a", "an", "this", "that", "these", "those",
	"team", "support", "admin", "user", "customer", "client", "agent", "assistant", "system", "bot", "tool", "guest",
	"error", "warning", "info", "debug", "note", "todo", "fixme", "true", "false", "null", "none", "ok", "yes", "no",
)

// techWordsList are product and language names that are also given names or
// places: never a name alone, but "Julia Wagner" is one.
var techWordsList = words(
	"python", "java", "julia", "ruby", "rust", "go", "kotlin", "swift", "scala", "perl", "dart", "elixir", "erlang", "haskell",
	"jenkins", "docker", "kubernetes", "kafka", "redis", "postgres", "mysql", "sqlite", "mongo", "nginx", "apache", "linux",
	"windows", "ubuntu", "debian", "fedora", "alpine", "django", "flask", "rails", "react", "vue", "angular", "node", "deno",
	"github", "gitlab", "jira", "slack", "zoom", "teams", "outlook", "gmail", "google", "amazon", "azure", "aws", "openai",
	"claude", "gemini", "llama", "mistral", "copilot", "alexa", "siri", "cortana", "chrome", "firefox", "safari", "edge",
	"ada", "pascal", "lisp", "cobol", "fortran", "jasmine", "mocha", "karma", "jest", "cypress", "helm", "terraform",
	"christmas", "easter", "ramadan", "diwali", "thanksgiving", "halloween", "eid", "hanukkah",
)

// moreStopWordsList: titles without their dot, street and compass words,
// job and technical abbreviations.
var moreStopWordsList = words(
	"mr", "mrs", "ms", "dr",
	"street", "road", "avenue", "north", "south", "east", "west", "central", "new", "old", "saint",
	"ceo", "cto", "cfo", "vp", "hr", "it", "pm", "am", "id", "api", "url", "faq", "qa", "ui", "ux",
)

// orgSuffixesList after a run make it an organisation, not a person or place.
var orgSuffixesList = words("inc", "ltd", "llc", "llp", "plc", "gmbh", "ag", "sa", "sas", "srl", "spa", "bv", "nv", "oy", "ab", "as",
	"corp", "corporation", "co", "company", "group", "holdings", "bank", "university", "institute", "foundation", "labs",
	"technologies", "technology", "systems", "solutions", "partners", "associates", "hospital", "clinic", "school", "college",
	"airlines", "airways", "motors", "pharma", "capital", "ventures", "consulting", "software", "media", "studios", "fc",
	"council", "agency", "ministry", "department", "committee", "press", "times", "post", "journal", "news", "hotel")

// placePrepsList before a word make a place reading likely.
var placePrepsList = words("in", "at", "from", "to", "near", "into", "across", "via", "toward", "towards", "around",
	"throughout", "outside", "within", "visit", "visiting", "visited", "nach", "aus", "bei", "à", "en", "em", "na", "no",
	"w", "во", "в", "из", "a", "fly", "flying", "flew", "moved", "relocating", "headquartered", "based", "located", "born", "city",
	"of", "capital", "downtown", "office")

// personVerbsList after a run make a person reading likely.
var personVerbsList = words("said", "says", "wrote", "writes", "asked", "asks", "replied", "replies", "told", "tells",
	"mentioned", "confirmed", "called", "emailed", "texted", "approved", "signed", "joined", "left", "thinks", "thought",
	"agreed", "explained", "reported", "noted", "added")

// personKeysList and placeKeysList are JSON/YAML/form keys whose value is a person
// or a place ("name": "Ana Souza", City: Porto).
var personKeysList = words("name", "fullname", "full_name", "first_name", "firstname", "last_name", "lastname", "surname",
	"given_name", "family_name", "author", "assignee", "reporter", "owner", "contact", "customer", "customer_name",
	"patient", "employee", "recipient", "sender", "cc", "manager", "signed_by", "requester", "attendee",
	"passenger", "traveler", "traveller", "guest_name", "user_name", "display_name", "contact_name", "nom", "prénom", "vorname", "nachname")

var placeKeysList = words("city", "country", "location", "address", "region", "state", "province", "place", "destination",
	"origin", "birthplace", "hometown", "town", "county", "ort", "stadt", "land", "ville", "pays", "ciudad", "país")

// greetingsList before a name ("Dear Ana", "Hi Tomás,").
var greetingsList = words("hi", "hello", "hey", "dear", "thanks", "thank", "cheers", "welcome", "congrats", "congratulations",
	"hallo", "liebe", "lieber", "bonjour", "cher", "chère", "hola", "estimado", "estimada", "ciao", "caro", "cara", "olá",
	"привет", "здравствуйте", "morning", "evening", "afternoon", "ask", "cc", "ping", "meet", "met")

// signOffsList on the line before a name make it a signature.
var signOffsList = words("regards", "best", "thanks", "cheers", "sincerely", "yours", "warmly", "respectfully", "best regards",
	"kind regards", "many thanks", "thank you", "warm regards", "all the best", "mit freundlichen grüßen", "cordialement",
	"saludos", "un saludo", "atentamente", "cordiali saluti", "grüße", "viele grüße", "love", "talk soon", "br")

// streetWordsList end (or, for the Romance ones, start) a street name.
var streetWordsList = words("street", "st", "avenue", "ave", "road", "rd", "boulevard", "blvd", "lane", "ln", "drive", "way",
	"court", "ct", "place", "pl", "square", "sq", "terrace", "parkway", "pkwy", "highway", "hwy", "crescent", "close", "row")

// longStreetWordsList end a street name even without a house number.
var longStreetWordsList = words("street", "avenue", "road", "boulevard")

// compassList may follow a street name ("Pennsylvania Avenue NW").
var compassList = words("n", "s", "e", "w", "nw", "ne", "sw", "se")

// streetPrefixesList start a street name ("Rue de Rivoli", "Via Roma").
var streetPrefixesList = words("rue", "via", "calle", "avenida", "rua", "piazza", "plaza", "viale", "corso", "boulevard", "avenue", "ulica", "ul")

var streetSuffixesDE = []string{"straße", "strasse", "str", "gasse", "weg", "platz", "allee", "ring", "damm", "gracht", "laan", "straat", "vej", "gatan", "gata", "veien"}

func words(ws ...string) []string { return ws }

// wordClass is a bit set of the word lists above a word belongs to: one
// map look-up per word answers every "is it a ...?".
type wordClass uint32

const (
	cTitles wordClass = 1 << iota
	cParticles
	cStopWords
	cTechWords
	cMoreStopWords
	cOrgSuffixes
	cPlacePreps
	cPersonVerbs
	cPersonKeys
	cPlaceKeys
	cGreetings
	cSignOffs
	cStreetWords
	cLongStreetWords
	cCompass
	cStreetPrefixes
	cThingKeys
	cPersonPreps
)

var (
	classesOnce sync.Once
	classes     map[string]wordClass
)

// is reports whether the lower-case word w is in the list of class c.
// The lists become one map on first use, not at package initialisation.
func is(w string, c wordClass) bool { return classOf(w)&c != 0 }

func initClasses() {
	lists := map[wordClass][]string{
		cTitles:          titlesList,
		cParticles:       particlesList,
		cStopWords:       stopWordsList,
		cTechWords:       techWordsList,
		cMoreStopWords:   moreStopWordsList,
		cOrgSuffixes:     orgSuffixesList,
		cPlacePreps:      placePrepsList,
		cPersonVerbs:     personVerbsList,
		cPersonKeys:      personKeysList,
		cPlaceKeys:       placeKeysList,
		cGreetings:       greetingsList,
		cSignOffs:        signOffsList,
		cStreetWords:     streetWordsList,
		cLongStreetWords: longStreetWordsList,
		cCompass:         compassList,
		cStreetPrefixes:  streetPrefixesList,
		cThingKeys:       thingKeysList,
		cPersonPreps:     personPrepsList,
	}
	classes = map[string]wordClass{}
	for c, ws := range lists {
		for _, w := range ws {
			classes[w] |= c
		}
	}
}

// classOf returns the classes of the lower-case word w.
func classOf(w string) wordClass {
	classesOnce.Do(initClasses)
	return classes[w]
}

// isUpperAt reports whether a capital letter starts at i and returns its
// size.
func isUpperAt(text string, i int) (bool, int) {
	c := text[i]
	if c < utf8.RuneSelf {
		return c >= 'A' && c <= 'Z', 1
	}
	r, n := utf8.DecodeRuneInString(text[i:])
	return unicode.IsUpper(r) || unicode.IsTitle(r), n
}

// caselessLetter reports whether r is a letter of a script without case
// (Arabic, Hebrew, Devanagari, CJK...).
func caselessLetter(r rune) bool {
	return r >= 0x590 && unicode.IsLetter(r) && !unicode.IsUpper(r) && !unicode.IsLower(r)
}

// wordEnd returns the end of the word starting at i: letters and marks,
// with inner apostrophes and hyphens followed by a letter.
func wordEnd(text string, i int) int {
	e := i
	for e < len(text) {
		c := text[e]
		if c < utf8.RuneSelf {
			if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' {
				e++
				continue
			}
			if (c == '\'' || c == '-') && e > i && e+1 < len(text) && isLetterAt(text, e+1) {
				e++
				continue
			}
			break
		}
		r, n := utf8.DecodeRuneInString(text[e:])
		if r == '’' && e > i && e+n < len(text) && isLetterAt(text, e+n) {
			e += n
			continue
		}
		if !unicode.IsLetter(r) && !unicode.Is(unicode.Mn, r) && !unicode.Is(unicode.Mc, r) {
			break
		}
		e += n
	}
	return e
}

func isLetterAt(text string, i int) bool {
	c := text[i]
	if c < utf8.RuneSelf {
		return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
	}
	r, _ := utf8.DecodeRuneInString(text[i:])
	return unicode.IsLetter(r)
}

// lowerKey lower-cases an ASCII word without allocating more than the
// key; other words go through strings.ToLower.
func lowerKey(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return strings.ToLower(s)
		}
	}
	var buf [maxNameBytes]byte
	if len(s) > len(buf) {
		return strings.ToLower(s)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf[i] = c
	}
	return string(buf[:len(s)])
}

// codeLike reports whether the word [s, e) is part of a code identifier:
// joined to digits, underscores, dots, slashes or a call's parenthesis, or
// in camelCase.
func codeLike(text string, s, e int) bool {
	if s > 0 {
		switch text[s-1] {
		case '.', '_', '/', '\\', '$', '#', '<', '`', '{', '[', '@', '&', '%', '*':
			return true
		}
	}
	if e < len(text) {
		switch c := text[e]; {
		case c == '_' || c == '(' || c == '/' || c == '\\' || c == '`' || c == '>' || c == '=' || isDigit(c):
			return true
		case c == '.' && e+1 < len(text) && isAlnumByte(text[e+1]):
			return true
		case c == ':' && e+1 < len(text) && text[e+1] == ':':
			return true
		}
	}
	// camelCase: a capital after a lower-case letter, except the name
	// shapes McDonald, MacArthur, DeShawn, LaToya, O'Brien (the apostrophe
	// is inside the word), DiCaprio.
	w := text[s:e]
	for i := 1; i < len(w); i++ {
		if w[i] >= 'A' && w[i] <= 'Z' && w[i-1] >= 'a' && w[i-1] <= 'z' {
			p := w[:i]
			if p == "Mc" || p == "Mac" || p == "De" || p == "La" || p == "Di" || p == "Le" || p == "Van" || p == "Da" {
				continue
			}
			return true
		}
	}
	return false
}

// allCaps reports whether a word of two or more letters has no lower-case
// letter (an acronym or a constant).
func allCaps(w string) bool {
	if len(w) < 2 {
		return false
	}
	for _, r := range w {
		if unicode.IsLower(r) {
			return false
		}
	}
	return true
}

// scanNames reads the run of capitalised words (with name particles and
// titles) starting at i, adds its PERSON and LOCATION findings, and
// returns the end of the run (> i).
func scanNames(text string, i int, person, place bool, add func(string, int, int, float64)) int {
	var ws [maxRunWords]word
	n := 0
	e := i
	for n < maxRunWords && e < len(text) {
		up, _ := isUpperAt(text, e)
		we := wordEnd(text, e)
		if we == e {
			break
		}
		raw := text[e:we]
		w := word{start: e, end: we}
		if !up {
			if we-e > 5 {
				break // no particle is longer
			}
			w.key = lowerKey(raw)
			w.cls = classOf(w.key)
			if !(w.cls&cParticles != 0) || n == 0 {
				break
			}
			w.particle = true
		} else {
			if allCaps(raw) && (we-e > 3 || n == 0 && !(we < len(text) && text[we] == '.')) || codeLike(text, e, we) || we-e > maxNameBytes {
				break
			}
			w.key = lowerKey(raw)
			w.cls = classOf(w.key)
			w.title = w.cls&cTitles != 0
			if !w.title {
				w.f = gazetteer.Lookup(w.key)
				w.hyphen = w.f == 0 && hyphenGiven(raw)
			}
		}
		// A title or an initial may be followed by a dot.
		if we < len(text) && text[we] == '.' && (w.title || utf8.RuneCountInString(raw) == 1) {
			we++
			w.end = we
		}
		ws[n] = w
		n++
		e = we
		// Words are separated by one space (or a non-breaking one).
		if e+1 < len(text) && text[e] == ' ' && text[e+1] != ' ' {
			e++
		} else if strings.HasPrefix(text[e:], "\u00a0") {
			e += 2
		} else {
			break
		}
	}
	// Trailing particles belong to the next word, not this run.
	for n > 0 && ws[n-1].particle {
		n--
	}
	if n == 0 {
		// One word, skipped (all capitals, code): continue after it.
		return max(wordEnd(text, i), i+1)
	}
	runEnd := ws[n-1].end
	next := nextWord(text, runEnd)
	if is(next, cOrgSuffixes) {
		return runEnd
	}
	for k := 1; k < n; k++ {
		if ws[k].cls&cOrgSuffixes != 0 {
			// "Apple Inc", "Acme Corp": an organisation; what follows the
			// suffix is a run of its own.
			if k+1 < n {
				classifyRun(text, ws[k+1:n], ctx{}, next, person, place, add)
			}
			return runEnd
		}
	}
	c := nameContext(text, ws[0].start)
	classifyRun(text, ws[:n], c, next, person, place, add)
	return runEnd
}

// ctx is what comes before a run.
type ctx struct {
	sentenceStart bool
	prev          string // the word before, lower case
	personCue     bool   // greeting, "my name is", name key, signature
	placeCue      bool   // preposition, location key
	thingKey      bool   // a key whose value is a thing ("hotel", "title")
	phrase        bool   // the run continues a capitalised phrase ("Worker Pool")
}

// thingKeysList are keys whose value names a thing, not a person.
var thingKeysList = words("hotel", "company", "title", "product", "org", "organization", "organisation", "team", "project",
	"subject", "event", "room", "repo", "repository", "venue", "restaurant", "brand", "vendor", "component", "category",
	"status", "type", "kind", "label", "model", "tool", "function", "service", "app")

// mailboxFollows reports whether " <...@...>" follows position e.
func mailboxFollows(text string, e int) bool {
	if e+2 >= len(text) || text[e] != ' ' || text[e+1] != '<' {
		return false
	}
	rest := text[e+2 : min(len(text), e+2+80)]
	gt := strings.IndexByte(rest, '>')
	return gt > 0 && strings.IndexByte(rest[:gt], '@') > 0
}

// nameContext looks at most some 80 bytes back from the start s of a run.
func nameContext(text string, s int) ctx {
	var c ctx
	j := s
	for j > 0 && (text[j-1] == ' ' || text[j-1] == '\t' || text[j-1] == '"' || text[j-1] == '\'' || text[j-1] == '*' || text[j-1] == '(') {
		j--
	}
	if j == 0 {
		c.sentenceStart = true
		return c
	}
	switch text[j-1] {
	case '.', '!', '?', '\n', '\r', '>', '|', '-':
		c.sentenceStart = true
		if text[j-1] == '\n' {
			c.personCue = signatureBefore(text, j-1)
		}
		return c
	case ':', '=':
		// "Name: Ana", "name": "Ana", city=Porto
		c.sentenceStart = true
		k := j - 1
		for k > 0 && (text[k-1] == ' ' || text[k-1] == '"' || text[k-1] == '\'') {
			k--
		}
		ks := k
		for ks > 0 && (isAlnumByte(text[ks-1]) || text[ks-1] == '_') && k-ks < 32 {
			ks--
		}
		key := lowerKey(text[ks:k])
		c.prev = key
		c.personCue = is(key, cPersonKeys) || strings.HasSuffix(key, "_name") && !strings.Contains(key, "file") && !strings.Contains(key, "host")
		c.placeCue = is(key, cPlaceKeys) || strings.HasSuffix(key, "_city") || strings.HasSuffix(key, "_country")
		c.thingKey = is(key, cThingKeys)
		return c
	case ',':
		// "Thanks, Ana" / "Hi, Ana"
		w := lastWord(text, j-1)
		c.personCue = is(w, cGreetings) || is(w, cSignOffs)
		c.prev = ","
		return c
	}
	if isDigit(text[j-1]) {
		// "10115 Berlin", "00184 Roma": a postal code.
		k := j
		for k > 0 && isDigit(text[k-1]) && j-k <= 6 {
			k--
		}
		if j-k >= 4 && j-k <= 6 && (k == 0 || !isAlnumByte(text[k-1])) {
			c.placeCue = true
			c.prev = "postcode"
		}
		return c
	}
	w := lastWord(text, j)
	c.prev = w
	if is(w, cGreetings) {
		c.personCue = true
	}
	if is(w, cPlacePreps) {
		c.placeCue = true
	}
	// "my name is", "I'm", "I am", "this is", "call me", "named", "by"
	switch w {
	case "is", "am", "im", "i'm", "me", "named", "called", "by", "with", "for", "and":
		b := strings.ToLower(text[max(0, j-16):j])
		if strings.HasSuffix(b, "name is") || strings.HasSuffix(b, "i am") || strings.HasSuffix(b, "i'm") || strings.HasSuffix(b, "this is") ||
			strings.HasSuffix(b, "call me") || w == "named" || strings.HasSuffix(b, "i’m") {
			c.personCue = true
		}
	}
	return c
}

// lastWord returns the lower-cased word ending at j (skipping spaces), at
// most 24 bytes long.
func lastWord(text string, j int) string {
	for j > 0 && text[j-1] == ' ' {
		j--
	}
	s := j
	for s > 0 && j-s < 24 && (text[s-1] >= 0x80 || text[s-1] >= 'a' && text[s-1] <= 'z' || text[s-1] >= 'A' && text[s-1] <= 'Z' || text[s-1] == '\'') {
		s--
	}
	for s < j && text[s] >= 0x80 && text[s] < 0xC0 {
		s++ // cut at a rune start
	}
	return lowerKey(text[s:j])
}

// nextWord returns the lower-cased word after a run's end (after spaces or
// a comma), "" when there is none nearby.
func nextWord(text string, e int) string {
	j := e
	for j < len(text) && j-e < 3 && (text[j] == ' ' || text[j] == ',') {
		j++
	}
	if j == e || j >= len(text) {
		return ""
	}
	we := wordEnd(text, j)
	if we-j > 24 {
		return ""
	}
	return lowerKey(text[j:we])
}

// signatureBefore reports whether the line ending at nl (a '\n') is a
// sign-off such as "Best regards," or "Thanks,".
func signatureBefore(text string, nl int) bool {
	j := nl
	for j > 0 && (text[j-1] == '\r' || text[j-1] == ' ') {
		j--
	}
	if j == 0 || text[j-1] != ',' && text[j-1] != '!' {
		return false
	}
	s := j - 1
	for s > 0 && text[s-1] != '\n' && j-s < 40 {
		s--
	}
	line := strings.ToLower(strings.TrimSpace(text[s : j-1]))
	return is(line, cSignOffs)
}

// classifyRun decides what the words of one run are.
func classifyRun(text string, ws []word, c ctx, next string, person, place bool, add func(string, int, int, float64)) {
	emit := func(typ string, a, b int, score float64) {
		if a >= b {
			return
		}
		if typ == EntityPerson && person || typ == EntityLocation && place {
			add(typ, ws[a].start, ws[b-1].end, score)
		}
	}
	// A title: the name-like words after it are a person.
	if ws[0].title {
		b := 1
		for b < len(ws) && !ws[b].title && ws[b].nameLike() && !(ws[b].f.Place() && !ws[b].f.Person()) {
			b++
		}
		if b > 1 {
			emit(EntityPerson, 1, b, 0.85)
		}
		if b < len(ws) {
			classifyRun(text, ws[b:], ctx{}, next, person, place, add)
		}
		return
	}
	// Street addresses: "221B Baker Street", "Hauptstraße 5", "Rue de Rivoli".
	if a, b, ok := streetAddress(text, ws); ok {
		if place {
			add(EntityLocation, a, b, 0.85)
		}
		return
	}
	// Longest multi-word place at the start ("New York", "Rio de Janeiro").
	if len(ws) >= 2 && ws[0].f&gazetteer.MultiStart != 0 {
		for k := len(ws); k >= 2; k-- {
			key := runKey(ws[:k])
			if f := gazetteer.Lookup(key); f.Place() && (f&(gazetteer.Country|gazetteer.Region|gazetteer.BigCity) != 0 || c.placeCue || placeFollows(text, ws[k-1].end)) {
				emit(EntityLocation, 0, k, 0.85)
				if k < len(ws) {
					classifyRun(text, ws[k:], ctx{}, next, person, place, add)
				}
				return
			}
		}
	}
	if c.thingKey {
		// "hotel": "Harbour View": a place at most.
		if len(ws) == 1 && ws[0].f.Place() && !ws[0].common() {
			emit(EntityLocation, 0, 1, 0.6)
		}
		return
	}
	// A sentence-initial ordinary word is not a name: "Please", "Will you".
	for len(ws) > 0 && c.sentenceStart && !c.personCue && !c.placeCue && ws[0].common() && (len(ws) != 2 || !(ws[0].givenName() && ws[1].f.Person() && !ws[1].common())) {
		if ws[0].cls&cGreetings != 0 {
			c = ctx{prev: ws[0].key, personCue: true}
		} else {
			c = ctx{prev: ws[0].key, placeCue: (ws[0].cls&cPlacePreps != 0)}
		}
		ws = ws[1:]
	}
	if len(ws) == 0 {
		return
	}
	if (ws[0].cls&cGreetings != 0) && len(ws) > 1 {
		c = ctx{prev: ws[0].key, personCue: true}
		ws = ws[1:]
	}
	if ws[0].title {
		classifyRun(text, ws, c, next, person, place, add)
		return
	}
	// "Tunde Bakare <tunde@example.ng>": a mailbox's display name.
	if !c.personCue && mailboxFollows(text, ws[len(ws)-1].end) && len(ws) <= 4 {
		c.personCue = true
	}
	// A place key or preposition before a run of place names.
	if c.placeCue && !c.personCue {
		k := 0
		for k < len(ws) && k < 4 && (ws[k].f.Place() || ws[k].f == 0 && (c.prev == "city" || is(c.prev, cPlaceKeys))) {
			k++
		}
		if k > 0 && ws[0].f.Place() && !ws[0].stop() && !(ws[0].f&gazetteer.Given != 0 && k < len(ws) && ws[k].f.Person() && !ws[k].f.Place()) {
			emit(EntityLocation, 0, k, 0.8)
			if k < len(ws) {
				classifyRun(text, ws[k:], ctx{}, next, person, place, add)
			}
			return
		}
		if k > 0 && is(c.prev, cPlaceKeys) {
			emit(EntityLocation, 0, k, 0.7)
			return
		}
	}
	// A person cue: the name-like words are a person.
	if c.personCue || is(next, cPersonVerbs) && len(ws) >= 2 && (ws[0].f.Person() || ws[1].f.Person()) {
		b := 0
		for b < len(ws) && b < 4 && ws[b].nameLike() && (!ws[b].common() || b > 0 && ws[b].f.Person()) && !(ws[b].f.Place() && !ws[b].f.Person() && ws[b].f&gazetteer.City == 0) {
			b++
		}
		if b > 0 {
			emit(EntityPerson, 0, b, 0.85)
			if b < len(ws) {
				classifyRun(text, ws[b:], ctx{}, next, person, place, add)
			}
			return
		}
	}
	// Given name + surname (or surname + given name), or a given name and
	// an unknown capitalised word.
	if len(ws) >= 2 {
		b := personSpan(ws, c)
		if b > 0 {
			emit(EntityPerson, 0, b, 0.85)
			if b < len(ws) {
				classifyRun(text, ws[b:], ctx{}, next, person, place, add)
			}
			return
		}
	}
	w := ws[0]
	rest := func() {
		if len(ws) > 1 {
			// After an ordinary capitalised word the run is a title-case
			// phrase ("Worker Pool", "Sweet Chili Sauce"): its other words
			// count only on strong evidence.
			classifyRun(text, ws[1:], ctx{phrase: c.phrase || w.common() || w.f == 0}, next, person, place, add)
		}
	}
	if c.phrase {
		switch f := w.f; {
		case w.common() || w.stop():
		case f&(gazetteer.Country|gazetteer.BigCity) != 0 && !f.Person():
			emit(EntityLocation, 0, 1, 0.7)
		}
		rest()
		return
	}
	switch f := w.f; {
	case w.stop() || w.particle || c.thingKey:
	case f&(gazetteer.Country|gazetteer.Region) != 0 && !(f&gazetteer.Given != 0 && (c.personCue || is(next, cPersonVerbs) && !c.placeCue)) &&
		// An ordinary word that is also a region ("Pool", "Centre") needs a
		// place cue; one that is a country ("Turkey") stands alone.
		!(w.common() && f&gazetteer.Country == 0 && !c.placeCue) && !(w.common() && len(ws) > 1):
		if !(w.common() && c.sentenceStart) {
			emit(EntityLocation, 0, 1, 0.85)
		}
	case f&gazetteer.City != 0 && (c.placeCue || placeFollows(text, w.end)):
		emit(EntityLocation, 0, 1, 0.8)
	case f&gazetteer.BigCity != 0 && (!w.common() || len(ws) == 1 && !c.sentenceStart) && !c.personCue && !(is(next, cPersonVerbs) && f&gazetteer.Given != 0):
		emit(EntityLocation, 0, 1, 0.7)
	case f&gazetteer.Given != 0 && !w.common() && (len(ws) == 1 || !ws[1].f.Place()):
		emit(EntityPerson, 0, 1, 0.65)
	case f&gazetteer.Surname != 0 && !w.common() && (is(next, cPersonVerbs) && len(ws) == 1 && !c.sentenceStart):
		emit(EntityPerson, 0, 1, 0.6)
	}
	rest()
}

// personSpan returns how many leading words of ws form a person's name
// without a cue (0: none).
func personSpan(ws []word, c ctx) int {
	a, b := ws[0], ws[1]
	if a.title || b.title || a.particle || (a.cls&cStopWords != 0) || (a.cls&cMoreStopWords != 0) || (b.cls&cStopWords != 0) || b.stop() && !b.f.Person() {
		return 0
	}
	ok := false
	switch {
	case a.givenName() && (b.surnameLike() || b.particle || b.unknownName()):
		// Two ordinary English words are not a name ("Dark Mode", "Brown
		// Sugar", also "Bill Gates"); an ordinary word counts as a given
		// name only before a surname that is no ordinary word ("Mark
		// Twain"), and as a surname only after a given name that is none
		// ("Olivia Brown").
		switch {
		case a.common() && b.common():
		case a.common():
			ok = a.f&gazetteer.Given != 0 && b.f&(gazetteer.Surname|gazetteer.Name) != 0 && b.f&(gazetteer.Country|gazetteer.Region) == 0
		case b.common():
			ok = a.f&gazetteer.Given != 0 && b.f&gazetteer.Surname != 0
		case b.unknownName():
			ok = a.f&gazetteer.Given != 0 // a name of either kind and a word in no list: too weak
		default:
			ok = true
		}
	case a.f&(gazetteer.Surname|gazetteer.Name) != 0 && b.f&gazetteer.Given != 0 && !a.common() && !b.common():
		ok = true // family name first: "Zhang Wei", "Tanaka Hiroshi"
	case a.unknownName() && b.f&(gazetteer.Surname|gazetteer.Name) != 0 && !b.common() && !c.sentenceStart:
		ok = true
	case a.hyphen && b.f&(gazetteer.Surname|gazetteer.Name) != 0 && b.f&(gazetteer.Country|gazetteer.Region) == 0,
		b.hyphen && a.f&(gazetteer.Surname|gazetteer.Name) != 0 && a.f&(gazetteer.Country|gazetteer.Region) == 0:
		ok = true // "Hyun-woo Lee", "Park Ji-hoon"
	case a.unknownName() && b.unknownName() && is(c.prev, cPersonPreps):
		ok = true // "assigned to Nikos Papadopoulos"
	}
	if !ok {
		return 0
	}
	k := 2
	for k < len(ws) && k < 5 && (ws[k].particle || ws[k].surnameLike() && !ws[k].common() || ws[k].unknownName()) {
		k++
	}
	for k > 1 && ws[k-1].particle {
		k--
	}
	return k
}

// personPrepsList before two unknown capitalised words make them a person.
var personPrepsList = words("by", "with", "to", "from", "for", "cc", "and", "contact", "customer", "caller", "user", "agent",
	"manager", "colleague", "assigned", "ask", "tell", "call", "email", "mr", "mrs", "ms", "dr", "met", "thank", "thanks")

// runKey joins the keys of ws with single spaces.
func runKey(ws []word) string {
	var b strings.Builder
	for i, w := range ws {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(w.key)
	}
	return b.String()
}

// placeFollows reports whether ", <Country or region>" or ", XX" (a state
// code) follows position e.
func placeFollows(text string, e int) bool {
	if e+3 >= len(text) || text[e] != ',' || text[e+1] != ' ' {
		return false
	}
	j := e + 2
	we := wordEnd(text, j)
	if we == j || we-j > 32 {
		return false
	}
	w := text[j:we]
	if len(w) == 2 && allCaps(w) {
		return true
	}
	if up, _ := isUpperAt(text, j); !up {
		return false
	}
	f := gazetteer.Lookup(lowerKey(w))
	return f&(gazetteer.Country|gazetteer.Region) != 0
}

// streetAddress finds a street address in a run: a house number before
// it and a street word at its end ("221B Baker Street"), a German-style
// street name with a number after it ("Hauptstraße 5"), or a Romance
// prefix ("Rue de Rivoli", "Via Roma 10"). It returns byte offsets.
func streetAddress(text string, ws []word) (int, int, bool) {
	last := ws[len(ws)-1]
	start := ws[0].start
	// House number before: "221B ", "10 ".
	j := start
	if j > 0 && text[j-1] == ' ' {
		k := j - 1
		for k > 0 && (isAlnumByte(text[k-1]) && k-1 >= j-7) {
			k--
		}
		if k < j-1 && isDigit(text[k]) && tokenStart(text, k) {
			num := true
			for p := k; p < j-1; p++ {
				if !isDigit(text[p]) && !(p == j-2 && text[p] >= 'A' && text[p] <= 'Z') && !(p == j-2 && text[p] >= 'a' && text[p] <= 'z') {
					num = false
				}
			}
			if num && len(ws) >= 2 {
				end := len(ws) - 1
				if (ws[end].cls&cCompass != 0) && end >= 2 {
					end--
				}
				if ws[end].cls&cStreetWords != 0 {
					return k, ws[end].end, true
				}
			}
		}
	}
	numberAfter := func(e int) int {
		if e+1 < len(text) && text[e] == ' ' && isDigit(text[e+1]) {
			k := e + 1
			for k < len(text) && k-e < 6 && (isDigit(text[k]) || text[k] >= 'a' && text[k] <= 'z' && k > e+1) {
				k++
			}
			if tokenEnd(text, k) {
				return k
			}
		}
		return 0
	}
	for _, w := range ws {
		for _, suf := range streetSuffixesDE {
			if len(w.key) > len(suf)+2 && strings.HasSuffix(w.key, suf) {
				if k := numberAfter(w.end); k > 0 {
					return start, k, true
				}
			}
		}
	}
	if len(ws) >= 2 && last.cls&cLongStreetWords != 0 && ws[0].cls&(cStopWords|cMoreStopWords|cTechWords) == 0 {
		return start, last.end, true
	}
	if (ws[0].cls&cStreetPrefixes != 0) && len(ws) >= 2 {
		if k := numberAfter(last.end); k > 0 {
			return start, k, true
		}
		if j > 1 && isDigit(text[j-2]) && text[j-1] == ' ' {
			k := j - 2
			for k > 0 && isDigit(text[k-1]) && j-k < 7 {
				k--
			}
			if tokenStart(text, k) {
				return k, last.end, true
			}
		}
	}
	return 0, 0, false
}

// scanCaseless handles a word of a script without case at i (Arabic,
// Hebrew, Devanagari, CJK...): a word that is a country, region or large
// city is a place; two name words in a row are a person. It returns the
// end of what it consumed.
func scanCaseless(text string, i int, person, place bool, add func(string, int, int, float64)) int {
	e := wordEnd(text, i)
	if e == i {
		_, n := utf8.DecodeRuneInString(text[i:])
		return i + n
	}
	if e-i > maxNameBytes {
		return e
	}
	f := gazetteer.Lookup(strings.ToLower(text[i:e]))
	if f&(gazetteer.Country|gazetteer.Region|gazetteer.BigCity) != 0 && !f.Person() {
		if place {
			add(EntityLocation, i, e, 0.8)
		}
		return e
	}
	if f.Person() && e+1 < len(text) && text[e] == ' ' {
		e2 := wordEnd(text, e+1)
		if e2 > e+1 && e2-e <= maxNameBytes {
			if r, _ := utf8.DecodeRuneInString(text[e+1:]); caselessLetter(r) {
				if g := gazetteer.Lookup(strings.ToLower(text[e+1 : e2])); g.Person() {
					if person {
						add(EntityPerson, i, e2, 0.75)
					}
					return e2
				}
			}
		}
	}
	return e
}
