package detect

import (
	"fmt"
	"os"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// corpusText is one labelled text of testdata/pii-corpus.
type corpusText struct {
	kind string
	line int // line of its "===" header
	text string
	gold []Match // PERSON and LOCATION spans, code points
}

var corpusMark = regexp.MustCompile(`\[\[(PERSON|LOCATION):([^\]]+)\]\]`)

// readCorpus parses corpus.txt (format: testdata/pii-corpus/README.md).
func readCorpus(t testing.TB, path string) []corpusText {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []corpusText
	var cur *corpusText
	var body []string
	flush := func() {
		if cur == nil {
			return
		}
		raw := strings.Join(body, "\n")
		var sb strings.Builder
		last := 0
		for _, m := range corpusMark.FindAllStringSubmatchIndex(raw, -1) {
			sb.WriteString(raw[last:m[0]])
			start := utf8.RuneCountInString(sb.String())
			sb.WriteString(raw[m[4]:m[5]])
			cur.gold = append(cur.gold, Match{Type: raw[m[2]:m[3]], Start: start, End: utf8.RuneCountInString(sb.String())})
			last = m[1]
		}
		sb.WriteString(raw[last:])
		cur.text = sb.String()
		if strings.Contains(cur.text, "[[") {
			t.Fatalf("%s:%d: malformed entity markup", path, cur.line)
		}
		out = append(out, *cur)
	}
	for i, l := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		if strings.HasPrefix(l, "=== ") {
			flush()
			cur, body = &corpusText{kind: strings.TrimPrefix(l, "=== "), line: i + 1}, nil
			continue
		}
		if cur == nil {
			if l != "" && !strings.HasPrefix(l, "#") {
				t.Fatalf("%s:%d: text before the first === header", path, i+1)
			}
			continue
		}
		body = append(body, l)
	}
	flush()
	return out
}

// prf is precision, recall and F1 of counts.
type prf struct{ tp, fp, fn int }

func (c prf) p() float64 { return ratio(c.tp, c.tp+c.fp) }
func (c prf) r() float64 { return ratio(c.tp, c.tp+c.fn) }
func (c prf) f1() float64 {
	if c.p()+c.r() == 0 {
		return 0
	}
	return 2 * c.p() * c.r() / (c.p() + c.r())
}
func (c prf) String() string {
	return fmt.Sprintf("P %.3f R %.3f F1 %.3f (tp %d fp %d fn %d)", c.p(), c.r(), c.f1(), c.tp, c.fp, c.fn)
}

func ratio(a, b int) float64 {
	if b == 0 {
		return 1
	}
	return float64(a) / float64(b)
}

// scoreCorpus counts text-level and span-level results of got (one list
// of findings per text) against the gold labels, per type.
func scoreCorpus(texts []corpusText, got [][]Match) (textLevel, spanLevel map[string]*prf) {
	textLevel = map[string]*prf{EntityPerson: {}, EntityLocation: {}}
	spanLevel = map[string]*prf{EntityPerson: {}, EntityLocation: {}}
	for i, ct := range texts {
		for typ := range textLevel {
			has := func(ms []Match) bool {
				for _, m := range ms {
					if m.Type == typ {
						return true
					}
				}
				return false
			}
			g, p := has(ct.gold), has(got[i])
			switch {
			case g && p:
				textLevel[typ].tp++
			case p:
				textLevel[typ].fp++
			case g:
				textLevel[typ].fn++
			}
			key := func(m Match) string { return fmt.Sprintf("%d-%d", m.Start, m.End) }
			gold := map[string]bool{}
			for _, m := range ct.gold {
				if m.Type == typ {
					gold[key(m)] = true
				}
			}
			for _, m := range got[i] {
				if m.Type != typ {
					continue
				}
				if gold[key(m)] {
					spanLevel[typ].tp++
					delete(gold, key(m))
				} else {
					spanLevel[typ].fp++
				}
			}
			spanLevel[typ].fn += len(gold)
		}
	}
	return textLevel, spanLevel
}

// TestNameCorpus measures the offline recogniser on the labelled corpus:
// text level (does the text contain a PERSON / LOCATION) must reach
// precision 0.90 and recall 0.85 for each type; span level is reported.
// Run with -v to see the figures and every miss.
func TestNameCorpus(t *testing.T) {
	texts := readCorpus(t, "testdata/pii-corpus/corpus.txt")
	negatives := 0
	for _, ct := range texts {
		if strings.HasPrefix(ct.kind, "hard-negative") {
			negatives++
			if len(ct.gold) > 0 {
				t.Errorf("corpus.txt:%d: a hard negative with entities", ct.line)
			}
		}
	}
	if len(texts) < 300 || negatives < 100 {
		t.Errorf("corpus has %d texts and %d hard negatives; want at least 300 and 100", len(texts), negatives)
	}
	got := make([][]Match, len(texts))
	for i, ct := range texts {
		got[i] = PII(ct.text, []string{EntityPerson, EntityLocation})
		if testing.Verbose() {
			if d := diffSpans(ct, got[i]); d != "" {
				t.Logf("corpus.txt:%d: %s", ct.line, d)
			}
		}
	}
	textLevel, spanLevel := scoreCorpus(texts, got)
	for _, typ := range []string{EntityPerson, EntityLocation} {
		t.Logf("%-8s text level: %v", typ, textLevel[typ])
		t.Logf("%-8s span level: %v", typ, spanLevel[typ])
		if c := textLevel[typ]; c.p() < 0.90 || c.r() < 0.85 {
			t.Errorf("%s text level %v: want precision >= 0.90 and recall >= 0.85", typ, c)
		}
	}
}

