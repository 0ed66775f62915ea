package otlp

import (
	"bytes"
	"testing"

	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// The hand-written envelopes read and write exactly what the generated
// collector messages do.
func TestEnvelopeMatchesCollector(t *testing.T) {
	span := func(name string) *tracepb.Span {
		return &tracepb.Span{TraceId: bytes.Repeat([]byte{1}, 16), SpanId: bytes.Repeat([]byte{2}, 8), Name: name}
	}
	treq := &coltracepb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{
		{ScopeSpans: []*tracepb.ScopeSpans{{Spans: []*tracepb.Span{span("a"), span("b")}}}},
		{ScopeSpans: []*tracepb.ScopeSpans{{Spans: []*tracepb.Span{span("c")}}}},
	}}
	lreq := &collogspb.ExportLogsServiceRequest{ResourceLogs: []*logspb.ResourceLogs{
		{ScopeLogs: []*logspb.ScopeLogs{{LogRecords: []*logspb.LogRecord{{EventName: "gen_ai.user.message",
			Body: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: "hi"}}}}}}},
	}}
	for _, enc := range []Encoding{Protobuf, JSON} {
		var tb, lb []byte
		var err error
		if enc == Protobuf {
			tb, _ = proto.Marshal(treq)
			lb, _ = proto.Marshal(lreq)
			// An unknown field after the repeated one is skipped.
			tb = protowire.AppendString(protowire.AppendTag(tb, 9, protowire.BytesType), "x")
		} else {
			tb, _ = protojson.Marshal(treq)
			lb, _ = protojson.Marshal(lreq)
		}
		got, err := decodeTraces(tb, enc)
		if err != nil {
			t.Fatalf("enc %d: decodeTraces: %v", enc, err)
		}
		if !proto.Equal(&coltracepb.ExportTraceServiceRequest{ResourceSpans: got.ResourceSpans}, treq) {
			t.Errorf("enc %d: traces decoded as %v", enc, got.ResourceSpans)
		}
		gotl, err := decodeLogs(lb, enc)
		if err != nil {
			t.Fatalf("enc %d: decodeLogs: %v", enc, err)
		}
		if !proto.Equal(&collogspb.ExportLogsServiceRequest{ResourceLogs: gotl.ResourceLogs}, lreq) {
			t.Errorf("enc %d: logs decoded as %v", enc, gotl.ResourceLogs)
		}
	}
	for _, bad := range [][]byte{{0x0a, 0x05, 0x01}, {0xff}, {0x0a, 0x02, 0xff, 0xff}} {
		if _, err := decodeTraces(bad, Protobuf); err == nil {
			t.Errorf("decodeTraces(%x) accepted", bad)
		}
	}

	for _, tc := range []struct {
		rejected int
		msg      string
	}{{0, ""}, {3, "3 spans cannot be mapped"}, {1, ""}} {
		want := &coltracepb.ExportTraceServiceResponse{}
		if tc.rejected > 0 {
			want.PartialSuccess = &coltracepb.ExportTracePartialSuccess{RejectedSpans: int64(tc.rejected), ErrorMessage: tc.msg}
		}
		got := &coltracepb.ExportTraceServiceResponse{}
		if err := proto.Unmarshal(encodeResponse(Protobuf, "rejectedSpans", tc.rejected, tc.msg), got); err != nil || !proto.Equal(got, want) {
			t.Errorf("protobuf response %+v: %v %v", tc, got, err)
		}
		got = &coltracepb.ExportTraceServiceResponse{}
		if err := protojson.Unmarshal(encodeResponse(JSON, "rejectedSpans", tc.rejected, tc.msg), got); err != nil || !proto.Equal(got, want) {
			t.Errorf("JSON response %+v: %v %v", tc, got, err)
		}
		wantl := &collogspb.ExportLogsServiceResponse{}
		if tc.rejected > 0 {
			wantl.PartialSuccess = &collogspb.ExportLogsPartialSuccess{RejectedLogRecords: int64(tc.rejected), ErrorMessage: tc.msg}
		}
		gotl := &collogspb.ExportLogsServiceResponse{}
		if err := protojson.Unmarshal(encodeResponse(JSON, "rejectedLogRecords", tc.rejected, tc.msg), gotl); err != nil || !proto.Equal(gotl, wantl) {
			t.Errorf("JSON logs response %+v: %v %v", tc, gotl, err)
		}
	}
}
