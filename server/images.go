package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"

	"github.com/vigilhq/vigil/store"
	"github.com/vigilhq/vigil/trace"
)

// This file handles images in traces (explorer-api §2.1 rule 2, §5, §8.1):
//
//   - on ingest, string content "base64_img: <b64>" / "local_base64_img:
//     <b64>" and image parts whose image_url.url is a
//     "data:image/<type>;base64," URI are decoded, stored once per owner as
//     content-addressed blobs (store.Blobs), and rewritten to
//     "local_img_link: /api/v1/trace/image/_/<trace>/<sha256>.<ext>"
//     (string content) or to the bare path (parts); invalid base64 is a 400
//     naming the JSON path;
//   - GET /api/v1/trace/image/{dataset}/{trace_id}/{image} serves the bytes
//     of an image the trace references, with or without the extension;
//   - export and trace download inline the images again, so an export
//     re-uploads with its images.
//
// http(s) URLs are never fetched and stay as they are.

// maxImageBytes is the largest decoded image a trace may carry
// (explorer-api §2.1: at most 20 MiB).
const maxImageBytes = 20 << 20

// imageRoute is the path prefix of the image route; the dataset segment is
// ignored and written as "_".
const imageRoute = "/api/v1/trace/image/"

// Content prefixes of explorer-api §2.1.
const (
	imgLinkPrefix   = "local_img_link:"
	imgInlinePrefix = "local_base64_img:"
	imgBase64Prefix = "base64_img:"
)

// imageLinkRx matches a link the ingest wrote: trace id, hash, extension.
var imageLinkRx = regexp.MustCompile(`^/api/v1/trace/image/[^/]+/([^/]+)/([0-9a-f]{64})(?:\.[a-z0-9]+)?$`)

// imageSet collects the blobs of one trace during ingest. The zero value
// is ready to use.
type imageSet struct {
	blobs []*store.Blob
	seen  map[string]bool
}

// add records data (of content type mime) and returns its link path.
func (is *imageSet) add(traceID, mime string, data []byte) string {
	sum := sha256.Sum256(data)
	h := hex.EncodeToString(sum[:])
	if !is.seen[h] {
		if is.seen == nil {
			is.seen = map[string]bool{}
		}
		is.seen[h] = true
		is.blobs = append(is.blobs, &store.Blob{SHA256: h, ContentType: mime, Data: data})
	}
	return imageRoute + "_/" + traceID + "/" + h + "." + imageExt(mime)
}

// eventPos is where an event is in its request, for errors: its JSON path
// is path[event], or messages[trace][event] when path is "" (a push). It
// is rendered only for an error, so ingest does not pay for it per event.
type eventPos struct {
	path         string
	trace, event int
}

func (p eventPos) String() string {
	if p.path == "" {
		return fmt.Sprintf("messages[%d][%d]", p.trace, p.event)
	}
	return fmt.Sprintf("%s[%d]", p.path, p.event)
}

