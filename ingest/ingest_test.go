package ingest_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vigilhq/vigil/ingest"
	"github.com/vigilhq/vigil/ledger"
	"github.com/vigilhq/vigil/store"
	"github.com/vigilhq/vigil/store/sqlite"
)

// newIngester opens a real SQLite store with one user and returns an
// Ingester writing to it, the store and the user id.
func newIngester(t *testing.T) (*ingest.Ingester, store.Store, string, ed25519.PublicKey) {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "vigil.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	u := &store.User{Username: "alice", Role: "member"}
	if err := st.CreateUser(ctx, u); err != nil {
		t.Fatal(err)
	}
	pub, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return ingest.New(st, key, ingest.Config{}), st, u.ID, pub
}

// verifySession checks that the session's receipts form a valid chain
// signed by pub, and returns how many there are.
func verifySession(t *testing.T, st store.Store, sessionID string, pub ed25519.PublicKey) int {
	t.Helper()
	rs, err := st.ListReceipts(context.Background(), sessionID, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	parsed := make([]*ledger.Receipt, len(rs))
	for i, r := range rs {
		if parsed[i], err = ledger.ParseReceipt([]byte(r.Text)); err != nil {
			t.Fatalf("receipt %d: %v", i, err)
		}
	}
	res, err := ledger.VerifyChain(parsed, ledger.VerifyOptions{PublicKey: pub, SessionID: sessionID})
	if err != nil || !res.Valid {
		t.Fatalf("chain of %s: %+v, %v", sessionID, res, err)
	}
	return len(rs)
}

func prepare(t *testing.T, events string, traceID string) *ingest.Prepared {
	t.Helper()
	var warn ingest.Warnings
	pe, err := ingest.Prepare([]byte(events), ingest.TraceOptions{TraceID: traceID}, &warn)
	if err != nil {
		t.Fatalf("Prepare(%s): %v", events, err)
	}
	return pe
}

// TestPushAppend pushes a trace through the Ingester, appends to it, and
// checks the stored events, the tool registry and the receipt chain.
func TestPushAppend(t *testing.T) {
	ctx := context.Background()
	in, st, owner, pub := newIngester(t)
	id := store.NewID()
	pe := prepare(t, `[{"role":"user","content":"hi","message_id":"m1"},
		{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"search","arguments":{"q":"x"}}}]}]`, id)
	res, err := in.Push(ctx, ingest.PushRequest{PushRequest: store.PushRequest{
		OwnerID: owner, DatasetName: "ds", CreateIfMissing: true,
		Traces: []store.NewTrace{{ID: id, Messages: pe.Messages}}, Tools: ingest.ToolList(pe.Tools),
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Traces) != 1 || res.Traces[0].ID != id || res.Dataset == nil || res.Dataset.Name != "ds" {
		t.Fatalf("push result %+v", res)
	}
	tr, err := st.GetTrace(ctx, id, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Messages) != 2 || tr.Messages[0].ID != "m1" {
		t.Fatalf("stored messages %+v", tr.Messages)
	}
	// The assistant message has a node per tool call besides its own.
	if n := len(pe.Messages[1].NodeIDs); n != 2 {
		t.Errorf("assistant message has %d node ids, want 2", n)
	}
	if got := pe.Tools["search"]; got == nil || got.Count != 1 || strings.Join(got.ArgumentKeys, ",") != "q" {
		t.Errorf("tools %+v", pe.Tools)
	}
	if n := verifySession(t, st, tr.SessionID, pub); n != 2 {
		t.Fatalf("%d receipts after push, want 2", n)
	}

	// Append two events out of order, one reusing an id: they are sorted
	// by timestamp, the clashing id is replaced with a warning, and the
	// chain continues.
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var warn ingest.Warnings
	ap, err := ingest.PrepareAppend(tr, []byte(`[{"role":"user","content":"late","timestamp":"2026-01-02T00:00:02Z","message_id":"m1"},
		{"role":"user","content":"early","timestamp":"2026-01-02 00:00:01"}]`), now, "messages", &warn)
	if err != nil {
		t.Fatal(err)
	}
	if len(warn) != 1 || warn[0].Message != 2 || !strings.Contains(warn[0].Detail, "message_id") {
		t.Errorf("warnings %+v, want one about message 2's id", warn)
	}
	ares, err := in.Append(ctx, ingest.AppendRequest{Trace: tr, Events: ap, Time: now})
	if err != nil {
		t.Fatal(err)
	}
	var contents []string
	for _, m := range ares.Messages {
		var v struct {
			Content   string `json:"content"`
			Timestamp string `json:"timestamp"`
		}
		if err := json.Unmarshal(m.Data, &v); err != nil {
			t.Fatal(err)
		}
		contents = append(contents, v.Content+"@"+v.Timestamp)
		if m.ID == "m1" {
			t.Errorf("appended message kept the clashing id m1")
		}
	}
	if got, want := strings.Join(contents, " "), "early@2026-01-02T00:00:01.000000Z late@2026-01-02T00:00:02.000000Z"; got != want {
		t.Errorf("appended %q, want %q", got, want)
	}
	if n := verifySession(t, st, tr.SessionID, pub); n != 4 {
		t.Fatalf("%d receipts after append, want 4", n)
	}
}

// TestPushPrepareHook pushes with the store's Prepare hook (the large
// push path): messages are filled in inside the transaction and sealed
// there.
func TestPushPrepareHook(t *testing.T) {
	ctx := context.Background()
	in, st, owner, pub := newIngester(t)
	ids := []string{store.NewID(), store.NewID()}
	raws := []string{`[{"role":"user","content":"a"}]`, `[{"role":"user","content":"b"},{"role":"assistant","content":"c"}]`}
	calls := 0
	res, err := in.Push(ctx, ingest.PushRequest{PushRequest: store.PushRequest{
		OwnerID: owner, DatasetName: "big", CreateIfMissing: true,
		Traces: []store.NewTrace{{ID: ids[0]}, {ID: ids[1]}},
		Prepare: func(i int, nt *store.NewTrace) error {
			calls++
			pe, err := ingest.Prepare([]byte(raws[i]), ingest.TraceOptions{TraceIdx: i, TraceID: nt.ID}, new(ingest.Warnings))
			if err != nil {
				return err
			}
			nt.Messages = pe.Messages
			return nil
		},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if calls < 2 || len(res.Traces) != 2 {
		t.Fatalf("%d Prepare calls, %d traces", calls, len(res.Traces))
	}
	for i, want := range []int{1, 2} {
		tr, err := st.GetTrace(ctx, ids[i], false)
		if err != nil {
			t.Fatal(err)
		}
		if n := verifySession(t, st, tr.SessionID, pub); n != want {
			t.Errorf("trace %d: %d receipts, want %d", i, n, want)
		}
	}
}

// TestImages checks that inline images become blob links and that the
// Ingester stores the blobs they link.
func TestImages(t *testing.T) {
	ctx := context.Background()
	in, st, owner, _ := newIngester(t)
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
	b64 := base64.StdEncoding.EncodeToString(png)
	id := store.NewID()
	pe := prepare(t, `[{"role":"user","content":"base64_img: `+b64+`"},
		{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,`+b64+`"}},{"type":"image_url","image_url":{"url":"https://example.com/a.png"}}]}]`, id)
	if len(pe.Images.Blobs) != 1 {
		t.Fatalf("%d blobs, want 1 (the same image twice)", len(pe.Images.Blobs))
	}
	sum := pe.Images.Blobs[0].SHA256
	link := ingest.ImageRoute + "_/" + id + "/" + sum + ".png"
	for i, want := range []string{`"content":"local_img_link: ` + link + `"`, `"url":"` + link + `"`} {
		if !strings.Contains(string(pe.Messages[i].Data), want) {
			t.Errorf("event %d = %s, want it to hold %s", i, pe.Messages[i].Data, want)
		}
	}
	if !strings.Contains(string(pe.Messages[1].Data), `"url":"https://example.com/a.png"`) {
		t.Errorf("http URL rewritten: %s", pe.Messages[1].Data)
	}
	if _, err := in.Push(ctx, ingest.PushRequest{
		PushRequest: store.PushRequest{OwnerID: owner, Traces: []store.NewTrace{{ID: id, Messages: pe.Messages}}},
		Blobs:       pe.Images.Blobs,
	}); err != nil {
		t.Fatal(err)
	}
	b, err := st.GetBlob(ctx, owner, sum)
	if err != nil || string(b.Data) != string(png) || b.ContentType != "image/png" {
		t.Fatalf("stored blob %+v, %v", b, err)
	}
}

// TestDecodeImage covers the accepted base64 forms.
func TestDecodeImage(t *testing.T) {
	data := []byte{0xfb, 0xff, 0x01, 0x02}
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{base64.StdEncoding.EncodeToString(data), true},
		{base64.RawStdEncoding.EncodeToString(data), true},
		{base64.URLEncoding.EncodeToString(data), true},
		{base64.RawURLEncoding.EncodeToString(data), true},
		{" +/8B\nAg== ", true},
		{"!!!", false},
		{"", false},
		{"  \n", false},
		{"+/8BAg=", false},
	} {
		got, err := ingest.DecodeImage(tc.in, "p")
		if (err == nil) != tc.ok || (tc.ok && !bytes.Equal(got, data)) {
			t.Errorf("ingest.DecodeImage(%q) = %x, %v", tc.in, got, err)
		}
	}
}

// TestPrepareErrors covers input Prepare refuses: each is an *Error with
// its code and, where the value has one, its JSON path.
func TestPrepareErrors(t *testing.T) {
	for _, tc := range []struct {
		name, events string
		opt          ingest.TraceOptions
		code, path   string
		detail       string
	}{
		{"syntax", `[{"role":`, ingest.TraceOptions{TraceIdx: 3}, ingest.CodeInvalidJSON, "", "trace 3: "},
		{"invalid UTF-8", "[{\"role\":\"user\",\"content\":\"a\xff\"}]", ingest.TraceOptions{}, ingest.CodeInvalidJSON, "", "[0].content"},
		{"not a list", `{"role":"user"}`, ingest.TraceOptions{TraceIdx: 1}, ingest.CodeInvalidRequest, "", "trace 1 must be a list of objects"},
		{"not objects", `[1, 2]`, ingest.TraceOptions{}, ingest.CodeInvalidRequest, "", "trace 0 must be a list of objects"},
		{"bad base64", `[{"role":"user","content":"ok"},{"role":"user","content":"base64_img: !!!"}]`, ingest.TraceOptions{TraceIdx: 2}, ingest.CodeInvalidRequest, "messages[2][1].content", "invalid base64 image"},
		{"bad data URI type", `[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/p n g;base64,AAAA"}}]}]`, ingest.TraceOptions{Path: "content"}, ingest.CodeInvalidRequest, "content[0].content[0].image_url.url", "invalid image type"},
		{"strict timestamp", `[{"role":"user","timestamp":"yesterday"}]`, ingest.TraceOptions{StrictTimestamps: true}, ingest.CodeInvalidRequest, "", "Invalid timestamp format in message: yesterday"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ingest.Prepare([]byte(tc.events), tc.opt, new(ingest.Warnings))
			var ie *ingest.Error
			if !errors.As(err, &ie) {
				t.Fatalf("error %v (%T), want *ingest.Error", err, err)
			}
			if ie.Code != tc.code || ie.Path != tc.path || !strings.Contains(ie.Detail, tc.detail) {
				t.Errorf("error %+v, want code %s, path %q, detail holding %q", ie, tc.code, tc.path, tc.detail)
			}
		})
	}
}

// TestPrepareWarnings checks what Prepare tolerates: a lenient timestamp
// is kept with a warning, and warnings stop at MaxWarnings.
func TestPrepareWarnings(t *testing.T) {
	var warn ingest.Warnings
	if _, err := ingest.Prepare([]byte(`[{"role":"user","timestamp":"yesterday"}]`), ingest.TraceOptions{TraceIdx: 4}, &warn); err != nil {
		t.Fatal(err)
	}
	if len(warn) != 1 || warn[0].Trace != 4 || warn[0].Message != 0 || !strings.Contains(warn[0].Detail, "unparsable timestamp") {
		t.Fatalf("warnings %+v", warn)
	}
	events := strings.Repeat(`{"role":"user","message_id":"same"},`, ingest.MaxWarnings+10)
	warn = nil
	if _, err := ingest.Prepare([]byte("["+strings.TrimSuffix(events, ",")+"]"), ingest.TraceOptions{}, &warn); err != nil {
		t.Fatal(err)
	}
	if len(warn) != ingest.MaxWarnings {
		t.Fatalf("%d warnings, want the cap %d", len(warn), ingest.MaxWarnings)
	}
}

// FuzzPrepare feeds arbitrary event lists to Prepare: it either refuses
// them with an *Error or returns one message per event with unique ids.
func FuzzPrepare(f *testing.F) {
	for _, s := range []string{
		`[{"role":"user","content":"hi"}]`, `[{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":"{\"a\":1}"}}]}]`,
		`[{"message_id":"x"},{"message_id":"x"}]`, `[{"content":"base64_img: aGk="}]`, `[1]`, `{}`, `[`, "[{\"content\":\"\xff\"}]",
		`[{"timestamp":"2025-01-01 10:00:00"}]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var warn ingest.Warnings
		pe, err := ingest.Prepare(raw, ingest.TraceOptions{TraceID: "t"}, &warn)
		if err != nil {
			var ie *ingest.Error
			if !errors.As(err, &ie) || (ie.Code != ingest.CodeInvalidJSON && ie.Code != ingest.CodeInvalidRequest) {
				t.Fatalf("error %v (%T)", err, err)
			}
			return
		}
		if len(pe.Messages) != len(pe.Events) || len(warn) > ingest.MaxWarnings {
			t.Fatalf("%d messages for %d events, %d warnings", len(pe.Messages), len(pe.Events), len(warn))
		}
		ids := map[string]bool{}
		for _, m := range pe.Messages {
			if ids[m.ID] || m.ID == "" || len(m.NodeIDs) == 0 {
				t.Fatalf("message %+v: duplicate or missing id", m)
			}
			ids[m.ID] = true
		}
	})
}
