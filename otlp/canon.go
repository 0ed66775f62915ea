package otlp

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"path"
	"strings"

	"github.com/vigilhq/vigil/ingest"
	"github.com/vigilhq/vigil/ledger"
	"github.com/vigilhq/vigil/trace"
)

// canonKey is the canonical form of an event for history
// de-duplication (spec gateway §8.3: role, text, images, tool calls as
// [id, name, canonical arguments], tool_call_id), hashed. A tool output
// is keyed by its tool_call_id alone: a later copy in a chat span's
// history is the same event whatever its text (spec explorer-api §11
// item 2).
type canonKey [16]byte

func canonOf(o *trace.Object) canonKey {
	role := str(o, "role")
	var b strings.Builder
	b.WriteString(role)
	b.WriteByte(0)
	if role == "tool" {
		b.WriteString(str(o, "tool_call_id"))
		return sum(b.String())
	}
	c, _ := o.Get("content")
	var texts, images []string
	switch x := c.(type) {
	case string:
		texts = append(texts, x)
	case []trace.Value:
		for _, p := range x {
			po, ok := p.(*trace.Object)
			if !ok {
				continue
			}
			switch str(po, "type") {
			case "text":
				texts = append(texts, str(po, "text"))
			case "image_url":
				iv, _ := po.Get("image_url")
				if io, ok := iv.(*trace.Object); ok {
					images = append(images, imageKey(str(io, "url")))
				}
			}
		}
	}
	b.WriteString(strings.ReplaceAll(strings.Join(texts, "\n"), "\r\n", "\n"))
	b.WriteByte(0)
	b.WriteString(strings.Join(images, "\x01"))
	b.WriteByte(0)
	tcs, _ := o.Get("tool_calls")
	if list, ok := tcs.([]trace.Value); ok {
		for _, tc := range list {
			tco, ok := tc.(*trace.Object)
			if !ok {
				continue
			}
			b.WriteString(str(tco, "id"))
			b.WriteByte(1)
			fv, _ := tco.Get("function")
			if fo, ok := fv.(*trace.Object); ok {
				b.WriteString(str(fo, "name"))
				b.WriteByte(1)
				args, _ := fo.Get("arguments")
				if s, ok := args.(string); ok {
					if v, err := trace.ParseValue([]byte(s)); err == nil {
						args = v
					}
				}
				if cj, err := ledger.Canonicalize(trace.Marshal(args)); err == nil {
					b.Write(cj)
				}
			}
			b.WriteByte(2)
		}
	}
	b.WriteByte(0)
	b.WriteString(str(o, "tool_call_id"))
	return sum(b.String())
}

func sum(s string) canonKey {
	h := sha256.Sum256([]byte(s))
	var k canonKey
	copy(k[:], h[:])
	return k
}

// imageKey is an image URL's canonical form: a data URI and a stored
// image link become the SHA-256 of the image bytes.
func imageKey(u string) string {
	if rest, ok := strings.CutPrefix(u, "data:"); ok {
		if _, data, ok := strings.Cut(rest, ";base64,"); ok {
			if raw, err := base64.StdEncoding.DecodeString(data); err == nil {
				h := sha256.Sum256(raw)
				return hex.EncodeToString(h[:])
			}
		}
		return u
	}
	if strings.HasPrefix(u, ingest.ImageLinkPrefix) || strings.Contains(u, "/api/v1/trace/image/") {
		base := path.Base(u)
		return strings.TrimSuffix(base, path.Ext(base))
	}
	return u
}

// str is the string member key of o ("" when absent or not a string).
func str(o *trace.Object, key string) string {
	v, _ := o.Get(key)
	s, _ := v.(string)
	return s
}
