package detect

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

func piiString(ms []Match, text string) []string {
	rs := []rune(text)
	var out []string
	for _, m := range ms {
		out = append(out, fmt.Sprintf("%s:%s", m.Type, string(rs[m.Start:m.End])))
	}
	return out
}

func TestPII(t *testing.T) {
	tests := []struct {
		name string
		text string
		want []string
	}{
		{"email", "write to jane.doe+news@example.co.uk today", []string{"EMAIL_ADDRESS:jane.doe+news@example.co.uk"}},
		{"email trailing dot", "mail bob@example.com.", []string{"EMAIL_ADDRESS:bob@example.com"}},
		{"not an email: no tld", "user@localhost and @mention and a@b.c", nil},
		{"phone international", "call +44 20 7946 0958 or +1-202-555-0173", []string{"PHONE_NUMBER:+44 20 7946 0958", "PHONE_NUMBER:+1-202-555-0173"}},
		{"phone north american", "office (415) 555-2671, cell 415.555.2671", []string{"PHONE_NUMBER:(415) 555-2671", "PHONE_NUMBER:415.555.2671"}},
		{"phone national grouped", "appelez le 06 12 34 56 78", []string{"PHONE_NUMBER:06 12 34 56 78"}},
		{"phone formats by country", "DE +49 30 1234567, +49 (0)30 1234567; FR +33 1 42 68 53 00; JP +81-3-1234-5678; IN +91 98765 43210; US +1 (415) 555-2671 and +14155552671",
			[]string{"PHONE_NUMBER:+49 30 1234567", "PHONE_NUMBER:+49 (0)30 1234567", "PHONE_NUMBER:+33 1 42 68 53 00", "PHONE_NUMBER:+81-3-1234-5678",
				"PHONE_NUMBER:+91 98765 43210", "PHONE_NUMBER:+1 (415) 555-2671", "PHONE_NUMBER:+14155552671"}},
		{"numbers that are not phones", "ISBN 978-3-16-148410-0, at 2024-05-01 12:30:45, $1,234,567.89, order #12345, 48.8566, 2.3522", nil},
		{"dates and versions are not phones", "on 2023-01-05 at 10:30 we shipped v1.2.3 to 150 users", nil},
		{"credit card", "card 4111 1111 1111 1111 exp", []string{"CREDIT_CARD:4111 1111 1111 1111"}},
		{"credit card compact", "amex 378282246310005", []string{"CREDIT_CARD:378282246310005"}},
		{"card followed by a year", "card 4111 1111 1111 1111 2024 ok", []string{"CREDIT_CARD:4111 1111 1111 1111"}},
		{"card failing luhn", "card 4111 1111 1111 1112", nil},
		{"iban", "IBAN DE89 3704 0044 0532 0130 00 please", []string{"IBAN_CODE:DE89 3704 0044 0532 0130 00"}},
		{"iban compact", "GB82WEST12345698765432", []string{"IBAN_CODE:GB82WEST12345698765432"}},
		{"iban bad checksum", "DE89370400440532013001", nil},
		{"ipv4", "host 192.168.1.20 and 10.0.0.1", []string{"IP_ADDRESS:192.168.1.20", "IP_ADDRESS:10.0.0.1"}},
		{"not ipv4", "version 1.2.3.4.5 and 999.1.1.1", nil},
		{"section and version numbers are not addresses", "see section 5.1.1.5, §8.1.2.2, (RFC 7540, 8.1.2.2) and v1.2.3.4", nil},
		{"ipv6", "addr 2001:db8::8a2e:370:7334 ok", []string{"IP_ADDRESS:2001:db8::8a2e:370:7334"}},
		{"not ipv6", "std::vector at 10:30:00 and a::b", nil},
		{"ssn", "SSN 536-90-4399.", []string{"US_SSN:536-90-4399"}},
		{"invalid ssn", "000-12-3456 666-12-3456 123-45-6789", nil},
		{"url", "see https://example.com/path?q=1. and www.example.org", []string{"URL:https://example.com/path?q=1", "URL:www.example.org"}},
		{"btc legacy", "send to 1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN2 now", []string{"CRYPTO:1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN2"}},
		{"btc p2sh", "3J98t1WpEZ73CNmQviecrnyiWrnqRhWNLy", []string{"CRYPTO:3J98t1WpEZ73CNmQviecrnyiWrnqRhWNLy"}},
		{"btc bech32", "bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq", []string{"CRYPTO:bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq"}},
		{"btc bad checksum", "1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN3 bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdr", nil},
		{"email wins over url", "x@www.example.com", []string{"EMAIL_ADDRESS:x@www.example.com"}},
		{"code offsets", "é📧 a@b.io", []string{"EMAIL_ADDRESS:a@b.io"}},
		{"internationalised local part", "mail jörg@example.de", []string{"EMAIL_ADDRESS:jörg@example.de"}},
		{"CJK text is not part of the address", "メールはabc@example.jpまで", []string{"EMAIL_ADDRESS:abc@example.jp"}},
		{"plain prose", "The meeting is at three; bring 2 copies of the report and 15 pens.", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := piiString(PII(tt.text, nil), tt.text)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("PII(%q) = %q, want %q", tt.text, got, tt.want)
			}
		})
	}
}

