package otlp

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"strconv"
	"time"

	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/vigilhq/vigil/trace"
	"github.com/vigilhq/vigil/trace/convert"
)

// Encoding is a request's (and its response's) body encoding.
type Encoding uint8

// Encodings of OTLP/HTTP.
const (
	Protobuf Encoding = iota
	JSON
)

// ErrUnsupportedMediaType is the error of a Content-Type other than
// application/x-protobuf or application/json (HTTP 415).
var ErrUnsupportedMediaType = errors.New("unsupported content type: want application/x-protobuf or application/json")

// ErrTooLarge is the error of a body larger than the limit, after
// decompression (HTTP 413).
var ErrTooLarge = errors.New("request body too large")

// ErrDecode is matched (errors.Is) by the error of a body that cannot be
// decoded (HTTP 400).
var ErrDecode = errors.New("cannot decode OTLP request")

// encodingOf reads the Content-Type header.
func encodingOf(contentType string) (Encoding, error) {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return 0, ErrUnsupportedMediaType
	}
	switch mt {
	case "application/x-protobuf", "application/protobuf":
		return Protobuf, nil
	case "application/json":
		return JSON, nil
	}
	return 0, ErrUnsupportedMediaType
}

// readBody reads a body of at most limit bytes after decompression
// (contentEncoding "" / identity or gzip).
func readBody(r io.Reader, contentEncoding string, limit int64) ([]byte, error) {
	switch contentEncoding {
	case "", "identity":
	case "gzip":
		zr, err := gzip.NewReader(r)
		if err != nil {
			return nil, fmt.Errorf("%w: gzip: %v", ErrDecode, err)
		}
		defer zr.Close()
		r = zr
	default:
		return nil, fmt.Errorf("%w: Content-Encoding %q: want gzip or none", ErrUnsupportedMediaType, contentEncoding)
	}
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		var mbe interface{ MaxBytes() int64 }
		if errors.As(err, &mbe) {
			return nil, ErrTooLarge
		}
		return nil, fmt.Errorf("%w: read body: %v", ErrDecode, err)
	}
	if int64(len(b)) > limit {
		return nil, ErrTooLarge
	}
	return b, nil
}

var jsonOpts = protojson.UnmarshalOptions{DiscardUnknown: true}

func unmarshal(b []byte, enc Encoding, m proto.Message) error {
	if enc == Protobuf {
		if err := proto.Unmarshal(b, m); err != nil {
			return fmt.Errorf("%w: protobuf: %v", ErrDecode, err)
		}
		return nil
	}
	fixed, err := hexIDsToBase64(b)
	if err != nil {
		return fmt.Errorf("%w: JSON: %v", ErrDecode, err)
	}
	if err := jsonOpts.Unmarshal(fixed, m); err != nil {
		return fmt.Errorf("%w: JSON: %v", ErrDecode, err)
	}
	return nil
}

// idKeys are the JSON keys of trace and span ids. The OTLP JSON mapping
// writes them as hex; protojson reads bytes as base64, so hex ids are
// rewritten first. A 32- or 16-character hex string cannot be the base64
// of a 16- or 8-byte id (those are 24 and 12 characters long), so both
// forms are accepted unambiguously.
var idKeys = map[string]int{"traceId": 16, "trace_id": 16, "spanId": 8, "span_id": 8, "parentSpanId": 8, "parent_span_id": 8}

func hexIDsToBase64(b []byte) ([]byte, error) {
	if !bytes.Contains(b, []byte(`Id"`)) && !bytes.Contains(b, []byte(`_id"`)) {
		return b, nil
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if d.More() {
		return nil, errors.New("trailing data after the JSON value")
	}
	fixIDs(v, 0)
	return json.Marshal(v)
}

func fixIDs(v any, depth int) {
	if depth > 64 {
		return
	}
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if n, ok := idKeys[k]; ok {
				if s, ok := e.(string); ok && len(s) == 2*n {
					if raw, err := hex.DecodeString(s); err == nil {
						x[k] = base64.StdEncoding.EncodeToString(raw)
					}
				}
				continue
			}
			fixIDs(e, depth+1)
		}
	case []any:
		for _, e := range x {
			fixIDs(e, depth+1)
		}
	}
}

