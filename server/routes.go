package server

import "net/http"

// routes is the whole route table (Go 1.22+ method patterns). Later issues
// add guardrails, findings, search, OTLP, the gateway and the UI here.
//
// The write endpoints of explorer-api §1.6 (push, append, upload, annotate
// and the creates) are wrapped in idempotent for Idempotency-Key replay.
// POST /api/v1/keys/create is not: its response carries the new secret,
// which the idempotency table would then keep in clear for 24 h.
func (s *Server) routes(mux *http.ServeMux) {
	// Health, version, metrics (explorer-api §14).
	s.handle(mux, "GET /healthz", accessNone, s.handleHealthz)
	s.handle(mux, "GET /readyz", accessNone, s.handleReadyz)
	s.handle(mux, "GET /api/v1/{$}", accessNone, s.handleHello)
	s.handle(mux, "GET /api/v1/version", accessNone, s.handleVersion)
	s.handle(mux, "GET /metrics", accessNone, s.handleMetrics)
	s.handle(mux, "GET /api/v1/metrics", accessNone, s.handleMetrics)

	// Push and append (§3).
	s.handle(mux, "POST /api/v1/push/trace", accessIngest, s.idempotent(s.maxJSON, s.handlePush))
	s.handle(mux, "POST /api/v1/trace/{id}/messages", accessIngest, s.idempotent(s.maxJSON, s.handleAppend))

	// Datasets (§4).
	s.handle(mux, "POST /api/v1/dataset/create", accessFull, s.idempotent(s.maxJSON, s.handleDatasetCreate))
	s.handle(mux, "POST /api/v1/dataset/upload", accessFull, s.idempotent(s.maxUp, s.handleUpload))
	s.handle(mux, "GET /api/v1/dataset/list", accessAnon, s.handleDatasetList)
	s.handle(mux, "GET /api/v1/dataset/list/byuser/{username}", accessPublic, s.handleDatasetListByUser)
	s.handle(mux, "GET /api/v1/dataset/byid/{id}", accessAnon, s.handleDatasetGet)
	s.handle(mux, "GET /api/v1/dataset/byuser/{username}/{name}", accessAnon, s.handleDatasetGet)
	s.handle(mux, "PUT /api/v1/dataset/byid/{id}", accessFull, s.handleDatasetUpdate)
	s.handle(mux, "PUT /api/v1/dataset/byuser/{username}/{name}", accessFull, s.handleDatasetUpdate)
	s.handle(mux, "DELETE /api/v1/dataset/byid/{id}", accessFull, s.handleDatasetDelete)
	s.handle(mux, "DELETE /api/v1/dataset/byuser/{username}/{name}", accessFull, s.handleDatasetDelete)
	s.handle(mux, "GET /api/v1/dataset/byid/{id}/traces", accessAnon, s.handleDatasetTraces)
	s.handle(mux, "GET /api/v1/dataset/byuser/{username}/{name}/traces", accessAnon, s.handleDatasetTraces)
	s.handle(mux, "GET /api/v1/dataset/byuser/{username}/{name}/indices", accessAnon, s.handleDatasetIndices)
	s.handle(mux, "GET /api/v1/dataset/byuser/{username}/{name}/full", accessAnon, s.handleDatasetFull)
	s.handle(mux, "GET /api/v1/dataset/byid/{id}/download", accessAnon, s.handleExport)
	s.handle(mux, "GET /api/v1/dataset/byid/{id}/download/annotated", accessAnon, s.handleExport)
	s.handle(mux, "POST /api/v1/dataset/byid/{id}/policy-check/stream", accessFull, s.handleBacktestStream)
	s.handle(mux, "POST /api/v1/dataset/byid/{id}/policy-check", accessFull, s.handleBacktestCompare)
	s.handle(mux, "GET /api/v1/dataset/metadata/{name}", accessAny, s.handleMetadataGet)
	s.handle(mux, "PUT /api/v1/dataset/metadata/{name}", accessIngest, s.handleMetadataPut) // I: a read key writes nothing

	// Search and saved queries (§7).
	s.handle(mux, "GET /api/v1/search", accessAnon, s.handleSearch)
	s.handle(mux, "GET /api/v1/dataset/byuser/{username}/{name}/s", accessAnon, s.handleCompatSearch)
	s.handle(mux, "PUT /api/v1/dataset/byuser/{username}/{name}/s", accessFull, s.handleSavedQueryPut)
	s.handle(mux, "DELETE /api/v1/dataset/query/{id}", accessFull, s.handleSavedQueryDelete)

	// Traces (§5).
	s.handle(mux, "GET /api/v1/trace/{id}", accessAnon, s.handleTraceGet)
	s.handle(mux, "DELETE /api/v1/trace/{id}", accessFull, s.handleTraceDelete)
	s.handle(mux, "GET /api/v1/trace/{id}/download", accessAnon, s.handleTraceDownload)
	s.handle(mux, "PATCH /api/v1/trace/{id}", accessFull, s.handleTracePatch)
	s.handle(mux, "GET /api/v1/trace/{id}/shared", accessAnon, s.handleSharedGet)
	s.handle(mux, "PUT /api/v1/trace/{id}/shared", accessFull, s.handleSharedSet)
	s.handle(mux, "DELETE /api/v1/trace/{id}/shared", accessFull, s.handleSharedSet)
	s.handle(mux, "POST /api/v1/trace/snippets/new", accessFull, s.idempotent(s.maxJSON, s.handleSnippetNew))
	s.handle(mux, "GET /api/v1/trace/snippets", accessRead, s.handleSnippetList)
	s.handle(mux, "GET /api/v1/trace/image/{dataset}/{trace_id}/{image}", accessAnon, s.handleTraceImage)

	// Annotations (§6).
	s.handle(mux, "POST /api/v1/trace/{id}/annotate", accessFull, s.idempotent(s.maxJSON, s.handleAnnotate))
	s.handle(mux, "GET /api/v1/trace/{id}/annotations", accessAnon, s.handleAnnotationList)
	s.handle(mux, "PUT /api/v1/trace/{id}/annotation/{aid}", accessFull, s.handleAnnotationUpdate)
	s.handle(mux, "DELETE /api/v1/trace/{id}/annotation/{aid}", accessFull, s.handleAnnotationDelete)
	s.handle(mux, "POST /api/v1/trace/{id}/annotations/update", accessFull, s.handleAnnotationsReplace)

	// Dataset guardrails: CRUD, history, change feed (§9.1–9.3). Their
	// /api/v1/dataset/{id}/… paths would conflict with the byid, byuser,
	// list and metadata patterns above in one ServeMux, so they live in
	// their own (guardrailRoutes) behind a catch-all that the patterns
	// above, being more specific, take precedence over.
	gm := http.NewServeMux()
	s.guardrailRoutes(gm)
	for _, m := range []string{"GET", "POST", "PUT", "DELETE"} {
		mux.Handle(m+" /api/v1/dataset/{id}/{rest...}", gm)
	}
	s.handle(mux, "GET /api/v1/guardrails/changes", accessIngest, s.handleGuardrailChanges)

	// Identity and keys (§12).
	s.handle(mux, "GET /api/v1/user/identity", accessAny, s.handleIdentity)
	s.handle(mux, "GET /api/v1/user/info", accessPublic, s.handleUserInfo)
	s.handle(mux, "POST /api/v1/keys/create", accessFull, s.handleKeyCreate)
	s.handle(mux, "GET /api/v1/keys/list", accessFull, s.handleKeyList)
	s.handle(mux, "DELETE /api/v1/keys/{id}", accessFull, s.handleKeyRevoke)
	s.handle(mux, "GET /api/v1/users", accessAdmin, s.handleUserList)
	s.handle(mux, "POST /api/v1/users", accessAdmin, s.idempotent(s.maxJSON, s.handleUserCreate))
	s.handle(mux, "PATCH /api/v1/users/{id}", accessAdmin, s.handleUserUpdate)
	s.handle(mux, "DELETE /api/v1/users/{id}", accessAdmin, s.handleUserDelete)
	s.sessionRoutes(mux) // browser sessions (§12.3), sessions.go

	// Guardrails check API (§10); anonymous when check_requires_key=false.
	check, checkAccess := newChecker(s), accessIngest
	if s.cfg.CheckAnonymous {
		checkAccess = accessPublic
	}
	s.handle(mux, "POST /api/v1/policy/check", checkAccess, check.handleCheck)
	s.handle(mux, "POST /api/v1/policy/check/batch", checkAccess, check.handleCheckBatch)
	s.handle(mux, "POST /api/v1/policy/load", checkAccess, check.handleLoad)

	// Audit ledger (ledger.md §10).
	s.handle(mux, "GET /api/v1/ledger/public-key", accessNone, s.handlePublicKey)
	s.handle(mux, "GET /api/v1/ledger/sessions/{id}", accessRead, s.handleSessionGet)
	s.handle(mux, "GET /api/v1/ledger/sessions/{id}/receipts", accessRead, s.handleSessionReceipts)
	s.handle(mux, "GET /api/v1/ledger/sessions/{id}/verify", accessRead, s.handleSessionVerify)
	s.handle(mux, "POST /api/v1/ledger/verify", accessAny, s.handleStatelessVerify)
	s.handle(mux, "GET /api/v1/runs/{id}", accessRead, s.handleRunGet)
	s.handle(mux, "GET /api/v1/runs/{id}/nodes", accessRead, s.handleRunNodes)
	s.handle(mux, "GET /api/v1/runs/{id}/verify", accessRead, s.handleRunVerify)
	s.handle(mux, "POST /api/v1/runs/{id}/finish", accessIngest, s.handleRunFinish)
	s.handle(mux, "POST /api/v1/ledger/agents", accessAdmin, s.handleAgentPut)
	s.handle(mux, "GET /api/v1/ledger/agents", accessRead, s.handleAgentList)
	s.handle(mux, "GET /api/v1/ledger/agents/{agent...}", accessRead, s.handleAgentGet)
	s.handle(mux, "DELETE /api/v1/ledger/agents/{agent...}", accessAdmin, s.handleAgentDelete)

	// Findings, review queue, evals (ledger.md §8.1–8.3, §10).
	s.handle(mux, "GET /api/v1/findings", accessRead, s.handleFindingList)
	s.handle(mux, "GET /api/v1/findings/{id}", accessRead, s.handleFindingGet)
	s.handle(mux, "PATCH /api/v1/findings/{id}", accessFull, s.handleFindingPatch)
	s.handle(mux, "GET /api/v1/review-queue", accessRead, s.handleReviewQueue)
	s.handle(mux, "GET /api/v1/evals", accessRead, s.handleEvals)

	// @invariance/sdk-compatible ledger endpoints (ledger.md §10).
	s.handle(mux, "POST /v1/sessions", accessIngest, s.idempotent(s.maxJSON, s.handleSDKSessionCreate))
	s.handle(mux, "GET /v1/sessions/{id}", accessRead, s.handleSDKSessionGet)
	s.handle(mux, "PATCH /v1/sessions/{id}", accessIngest, s.handleSDKSessionPatch)
	s.handle(mux, "GET /v1/sessions/{id}/verify", accessRead, s.handleSDKSessionVerify)
	s.handle(mux, "POST /v1/receipts", accessIngest, s.idempotent(s.maxJSON, s.handleSDKReceipts))

	// MCP sessions and tool pins (§13).
	s.mcpRoutes(mux)

	// Unknown API paths get a JSON 404; the rest goes to the handler
	// mounted at "/" (the web UI), or gets the same JSON 404 without one.
	s.handle(mux, "/api/", accessNone, s.handleAPINotFound)
	mux.Handle("/", http.HandlerFunc(s.serveRoot))
}

func (s *Server) handleAPINotFound(w http.ResponseWriter, r *http.Request, _ *principal) error {
	return notFound("no such endpoint: %s %s", r.Method, r.URL.Path)
}

// guardrailRoutes is the route table of the dataset guardrail endpoints
// under /api/v1/dataset/{id}/ (explorer-api §9.1, §9.2).
func (s *Server) guardrailRoutes(mux *http.ServeMux) {
	s.handle(mux, "POST /api/v1/dataset/{id}/policy", accessFull, s.idempotent(s.maxJSON, s.handleGuardrailCreate))
	s.handle(mux, "GET /api/v1/dataset/byuser/{username}/{name}/policy", accessIngest, s.handleGuardrailList)
	s.handle(mux, "PUT /api/v1/dataset/{id}/policy/{policy_id}", accessFull, s.handleGuardrailUpdate)
	s.handle(mux, "DELETE /api/v1/dataset/{id}/policy/{policy_id}", accessFull, s.handleGuardrailDelete)
	s.handle(mux, "GET /api/v1/dataset/{id}/policy/{policy_id}/versions", accessRead, s.handleGuardrailVersions)
	s.handle(mux, "GET /api/v1/dataset/{id}/policy/{policy_id}/versions/{n}", accessRead, s.handleGuardrailVersion)
	s.handle(mux, "POST /api/v1/dataset/{id}/policy/{policy_id}/versions/{n}/restore", accessFull, s.handleGuardrailRestore)
	s.handle(mux, "GET /api/v1/dataset/{id}/policy-history", accessRead, s.handlePolicyHistory)
	s.handle(mux, "GET /api/v1/dataset/{id}/ruleset/{rv}", accessRead, s.handleRulesetAt)
	s.handle(mux, "/", accessNone, s.handleAPINotFound)
}