// diffSpans describes the findings of got that are not gold and the gold
// spans not found.
func diffSpans(ct corpusText, got []Match) string {
	rs := []rune(ct.text)
	str := func(m Match) string { return fmt.Sprintf("%s:%q", m.Type, string(rs[m.Start:m.End])) }
	want := map[string]bool{}
	for _, m := range ct.gold {
		want[str(m)+fmt.Sprint(m.Start)] = true
	}
	var extra, missed []string
	for _, m := range got {
		if m.Type != EntityPerson && m.Type != EntityLocation {
			continue
		}
		if want[str(m)+fmt.Sprint(m.Start)] {
			delete(want, str(m)+fmt.Sprint(m.Start))
		} else {
			extra = append(extra, str(m))
		}
	}
	for _, m := range ct.gold {
		if want[str(m)+fmt.Sprint(m.Start)] {
			missed = append(missed, str(m))
		}
	}
	if len(extra) == 0 && len(missed) == 0 {
		return ""
	}
	return fmt.Sprintf("extra %v missed %v", extra, missed)
}

// TestNamesBadInput: very long words, runs and invalid UTF-8 give valid,
// bounded results: no panic, ranges inside the text, a number of findings
// no larger than the number of words, and memory of the order of the
// input (at most 24 bytes per byte: a finding is 48 bytes, and a text
// of names has one finding every 14 bytes).
func TestNamesBadInput(t *testing.T) {
	// 10 MB for one word (the case), 2 MB for texts of many
	// findings (enough to show a quadratic step: -race runs this too).
	size, many := 10<<20, 2<<20
	if testing.Short() {
		size, many = 1<<20, 1<<20
	}
	tests := []struct {
		name string
		text string
	}{
		{"one 10 MB capitalised word", "A" + strings.Repeat("b", size)},
		{"one 10 MB word in capitals", strings.Repeat("B", size)},
		{"one 10 MB lower-case word after a name", "Angela " + strings.Repeat("x", size)},
		{"one 10 MB word without case", strings.Repeat("北", size/3)},
		{"a long capitalised run", strings.Repeat("Angela Merkel ", many/14)},
		{"a long run of titles", strings.Repeat("Dr. ", many/4)},
		{"a long run of particles", "Anna " + strings.Repeat("van ", many/4)},
		{"invalid UTF-8", strings.Repeat("\xff\xc3Ü\xe2\x82", many/8)},
		{"mixed scripts", strings.Repeat("Ана Berlin محمد علي 東京 Δημήτρης ", many/60)},
		{"spaces then a name", strings.Repeat(" ", size) + "Angela Merkel"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			ms := PII(tt.text, []string{EntityPerson, EntityLocation})
			runtime.ReadMemStats(&after)
			n := utf8.RuneCountInString(tt.text)
			for _, m := range ms {
				if m.Start < 0 || m.End > n || m.Start >= m.End {
					t.Fatalf("bad range %+v", m)
				}
			}
			if words := len(strings.Fields(tt.text)); len(ms) > words {
				t.Errorf("%d findings for %d words", len(ms), words)
			}
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > uint64(24*len(tt.text))+64<<20 {
				t.Errorf("allocated %d bytes for %d bytes of text", alloc, len(tt.text))
			}
		})
	}
}

// FuzzNames checks the recogniser's invariants on any text: valid
// code-point ranges, no overlaps, spans that start and end on a letter.
func FuzzNames(f *testing.F) {
	for _, ct := range readCorpus(f, "testdata/pii-corpus/corpus.txt") {
		f.Add(ct.text)
	}
	f.Add("Dr. \xff Ana")
	f.Add("12 Rue\u00a0de la Paix")
	f.Fuzz(func(t *testing.T, s string) {
		rs := []rune(s)
		prev := 0
		for _, m := range PII(s, []string{EntityPerson, EntityLocation}) {
			if m.Start < prev || m.End > len(rs) || m.Start >= m.End {
				t.Fatalf("bad or overlapping range %+v in %q", m, s)
			}
			prev = m.End
			if m.Type != EntityPerson && m.Type != EntityLocation {
				t.Fatalf("type %s asked for PERSON and LOCATION", m.Type)
			}
			first, last := rs[m.Start], rs[m.End-1]
			if !unicode.IsLetter(first) && !unicode.IsDigit(first) || !unicode.IsLetter(last) && !unicode.IsDigit(last) && last != '.' && !unicode.IsMark(last) {
				t.Fatalf("span %q of %q does not start and end on a letter", string(rs[m.Start:m.End]), s)
			}
		}
	})
}

