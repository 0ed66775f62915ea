// Package detect implements the detectors that the policy language calls
// (policy-language §13.3) as plain functions over strings, with
// code-point ranges for the marks the engine records.
//
// Goals: offline, deterministic, fast detectors (secrets and PII scan
// clean text at tens of MB/s) with documented coverage, and one small
// interface for the capabilities that need a model (moderation,
// embeddings, LLM questions, PERSON/LOCATION, injection classification),
// served by an OpenAI-compatible HTTP endpoint. Non-goals: being a
// complete secret or PII scanner, parsing Python fully, or calling any
// network service at load time.
package detect
