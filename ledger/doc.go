// Package ledger is Vigil's proof layer: JS-compatible canonical JSON,
// Ed25519 keys, hash-chained signed receipts, chain verification with
// precise reason codes, sessions with a signed close statement, and the
// mapping of stored trace events onto runs, nodes and receipts
// (spec/ledger.md).
//
// Goals: receipts byte-for-byte interchangeable with @invariance/sdk 1.0.0
// (same canonical JSON, hash and signature); strict, total verification that
// reports every error of a chain, not just the first; verification of
// chains of any length from a stream, with signatures checked on all cores.
//
// Non-goals: storage (package store persists sessions and receipts as exact
// JSON text), HTTP (package server), the 0.1.2 node/DAG proof scheme,
// handoff tokens and HKDF agent keys.
//
// The canonical JSON functions (Parse, Marshal, Canonicalize, Hash) work on
// a small value model — nil, bool, float64, string (WTF-8), []any and
// map[string]any — never on encoding/json's, whose escaping, number
// handling and UTF-8 repair differ from JavaScript's (§11).
package ledger
