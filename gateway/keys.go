package gateway

import (
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"
)

// smuggleSep separates a provider key from a Vigil key in one header
// (spec §3.1 source 2).
const smuggleSep = ";invariant-auth="

// KeyError is a problem with the keys of a request (spec §3.1): its
// status, and the detail text Invariant uses.
type KeyError struct {
	Status int
	Detail string
}

func (e *KeyError) Error() string { return e.Detail }

// Keys are the keys a request carries.
type Keys struct {
	// Vigil is the Vigil key ("" when none).
	Vigil string
	// Provider is the provider key with any smuggled Vigil key removed
	// ("" when none); Header is where it was found ("" when none),
	// "query:key" for Gemini's ?key=.
	Provider string
	Header   string
	// Smuggled reports that the Vigil key came from the provider key.
	Smuggled bool
}

// providerKeyHeaders are the headers a client's provider key may be in,
// per upstream type, in order (spec §3.2).
func providerKeyHeaders(typ string) []string {
	switch typ {
	case TypeAzure:
		return []string{"Api-Key", "Authorization"}
	case TypeAnthropic:
		return []string{"X-Api-Key", "Authorization"}
	case TypeGemini:
		return []string{"X-Goog-Api-Key", "Authorization", "query:key"}
	}
	return []string{"Authorization"}
}

// ExtractKeys finds the Vigil key and the provider key of r for an
// upstream of type typ (spec §3.1–3.2; "" for routes without a provider
// key, such as MCP, which also accept INVARIANT-API-KEY). A smuggled key
// with an empty Vigil part is a *KeyError.
func ExtractKeys(r *http.Request, typ string) (Keys, error) {
	var k Keys
	for _, h := range []string{"Invariant-Authorization", "Vigil-Authorization"} {
		if v := r.Header.Get(h); v != "" {
			k.Vigil = bearer(v)
			break
		}
	}
	var names []string
	if typ != "" {
		names = providerKeyHeaders(typ)
	}
	for _, h := range names {
		var v string
		if q, ok := strings.CutPrefix(h, "query:"); ok {
			v = r.URL.Query().Get(q)
		} else {
			v = r.Header.Get(h)
			if h == "Authorization" {
				v = bearer(v)
			}
		}
		if v == "" {
			continue
		}
		k.Header = h
		if p, vk, ok := strings.Cut(v, smuggleSep); ok {
			vk = strings.TrimSpace(vk)
			if vk == "" {
				return k, &KeyError{http.StatusBadRequest, "Invalid API Key format"}
			}
			k.Provider, k.Smuggled = strings.TrimSpace(p), true
			if k.Vigil == "" {
				k.Vigil = vk
			}
		} else {
			k.Provider = strings.TrimSpace(v)
		}
		break
	}
	if typ == "" && k.Vigil == "" {
		k.Vigil = strings.TrimSpace(r.Header.Get("Invariant-Api-Key"))
	}
	return k, nil
}

func bearer(v string) string {
	if len(v) > 7 && strings.EqualFold(v[:7], "bearer ") {
		return strings.TrimSpace(v[7:])
	}
	return strings.TrimSpace(v)
}

// DecodeHeaderRules decodes an Invariant-Guardrails header value, which
// clients escape as Python's unicode_escape does (spec §3.3): \\ \n \r
// \t \' \" \a \b \f \v, \ooo, \xhh, \uXXXX and \UXXXXXXXX are decoded,
// backslash-newline is deleted and other sequences are kept as they are.
func DecodeHeaderRules(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 == len(s) {
			b.WriteByte(c)
			continue
		}
		n := s[i+1]
		simple := map[byte]string{'\\': `\`, 'n': "\n", 'r': "\r", 't': "\t", '\'': "'", '"': `"`, 'a': "\a", 'b': "\b", 'f': "\f", 'v': "\v", '\n': ""}
		if rep, ok := simple[n]; ok {
			b.WriteString(rep)
			i++
			continue
		}
		width := map[byte]int{'x': 2, 'u': 4, 'U': 8}[n]
		if width > 0 && i+2+width <= len(s) {
			if v, err := strconv.ParseUint(s[i+2:i+2+width], 16, 32); err == nil && utf8.ValidRune(rune(v)) {
				b.WriteRune(rune(v))
				i += 1 + width
				continue
			}
		}
		if n >= '0' && n <= '7' {
			j := i + 1
			for j < len(s) && j < i+4 && s[j] >= '0' && s[j] <= '7' {
				j++
			}
			v, _ := strconv.ParseUint(s[i+1:j], 8, 32)
			b.WriteRune(rune(v))
			i = j - 1
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}
