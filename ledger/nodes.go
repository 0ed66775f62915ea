package ledger

// nodes.go: how stored trace events become nodes and receipts (§7.3,
// §7.4). It reads the stored (normalised) event JSON with the §2.1 decoder
// and classifies it as policy-language §7.2 and package trace do: a string
// "role" makes a message ("tool": a tool output), else a "type" member makes
// a bare tool call. Keep the classification in step with trace/decode.go.

import (
	"crypto/ed25519"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// NodeBuilder derives the nodes of a run's events in event order. It keeps
// the run's tool calls, so a tool result finds its call (§7.3): the call
// with the same id, or without tool_call_id the most recent earlier call.
// Not safe for concurrent use; a store holds one per append transaction.
type NodeBuilder struct {
	RunID   string
	AgentID string // the run's agentId, for events without an "agent" string
	// SessionID is the receipts' session id; "" means RunID (a
	// server-signed run's session id is its run id, §7.1).
	SessionID string

	callsByID map[string]string // tool call id → node id (latest wins)
	lastCall  string            // node id of the most recent tool call
}

// NewNodeBuilder returns a builder for run runID whose agentId is agentID.
// prior are the run's nodes already stored, in event order (nil for a new
// run); their tool_call nodes are what later results can match.
func NewNodeBuilder(runID, agentID string, prior []Node) *NodeBuilder {
	b := &NodeBuilder{RunID: runID, AgentID: agentID, callsByID: map[string]string{}}
	for i := range prior {
		b.noteCall(&prior[i])
	}
	return b
}

func (b *NodeBuilder) noteCall(n *Node) {
	if n.ActionType != ActionToolCall {
		return
	}
	if n.ToolCallID != "" {
		b.callsByID[n.ToolCallID] = n.ID
	}
	b.lastCall = n.ID
}

// EventBinding is what one stored event gives: its nodes (primary first,
// then one child per tool call in tool_calls order) and the receipt that
// commits to it, not yet hashed or signed.
type EventBinding struct {
	Nodes []Node
	// Action is the receipt to append (§7.4): ID (also every node's
	// ReceiptID), agent and action of the primary node, no output or
	// error, Timestamp set, and Input = {"event","index","nodeIds","runId"}.
	Action Action
}

// Bind derives the nodes and receipt of the stored event at index (§7.3,
// §7.4). event is the event exactly as stored and served; tail is the run
// session's chain tail, which fixes the receipt timestamp (max(now, tail)).
// It fails only for event bytes that are not JSON (§2.1).
func (b *NodeBuilder) Bind(index int, event []byte, tail Tail) (*EventBinding, error) {
	return b.BindIDs(index, event, nil, tail)
}

// BindIDs is Bind for an event whose node ids were assigned before it was
// stored (primary first, then children in tool_calls order); ids missing
// from nodeIDs are made.
func (b *NodeBuilder) BindIDs(index int, event []byte, nodeIDs []string, tail Tail) (*EventBinding, error) {
	v, err := Parse(event)
	if err != nil {
		return nil, fmt.Errorf("run %s event %d: %w", b.RunID, index, err)
	}
	ts := max(Now(), int64(tail.Timestamp))
	receiptID := NewID()
	nodes := b.nodes(index, v, ts, receiptID, nodeIDs, true)
	return &EventBinding{Nodes: nodes, Action: b.action(index, v, nodes, receiptID, ts)}, nil
}

// ReceiptAction is BindIDs for ingest, which needs only the receipt: the
// same Action, made without the nodes' inputs and addresses.
func (b *NodeBuilder) ReceiptAction(index int, event []byte, nodeIDs []string, tail Tail) (Action, error) {
	v, err := Parse(event)
	if err != nil {
		return Action{}, fmt.Errorf("run %s event %d: %w", b.RunID, index, err)
	}
	ts := max(Now(), int64(tail.Timestamp))
	receiptID := NewID()
	return b.action(index, v, b.nodes(index, v, ts, receiptID, nodeIDs, false), receiptID, ts), nil
}

// action is the receipt of event v whose nodes are nodes (§7.4).
func (b *NodeBuilder) action(index int, v any, nodes []Node, receiptID string, ts int64) Action {
	ids := make([]any, len(nodes))
	for i, n := range nodes {
		ids[i] = n.ID
	}
	sid := b.SessionID
	if sid == "" {
		sid = b.RunID
	}
	return Action{
		ID: receiptID, SessionID: sid, Agent: nodes[0].AgentID, Action: nodes[0].ActionType,
		Input:     ReceiptInput(b.RunID, index, v, ids),
		Timestamp: &ts,
	}
}

// Stored derives, on read, the nodes of the stored event at index whose
// node ids are nodeIDs and whose receipt is receiptID made at receiptTime
// (ms; the startedAt of an event without a usable timestamp). Call it for
// a run's events in order, then LinkResults. Event bytes that are not JSON
// give an error.
func (b *NodeBuilder) Stored(index int, event []byte, nodeIDs []string, receiptID string, receiptTime int64) ([]Node, error) {
	v, err := Parse(event)
	if err != nil {
		return nil, fmt.Errorf("run %s event %d: %w", b.RunID, index, err)
	}
	return b.nodes(index, v, receiptTime, receiptID, nodeIDs, true), nil
}

// ReceiptInput returns the input of a server-signed receipt (§7.4):
// {"event": event, "index": index, "nodeIds": nodeIDs, "runId": runID}.
func ReceiptInput(runID string, index int, event any, nodeIDs []any) map[string]any {
	return map[string]any{"event": event, "index": float64(index), "nodeIds": nodeIDs, "runId": runID}
}

// nodes derives the nodes of event v. Without values it leaves out what no
// receipt needs: addresses and the inputs built from the event.
func (b *NodeBuilder) nodes(index int, v any, ts int64, receiptID string, ids []string, values bool) []Node {
	id := func(k int) string {
		if k < len(ids) && ids[k] != "" {
			return ids[k]
		}
		return NewID()
	}
	m, _ := v.(map[string]any)
	primary := Node{
		ID: id(0), RunID: b.RunID, AgentID: b.AgentID, EventIndex: index, StartedAt: ts, ReceiptID: receiptID,
	}
	if values {
		primary.Address = "messages." + strconv.Itoa(index)
	}
	if m == nil { // not an object: "anything else"
		primary.ActionType, primary.Input = ActionLog, v
		return []Node{primary}
	}
	if a, ok := m["agent"].(string); ok && a != "" {
		// An empty string is no agent: a receipt's agent is non-empty (§9).
		primary.AgentID = a
	}
	if t, ok := eventTime(m["timestamp"]); ok && values {
		primary.StartedAt = t
	}
	primary.Error = m["error"]
	role, hasRole := m["role"].(string)
	_, roleKey := m["role"]
	_, hasType := m["type"]
	switch {
	case hasRole && (role == "system" || role == "developer" || role == "user"):
		primary.ActionType = ActionMessage
		if values {
			primary.Input = map[string]any{"role": role, "content": m["content"]}
		}
	case hasRole && role == "assistant":
		primary.ActionType = ActionLLMStep
		primary.Output = m["content"]
		nodes := []Node{primary}
		calls, _ := m["tool_calls"].([]any)
		for j, c := range calls {
			child := primary
			child.ID = id(1 + j)
			child.ParentID = &nodes[0].ID
			if values {
				child.Address = primary.Address + ".tool_calls." + strconv.Itoa(j)
			}
			child.Output, child.Error = nil, nil
			cm, _ := c.(map[string]any)
			child.ActionType = ActionToolCall
			child.Input, child.ToolCallID = toolCallInput(cm, values)
			nodes = append(nodes, child)
		}
		parent := nodes[0].ID
		for j := 1; j < len(nodes); j++ {
			nodes[j].ParentID = &parent
			b.noteCall(&nodes[j])
		}
		return nodes
	case hasRole && role == "tool":
		primary.ActionType = ActionToolResult
		id, hasID := m["tool_call_id"].(string)
		if values {
			primary.Input = map[string]any{"tool_call_id": m["tool_call_id"]}
		}
		primary.Output = m["content"]
		var parent string
		if hasID {
			parent = b.callsByID[id]
		} else if _, present := m["tool_call_id"]; !present || m["tool_call_id"] == nil {
			parent = b.lastCall
		}
		if parent != "" {
			primary.ParentID = &parent
		}
	case !roleKey && hasType:
		primary.ActionType = ActionToolCall
		primary.Input, primary.ToolCallID = toolCallInput(m, values)
		b.noteCall(&primary)
	default:
		primary.ActionType = ActionLog
		if s, ok := m["action_type"].(string); ok && s != "" {
			primary.ActionType = s
		}
		primary.Input = v
	}
	return []Node{primary}
}

// toolCallInput returns {"id","name","arguments"} of a tool call object and
// its id ("" when it has none).
func toolCallInput(c map[string]any, values bool) (any, string) {
	id, _ := c["id"].(string)
	if !values {
		return nil, id
	}
	fn, _ := c["function"].(map[string]any)
	return map[string]any{"id": c["id"], "name": fn["name"], "arguments": fn["arguments"]}, id
}

// eventTime reads an event's "timestamp": a number of milliseconds or an
// RFC 3339 string.
func eventTime(v any) (int64, bool) {
	switch t := v.(type) {
	case float64:
		if t != t || t > 1<<62 || t < -(1<<62) { // NaN or absurd
			return 0, false
		}
		return int64(t), true
	case string:
		p, err := time.Parse(time.RFC3339Nano, t)
		if err != nil {
			return 0, false
		}
		return p.UnixMilli(), true
	}
	return 0, false
}

// LinkResults fills, on read, the Output and EndedAt of each tool_call node
// from the tool_result node whose parent it is (§7.3: derived, in no
// receipt). nodes are a run's nodes; they are changed in place.
func LinkResults(nodes []Node) {
	byID := make(map[string]int, len(nodes))
	for i, n := range nodes {
		byID[n.ID] = i
	}
	for _, n := range nodes {
		if n.ActionType != ActionToolResult || n.ParentID == nil {
			continue
		}
		if i, ok := byID[*n.ParentID]; ok && nodes[i].ActionType == ActionToolCall {
			nodes[i].Output = n.Output
			ended := n.StartedAt
			nodes[i].EndedAt = &ended
		}
	}
}

// NodeIDs returns the ids of nodes in order: the "nodeIds" of the receipt.
func NodeIDs(nodes []Node) []string {
	ids := make([]string, len(nodes))
	for i, n := range nodes {
		ids[i] = n.ID
	}
	return ids
}

// Seal appends the binding's receipt to the chain at tail, signed with the
// server key (§7.4), and returns it; r.Tail() is the new tail.
func (e *EventBinding) Seal(tail Tail, key ed25519.PrivateKey) (*Receipt, error) {
	return Append(tail, e.Action, key)
}

// ReceiptEvent returns the event an agent-signed receipt becomes (§7.4):
// {"type":"receipt","receipt_id","agent","action","input","output","error",
// "timestamp"}, output and error left out when null, input when absent.
func ReceiptEvent(r *Receipt) map[string]any {
	e := map[string]any{
		"type": "receipt", "receipt_id": r.ID, "agent": r.Agent, "action": r.Action, "timestamp": r.Timestamp,
	}
	if !r.InputAbsent {
		e["input"] = r.Input
	}
	if r.Output != nil {
		e["output"] = r.Output
	}
	if r.Error != nil {
		e["error"] = r.Error
	}
	return e
}

// ReceiptNode returns the one node of an agent-signed receipt stored as
// event index of run runID: its id is the receipt id and its actionType the
// receipt's action (§7.4).
func ReceiptNode(runID string, index int, r *Receipt) Node {
	n := Node{
		ID: r.ID, RunID: runID, AgentID: r.Agent, ActionType: r.Action,
		Address: fmt.Sprintf("messages.%d", index), EventIndex: index, Input: r.Input,
		Output: r.Output, Error: r.Error, StartedAt: r.Millis(), ReceiptID: r.ID,
	}
	return n
}

// Countersign makes r a server-signed receipt for an agent with no
// registered key (§7.4): the server's signature over the stored hash goes
// into Signature, the agent's is kept, unverified, as ClientSignature, and
// Raw is re-emitted. The hash is not recomputed: a receipt that fails its
// checks is stored as received and flagged.
func Countersign(r *Receipt, key ed25519.PrivateKey) error {
	r.ClientSignature = r.Signature
	r.Signature = SignHash(key, r.Hash)
	raw, err := r.MarshalJSON()
	if err != nil {
		return err
	}
	r.Raw = raw
	return nil
}

// CheckNext runs the §5.2 checks of a single incoming receipt r against
// the stored chain it extends (§7.4): prev is the last stored receipt (nil
// for the first), index r's position; opts.SessionID should be the session
// id. Duplicate ids are the store's concern (same id and hash: ignore;
// different hash: receipt_conflict). The errors are sorted by rank.
func CheckNext(prev *Receipt, index int, r *Receipt, opts VerifyOptions) []VerifyError {
	var cs [1]checked
	checkChunk([]*Receipt{r}, &opts, opts.keyVerifier(), cs[:])
	c := cs[0]
	var errs []VerifyError
	fail := func(reason Reason) { errs = append(errs, VerifyError{Index: index, Reason: reason}) }
	if !c.hashOK {
		fail(ReasonHashMismatch)
	}
	want := "0"
	if prev != nil {
		want = prev.Hash
	}
	if r.PreviousHash != want {
		fail(ReasonLinkage)
	}
	if !c.sigOK {
		fail(ReasonSignature)
	}
	if opts.SessionID != "" && r.SessionID != opts.SessionID {
		fail(ReasonSessionMismatch)
	}
	if prev != nil && r.Timestamp < prev.Timestamp {
		fail(ReasonTimestampOrder)
	}
	return slices.Clip(errs)
}
