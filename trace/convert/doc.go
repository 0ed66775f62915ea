// Package convert turns conversations recorded in other formats into Vigil
// traces (package trace), one file per source format.
//
// anthropic.go maps the Anthropic Messages API (request and response
// bodies) as spec/gateway.md §4.4 specifies; the gateway reuses it rather
// than keeping a second mapping. An OpenTelemetry GenAI importer
// (explorer-api §11) will sit beside it as otel.go.
//
// Goals: a faithful, total mapping (unknown blocks are kept verbatim, never
// dropped) and errors that name the JSON path of what could not be
// converted. Non-goals: calling providers, reassembling streamed frames
// (the gateway does that, then calls AnthropicMessage), and validating
// fields the trace does not use (model, max_tokens, ...).
package convert
