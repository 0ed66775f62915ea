package ledger

// run.go: runs and nodes (§7.1, §7.2). nodes.go maps events onto them.

import "errors"

// Run status values (§7.1).
const (
	RunOpen      = "open"
	RunCompleted = "completed"
	RunFailed    = "failed"
)

// ErrRunFinished is returned for appending to a finished run (HTTP 409
// RUN_FINISHED, §7.1).
var ErrRunFinished = errors.New("RUN_FINISHED")

// Eval marks a run as an eval case (§8.3); copied from trace metadata "eval".
type Eval struct {
	Suite string `json:"suite"`
	Case  string `json:"case"`
}

// Run is a stored trace seen by the ledger (§7.1). For a server-signed run
// SessionID equals ID.
type Run struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	AgentID   string `json:"agentId"`
	Status    string `json:"status"` // RunOpen, RunCompleted or RunFailed
	StartedAt int64  `json:"startedAt"`
	EndedAt   *int64 `json:"endedAt"`
	SessionID string `json:"sessionId"`
	Eval      *Eval  `json:"eval"`
}

// Node is one action inside a run (§7.2): a message, tool call or tool
// result. Output and EndedAt of a tool_call node are derived on read from
// its matching result and are in no receipt.
type Node struct {
	ID           string   `json:"id"`
	RunID        string   `json:"runId"`
	ParentID     *string  `json:"parentId"`
	AgentID      string   `json:"agentId"`
	ActionType   string   `json:"actionType"`
	Address      string   `json:"address"`
	EventIndex   int      `json:"eventIndex"`
	Input        any      `json:"input"`
	Output       any      `json:"output,omitempty"`
	Error        any      `json:"error,omitempty"`
	StartedAt    int64    `json:"startedAt"`
	EndedAt      *int64   `json:"endedAt,omitempty"`
	AnomalyScore *float64 `json:"anomalyScore,omitempty"`
	ReceiptID    string   `json:"receiptId"`
	// ToolCallID is the tool call id of a tool_call node (its input "id"),
	// used to match results; not in the JSON.
	ToolCallID string `json:"-"`
}

// Node action types (§7.3).
const (
	ActionMessage    = "message"
	ActionLLMStep    = "llm_step"
	ActionToolCall   = "tool_call"
	ActionToolResult = "tool_result"
	ActionLog        = "log"
)
