package web

func (h *Handler) guardrailsPage(q *request) error      { return notFound() }
func (h *Handler) guardrailSave(q *request) error       { return notFound() }
func (h *Handler) guardrailRestore(q *request) error    { return notFound() }
func (h *Handler) findingsPage(q *request) error        { return notFound() }
func (h *Handler) findingsTriage(q *request) error      { return notFound() }
func (h *Handler) datasetSettingsPage(q *request) error { return notFound() }
func (h *Handler) datasetSettingsPost(q *request) error { return notFound() }
func (h *Handler) proofPage(q *request) error           { return notFound() }
func (h *Handler) playgroundPage(q *request) error      { return notFound() }
func (h *Handler) mcpPage(q *request) error             { return notFound() }
func (h *Handler) settingsPage(q *request) error        { return notFound() }
func (h *Handler) keyCreate(q *request) error           { return notFound() }
func (h *Handler) keyRevoke(q *request) error           { return notFound() }
