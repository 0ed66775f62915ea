package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/vigilhq/vigil/ingest"
	"github.com/vigilhq/vigil/internal/lazyregexp"
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

// Names of the ingest side of images (package ingest).
const (
	imageRoute      = ingest.ImageRoute
	imgLinkPrefix   = ingest.ImageLinkPrefix
	imgInlinePrefix = ingest.ImageInlinePrefix
)

// imageLinkRx matches a link the ingest wrote: trace id, hash, extension.
var imageLinkRx = lazyregexp.New(`^/api/v1/trace/image/[^/]+/([^/]+)/([0-9a-f]{64})(?:\.[a-z0-9]+)?$`)

// badRequestAt is a 400 naming the JSON path of the bad value.
func badRequestAt(path, format string, args ...any) *Error {
	e := badRequest("%s: %s", path, fmt.Sprintf(format, args...))
	e.Extra = map[string]any{"path": path}
	return e
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
