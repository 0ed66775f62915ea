package otlp_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	oteltrace "go.opentelemetry.io/otel/trace"
	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/vigilhq/vigil/otlp"
)

// TestTwoConversations: spans of two conversations interleaved in one
// batch export (and in one OTel trace) never mix.
func TestTwoConversations(t *testing.T) {
	b := newBackend(t, sqliteStore, otlp.Config{})
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(b.url+"/api/v1/otlp/v1/traces"),
		otlptracehttp.WithHeaders(map[string]string{"Authorization": "Bearer " + b.key}))
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", "two"))))
	defer tp.Shutdown(context.Background())
	tr := tp.Tracer("test")
	ctx, root := tr.Start(context.Background(), "workflow")
	t0 := time.Now()
	for i := range 3 {
		for _, conv := range []string{"a", "b"} {
			input := fmt.Sprintf(`[{"role":"user","parts":[{"type":"text","content":"%s question %d"}]}]`, conv, i)
			output := fmt.Sprintf(`[{"role":"assistant","parts":[{"type":"text","content":"%s answer %d"}]}]`, conv, i)
			at := t0.Add(time.Duration(i*10) * time.Second)
			_, sp := tr.Start(ctx, "chat", oteltrace.WithTimestamp(at), oteltrace.WithAttributes(
				attribute.String("gen_ai.operation.name", "chat"), attribute.String("gen_ai.conversation.id", conv),
				attribute.String("gen_ai.input.messages", input), attribute.String("gen_ai.output.messages", output)))
			sp.End(oteltrace.WithTimestamp(at.Add(time.Second)))
		}
	}
	root.End()
	if err := tp.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	ts := b.traces(t, "two")
	if len(ts) != 2 {
		t.Fatalf("%d traces, want 2", len(ts))
	}
	for _, tr := range ts {
		conv := strings.TrimPrefix(tr.SessionKey, "otel:")
		var want []string
		for i := range 3 {
			want = append(want, fmt.Sprintf(`user "%s question %d"`, conv, i), fmt.Sprintf(`assistant "%s answer %d"`, conv, i))
		}
		if got := summary(tr.events); got != strings.Join(want, "\n") {
			t.Errorf("conversation %s:\n%s", conv, got)
		}
	}
}

func post(t testing.TB, url, key, ctype string, body []byte, hdr map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, bytes.NewReader(body))
	req.Header.Set("Content-Type", ctype)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp, out
}

func kv(k, v string) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}}
}

func id(n int, size int) []byte {
	b := make([]byte, size)
	b[size-1] = byte(n)
	b[0] = 1
	return b
}

// spanReq is a request of spans with the given attributes (one span
// each), trace id 1, span ids from first.
func spanReq(service string, first int, attrs ...[]*commonpb.KeyValue) *coltracepb.ExportTraceServiceRequest {
	var spans []*tracepb.Span
	base := uint64(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	for i, a := range attrs {
		spans = append(spans, &tracepb.Span{TraceId: id(1, 16), SpanId: id(first+i, 8), Name: "chat",
			StartTimeUnixNano: base + uint64(i)*1e9, EndTimeUnixNano: base + uint64(i)*1e9 + 5e8, Attributes: a})
	}
	return &coltracepb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{
		Resource:   &resourcepb.Resource{Attributes: []*commonpb.KeyValue{kv("service.name", service)}},
		ScopeSpans: []*tracepb.ScopeSpans{{Spans: spans}},
	}}}
}

func chatAttrs(user, answer string) []*commonpb.KeyValue {
	return []*commonpb.KeyValue{kv("gen_ai.operation.name", "chat"),
		kv("gen_ai.input.messages", `[{"role":"user","parts":[{"type":"text","content":"`+user+`"}]}]`),
		kv("gen_ai.output.messages", `[{"role":"assistant","parts":[{"type":"text","content":"`+answer+`"}]}]`)}
}

