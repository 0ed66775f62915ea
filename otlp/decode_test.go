package otlp

import (
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"testing"

	"github.com/vigilhq/vigil/trace/convert"
)

// jsonHex and jsonB64 are the same request with hex ids (the OTLP JSON
// rule) and base64 ids (what protojson writes).
const (
	jsonHex = `{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"svc"}}]},
 "scopeSpans":[{"spans":[{"traceId":"5b8efff798038103d269b633813fc60c","spanId":"eee19b7ec3c1b174","parentSpanId":"eee19b7ec3c1b173",
 "name":"chat","startTimeUnixNano":"1700000000000000000","endTimeUnixNano":"1700000001000000000",
 "attributes":[{"key":"gen_ai.operation.name","value":{"stringValue":"chat"}},{"key":"gen_ai.usage.input_tokens","value":{"intValue":"12"}},
 {"key":"gen_ai.input.messages","value":{"stringValue":"[{\"role\":\"user\",\"parts\":[{\"type\":\"text\",\"content\":\"hi\"}]}]"}}]}]}]}]}`
	jsonB64 = `{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"svc"}}]},
 "scopeSpans":[{"spans":[{"traceId":"W47/95gDgQPSabYzgT/GDA==","spanId":"7uGbfsPBsXQ=","parentSpanId":"7uGbfsPBsXM=",
 "name":"chat","startTimeUnixNano":"1700000000000000000","endTimeUnixNano":"1700000001000000000",
 "attributes":[{"key":"gen_ai.operation.name","value":{"stringValue":"chat"}},{"key":"gen_ai.usage.input_tokens","value":{"intValue":"12"}},
 {"key":"gen_ai.input.messages","value":{"stringValue":"[{\"role\":\"user\",\"parts\":[{\"type\":\"text\",\"content\":\"hi\"}]}]"}}]}]}]}]}`
)

func TestJSONIDs(t *testing.T) {
	for name, src := range map[string]string{"hex": jsonHex, "base64": jsonB64} {
		req, err := decodeTraces([]byte(src), JSON)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		spans := spansOf(req)
		if len(spans) != 1 {
			t.Fatalf("%s: %d spans", name, len(spans))
		}
		s := spans[0]
		if s.TraceID != "5b8efff798038103d269b633813fc60c" || s.SpanID != "eee19b7ec3c1b174" || s.ParentSpanID != "eee19b7ec3c1b173" {
			t.Errorf("%s: ids %s %s %s", name, s.TraceID, s.SpanID, s.ParentSpanID)
		}
		if s.dataset != "svc" || s.Start.Unix() != 1700000000 || s.Attrs["gen_ai.usage.input_tokens"] != any(traceNumber("12")) {
			t.Errorf("%s: %+v", name, s)
		}
	}
}

// FuzzDecode: no body makes the decoders or the mapper panic, in either
// encoding, for traces and for logs.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(jsonHex), true)
	f.Add([]byte(jsonB64), true)
	if req, err := decodeTraces([]byte(jsonHex), JSON); err == nil {
		b, _ := marshalProto(&coltracepb.ExportTraceServiceRequest{ResourceSpans: req.ResourceSpans})
		f.Add(b, false)
	}
	f.Add([]byte(`{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"eventName":"gen_ai.user.message","traceId":"5b8efff798038103d269b633813fc60c","spanId":"eee19b7ec3c1b174","body":{"kvlistValue":{"values":[{"key":"content","value":{"stringValue":"hi"}}]}}}]}]}]}`), true)
	f.Fuzz(func(t *testing.T, data []byte, js bool) {
		enc := Protobuf
		if js {
			enc = JSON
		}
		if req, err := decodeTraces(data, enc); err == nil {
			for _, s := range spansOf(req) {
				if _, err := convert.FromOTelSpan(&s.OTelSpan); err != nil && containsPanic(err) {
					t.Fatal(err)
				}
			}
		}
		if req, err := decodeLogs(data, enc); err == nil {
			recs, _ := logsOf(req)
			for _, r := range recs {
				sp := logSpan([]*logRecord{r})
				if _, err := convert.FromOTelSpan(&sp.OTelSpan); err != nil && containsPanic(err) {
					t.Fatal(err)
				}
			}
		}
	})
}
