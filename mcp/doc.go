// Package mcp is Vigil's MCP proxy (spec/gateway.md §9): the stdio
// wrapper behind `vigil mcp run` (RunStdio) and the streamable HTTP proxy
// mounted under /api/v1/gateway/…/mcp/… (Proxy). Both relay JSON-RPC
// through a Session, which
//
//   - checks tools/call arguments before they reach the server and
//     results before they reach the client against the blocking
//     guardrails, answering a violation with the §9.2 block response;
//   - has the server pin each tools/list page (trust on first use,
//     §9.4) and replaces a tool whose definition changed since approval
//     by a stub that blocks its calls;
//   - records the session as one trace of the Invariant-compatible shape
//     (§9.1) through a Store: the HTTP API from the stdio wrapper
//     (ClientStore), package ingest in-process inside `vigil serve`.
//
// Everything else — initialize, resources, prompts, notifications,
// cancellation, server-to-client requests, batches — passes through
// unchanged and in order.
//
// Non-goals: the SSE transport (answered 501 by the gateway router), a
// local cache of rules and pins for a store that cannot be reached, and
// running logging rules inline (the monitors of the recorded trace run
// them).
package mcp
