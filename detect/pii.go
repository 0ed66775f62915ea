package detect

import (
	"github.com/vigilhq/vigil/internal/lazyregexp"
	"net/netip"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// PII entity types (Presidio's names) that the offline recognisers report.
const (
	EntityEmail      = "EMAIL_ADDRESS"
	EntityPhone      = "PHONE_NUMBER"
	EntityCreditCard = "CREDIT_CARD"
	EntityIBAN       = "IBAN_CODE"
	EntityIP         = "IP_ADDRESS"
	EntitySSN        = "US_SSN"
	EntityURL        = "URL"
	EntityCrypto     = "CRYPTO"
	// EntityPerson and EntityLocation come from the offline name and
	// place recogniser (OfflineNames), or from an installed
	// EntityRecognizer (a model) when there is one.
	EntityPerson   = "PERSON"
	EntityLocation = "LOCATION"
)

// OfflineEntities are the entity types PII finds without a model: every
// built-in type.
var OfflineEntities = []string{EntityEmail, EntityPhone, EntityCreditCard, EntityIBAN, EntityIP, EntitySSN, EntityURL, EntityCrypto, EntityPerson, EntityLocation}

// ModelEntities are the entity types an installed EntityRecognizer
// answers instead of the offline recogniser.
var ModelEntities = []string{EntityPerson, EntityLocation}

// piiPriority orders types when findings overlap: the earlier type wins
// (a card number is not also a phone number; an e-mail address is not
// also a URL).
var piiPriority = map[string]int{
	EntityEmail: 0, EntityURL: 1, EntityCreditCard: 2, EntityIBAN: 3, EntityCrypto: 4,
	EntitySSN: 5, EntityIP: 6, EntityPhone: 7, EntityLocation: 8, EntityPerson: 9,
}

// PII runs the offline recognisers over text in one pass and returns their
// findings restricted to entities (all offline types, PERSON and LOCATION
// included, when nil), ordered by start, overlaps resolved by type
// priority. Offsets are code points. Every finding passed its validation
// (checksum, ranges, context rules), so its Score is above 0.5; findings
// a validator rejects are not reported. The name and place tables load on
// the first call that asks for PERSON or LOCATION.
func PII(text string, entities []string) []Match {
	want := func(string) bool { return true }
	if entities != nil {
		set := map[string]bool{}
		for _, e := range entities {
			set[e] = true
		}
		want = func(t string) bool { return set[t] }
	}
	var ms []Match
	add := func(typ string, start, end int, score float64) {
		if want(typ) {
			ms = append(ms, Match{Type: typ, Start: start, End: end, Score: score})
		}
	}
	person, place := want(EntityPerson), want(EntityLocation)
	names := person || place
	n := len(text)
	for i := 0; i < n; i++ {
		c := text[i]
		switch {
		case c == '@':
			if s, e, ok := scanEmail(text, i); ok {
				add(EntityEmail, s, e, 1)
			}
		case c >= '0' && c <= '9' || c == '+' || c == '(':
			if !tokenStart(text, i) {
				continue
			}
			if c == '1' || c == '3' {
				if e, ok := scanBase58Check(text, i); ok {
					add(EntityCrypto, i, e, 1)
					i = e - 1
					continue
				}
			}
			e, end := numericRun(text, i)
			if e > i {
				scanNumeric(text, i, e, add)
				i = e - 1
			} else {
				// No digit in the whole run: no later start inside it has
				// one either, so skip it (rescanning it was quadratic).
				i = end - 1
			}
		case c == ':':
			// Every colon of a token gives the same token: skip past it.
			s, e, ok := scanIPv6(text, i)
			if ok {
				add(EntityIP, s, e, 1)
			}
			i = max(i, e-1)
		case c >= 'A' && c <= 'Z':
			if i+3 < n && text[i+1] >= 'A' && text[i+1] <= 'Z' && isDigit(text[i+2]) && isDigit(text[i+3]) && tokenStart(text, i) {
				if e, ok := scanIBAN(text, i); ok {
					add(EntityIBAN, i, e, 1)
					i = e - 1
					continue
				}
			}
			if names && tokenStart(text, i) {
				i = scanNames(text, i, person, place, add) - 1
			}
		case c >= 0xC0:
			// The first byte of a non-ASCII character: a capital starts a
			// run of names; a letter of a script without case is looked
			// up as a word.
			if !names || !tokenStart(text, i) {
				continue
			}
			r, size := utf8.DecodeRuneInString(text[i:])
			switch {
			case unicode.IsUpper(r) || unicode.IsTitle(r):
				i = scanNames(text, i, person, place, add) - 1
			case caselessLetter(r):
				i = scanCaseless(text, i, person, place, add) - 1
			case unicode.IsLetter(r):
				// A lower-case word: skip it whole.
				i = max(wordEnd(text, i), i+size) - 1
			}
		case c == 'b' || c == 'B':
			if i+3 < n && (text[i+1] == 'c' || text[i+1] == 'C') && text[i+2] == '1' && tokenStart(text, i) {
				if e, ok := scanBech32(text, i); ok {
					add(EntityCrypto, i, e, 1)
					i = e - 1
				}
			}
		case c == 'h' || c == 'H' || c == 'w' || c == 'W':
			if e, ok := scanURL(text, i); ok {
				add(EntityURL, i, e, 0.85)
				i = e - 1
			}
		}
	}
	return resolvePII(text, ms)
}

func resolvePII(text string, ms []Match) []Match {
	if len(ms) == 0 {
		return nil
	}
	if len(ms) == 1 {
		byteMatchesToRunes(text, ms)
		return ms
	}
	// Sort by priority, then start; the priority of each finding is looked
	// up once, not in every comparison.
	type ranked struct {
		pri int
		m   Match
	}
	rs := make([]ranked, len(ms))
	for i, m := range ms {
		rs[i] = ranked{piiPriority[m.Type], m}
	}
	slices.SortStableFunc(rs, func(a, b ranked) int {
		if a.pri != b.pri {
			return a.pri - b.pri
		}
		return a.m.Start - b.m.Start
	})
	for i := range rs {
		ms[i] = rs[i].m
	}
	// Bytes taken by a kept finding, one bit each: checking a candidate
	// against every kept finding was quadratic (a text of 20,000 names).
	var taken []uint64
	kept := ms[:0:0]
	for _, m := range ms {
		if need := m.End/64 + 1; need > len(taken) {
			taken = append(taken, make([]uint64, need-len(taken))...)
		}
		ok := true
		for b := m.Start; b < m.End && ok; b++ {
			ok = taken[b/64]&(1<<(b%64)) == 0
		}
		if !ok {
			continue
		}
		for b := m.Start; b < m.End; b++ {
			taken[b/64] |= 1 << (b % 64)
		}
		kept = append(kept, m)
	}
	slices.SortStableFunc(kept, func(a, b Match) int { return a.Start - b.Start })
	byteMatchesToRunes(text, kept)
	return kept
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isAlnumByte(c byte) bool {
	return isDigit(c) || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}

// tokenStart reports whether position i starts a token: the byte before it
// is not a letter, digit, underscore or part of a non-ASCII character.
func tokenStart(text string, i int) bool {
	return i == 0 || !(isAlnumByte(text[i-1]) || text[i-1] == '_')
}

// tokenEnd reports whether position e ends a token.
func tokenEnd(text string, e int) bool {
	return e >= len(text) || !(isAlnumByte(text[e]) || text[e] == '_')
}

// --- e-mail ---

func isLocalByte(c byte) bool {
	return isDigit(c) || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || strings.IndexByte("._%+-'", c) >= 0
}

// isLocalRune: characters of an address's local part. Internationalised
// addresses (RFC 6531) may use letters; only Latin, Greek and Cyrillic
// ones are taken, so that an address written right after CJK text does
// not swallow it.
func isLocalRune(r rune) bool {
	if r < utf8.RuneSelf {
		return isLocalByte(byte(r))
	}
	return r < 0x530 && unicode.IsLetter(r)
}

func isDomainByte(c byte) bool {
	return isDigit(c) || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '.' || c == '-'
}

// scanEmail validates the address around the '@' at at.
func scanEmail(text string, at int) (int, int, bool) {
	s := at
	for s > 0 && at-s < 64 {
		r, n := utf8.DecodeLastRuneInString(text[:s])
		if !isLocalRune(r) {
			break
		}
		s -= n
	}
	for s < at && (text[s] == '.' || text[s] == '\'') {
		s++
	}
	e := at + 1
	for e < len(text) && e-at < 255 && isDomainByte(text[e]) {
		e++
	}
	for e > at+1 && (text[e-1] == '.' || text[e-1] == '-') {
		e--
	}
	if s == at || e == at+1 || strings.Contains(text[s:at], "..") {
		return 0, 0, false
	}
	labels := strings.Split(text[at+1:e], ".")
	if len(labels) < 2 {
		return 0, 0, false
	}
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return 0, 0, false
		}
	}
	tld := labels[len(labels)-1]
	if len(tld) < 2 {
		return 0, 0, false
	}
	for i := 0; i < len(tld); i++ {
		if !(tld[i] >= 'a' && tld[i] <= 'z' || tld[i] >= 'A' && tld[i] <= 'Z') {
			return 0, 0, false
		}
	}
	return s, e, true
}

