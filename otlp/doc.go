// Package otlp serves OTLP/HTTP ingest (spec explorer-api §11): the
// routes POST /v1/traces, /api/v1/otlp/v1/traces, /v1/logs and
// /api/v1/otlp/v1/logs take ExportTraceServiceRequest and
// ExportLogsServiceRequest in protobuf or JSON, optionally gzip, and turn
// the GenAI spans and log records they hold into trace events written
// through package ingest, so guardrails, receipts and search apply as to
// every other source.
//
// Goals: one trace per conversation (gen_ai.conversation.id, session.id,
// else the OTel trace id) whatever the number of export requests; a chat
// span repeating the whole history appends only what is new; exporter
// retries add nothing; a bounded write queue that answers 429 with
// Retry-After when full so exporters back off instead of losing spans.
// The mapping of one span is package trace/convert's (FromOTelSpan).
//
// State: the span ids stored are remembered in memory and in the store
// (store.OTLPSpans, kept Config.SpanRetention), so a retry reaching a
// restarted server or another process on the same database adds
// nothing; each conversation's de-duplication state (its canonical
// history, tool outputs, usage) is cached per process and rebuilt from
// the stored trace on a miss. Conversations are serialised per process;
// two processes receiving spans of one new conversation at the same
// instant may each start a trace for it.
//
// Non-goals: gRPC; metrics.
package otlp