// BenchmarkPIINames runs pii over about 1 MiB of the corpus's texts
// (agent-style traffic dense in names and places): all types in one
// pass, and PERSON and LOCATION alone.
func BenchmarkPIINames(b *testing.B) {
	var sb strings.Builder
	texts := readCorpus(b, "testdata/pii-corpus/corpus.txt")
	for sb.Len() < 1<<20 {
		for _, ct := range texts {
			sb.WriteString(ct.text)
			sb.WriteString("\n\n")
		}
	}
	text := sb.String()
	for _, bc := range []struct {
		name     string
		entities []string
	}{{"all", nil}, {"names", []string{EntityPerson, EntityLocation}}, {"offline-without-names", offlineOnly}} {
		b.Run(bc.name, func(b *testing.B) {
			PII(text, bc.entities) // load the tables
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				PII(text, bc.entities)
			}
		})
	}
}

// TestPIIPlan: without a model PII answers every type it knows, names
// included; with one, the model answers PERSON, LOCATION and the types
// PII does not know, and PII the rest.
func TestPIIPlan(t *testing.T) {
	p, _ := newMock(t, &mockModel{})
	tests := []struct {
		name     string
		model    bool
		entities []string
		given    bool
		offline  string
		asked    string
	}{
		{"offline, all", false, nil, false, "[]", "[]"},
		{"offline, some", false, []string{"PERSON", "EMAIL_ADDRESS", "NRP"}, true, "[PERSON EMAIL_ADDRESS NRP]", "[]"},
		{"model, all", true, nil, false, fmt.Sprint(offlineOnly), "[PERSON LOCATION]"},
		{"model, some", true, []string{"PERSON", "EMAIL_ADDRESS", "NRP"}, true, "[EMAIL_ADDRESS]", "[PERSON NRP]"},
		{"model, none", true, []string{}, true, "[]", "[]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			SetProviders(nil)
			if tt.model {
				SetProviders(p.Providers())
				defer SetProviders(nil)
			}
			offline, model, rec := piiPlan(tt.entities, tt.given)
			if fmt.Sprint(offline) != tt.offline || fmt.Sprint(model) != tt.asked || (rec != nil) != tt.model {
				t.Errorf("piiPlan = %v, %v, %v; want %s, %s", offline, model, rec, tt.offline, tt.asked)
			}
			if !tt.given && !tt.model && offline != nil {
				t.Errorf("offline = %v, want nil (all types)", offline)
			}
		})
	}
}

// TestNames pins each context rule of the recogniser on one example.
func TestNames(t *testing.T) {
	tests := []struct {
		name string
		text string
		want []string
	}{
		{"issue example", "Please email Angela Merkel in Berlin about the invoice", []string{"PERSON:Angela Merkel", "LOCATION:Berlin"}},
		{"title, not in the span", "Call Dr. Okonkwo back.", []string{"PERSON:Okonkwo"}},
		{"greeting then title", "Dear Mrs. Adeyemi, your slot moved.", []string{"PERSON:Adeyemi"}},
		{"signature", "See you then.\nBest regards,\nMaria Fernández", []string{"PERSON:Maria Fernández"}},
		{"name and location keys", `{"name": "Kwame Mensah", "city": "Accra"}`, []string{"PERSON:Kwame Mensah", "LOCATION:Accra"}},
		{"mailbox display name", "From: Tunde Bakare <tunde@example.ng>", []string{"PERSON:Tunde Bakare", "EMAIL_ADDRESS:tunde@example.ng"}},
		{"family name first", "My name is Zhang Wei.", []string{"PERSON:Zhang Wei"}},
		{"hyphenated given name", "Let Hyun-woo Lee know.", []string{"PERSON:Hyun-woo Lee"}},
		{"multi-word place", "Flights from São Paulo to Rio de Janeiro", []string{"LOCATION:São Paulo", "LOCATION:Rio de Janeiro"}},
		{"city, country", "I live in Shanghai, China.", []string{"LOCATION:Shanghai", "LOCATION:China"}},
		{"house number and street", "Ship to 221B Baker Street, London.", []string{"LOCATION:221B Baker Street", "LOCATION:London"}},
		{"street and house number", "Hauptstraße 12, 10115 Berlin", []string{"LOCATION:Hauptstraße 12", "LOCATION:Berlin"}},
		{"Cyrillic", "Владимир Путин прибыл.", []string{"PERSON:Владимир Путин"}},
		{"sentence-initial ordinary words", "Will you send it? May I ask? Bill me later.", nil},
		{"months and weekdays", "Due in June, or on Monday in August.", nil},
		{"organisation suffix", "Apple Inc and Acme Corp signed.", nil},
		{"code identifiers", "Call getUserName() or User.Name or MAX_NAME.", nil},
		{"title-case phrase", "Open the Worker Pool and the Shared Drive.", nil},
		{"product names", "Jenkins runs Kafka and Julia jobs.", nil},
		{"two ordinary words", "Turn on Dark Mode and add Brown Sugar.", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := piiString(PII(tt.text, nil), tt.text)
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("PII(%q) = %q, want %q", tt.text, got, tt.want)
			}
		})
	}
}