func TestPIIEntitiesFilter(t *testing.T) {
	text := "a@b.io 192.168.0.1"
	got := piiString(PII(text, []string{"IP_ADDRESS"}), text)
	if want := []string{"IP_ADDRESS:192.168.0.1"}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := PII(text, []string{}); len(got) != 0 {
		t.Errorf("empty entity list: got %v", got)
	}
}

func FuzzPII(f *testing.F) {
	for _, s := range []string{"a@b.io", "+44 20 7946 0958", "4111 1111 1111 1111", "DE89 3704 0044 0532 0130 00",
		"2001:db8::1", "1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN2", "bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq", "http://x.y/é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n := len([]rune(s))
		for _, m := range PII(s, nil) {
			if m.Start < 0 || m.End > n || m.Start >= m.End {
				t.Fatalf("bad range %+v in %q", m, s)
			}
		}
	})
}

// Pathological inputs: every recogniser skips past what it has examined,
// so these stay linear (BenchmarkPIIPathological measures them).
func TestPIIPathological(t *testing.T) {
	for _, unit := range pathologicalPII {
		text := strings.Repeat(unit, 20000)
		n := len([]rune(text))
		for _, m := range PII(text, nil) {
			if m.Start < 0 || m.End > n || m.Start >= m.End {
				t.Fatalf("bad range %+v", m)
			}
		}
	}
}

var pathologicalPII = []string{"1:", "a@", "1 ", "http://x", "DE89", "1.", "+1-", "bc1q", "1Bv", "(", "+ ", "(-",
	// Names and places (issue_18_names_offline): capitalised runs, titles,
	// street shapes, scripts without case, invalid UTF-8.
	"Angela ", "Dr. ", "A", "Ü", "New York ", "12 Baker Street ", "van ", "Hi Ana, ", "北京", "محمد ", "\xff\xfe", "Ab\u00a0",
	// Many findings: overlaps were resolved against every kept finding.
	"a@b.io ", "Angela Merkel, "}

// TestPIIDigitlessSeparatorRun: a long run of number separators without a
// digit ("((((", "+ + + ") is skipped at once; it was rescanned from every
// position (200,000 "(" took about 40 s). Numbers after it are found.
func TestPIIDigitlessSeparatorRun(t *testing.T) {
	for _, unit := range []string{"(", "+ ", "(-", ")"} {
		text := strings.Repeat(unit, 200000/len(unit)) + "x call (415) 555-2671"
		start := time.Now()
		got := piiString(PII(text, nil), text)
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%q run: took %v", unit, d)
		}
		if want := []string{"PHONE_NUMBER:(415) 555-2671"}; !reflect.DeepEqual(got, want) {
			t.Errorf("%q run: got %v, want %v", unit, got, want)
		}
	}
}
