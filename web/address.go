package web

import (
	"strconv"
	"strings"

	"github.com/vigilhq/vigil/internal/lazyregexp"
)

// An address (explorer-api §2.3) split into its path and selector.
type address struct {
	Path string // normalised: "[i]" written ".i"
	// Selector: Kind is "" (whole target), "range", "line" or "bbox".
	Kind       string
	Start, End int        // range: [Start, End) code points; line: Start
	Box        [4]float64 // bbox: x1, y1, x2, y2 in [0, 1]
}

var selectorRx = lazyregexp.New(`^(?:(\d+)-(\d+)|L(\d+)|bbox-(\d+(?:\.\d+)?),(\d+(?:\.\d+)?),(\d+(?:\.\d+)?),(\d+(?:\.\d+)?))$`)

// parseAddress splits a rendered (positional) address. ok is false for
// "<root>" and for anything not starting at "messages".
func parseAddress(s string) (a address, ok bool) {
	if !strings.HasPrefix(s, "messages") {
		return a, false
	}
	path := s
	for i := strings.LastIndexByte(s, ':'); i >= 0; i = strings.LastIndexByte(s[:i], ':') {
		m := selectorRx.FindStringSubmatch(s[i+1:])
		if m == nil {
			continue
		}
		path = s[:i]
		switch {
		case m[1] != "":
			a.Kind = "range"
			a.Start, _ = strconv.Atoi(m[1])
			a.End, _ = strconv.Atoi(m[2])
		case m[3] != "":
			a.Kind = "line"
			a.Start, _ = strconv.Atoi(m[3])
		default:
			a.Kind = "bbox"
			for j := range 4 {
				a.Box[j], _ = strconv.ParseFloat(m[4+j], 64)
			}
		}
		break
	}
	a.Path = normalisePath(path)
	return a, true
}

// normalisePath writes "[i]" steps as ".i".
func normalisePath(p string) string {
	if !strings.Contains(p, "[") {
		return p
	}
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '[':
			b.WriteByte('.')
		case ']':
		default:
			b.WriteByte(p[i])
		}
	}
	return b.String()
}

// eventOf returns the message index an address path starts at.
func eventOf(path string) (int, bool) {
	rest, ok := strings.CutPrefix(path, "messages.")
	if !ok {
		return 0, false
	}
	num, _, _ := strings.Cut(rest, ".")
	n, err := strconv.Atoi(num)
	return n, err == nil
}

// fragment is the URL fragment of an address: "#" and the address with
// ":" written %3A (html/template would take "messages.0.content:" for a
// URL scheme), "%" and spaces escaped. The page script decodes it.
func fragment(addr string) string {
	r := strings.NewReplacer("%", "%25", ":", "%3A", " ", "%20", "\"", "%22", "<", "%3C", ">", "%3E")
	return "#" + r.Replace(addr)
}
