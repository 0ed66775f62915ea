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
// Blocking rules are evaluated incrementally per session (one
// policy.Monitor per rule), so a call costs the same late in a long
// session as early. The stdio wrapper keeps the last rules and approved
// pin fingerprints in a cache and spools records while the server is
// unreachable.
//
// Non-goals: the SSE transport (answered 501 by the gateway router) and
// running logging rules inline (the monitors of the recorded trace run
// them).
package mcp
