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
// JSON text), HTTP (package server), findings and evals, the 0.1.2
// node/DAG proof scheme, handoff tokens and HKDF agent keys.
//
// # Canonical JSON
//
// Parse, Marshal, Canonicalize and Hash work on a small value model — nil,
// bool, float64, string (WTF-8, so lone surrogates survive), []any and
// map[string]any — never on encoding/json's, whose escaping, number
// handling and UTF-8 repair differ from JavaScript's (§11).
//
// # Receipts and verification
//
// Append makes a receipt from an Action and the chain's Tail. VerifyChain
// checks parsed receipts, VerifyStream a JSON text of any size, Verifier
// one receipt at a time, CheckNext one incoming receipt against a stored
// tail. Signatures are made and checked with curve25519-voi: signing is
// RFC 8032 (byte-identical to crypto/ed25519, about half its CPU), checks
// follow @noble/ed25519 (ZIP-215, the cofactored equation), in batches of
// 512 per goroutine; see keys.go and sig.go.
//
// # Sessions and runs
//
// Session carries the §6 lifecycle (Append, Close with its signed close
// statement, MarkTampered); VerifySession and VerifyRun add the server's
// checks (close_signature, event_mismatch, missing_receipt,
// missing_event). NodeBuilder turns each stored event into its nodes and
// the receipt that commits to it (§7.3, §7.4): Bind/BindIDs at ingest,
// ReceiptAction when only the receipt is needed, Stored plus LinkResults
// on read; ReceiptEvent, ReceiptNode, Countersign and CheckNext serve
// agent-signed (SDK) sessions. LoadServerKey and
// LoadKeyRing handle the server key files (§3).
package ledger