// TestErrors: the status codes of §11 and partialSuccess.
func TestErrors(t *testing.T) {
	b := newBackend(t, sqliteStore, otlp.Config{MaxBodyBytes: 4096})
	good, _ := proto.Marshal(spanReq("errs", 1, chatAttrs("hi", "hello")))
	for _, c := range []struct {
		name, ctype, key string
		body             []byte
		hdr              map[string]string
		want             int
	}{
		{"no key", "application/x-protobuf", "", good, nil, 401},
		{"bad key", "application/x-protobuf", "vgl-nope", good, nil, 401},
		{"text/plain", "text/plain", b.key, good, nil, 415},
		{"undecodable protobuf", "application/x-protobuf", b.key, []byte{0xff, 0xff, 0xff}, nil, 400},
		{"undecodable JSON", "application/json", b.key, []byte(`{"resourceSpans": [`), nil, 400},
		{"bad gzip", "application/x-protobuf", b.key, []byte("not gzip"), map[string]string{"Content-Encoding": "gzip"}, 400},
		{"unknown encoding", "application/x-protobuf", b.key, good, map[string]string{"Content-Encoding": "br"}, 415},
		{"too large", "application/json", b.key, bytes.Repeat([]byte(" "), 5000), nil, 413},
		{"ok", "application/x-protobuf", b.key, good, nil, 200},
		{"key header", "application/x-protobuf", "", good, map[string]string{"Vigil-Api-Key": b.key}, 200},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, _ := post(t, b.url+"/v1/traces", c.key, c.ctype, c.body, c.hdr)
			if resp.StatusCode != c.want {
				t.Errorf("status %d, want %d", resp.StatusCode, c.want)
			}
		})
	}
	// A span that cannot be mapped is rejected; the others land.
	req := spanReq("partial", 10, chatAttrs("q1", "a1"),
		[]*commonpb.KeyValue{kv("gen_ai.operation.name", "chat"), kv("gen_ai.input.messages", `[{"role":`)},
		[]*commonpb.KeyValue{kv("http.method", "GET")}) // irrelevant: dropped, not rejected
	body, _ := proto.Marshal(req)
	resp, out := post(t, b.url+"/v1/traces", b.key, "application/x-protobuf", body, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	var er coltracepb.ExportTraceServiceResponse
	if err := proto.Unmarshal(out, &er); err != nil {
		t.Fatal(err)
	}
	if er.GetPartialSuccess().GetRejectedSpans() != 1 || !strings.Contains(er.GetPartialSuccess().GetErrorMessage(), "gen_ai.input.messages") {
		t.Errorf("partialSuccess = %v", er.GetPartialSuccess())
	}
	if ts := b.traces(t, "partial"); len(ts) != 1 || summary(ts[0].events) != "user \"q1\"\nassistant \"a1\"" {
		t.Errorf("traces: %d", len(ts))
	}
	// JSON response for a JSON request.
	resp, out = post(t, b.url+"/v1/traces", b.key, "application/json", []byte(`{"resourceSpans":[]}`), nil)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" || !bytes.HasPrefix(out, []byte("{")) {
		t.Errorf("JSON response: %d %s %q", resp.StatusCode, resp.Header.Get("Content-Type"), out)
	}
}

// TestDatasetResolution: header, then vigil.dataset, then service.name,
// then the default; bad characters become "-".
func TestDatasetResolution(t *testing.T) {
	for _, c := range []struct{ header, resource, def, want string }{
		{"from-header", "res", "otel", "from-header"},
		{"", "my service.v2", "otel", "my-service-v2"},
		{"", "", "otel", "otel"},
		{"", "", "", "otel"},
	} {
		if got := otlp.DatasetName(c.header, c.resource, c.def); got != c.want {
			t.Errorf("DatasetName(%q, %q, %q) = %q, want %q", c.header, c.resource, c.def, got, c.want)
		}
	}
	b := newBackend(t, sqliteStore, otlp.Config{DefaultDataset: "fallback"})
	req := spanReq("svc name", 1, chatAttrs("q", "a"))
	req.ResourceSpans[0].Resource.Attributes = append(req.ResourceSpans[0].Resource.Attributes, kv("vigil.dataset", "from-resource"))
	body, _ := proto.Marshal(req)
	post(t, b.url+"/v1/traces", b.key, "application/x-protobuf", body, nil)
	b.traces(t, "from-resource")
	body, _ = proto.Marshal(spanReq("svc name", 5, chatAttrs("q", "a")))
	post(t, b.url+"/v1/traces", b.key, "application/x-protobuf", body, map[string]string{"Vigil-Dataset": "hdr"})
	b.traces(t, "hdr")
	req = spanReq("", 9, chatAttrs("q", "a"))
	req.ResourceSpans[0].Resource = nil
	body, _ = proto.Marshal(req)
	post(t, b.url+"/v1/traces", b.key, "application/x-protobuf", body, nil)
	b.traces(t, "fallback")
}

