package ingest

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/vigilhq/vigil/store"
	"github.com/vigilhq/vigil/trace"
)

// Inline images: string content "base64_img: <b64>" / "local_base64_img:
// <b64>" and image parts whose image_url.url is a
// "data:image/<type>;base64," URI are decoded, collected as
// content-addressed blobs, and rewritten to "local_img_link:
// /api/v1/trace/image/_/<trace>/<sha256>.<ext>" (string content) or to the
// bare path (parts); invalid base64 is an *Error naming the JSON path.
// http(s) URLs are never fetched and stay as they are.

// MaxImageBytes is the largest decoded image a trace may carry
// (explorer-api §2.1: at most 20 MiB).
const MaxImageBytes = 20 << 20

// ImageRoute is the path prefix of the image route; the dataset segment is
// ignored and written as "_".
const ImageRoute = "/api/v1/trace/image/"

// Content prefixes of explorer-api §2.1.
const (
	ImageLinkPrefix   = "local_img_link:"
	ImageInlinePrefix = "local_base64_img:"
	ImageBase64Prefix = "base64_img:"
)

// Images collects the blobs of one trace during ingest. The zero value
// is ready to use.
type Images struct {
	Blobs []*store.Blob
	seen  map[string]bool
}

// add records data (of content type mime) and returns its link path.
func (is *Images) add(traceID, mime string, data []byte) string {
	sum := sha256.Sum256(data)
	h := hex.EncodeToString(sum[:])
	if !is.seen[h] {
		if is.seen == nil {
			is.seen = map[string]bool{}
		}
		is.seen[h] = true
		is.Blobs = append(is.Blobs, &store.Blob{SHA256: h, ContentType: mime, Data: data})
	}
	return ImageRoute + "_/" + traceID + "/" + h + "." + ImageExt(mime)
}

// Pos is where an event is in its request, for errors: its JSON path
// is path[event], or messages[trace][event] when path is "" (a push). It
// is rendered only for an error, so ingest does not pay for it per event.
type Pos struct {
	Path         string
	Trace, Event int
}

// String is the JSON path of the event.
func (p Pos) String() string {
	if p.Path == "" {
		return fmt.Sprintf("messages[%d][%d]", p.Trace, p.Event)
	}
	return fmt.Sprintf("%s[%d]", p.Path, p.Event)
}

// Rewrite replaces the inline images of one event (its "content":
// a string, or a list of parts) by links to blobs added to is. at is the
// event's place in the request, for errors.
func (is *Images) Rewrite(obj *trace.Object, traceID string, at Pos) error {
	c, ok := obj.Get("content")
	if !ok {
		return nil
	}
	switch c := c.(type) {
	case string:
		b64, ok := CutImagePrefix(c)
		if !ok {
			return nil
		}
		data, err := DecodeImage(b64, at.String()+".content")
		if err != nil {
			return err
		}
		obj.Set("content", ImageLinkPrefix+" "+is.add(traceID, sniffImage(data), data))
	case []trace.Value:
		for i, part := range c {
			po, ok := part.(*trace.Object)
			if !ok {
				continue
			}
			iu, ok := po.Get("image_url")
			if !ok {
				continue
			}
			switch u := iu.(type) {
			case string: // the short form some clients send
				link, err := is.rewriteDataURI(u, traceID, at, i, "")
				if err != nil {
					return err
				}
				if link != "" {
					po.Set("image_url", link)
				}
			case *trace.Object:
				s, ok := u.Get("url")
				if str, isStr := s.(string); ok && isStr {
					link, err := is.rewriteDataURI(str, traceID, at, i, ".url")
					if err != nil {
						return err
					}
					if link != "" {
						u.Set("url", link)
					}
				}
			}
		}
	}
	return nil
}

// rewriteDataURI stores the image of a "data:image/<type>;base64,<b64>"
// URI and returns its link; "" when uri is not such a URI (http(s) URLs,
// non-base64 data URIs), which is then kept as it is. The URI is part
// `part` of the event at, under image_url plus suffix.
func (is *Images) rewriteDataURI(uri, traceID string, at Pos, part int, suffix string) (string, error) {
	rest, ok := cutPrefixFold(uri, "data:")
	if !ok {
		return "", nil
	}
	header, b64, ok := strings.Cut(rest, ",")
	if !ok {
		return "", nil
	}
	path := func() string { return at.String() + ".content[" + strconv.Itoa(part) + "].image_url" + suffix }
	params := strings.Split(header, ";")
	mime := strings.ToLower(strings.TrimSpace(params[0]))
	if !strings.HasPrefix(mime, "image/") || !strings.EqualFold(strings.TrimSpace(params[len(params)-1]), "base64") {
		return "", nil
	}
	if !validMime(mime) {
		return "", errAt(path(), "invalid image type %q in data URI", mime)
	}
	data, err := DecodeImage(b64, path())
	if err != nil {
		return "", err
	}
	return is.add(traceID, mime, data), nil
}

// CutImagePrefix returns the base64 text of "base64_img: <b64>" or
// "local_base64_img: <b64>" content.
func CutImagePrefix(s string) (string, bool) {
	for _, p := range []string{ImageBase64Prefix, ImageInlinePrefix} {
		if rest, ok := strings.CutPrefix(s, p); ok {
			return rest, true
		}
	}
	return "", false
}

func cutPrefixFold(s, prefix string) (string, bool) {
	if len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix) {
		return s[len(prefix):], true
	}
	return "", false
}

// DecodeImage decodes base64 image text (standard or URL alphabet, padded
// or not, ASCII whitespace ignored). Empty, invalid or over-large images
// are an *Error naming path.
func DecodeImage(b64, path string) ([]byte, error) {
	clean := strings.Map(func(r rune) rune {
		if r == ' ' || r == '\n' || r == '\r' || r == '\t' {
			return -1
		}
		return r
	}, b64)
	if clean == "" {
		return nil, errAt(path, "empty base64 image")
	}
	if base64.StdEncoding.DecodedLen(len(clean)) > MaxImageBytes+3 {
		return nil, errAt(path, "image larger than %d bytes", MaxImageBytes)
	}
	var firstErr error
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		data, err := enc.DecodeString(clean)
		if err == nil {
			if len(data) > MaxImageBytes {
				return nil, errAt(path, "image larger than %d bytes", MaxImageBytes)
			}
			return data, nil
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	return nil, errAt(path, "invalid base64 image: %v", firstErr)
}

// sniffImage returns the content type of an image given without one; data
// that is not a recognised image is application/octet-stream.
func sniffImage(data []byte) string {
	if ct := http.DetectContentType(data); strings.HasPrefix(ct, "image/") {
		return ct
	}
	return "application/octet-stream"
}

// validMime reports whether mime is type/subtype of token characters.
func validMime(mime string) bool {
	typ, sub, ok := strings.Cut(mime, "/")
	if !ok || typ == "" || sub == "" || len(mime) > 100 {
		return false
	}
	for _, c := range typ + sub {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.ContainsRune("!#$&-^_.+", c)) {
			return false
		}
	}
	return true
}

// ImageExt is the link extension of a content type: its subtype with
// jpeg as jpg and svg+xml as svg; "bin" when not an image.
func ImageExt(mime string) string {
	sub, ok := strings.CutPrefix(mime, "image/")
	if !ok {
		return "bin"
	}
	switch sub {
	case "jpeg":
		return "jpg"
	case "svg+xml":
		return "svg"
	}
	ext := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return -1
	}, sub)
	if ext == "" {
		return "bin"
	}
	return ext
}