// rewriteImages replaces the inline images of one event (its "content":
// a string, or a list of parts) by links to blobs added to is. at is the
// event's place in the request, for errors.
func (is *imageSet) rewriteImages(obj *trace.Object, traceID string, at eventPos) error {
	c, ok := obj.Get("content")
	if !ok {
		return nil
	}
	switch c := c.(type) {
	case string:
		b64, ok := cutImagePrefix(c)
		if !ok {
			return nil
		}
		data, err := decodeImage(b64, at.String()+".content")
		if err != nil {
			return err
		}
		obj.Set("content", imgLinkPrefix+" "+is.add(traceID, sniffImage(data), data))
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
func (is *imageSet) rewriteDataURI(uri, traceID string, at eventPos, part int, suffix string) (string, error) {
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
		return "", badRequestAt(path(), "invalid image type %q in data URI", mime)
	}
	data, err := decodeImage(b64, path())
	if err != nil {
		return "", err
	}
	return is.add(traceID, mime, data), nil
}

// cutImagePrefix returns the base64 text of "base64_img: <b64>" or
// "local_base64_img: <b64>" content.
func cutImagePrefix(s string) (string, bool) {
	for _, p := range []string{imgBase64Prefix, imgInlinePrefix} {
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

// badRequestAt is a 400 naming the JSON path of the bad value.
func badRequestAt(path, format string, args ...any) *Error {
	e := badRequest("%s: %s", path, fmt.Sprintf(format, args...))
	e.Extra = map[string]any{"path": path}
	return e
}

// decodeImage decodes base64 image text (standard or URL alphabet, padded
// or not, ASCII whitespace ignored). Empty, invalid or over-large images
// are a 400 naming path.
func decodeImage(b64, path string) ([]byte, error) {
	clean := strings.Map(func(r rune) rune {
		if r == ' ' || r == '\n' || r == '\r' || r == '\t' {
			return -1
		}
		return r
	}, b64)
	if clean == "" {
		return nil, badRequestAt(path, "empty base64 image")
	}
	if base64.StdEncoding.DecodedLen(len(clean)) > maxImageBytes+3 {
		return nil, badRequestAt(path, "image larger than %d bytes", maxImageBytes)
	}
	var firstErr error
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		data, err := enc.DecodeString(clean)
		if err == nil {
			if len(data) > maxImageBytes {
				return nil, badRequestAt(path, "image larger than %d bytes", maxImageBytes)
			}
			return data, nil
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	return nil, badRequestAt(path, "invalid base64 image: %v", firstErr)
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

// imageExt is the link extension of a content type: its subtype with
// jpeg as jpg and svg+xml as svg; "bin" when not an image.
func imageExt(mime string) string {
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

// putBlobs stores the images of an ingest for ownerID before the traces
// that link them: a blob is content-addressed and written once, so a
// failed trace write leaves at most an unreferenced blob, never a link
// without its image.
func (s *Server) putBlobs(ctx context.Context, ownerID string, blobs []*store.Blob) error {
	for _, b := range blobs {
		b.OwnerID = ownerID
		if err := s.st.PutBlob(ctx, b); err != nil {
			return fmt.Errorf("store image %s: %w", b.SHA256, err)
		}
	}
	return nil
}

// handleTraceImage serves GET /api/v1/trace/image/{dataset}/{trace_id}/{image}
// (explorer-api §5): the bytes of an image the trace references, with
// its stored content type. {image} is <sha256>.<ext> or the bare hash.
func (s *Server) handleTraceImage(w http.ResponseWriter, r *http.Request, p *principal) error {
	name := r.PathValue("image")
	sum, _, _ := strings.Cut(name, ".")
	sum = strings.ToLower(sum)
	if len(sum) != 64 || strings.Trim(sum, "0123456789abcdef") != "" {
		return notFound("Image not found")
	}
	t, err := s.traceForRead(r, p, r.PathValue("trace_id"), true)
	if err != nil {
		return err
	}
	if !traceReferences(t, sum) {
		return notFound("Image not found")
	}
	b, err := s.st.GetBlob(r.Context(), t.OwnerID, sum)
	if errors.Is(err, store.ErrNotFound) {
		return notFound("Image not found")
	}
	if err != nil {
		return err
	}
	h := w.Header()
	h.Set("Content-Type", b.ContentType)
	h.Set("Content-Length", strconv.Itoa(len(b.Data)))
	h.Set("ETag", `"`+sum+`"`)
	h.Set("Cache-Control", "private, max-age=3600")
	// Stored bytes are the client's: never let a browser run them (an
	// image/svg+xml with script) in the API's origin.
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; sandbox")
	if match := r.Header.Get("If-None-Match"); match == `"`+sum+`"` {
		w.WriteHeader(http.StatusNotModified)
		return nil
	}
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, err = w.Write(b.Data)
	}
	return err
}

// traceReferences reports whether one of t's events links the image sum.
func traceReferences(t *store.Trace, sum string) bool {
	needle := []byte("/" + sum)
	for _, m := range t.Messages {
		if bytes.Contains(m.Data, needle) {
			return true
		}
	}
	return false
}

// inlineImages replaces, in t's events, the image links written at ingest
// by the images themselves (explorer-api §8.1): string content becomes
// "local_base64_img: <b64>" and parts "data:<mime>;base64,<b64>" URIs. An
// export of t then re-uploads with its images. A link whose blob is gone
// is left as it is.
func (s *Server) inlineImages(ctx context.Context, t *store.Trace) error {
	var cache map[string]*store.Blob // per trace: the same image is often repeated
	blob := func(sum string) (*store.Blob, error) {
		if b, ok := cache[sum]; ok {
			return b, nil
		}
		b, err := s.st.GetBlob(ctx, t.OwnerID, sum)
		if errors.Is(err, store.ErrNotFound) {
			b, err = nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("inline image %s of trace %s: %w", sum, t.ID, err)
		}
		if cache == nil {
			cache = map[string]*store.Blob{}
		}
		cache[sum] = b
		return b, nil
	}
	for i := range t.Messages {
		m := &t.Messages[i]
		if !bytes.Contains(m.Data, []byte(imageRoute)) {
			continue
		}
		v, err := trace.ParseValue(m.Data)
		if err != nil {
			continue // stored events are valid JSON; leave anything else alone
		}
		obj, ok := v.(*trace.Object)
		if !ok {
			continue
		}
		changed, err := inlineEvent(obj, blob)
		if err != nil {
			return err
		}
		if changed {
			m.Data = trace.Marshal(obj)
		}
	}
	return nil
}

// inlineEvent is inlineImages for one event object.
func inlineEvent(obj *trace.Object, blob func(string) (*store.Blob, error)) (bool, error) {
	c, _ := obj.Get("content")
	changed := false
	switch c := c.(type) {
	case string:
		rest, ok := strings.CutPrefix(c, imgLinkPrefix)
		if !ok {
			return false, nil
		}
		b, err := linkedBlob(strings.TrimSpace(rest), blob)
		if b == nil || err != nil {
			return false, err
		}
		obj.Set("content", imgInlinePrefix+" "+base64.StdEncoding.EncodeToString(b.Data))
		return true, nil
	case []trace.Value:
		for _, part := range c {
			po, ok := part.(*trace.Object)
			if !ok {
				continue
			}
			iu, _ := po.Get("image_url")
			var link string
			uo, isObj := iu.(*trace.Object)
			if isObj {
				u, _ := uo.Get("url")
				link, _ = u.(string)
			} else {
				link, _ = iu.(string)
			}
			b, err := linkedBlob(link, blob)
			if err != nil {
				return changed, err
			}
			if b == nil {
				continue
			}
			uri := "data:" + b.ContentType + ";base64," + base64.StdEncoding.EncodeToString(b.Data)
			if isObj {
				uo.Set("url", uri)
			} else {
				po.Set("image_url", uri)
			}
			changed = true
		}
	}
	return changed, nil
}

// linkedBlob returns the blob a link path names, or nil when link is not
// an image link or its blob is gone.
func linkedBlob(link string, blob func(string) (*store.Blob, error)) (*store.Blob, error) {
	m := imageLinkRx.FindStringSubmatch(link)
	if m == nil {
		return nil, nil
	}
	return blob(m[2])
}