// TestBackpressure: a burst larger than the queue gets 429 with
// Retry-After; clients that retry lose nothing.
func TestBackpressure(t *testing.T) {
	b := newBackend(t, sqliteStore, otlp.Config{QueueSize: 4, Workers: 1})
	const clients = 24
	var rejected atomic.Int64
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := spanReq("burst", 1, chatAttrs(fmt.Sprintf("c%d q1", c), "a"), chatAttrs(fmt.Sprintf("c%d q2", c), "a2"), chatAttrs(fmt.Sprintf("c%d q3", c), "a3"))
			for _, rs := range req.ResourceSpans[0].ScopeSpans[0].Spans {
				rs.TraceId = id(c+1, 16)
				rs.SpanId[1] = byte(c)
			}
			body, _ := proto.Marshal(req)
			for attempt := 0; ; attempt++ {
				resp, _ := post(t, b.url+"/v1/traces", b.key, "application/x-protobuf", body, nil)
				if resp.StatusCode == 200 {
					return
				}
				if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" {
					t.Errorf("status %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
					return
				}
				rejected.Add(1)
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	if rejected.Load() == 0 {
		t.Error("no request was refused: the burst did not exceed the queue")
	}
	ts := b.traces(t, "burst")
	if len(ts) != clients {
		t.Fatalf("%d traces, want %d", len(ts), clients)
	}
	for _, tr := range ts {
		if len(tr.events) != 6 {
			t.Errorf("trace %s: %d events, want 6", tr.SessionKey, len(tr.events))
		}
	}
}

// logsReq is a logs request of GenAI message records for span spanN of
// trace 1 (the OTel contrib OpenAI instrumentation's form: content in
// log records, the body a map).
func logsReq(spanN int, recs ...*logspb.LogRecord) *collogspb.ExportLogsServiceRequest {
	for _, r := range recs {
		r.TraceId, r.SpanId = id(1, 16), id(spanN, 8)
	}
	return &collogspb.ExportLogsServiceRequest{ResourceLogs: []*logspb.ResourceLogs{{
		Resource:  &resourcepb.Resource{Attributes: []*commonpb.KeyValue{kv("service.name", "logs")}},
		ScopeLogs: []*logspb.ScopeLogs{{LogRecords: recs}},
	}}}
}

func kvlist(kvs ...*commonpb.KeyValue) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_KvlistValue{KvlistValue: &commonpb.KeyValueList{Values: kvs}}}
}

func rec(name string, sec int, body *commonpb.AnyValue) *logspb.LogRecord {
	return &logspb.LogRecord{EventName: name, TimeUnixNano: uint64(time.Date(2026, 1, 1, 0, 0, sec, 0, time.UTC).UnixNano()), Body: body}
}

