package ask

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/vigilhq/vigil/store"
	"github.com/vigilhq/vigil/trace"
)

// decodeTrace decodes the stored events of t (its messages loaded) for
// address resolution; a trace the decoder refuses resolves nothing.
func decodeTrace(t *store.Trace) (*trace.Trace, error) {
	n := 2
	for _, m := range t.Messages {
		n += len(m.Data) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, '[')
	for i, m := range t.Messages {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, m.Data...)
	}
	b = append(b, ']')
	tr, err := trace.Decode(b)
	if err != nil {
		return nil, fmt.Errorf("trace %s does not decode: %w", t.ID, err)
	}
	return tr, nil
}

// TextAt returns the text at address addr of tr: the selected text of a
// range or line selector, the string at the address, or the compact JSON
// of any other value. An address that does not parse or resolve is an
// error saying why.
func TextAt(tr *trace.Trace, addr string) (string, error) {
	a, err := trace.ParseAddress(addr)
	if err != nil {
		return "", err
	}
	if a.Root {
		return "", fmt.Errorf("address %s: the whole trace cannot be quoted; cite an address inside it", addr)
	}
	r, err := tr.Resolve(a)
	if err != nil {
		return "", err
	}
	if a.Selector.Kind == trace.SelectRange || a.Selector.Kind == trace.SelectLine {
		return r.Text, nil
	}
	if s, ok := r.Value.(string); ok {
		return s, nil
	}
	return string(trace.Marshal(r.Value)), nil
}

// NormalizeSpace collapses every run of white space in s to one space
// and trims it: the comparison of a quote with the stored text.
func NormalizeSpace(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// QuoteMatches reports whether quote is the text at the address, after
// white-space normalisation. JSON values also match their compact JSON
// with any key spacing (a model may write {"a": 1} for {"a":1}).
func QuoteMatches(quote, text string) bool {
	if NormalizeSpace(quote) == NormalizeSpace(text) {
		return true
	}
	var a, b any
	if json.Unmarshal([]byte(quote), &a) != nil || json.Unmarshal([]byte(text), &b) != nil {
		return false
	}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb) && strings.ContainsAny(strings.TrimSpace(text), "{[")
}

// messageRole is the role of a stored event ("" when it has none).
func messageRole(data []byte) string {
	var e struct {
		Role string `json:"role"`
	}
	_ = json.Unmarshal(data, &e) // an event that does not decode has no role
	return e.Role
}

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }
