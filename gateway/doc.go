// Package gateway is the LLM gateway: a reverse proxy in front of OpenAI,
// Anthropic, Gemini and any OpenAI-compatible upstream that records
// every call as trace events and blocks, with the policy engine, what a
// dataset's guardrails forbid, including text a streamed response is
// about to deliver.
package gateway