// TestLogs: message content in log records is attached to its span,
// whether the records come before or after the span; a retried logs
// export adds nothing; records whose span never comes are mapped alone.
func TestLogs(t *testing.T) {
	b := newBackend(t, sqliteStore, otlp.Config{LogWait: 200 * time.Millisecond})
	chat := []*commonpb.KeyValue{kv("gen_ai.operation.name", "chat"), kv("gen_ai.system", "openai"), kv("gen_ai.request.model", "gpt-4o-mini")}
	turn := func(spanN int, q, a string) []*logspb.LogRecord {
		return []*logspb.LogRecord{
			rec("gen_ai.user.message", spanN*10, kvlist(kv("content", q))),
			rec("gen_ai.choice", spanN*10+1, kvlist(kv("finish_reason", "stop"), &commonpb.KeyValue{Key: "message", Value: kvlist(kv("role", "assistant"), kv("content", a))})),
		}
	}
	send := func(path string, m proto.Message) {
		body, _ := proto.Marshal(m)
		if resp, out := post(t, b.url+path, b.key, "application/x-protobuf", body, nil); resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, out)
		}
	}
	// Records first, then their span.
	send("/v1/logs", logsReq(1, turn(1, "q1", "a1")...))
	send("/v1/traces", spanReq("logs", 1, chat))
	// Span first, then its records (history included: deduplicated).
	send("/v1/traces", spanReq("logs", 2, chat))
	// The instrumentation logs the whole history at the call's start.
	recs := []*logspb.LogRecord{
		rec("gen_ai.user.message", 20, kvlist(kv("content", "q1"))),
		rec("gen_ai.assistant.message", 20, kvlist(kv("content", "a1"))),
		rec("gen_ai.user.message", 20, kvlist(kv("content", "q2"))),
		rec("gen_ai.choice", 21, kvlist(kv("finish_reason", "stop"), &commonpb.KeyValue{Key: "message", Value: kvlist(kv("role", "assistant"), kv("content", "a2"))})),
	}
	send("/v1/logs", logsReq(2, recs...))
	// A retry of that logs export.
	send("/v1/logs", logsReq(2, recs...))
	want := "user \"q1\"\nassistant \"a1\"\nuser \"q2\"\nassistant \"a2\""
	if ts := b.traces(t, "logs"); len(ts) != 1 || summary(ts[0].events) != want {
		t.Fatalf("got %d traces: %s", len(ts), summary(ts[0].events))
	}
	// Records whose span never comes: mapped on their own after LogWait.
	send("/v1/logs", logsReq(7, turn(3, "q3", "a3")...))
	waitFor(t, "orphan records", func() bool {
		ts := b.traces(t, "logs")
		return len(ts) == 1 && len(ts[0].events) == 6
	})
	if ts := b.traces(t, "logs"); !strings.HasSuffix(summary(ts[0].events), "user \"q3\"\nassistant \"a3\"") {
		t.Errorf("orphans: %s", summary(ts[0].events))
	}
}

