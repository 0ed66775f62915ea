package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/vigilhq/vigil/client"
	"github.com/vigilhq/vigil/ingest"
	"github.com/vigilhq/vigil/store"
	"github.com/vigilhq/vigil/trace"
)

// testPNG returns a small valid PNG (w×1 pixels, so callers get distinct
// images).
func testPNG(t testing.TB, w int) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, 1))
	img.Set(0, 0, color.RGBA{R: 200, A: 255})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

var imageLinkInText = regexp.MustCompile(`/api/v1/trace/image/_/[0-9a-f-]+/[0-9a-f]{64}\.[a-z]+`)

// getRaw sends a GET and returns the response with its body read.
func (ts *testServer) getRaw(t *testing.T, path, key string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest("GET", ts.URL+path, nil)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// TestImages: inline images are stored as blobs and rewritten to links
// (explorer-api §2.1 rule 2), the image route serves them with and
// without the extension (§5), and export inlines them again so the export
// re-uploads with its images (§8.1).
func TestImages(t *testing.T) {
	forEachBackend(t, func(t *testing.T, ts *testServer) {
		ctx := context.Background()
		img1, img2 := testPNG(t, 1), testPNG(t, 2)
		b1, b2 := base64.StdEncoding.EncodeToString(img1), base64.StdEncoding.EncodeToString(img2)
		events := []any{
			map[string]any{"role": "user", "content": "base64_img: " + b1},
			map[string]any{"role": "user", "content": []any{
				map[string]any{"type": "text", "text": "what is this?"},
				map[string]any{"type": "image_url", "image_url": map[string]any{"url": "data:image/png;base64," + b2}},
				map[string]any{"type": "image_url", "image_url": map[string]any{"url": "https://example.com/cat.png"}},
			}},
			map[string]any{"role": "tool", "tool_call_id": "1", "content": "local_base64_img: " + b1},
		}
		st, body := ts.do(t, "POST", "/api/v1/push/trace", adminKey, map[string]any{"messages": []any{events}, "dataset": "imgs"})
		if st != 200 {
			t.Fatalf("push: %d %s", st, body)
		}
		var pr struct{ ID []string }
		json.Unmarshal(body, &pr)
		id := pr.ID[0]

		st, body = ts.do(t, "GET", "/api/v1/trace/"+id, adminKey, nil)
		if st != 200 {
			t.Fatalf("get trace: %d %s", st, body)
		}
		var tr struct{ Messages []map[string]any }
		json.Unmarshal(body, &tr)
		link1 := "/api/v1/trace/image/_/" + id + "/" + sha(img1) + ".png"
		link2 := "/api/v1/trace/image/_/" + id + "/" + sha(img2) + ".png"
		if got := tr.Messages[0]["content"]; got != "local_img_link: "+link1 {
			t.Errorf("string content = %v, want the link %s", got, link1)
		}
		if got := tr.Messages[2]["content"]; got != "local_img_link: "+link1 {
			t.Errorf("tool output content = %v", got)
		}
		parts, _ := tr.Messages[1]["content"].([]any)
		if len(parts) != 3 {
			t.Fatalf("parts = %v", tr.Messages[1]["content"])
		}
		if got := parts[1].(map[string]any)["image_url"].(map[string]any)["url"]; got != link2 {
			t.Errorf("data URI part = %v, want %s", got, link2)
		}
		if got := parts[2].(map[string]any)["image_url"].(map[string]any)["url"]; got != "https://example.com/cat.png" {
			t.Errorf("http URL part = %v, want it kept", got)
		}
		if strings.Contains(string(body), b1) {
			t.Error("the trace still holds the base64 image")
		}

		// The image route, with and without the extension.
		for _, tc := range []struct {
			path string
			want []byte // nil: 404
		}{
			{link1, img1},
			{strings.TrimSuffix(link1, ".png"), img1},
			{link2, img2},
			{"/api/v1/trace/image/imgs/" + id + "/" + sha(img2), img2},
			{"/api/v1/trace/image/_/" + id + "/" + sha([]byte("other")) + ".png", nil},
			{"/api/v1/trace/image/_/" + id + "/not-a-hash.png", nil},
			{"/api/v1/trace/image/_/00000000-0000-7000-8000-000000000000/" + sha(img1), nil},
		} {
			resp, got := ts.getRaw(t, tc.path, adminKey)
			if tc.want == nil {
				if resp.StatusCode != 404 {
					t.Errorf("GET %s: %d, want 404", tc.path, resp.StatusCode)
				}
				continue
			}
			if resp.StatusCode != 200 || !bytes.Equal(got, tc.want) || resp.Header.Get("Content-Type") != "image/png" {
				t.Errorf("GET %s: %d %s, %d bytes", tc.path, resp.StatusCode, resp.Header.Get("Content-Type"), len(got))
			}
		}
		// An image of one trace is not served through another trace that
		// does not reference it.
		st, body = ts.do(t, "POST", "/api/v1/push/trace", adminKey, map[string]any{"messages": []any{[]any{map[string]any{"role": "user", "content": "hi"}}}})
		if st != 200 {
			t.Fatalf("push: %d %s", st, body)
		}
		json.Unmarshal(body, &pr)
		if resp, _ := ts.getRaw(t, "/api/v1/trace/image/_/"+pr.ID[0]+"/"+sha(img1)+".png", adminKey); resp.StatusCode != 404 {
			t.Errorf("image through an unrelated trace: %d, want 404", resp.StatusCode)
		}
		// Anonymous callers see nothing of a private trace.
		if resp, _ := ts.getRaw(t, link1, ""); resp.StatusCode != 401 && resp.StatusCode != 404 {
			t.Errorf("anonymous image read: %d", resp.StatusCode)
		}

		// Append rewrites too.
		st, body = ts.do(t, "POST", "/api/v1/trace/"+id+"/messages", adminKey, map[string]any{"messages": []any{map[string]any{"role": "user", "content": "base64_img: " + b2}}})
		if st != 200 {
			t.Fatalf("append: %d %s", st, body)
		}
		if _, got := ts.getRaw(t, "/api/v1/trace/"+id, adminKey); !strings.Contains(string(got), `"local_img_link: `+link2+`"`) {
			t.Errorf("appended image not rewritten: %s", got)
		}

		// Export inlines the images; the export re-uploads with them.
		d, err := ts.c.GetDatasetByName(ctx, "admin", "imgs")
		if err != nil {
			t.Fatal(err)
		}
		rc, err := ts.c.Export(ctx, d.ID, client.ExportOptions{})
		if err != nil {
			t.Fatal(err)
		}
		exp, _ := io.ReadAll(rc)
		rc.Close()
		for _, want := range []string{`"content":"local_base64_img: ` + b1 + `"`, `"url":"data:image/png;base64,` + b2 + `"`, `"content":"local_base64_img: ` + b2 + `"`, `"url":"https://example.com/cat.png"`} {
			if !strings.Contains(string(exp), want) {
				t.Errorf("export lacks %s:\n%.600s", want, exp)
			}
		}
		if strings.Contains(string(exp), "local_img_link") {
			t.Errorf("export still has links:\n%.600s", exp)
		}
		resp, dl := ts.getRaw(t, "/api/v1/trace/"+id+"/download", adminKey)
		if resp.StatusCode != 200 || !strings.Contains(string(dl), `local_base64_img: `+b1) {
			t.Errorf("trace download: %d %.300s", resp.StatusCode, dl)
		}
		d2, err := ts.c.Upload(ctx, "imgs-copy", bytes.NewReader(exp), client.UploadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		st, body = ts.do(t, "GET", "/api/v1/dataset/byid/"+d2.ID+"/traces", adminKey, nil)
		if st != 200 {
			t.Fatalf("traces: %d %s", st, body)
		}
		var traces []struct{ ID string }
		json.Unmarshal(body, &traces)
		if len(traces) != 1 || traces[0].ID == id {
			t.Fatalf("uploaded traces: %s", body)
		}
		_, got := ts.getRaw(t, "/api/v1/trace/"+traces[0].ID, adminKey)
		links := imageLinkInText.FindAllString(string(got), -1)
		if len(links) != 4 {
			t.Fatalf("re-uploaded trace has %d image links, want 4: %s", len(links), got)
		}
		for _, l := range links {
			if !strings.Contains(l, "/"+traces[0].ID+"/") {
				t.Errorf("link %s does not name the new trace", l)
			}
			if resp, b := ts.getRaw(t, l, adminKey); resp.StatusCode != 200 || (!bytes.Equal(b, img1) && !bytes.Equal(b, img2)) {
				t.Errorf("GET %s after re-upload: %d", l, resp.StatusCode)
			}
		}
		// The export of the copy is the export of the original.
		rc, _ = ts.c.Export(ctx, d2.ID, client.ExportOptions{})
		exp2, _ := io.ReadAll(rc)
		rc.Close()
		// (but for the name: an indexed trace without one is "Run <index>").
		l1, l2 := strings.Split(string(exp), "\n")[1], strings.Split(string(exp2), "\n")[1]
		if _, m1, _ := strings.Cut(l1, `"messages":`); !strings.HasSuffix(l2, m1) {
			t.Errorf("re-exported line differs:\n%.300s\n%.300s", l1, l2)
		}
	})
}

// TestInvalidImages: invalid base64 images are a 400 naming the JSON path
// (issue 17 item 5: they were stored and acknowledged with 200).
func TestInvalidImages(t *testing.T) {
	ts := newTestServer(t, openSQLite(t))
	good := base64.StdEncoding.EncodeToString(testPNG(t, 1))
	for _, tc := range []struct {
		name, method, path string
		body               any
		wantPath           string
	}{
		{"base64_img", "POST", "/api/v1/push/trace",
			map[string]any{"messages": []any{[]any{map[string]any{"role": "user", "content": "base64_img: !!!"}}}},
			"messages[0][0].content"},
		{"local_base64_img_second_trace", "POST", "/api/v1/push/trace",
			map[string]any{"messages": []any{
				[]any{map[string]any{"role": "user", "content": "base64_img: " + good}},
				[]any{map[string]any{"role": "user", "content": "x"}, map[string]any{"role": "tool", "content": "local_base64_img: abc$"}},
			}},
			"messages[1][1].content"},
		{"empty", "POST", "/api/v1/push/trace",
			map[string]any{"messages": []any{[]any{map[string]any{"role": "user", "content": "base64_img: "}}}},
			"messages[0][0].content"},
		{"data_uri", "POST", "/api/v1/push/trace",
			map[string]any{"messages": []any{[]any{map[string]any{"role": "user", "content": []any{
				map[string]any{"type": "text", "text": "look"},
				map[string]any{"type": "image_url", "image_url": map[string]any{"url": "data:image/png;base64,@@@"}}}}}}},
			"messages[0][0].content[1].image_url.url"},
		{"data_uri_bad_type", "POST", "/api/v1/push/trace",
			map[string]any{"messages": []any{[]any{map[string]any{"role": "user", "content": []any{
				map[string]any{"type": "image_url", "image_url": map[string]any{"url": "data:image/p<n>g;base64," + good}}}}}}},
			"messages[0][0].content[0].image_url.url"},
		{"snippet", "POST", "/api/v1/trace/snippets/new",
			map[string]any{"content": []any{map[string]any{"role": "user", "content": "base64_img: ***"}}},
			"content[0].content"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, body := ts.do(t, tc.method, tc.path, adminKey, tc.body)
			if st != 400 {
				t.Fatalf("status %d, want 400: %s", st, body)
			}
			var e struct{ Detail, Code, Path string }
			json.Unmarshal(body, &e)
			if e.Code != CodeInvalidRequest || e.Path != tc.wantPath || !strings.HasPrefix(e.Detail, tc.wantPath+": ") {
				t.Errorf("error %s, want path %s", body, tc.wantPath)
			}
		})
	}
	// Nothing of a rejected push is stored.
	st, body := ts.do(t, "GET", "/api/v1/dataset/list", adminKey, nil)
	if st != 200 || strings.TrimSpace(string(body)) != "[]" {
		t.Errorf("datasets after rejected pushes: %s", body)
	}
	// Append names the path in its own request.
	st, body = ts.do(t, "POST", "/api/v1/push/trace", adminKey, map[string]any{"messages": []any{[]any{map[string]any{"role": "user", "content": "hi"}}}})
	var pr struct{ ID []string }
	json.Unmarshal(body, &pr)
	st, body = ts.do(t, "POST", "/api/v1/trace/"+pr.ID[0]+"/messages", adminKey, map[string]any{"messages": []any{map[string]any{"role": "user", "content": "ok"}, map[string]any{"role": "user", "content": "base64_img: %%"}}})
	if st != 400 || !strings.Contains(string(body), `"path":"messages[1].content"`) {
		t.Errorf("append: %d %s", st, body)
	}
	// Upload names the line and the path.
	up := `{"messages": [{"role": "user", "content": "base64_img: ` + good + `"}]}` + "\n" + `{"messages": [{"role": "user", "content": "base64_img: !!"}]}` + "\n"
	st, body = ts.do(t, "POST", "/api/v1/dataset/upload?name=bad", adminKey, up)
	if st != 400 || !strings.Contains(string(body), "line 2") || !strings.Contains(string(body), "messages[0].content") {
		t.Errorf("upload: %d %s", st, body)
	}
}

// FuzzImages rewrites arbitrary image content (string content and a data
// URI part) and inlines the result again: every input is either rejected
// with a 400 naming a path under the event, or stored as blobs whose
// hashes match their bytes and that inline back to the same bytes.
func FuzzImages(f *testing.F) {
	png := base64.StdEncoding.EncodeToString(testPNG(f, 1))
	for _, s := range [][2]string{
		{"base64_img: " + png, "data:image/png;base64," + png},
		{"local_base64_img: " + png, "data:image/jpeg;base64,/9j/4AAQ"},
		{"base64_img: !!!", "data:image/png;base64,@@@"},
		{"base64_img:", "data:image/;base64,AAAA"},
		{"plain text", "https://example.com/a.png"},
		{"local_img_link: /api/v1/trace/image/_/t/" + strings.Repeat("a", 64) + ".png", "data:text/plain;base64,aGk="},
		{"base64_img: aGk", "DATA:IMAGE/PNG;charset=x;BASE64,aGk="},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, content, url string) {
		obj := trace.NewObject("role", "user", "content", content)
		parts := trace.NewObject("role", "user", "content", []trace.Value{
			trace.NewObject("type", "image_url", "image_url", trace.NewObject("url", url)),
		})
		var is ingest.Images
		for i, o := range []*trace.Object{obj, parts} {
			err := is.Rewrite(o, "tid", ingest.Pos{Trace: 0, Event: i})
			if err != nil {
				ae := toAPIError(err)
				if ae.Status != 400 || !strings.HasPrefix(ae.Detail, "messages[0]["+strconv.Itoa(i)+"].content") {
					t.Fatalf("error %v, want a 400 naming the content path", err)
				}
				return
			}
		}
		blobs := map[string]*store.Blob{}
		for _, b := range is.Blobs {
			if sha(b.Data) != b.SHA256 || len(b.Data) == 0 || len(b.Data) > ingest.MaxImageBytes {
				t.Fatalf("blob %s of %d bytes", b.SHA256, len(b.Data))
			}
			blobs[b.SHA256] = b
		}
		for _, o := range []*trace.Object{obj, parts} {
			if _, err := inlineEvent(o, func(s string) (*store.Blob, error) { return blobs[s], nil }); err != nil {
				t.Fatal(err)
			}
		}
		// What was an image inlines back to the same bytes.
		if _, ok := ingest.CutImagePrefix(content); ok {
			c, _ := obj.Get("content")
			b64, ok := ingest.CutImagePrefix(c.(string))
			data, err := ingest.DecodeImage(b64, "p")
			want, _ := ingest.DecodeImage(strings.TrimPrefix(strings.TrimPrefix(content, ingest.ImageBase64Prefix), imgInlinePrefix), "p")
			if !ok || err != nil || !bytes.Equal(data, want) {
				t.Fatalf("content %q inlined as %q", content, c)
			}
		}
	})
}
