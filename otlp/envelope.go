package otlp

import (
	"encoding/json"
	"fmt"
	"strconv"

	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// The collector service envelopes (ExportTraceServiceRequest and its
// response, and the logs ones) are decoded and encoded here by hand: each
// is one repeated field, or one optional message of two fields. The
// generated collector packages would do the same, but they also hold the
// gRPC service stubs, which link gRPC and grpc-gateway into the binary and
// add their package initialisation to the start of every vigil command.

// traceRequest is an ExportTraceServiceRequest
// (opentelemetry.proto.collector.trace.v1): field 1, resource_spans.
type traceRequest struct{ ResourceSpans []*tracepb.ResourceSpans }

// GetResourceSpans returns the request's resource spans.
func (r *traceRequest) GetResourceSpans() []*tracepb.ResourceSpans { return r.ResourceSpans }

// logsRequest is an ExportLogsServiceRequest
// (opentelemetry.proto.collector.logs.v1): field 1, resource_logs.
type logsRequest struct{ ResourceLogs []*logspb.ResourceLogs }

// GetResourceLogs returns the request's resource logs.
func (r *logsRequest) GetResourceLogs() []*logspb.ResourceLogs { return r.ResourceLogs }

// decodeTraces decodes an ExportTraceServiceRequest.
func decodeTraces(b []byte, enc Encoding) (*traceRequest, error) {
	req := &traceRequest{}
	err := decodeEnvelope(b, enc, "resourceSpans", "resource_spans", func() proto.Message {
		rs := &tracepb.ResourceSpans{}
		req.ResourceSpans = append(req.ResourceSpans, rs)
		return rs
	})
	if err != nil {
		return nil, err
	}
	return req, nil
}

// decodeLogs decodes an ExportLogsServiceRequest.
func decodeLogs(b []byte, enc Encoding) (*logsRequest, error) {
	req := &logsRequest{}
	err := decodeEnvelope(b, enc, "resourceLogs", "resource_logs", func() proto.Message {
		rl := &logspb.ResourceLogs{}
		req.ResourceLogs = append(req.ResourceLogs, rl)
		return rl
	})
	if err != nil {
		return nil, err
	}
	return req, nil
}

// decodeEnvelope decodes a request whose field 1 (JSON key jsonKey, or
// its proto name protoKey) is a repeated message: next appends one item
// and returns it to be filled. Other fields are skipped, as an unknown
// field is.
func decodeEnvelope(b []byte, enc Encoding, jsonKey, protoKey string, next func() proto.Message) error {
	if enc == Protobuf {
		for len(b) > 0 {
			num, typ, n := protowire.ConsumeTag(b)
			if n < 0 {
				return fmt.Errorf("%w: protobuf: %v", ErrDecode, protowire.ParseError(n))
			}
			b = b[n:]
			if num == 1 && typ == protowire.BytesType {
				v, n := protowire.ConsumeBytes(b)
				if n < 0 {
					return fmt.Errorf("%w: protobuf: field 1: %v", ErrDecode, protowire.ParseError(n))
				}
				if err := proto.Unmarshal(v, next()); err != nil {
					return fmt.Errorf("%w: protobuf: %v", ErrDecode, err)
				}
				b = b[n:]
				continue
			}
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return fmt.Errorf("%w: protobuf: field %d: %v", ErrDecode, num, protowire.ParseError(n))
			}
			b = b[n:]
		}
		return nil
	}
	fixed, err := hexIDsToBase64(b)
	if err != nil {
		return fmt.Errorf("%w: JSON: %v", ErrDecode, err)
	}
	var env map[string]json.RawMessage
	if err := json.Unmarshal(fixed, &env); err != nil {
		return fmt.Errorf("%w: JSON: %v", ErrDecode, err)
	}
	raw, ok := env[jsonKey]
	if !ok {
		raw = env[protoKey]
	}
	var items []json.RawMessage
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &items); err != nil {
			return fmt.Errorf("%w: JSON: %s: %v", ErrDecode, jsonKey, err)
		}
	}
	for i, it := range items {
		if err := jsonOpts.Unmarshal(it, next()); err != nil {
			return fmt.Errorf("%w: JSON: %s[%d]: %v", ErrDecode, jsonKey, i, err)
		}
	}
	return nil
}

// encodeResponse encodes an Export…ServiceResponse: empty, or with
// partial_success (field 1) holding the rejected count (field 1, JSON key
// countKey) and the error message (field 2) when rejected > 0.
func encodeResponse(enc Encoding, countKey string, rejected int, msg string) []byte {
	if enc == JSON {
		if rejected <= 0 {
			return []byte("{}")
		}
		// protojson's form: int64 as a decimal string.
		b, _ := json.Marshal(map[string]any{"partialSuccess": map[string]any{countKey: strconv.Itoa(rejected), "errorMessage": msg}})
		return b
	}
	if rejected <= 0 {
		return nil
	}
	var ps []byte
	ps = protowire.AppendTag(ps, 1, protowire.VarintType)
	ps = protowire.AppendVarint(ps, uint64(rejected))
	if msg != "" {
		ps = protowire.AppendTag(ps, 2, protowire.BytesType)
		ps = protowire.AppendString(ps, msg)
	}
	out := protowire.AppendTag(nil, 1, protowire.BytesType)
	return protowire.AppendBytes(out, ps)
}
