// Package ask answers questions over stored runs, every answer cited to
// the events that prove it (POST /api/v1/ask, vigil ask).
//
// Without a model the answer is the evidence itself: MakePlan turns the
// question into searches of the explorer-api §7.2 grammar (quoted
// phrases, tool names, roles, meta: and other filters, time words), and
// the searches' matches, the findings and the annotations that fit are
// quoted from the store at their addresses and ranked, deterministically.
//
// With an OpenAI-compatible chat endpoint configured, a model answers as
// an agent over four read-only tools (search, get_events, check,
// list_findings) that run with the asking caller's permissions. Its
// answer must be JSON {answer, citations: [{trace_id, address, quote}]};
// every citation is checked against the store (the caller may read the
// trace, the address resolves, the quote is the text there after white-
// space normalisation), failed ones are dropped and counted, and an
// answer left with no valid citation is withheld. The exchange is
// recorded through package ingest as a trace of the caller's vigil-ask
// dataset.
//
// Non-goals: ask never writes anything but that exchange trace; it keeps
// no index of its own (the stores' search indexes serve it); it does not
// judge whether an answer's prose follows from its citations, only that
// each citation is real.
package ask