// --- URL ---

// scanURL recognises http://, https:// and www. URLs starting at i.
func scanURL(text string, i int) (int, bool) {
	if !tokenStart(text, i) {
		return 0, false
	}
	rest := text[i:]
	var hostStart int
	switch {
	case hasPrefixFold(rest, "https://"):
		hostStart = i + 8
	case hasPrefixFold(rest, "http://"):
		hostStart = i + 7
	case hasPrefixFold(rest, "www."):
		hostStart = i + 4
	default:
		return 0, false
	}
	h := hostStart
	for h < len(text) && (isDomainByte(text[h]) || text[h] >= 0x80) {
		h++
	}
	host := strings.TrimRight(text[hostStart:h], ".-")
	if host == "" || (!strings.Contains(host, ".") && !strings.EqualFold(host, "localhost") && hasPrefixFold(rest, "www.")) {
		return 0, false
	}
	e := h
	for e < len(text) && !isURLStop(text[e]) {
		e++
	}
	for e > hostStart && strings.IndexByte(".,;:!?)]}'\"", text[e-1]) >= 0 {
		e--
	}
	if e <= hostStart {
		return 0, false
	}
	return e, true
}

func isURLStop(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '"' || c == '<' || c == '>' || c == '`' || c == '\''
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// --- numbers: credit cards, SSNs, phone numbers, IPv4 ---

// numericRun returns the end of the run of digits and separators starting
// at i, trimmed back to its last digit (e, or i when it has no digit), and
// end, the end of the run before trimming (at least i+1).
func numericRun(text string, i int) (e, end int) {
	e = i
	for e < len(text) {
		c := text[e]
		if isDigit(c) || c == ' ' || c == '-' || c == '.' || c == '(' || c == ')' || c == '+' || c == '/' {
			e++
			continue
		}
		break
	}
	end = e
	for e > i && !isDigit(text[e-1]) {
		e--
	}
	return e, max(end, i+1)
}

var (
	cardRE  = lazyregexp.New(`\d(?:[ -]?\d){12,18}`)
	ssnRE   = lazyregexp.New(`\d{3}-\d{2}-\d{4}|\d{3} \d{2} \d{4}|\d{3}\.\d{2}\.\d{4}`)
	ipv4RE  = lazyregexp.New(`\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}`)
	phoneRE = lazyregexp.New(`\+\d{1,3}(?:[ .-]?\(?\d{1,5}\)?){1,6}|\(\d{3}\) ?\d{3}[ .-]\d{4}|\d{3}[.-]\d{3}[.-]\d{4}|\d{2,5}(?:[ ]\d{2,5}){2,4}`)
)

// scanNumeric runs the numeric recognisers on the run [s, e).
func scanNumeric(text string, s, e int, add func(string, int, int, float64)) {
	run := text[s:e]
	// Shape prefilter: each recogniser needs a number of digits (a card
	// 13, an SSN 9, a phone number 8) or dots (IPv4 3); most runs (years,
	// amounts, order numbers) have too few for any of them.
	digits, dots := 0, 0
	for i := 0; i < len(run); i++ {
		switch {
		case isDigit(run[i]):
			digits++
		case run[i] == '.':
			dots++
		}
	}
	if digits < 8 && (digits < 4 || dots < 3) {
		return
	}
	bounded := func(a, b int) bool {
		return tokenStart(text, s+a) && tokenEnd(text, s+b) &&
			!(s+b+1 < len(text) && (text[s+b] == '.' || text[s+b] == '-') && isDigit(text[s+b+1]))
	}
	for _, loc := range findAll(cardRE, run, digits >= 13) {
		if bounded(loc[0], loc[1]) && validCard(run[loc[0]:loc[1]]) {
			add(EntityCreditCard, s+loc[0], s+loc[1], 1)
			continue
		}
		// "4111 1111 1111 1111 2024": try the spans of whole groups.
		if a, b, ok := cardInGroups(run, loc[0], loc[1], bounded); ok {
			add(EntityCreditCard, s+a, s+b, 1)
		}
	}
	for _, loc := range findAll(ssnRE, run, digits >= 9) {
		if bounded(loc[0], loc[1]) && validSSN(run[loc[0]:loc[1]]) {
			add(EntitySSN, s+loc[0], s+loc[1], 0.85)
		}
	}
	for _, loc := range findAll(ipv4RE, run, digits >= 4 && dots >= 3) {
		if bounded(loc[0], loc[1]) && validIPv4(run[loc[0]:loc[1]]) && !sectionNumber(text, s+loc[0]) {
			add(EntityIP, s+loc[0], s+loc[1], 1)
		}
	}
	for _, loc := range findAll(phoneRE, run, digits >= 8) {
		a, b := loc[0], loc[1]
		for b > a && !isDigit(run[b-1]) {
			b--
		}
		if bounded(a, b) && validPhone(run[a:b]) {
			add(EntityPhone, s+a, s+b, 0.75)
		}
	}
}

// findAll is re.FindAllStringIndex(s, -1) when may is true, else nil.
func findAll(re *lazyregexp.Regexp, s string, may bool) [][]int {
	if !may {
		return nil
	}
	return re.FindAllStringIndex(s, -1)
}

// cardInGroups looks for a valid card number made of whole digit groups
// of run[a:b] (groups separated by spaces or hyphens), leftmost first.
func cardInGroups(run string, a, b int, bounded func(int, int) bool) (int, int, bool) {
	var starts, ends []int
	for i := a; i < b; i++ {
		if isDigit(run[i]) && (i == a || !isDigit(run[i-1])) {
			starts = append(starts, i)
		}
		if isDigit(run[i]) && (i+1 == b || !isDigit(run[i+1])) {
			ends = append(ends, i+1)
		}
	}
	// Card numbers are written in at most five groups (4-4-4-4-3,
	// 4-6-5); a long run of short groups is something else.
	if len(starts) < 2 || len(starts) > 8 {
		return 0, 0, false
	}
	for _, x := range starts {
		for j := len(ends) - 1; j >= 0; j-- {
			y := ends[j]
			if y <= x || x == a && y == b {
				continue
			}
			if n := len(digitsOf(run[x:y])); n >= 13 && n <= 19 && bounded(x, y) && validCard(run[x:y]) {
				return x, y, true
			}
		}
	}
	return 0, 0, false
}

func digitsOf(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if isDigit(s[i]) {
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// validCard checks length, issuer prefix and the Luhn checksum.
func validCard(s string) bool {
	d := digitsOf(s)
	if len(d) < 13 || len(d) > 19 {
		return false
	}
	// Separators must be consistent: none, or all the same character.
	sep := byte(0)
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			if sep != 0 && s[i] != sep {
				return false
			}
			sep = s[i]
		}
	}
	known := false
	for _, p := range []string{"4", "51", "52", "53", "54", "55", "22", "23", "24", "25", "26", "27", "34", "37", "6011", "65", "64", "36", "38", "30", "35", "62"} {
		if strings.HasPrefix(d, p) {
			known = true
			break
		}
	}
	if !known || strings.Count(d, d[:1]) == len(d) {
		return false
	}
	return luhn(d)
}

func luhn(d string) bool {
	sum := 0
	double := false
	for i := len(d) - 1; i >= 0; i-- {
		n := int(d[i] - '0')
		if double {
			n *= 2
			if n > 9 {
				n -= 9
			}
		}
		sum += n
		double = !double
	}
	return sum%10 == 0
}

// validSSN rejects numbers the SSA never issues.
func validSSN(s string) bool {
	d := digitsOf(s)
	area, group, serial := d[:3], d[3:5], d[5:]
	if area == "000" || area == "666" || area[0] == '9' || group == "00" || serial == "0000" {
		return false
	}
	// Widely published sample numbers.
	return d != "123456789" && d != "078051120" && d != "219099999"
}

// sectionNumber reports whether the dotted number at i follows a word
// that makes it a section or version number ("section 8.1.2.2",
// "RFC 7540, 8.1.2.2", "§5.1.1.5", "version 1.2.3.4").
func sectionNumber(text string, i int) bool {
	if strings.Contains(strings.ToLower(text[max(0, i-16):i]), "rfc") {
		return true
	}
	before := strings.ToLower(text[max(0, i-10):i])
	for _, w := range []string{"section ", "sections ", "sec. ", "§", "§ ", "version ", "ver. ", "v"} {
		if strings.HasSuffix(before, w) {
			return w != "v" || i < 2 || !isAlnumByte(text[i-2])
		}
	}
	return false
}

func validIPv4(s string) bool {
	a, err := netip.ParseAddr(s)
	return err == nil && a.Is4()
}

// validPhone accepts international numbers (+CC, 8 to 15 digits, E.164)
// and North American numbers (10 digits, area and exchange codes not
// starting with 0 or 1); a national number written in groups needs 9 to 12
// digits. Runs of one repeated digit are rejected.
func validPhone(s string) bool {
	d := digitsOf(s)
	if strings.Count(d, d[:1]) == len(d) {
		return false
	}
	switch {
	case strings.HasPrefix(s, "+"):
		return len(d) >= 8 && len(d) <= 15 && d[0] != '0'
	case len(d) == 10 && (strings.HasPrefix(s, "(") || strings.Count(s, "-") == 2 || strings.Count(s, ".") == 2):
		return d[0] >= '2' && d[3] >= '2'
	case strings.Count(s, " ") >= 2:
		// Grouped national numbers: "020 7946 0958", "06 12 34 56 78".
		return len(d) >= 9 && len(d) <= 12 && d[0] == '0'
	}
	return false
}

// --- IPv6 ---

func isHexByte(c byte) bool {
	return isDigit(c) || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// scanIPv6 validates the token of hex digits, colons and dots around the
// colon at i; it returns the token's bounds even when it is no address.
func scanIPv6(text string, i int) (int, int, bool) {
	s := i
	for s > 0 && (isHexByte(text[s-1]) || text[s-1] == ':' || text[s-1] == '.') {
		s--
	}
	e := i
	for e < len(text) && (isHexByte(text[e]) || text[e] == ':' || text[e] == '.') {
		e++
	}
	for e > i && text[e-1] == '.' {
		e--
	}
	tok := text[s:e]
	if strings.Count(tok, ":") < 2 || !tokenStart(text, s) || !tokenEnd(text, e) || len(tok) < 3 || len(tok) > 45 {
		return s, e, false
	}
	// Short tokens such as "::", "a::b" or "dead::beef" are more often code
	// than addresses: require three groups, or two with a digit ("fe80::1").
	groups := 0
	for _, g := range strings.Split(tok, ":") {
		if g != "" {
			groups++
		}
	}
	if groups < 2 || groups == 2 && (len(tok) < 6 || !strings.ContainsAny(tok, "0123456789")) {
		return s, e, false
	}
	a, err := netip.ParseAddr(tok)
	if err != nil || !a.Is6() {
		return s, e, false
	}
	return s, e, true
}

// --- IBAN ---

// ibanLengths is the IBAN length of each country (ISO 13616 registry).
var ibanLengths = map[string]int{
	"AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22, "BR": 29,
	"BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DK": 18, "DO": 28, "EE": 20, "EG": 29,
	"ES": 24, "FI": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23, "GL": 18, "GR": 27, "GT": 28,
	"HR": 21, "HU": 28, "IE": 22, "IL": 23, "IQ": 23, "IS": 26, "IT": 27, "JO": 30, "KW": 30, "KZ": 20,
	"LB": 28, "LC": 32, "LI": 21, "LT": 20, "LU": 20, "LV": 21, "MC": 27, "MD": 24, "ME": 22, "MK": 19,
	"MR": 27, "MT": 31, "MU": 30, "NL": 18, "NO": 15, "PK": 24, "PL": 28, "PS": 29, "PT": 25, "QA": 29,
	"RO": 24, "RS": 22, "SA": 24, "SC": 31, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "ST": 25, "SV": 28,
	"TL": 23, "TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20,
}

// scanIBAN reads an IBAN at i, compact or in groups of four separated by
// single spaces, and validates its country length and mod-97 checksum.
func scanIBAN(text string, i int) (int, bool) {
	want, ok := ibanLengths[text[i:i+2]]
	if !ok {
		return 0, false
	}
	var b strings.Builder
	e := i
	for e < len(text) && b.Len() < want {
		c := text[e]
		switch {
		case isDigit(c) || c >= 'A' && c <= 'Z':
			b.WriteByte(c)
			e++
		case (c >= 'a' && c <= 'z') && b.Len() >= 4:
			b.WriteByte(c - 'a' + 'A')
			e++
		case c == ' ' && e+1 < len(text) && isAlnumByte(text[e+1]) && (b.Len())%4 == 0:
			e++
		default:
			return 0, false
		}
	}
	if b.Len() != want || !tokenEnd(text, e) {
		return 0, false
	}
	return e, ibanChecksum(b.String())
}

func ibanChecksum(iban string) bool {
	r := iban[4:] + iban[:4]
	mod := 0
	for i := 0; i < len(r); i++ {
		c := r[i]
		switch {
		case isDigit(c):
			mod = (mod*10 + int(c-'0')) % 97
		case c >= 'A' && c <= 'Z':
			mod = (mod*100 + int(c-'A'+10)) % 97
		default:
			return false
		}
	}
	return mod == 1
}