// TestGuardrail: apply_guardrail spans and gen_ai.guardrail.result
// events become otel-guardrail annotations on <root>.
func TestGuardrail(t *testing.T) {
	b := newBackend(t, sqliteStore, otlp.Config{})
	req := spanReq("guard", 1, chatAttrs("q", "a"),
		[]*commonpb.KeyValue{kv("gen_ai.operation.name", "apply_guardrail"), kv("gen_ai.guardrail.name", "pii"), kv("gen_ai.guardrail.decision", "deny")})
	body, _ := proto.Marshal(req)
	post(t, b.url+"/v1/traces", b.key, "application/x-protobuf", body, nil)
	ts := b.traces(t, "guard")
	if len(ts) != 1 {
		t.Fatalf("%d traces", len(ts))
	}
	anns, err := b.st.ListAnnotations(context.Background(), ts[0].ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(anns) != 1 || anns[0].Source != "otel-guardrail" || anns[0].Address != "<root>" || !strings.Contains(anns[0].Content, "pii: deny") {
		for _, a := range anns {
			t.Logf("%+v", a)
		}
		t.Fatalf("annotations: %d", len(anns))
	}
}

// TestRetryAfterRestart: a second handler (a restarted server, or
// another process on the same database) recognises spans the first one
// stored, and continues the conversation from the stored trace.
func TestRetryAfterRestart(t *testing.T) {
	for _, kind := range []storeKind{sqliteStore, postgresStore} {
		t.Run(string(kind), func(t *testing.T) {
			b := newBackend(t, kind, otlp.Config{})
			first, _ := proto.Marshal(spanReq("restart", 1, chatAttrs("q1", "a1")))
			post(t, b.url+"/v1/traces", b.key, "application/x-protobuf", first, nil)
			h2 := otlp.New(b.srv, otlp.Config{})
			defer h2.Close()
			s2 := httptest.NewServer(h2)
			defer s2.Close()
			if resp, out := post(t, s2.URL+"/v1/traces", b.key, "application/x-protobuf", first, nil); resp.StatusCode != 200 {
				t.Fatalf("retry: %d %s", resp.StatusCode, out)
			}
			next := spanReq("restart", 2, []*commonpb.KeyValue{kv("gen_ai.operation.name", "chat"),
				kv("gen_ai.input.messages", `[{"role":"user","parts":[{"type":"text","content":"q1"}]},{"role":"assistant","parts":[{"type":"text","content":"a1"}]},{"role":"user","parts":[{"type":"text","content":"q2"}]}]`),
				kv("gen_ai.output.messages", `[{"role":"assistant","parts":[{"type":"text","content":"a2"}]}]`)})
			body, _ := proto.Marshal(next)
			post(t, s2.URL+"/v1/traces", b.key, "application/x-protobuf", body, nil)
			want := "user \"q1\"\nassistant \"a1\"\nuser \"q2\"\nassistant \"a2\""
			if ts := b.traces(t, "restart"); len(ts) != 1 || summary(ts[0].events) != want {
				t.Fatalf("%d traces: %s", len(ts), summary(ts[0].events))
			}
		})
	}
}

// TestStoreDown: when the store fails, the exporter gets 503 with
// Retry-After (and retries), never a 200 for spans that were not stored.
func TestStoreDown(t *testing.T) {
	b := newBackend(t, sqliteStore, otlp.Config{})
	body, _ := proto.Marshal(spanReq("down", 1, chatAttrs("q", "a")))
	if resp, _ := post(t, b.url+"/v1/traces", b.key, "application/x-protobuf", body, nil); resp.StatusCode != 200 {
		t.Fatalf("first: %d", resp.StatusCode)
	}
	b.st.Close() // the key stays cached by the server
	body, _ = proto.Marshal(spanReq("down", 5, chatAttrs("q2", "a2")))
	resp, _ := post(t, b.url+"/v1/traces", b.key, "application/x-protobuf", body, nil)
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
		t.Errorf("status %d, Retry-After %q; want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
}

// TestAgentSpans: an agent span's messages are mapped only in a trace
// without chat spans; with chat spans they are not repeated, and its
// name names the trace.
func TestAgentSpans(t *testing.T) {
	b := newBackend(t, sqliteStore, otlp.Config{})
	agent := func(conv string) []*commonpb.KeyValue {
		return []*commonpb.KeyValue{kv("gen_ai.operation.name", "invoke_agent"), kv("gen_ai.agent.name", "planner"), kv("gen_ai.conversation.id", conv),
			kv("gen_ai.input.messages", `[{"role":"user","parts":[{"type":"text","content":"plan a trip"}]}]`),
			kv("gen_ai.output.messages", `[{"role":"assistant","parts":[{"type":"text","content":"done"}]}]`)}
	}
	chat := append(chatAttrs("plan a trip", "done"), kv("gen_ai.conversation.id", "with-chat"))
	body, _ := proto.Marshal(spanReq("agents", 1, agent("alone")))
	post(t, b.url+"/v1/traces", b.key, "application/x-protobuf", body, nil)
	body, _ = proto.Marshal(spanReq("agents", 5, agent("with-chat"), chat))
	post(t, b.url+"/v1/traces", b.key, "application/x-protobuf", body, nil)
	ts := b.traces(t, "agents")
	if len(ts) != 2 {
		t.Fatalf("%d traces", len(ts))
	}
	for _, tr := range ts {
		if got := summary(tr.events); got != "user \"plan a trip\"\nassistant \"done\"" {
			t.Errorf("%s: %s", tr.SessionKey, got)
		}
		if tr.Name != "planner" {
			t.Errorf("%s: name %q", tr.SessionKey, tr.Name)
		}
	}
}

// TestNoContent: chat spans recorded without message content (the
// instrumentations' default) still make a trace with model and usage.
func TestNoContent(t *testing.T) {
	b := newBackend(t, sqliteStore, otlp.Config{})
	body, _ := proto.Marshal(spanReq("nocontent", 1, []*commonpb.KeyValue{kv("gen_ai.operation.name", "chat"), kv("gen_ai.request.model", "gpt-4o"),
		{Key: "gen_ai.usage.input_tokens", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: 7}}}}))
	if resp, out := post(t, b.url+"/v1/traces", b.key, "application/x-protobuf", body, nil); resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, out)
	}
	ts := b.traces(t, "nocontent")
	if len(ts) != 1 || len(ts[0].events) != 0 || ts[0].meta["model"] != "gpt-4o" {
		t.Fatalf("%d traces %+v", len(ts), ts)
	}
}