// value converts an OTLP AnyValue to a trace value.
func value(v *commonpb.AnyValue) trace.Value {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_BoolValue:
		return x.BoolValue
	case *commonpb.AnyValue_IntValue:
		return trace.Number(strconv.FormatInt(x.IntValue, 10))
	case *commonpb.AnyValue_DoubleValue:
		f := x.DoubleValue
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return strconv.FormatFloat(f, 'g', -1, 64)
		}
		return trace.Number(strconv.FormatFloat(f, 'g', -1, 64))
	case *commonpb.AnyValue_ArrayValue:
		vals := x.ArrayValue.GetValues()
		out := make([]trace.Value, len(vals))
		for i, e := range vals {
			out[i] = value(e)
		}
		return out
	case *commonpb.AnyValue_KvlistValue:
		kvs := x.KvlistValue.GetValues()
		o := &trace.Object{Members: make([]trace.Member, 0, len(kvs))}
		for _, kv := range kvs {
			o.Members = append(o.Members, trace.Member{Key: kv.GetKey(), Value: value(kv.GetValue())})
		}
		return o
	case *commonpb.AnyValue_BytesValue:
		return base64.StdEncoding.EncodeToString(x.BytesValue)
	}
	return nil
}

// attrMap converts attributes (a later duplicate key wins).
func attrMap(kvs []*commonpb.KeyValue) map[string]trace.Value {
	m := make(map[string]trace.Value, len(kvs))
	for _, kv := range kvs {
		m[kv.GetKey()] = value(kv.GetValue())
	}
	return m
}

func unixNano(n uint64) time.Time {
	if n == 0 || n > math.MaxInt64 {
		return time.Time{}
	}
	return time.Unix(0, int64(n)).UTC()
}

// span is one decoded span of a request, with where it came from.
type span struct {
	convert.OTelSpan
	// dataset is the resource's vigil.dataset, else its service.name
	// ("" for neither).
	dataset string
	service string
	// res is the mapped span (set by the writer).
	res *convert.OTelResult
	// logKeys are the keys of the log records attached to the span
	// (logs.go), remembered with its id so that a retried log export
	// adds nothing.
	logKeys []string
}

// spansOf flattens a trace request into spans.
func spansOf(req *traceRequest) []*span {
	var out []*span
	for _, rs := range req.GetResourceSpans() {
		resAttrs := attrMap(rs.GetResource().GetAttributes())
		ds, svc := resourceDataset(resAttrs)
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				sp := &span{dataset: ds, service: svc, OTelSpan: convert.OTelSpan{
					TraceID: hex.EncodeToString(s.GetTraceId()), SpanID: hex.EncodeToString(s.GetSpanId()),
					ParentSpanID: hex.EncodeToString(s.GetParentSpanId()), Name: s.GetName(),
					Start: unixNano(s.GetStartTimeUnixNano()), End: unixNano(s.GetEndTimeUnixNano()),
					Attrs: attrMap(s.GetAttributes()), Resource: resAttrs,
				}}
				for _, e := range s.GetEvents() {
					sp.Events = append(sp.Events, convert.OTelEvent{Name: e.GetName(), Time: unixNano(e.GetTimeUnixNano()), Attrs: attrMap(e.GetAttributes())})
				}
				out = append(out, sp)
			}
		}
	}
	return out
}

func resourceDataset(res map[string]trace.Value) (dataset, service string) {
	service, _ = res["service.name"].(string)
	dataset, _ = res["vigil.dataset"].(string)
	if dataset == "" {
		dataset = service
	}
	return dataset, service
}

// logRecord is one decoded log record of a request.
type logRecord struct {
	convert.OTelEvent
	traceID, spanID string
	dataset         string
	service         string
	resource        map[string]trace.Value
}

// logsOf flattens a logs request into records; relevant reports how
// many are GenAI message records (the others are counted and dropped).
func logsOf(req *logsRequest) (recs []*logRecord, dropped int) {
	for _, rl := range req.GetResourceLogs() {
		resAttrs := attrMap(rl.GetResource().GetAttributes())
		ds, svc := resourceDataset(resAttrs)
		for _, sl := range rl.GetScopeLogs() {
			for _, l := range sl.GetLogRecords() {
				attrs := attrMap(l.GetAttributes())
				name := l.GetEventName()
				if n, ok := attrs["event.name"].(string); ok && name == "" {
					name = n
				}
				if !convert.IsOTelMessageEvent(name) {
					dropped++
					continue
				}
				t := unixNano(l.GetTimeUnixNano())
				if t.IsZero() {
					t = unixNano(l.GetObservedTimeUnixNano())
				}
				body := value(l.GetBody())
				recs = append(recs, &logRecord{
					OTelEvent: convert.OTelEvent{Name: name, Time: t, Attrs: attrs, Body: body},
					traceID:   hex.EncodeToString(l.GetTraceId()), spanID: hex.EncodeToString(l.GetSpanId()),
					dataset: ds, service: svc, resource: resAttrs,
				})
			}
		}
	}
	return recs, dropped
}
