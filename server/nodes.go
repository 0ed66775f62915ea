package server

import (
	"time"

	"github.com/vigilhq/vigil/ledger"
	"github.com/vigilhq/vigil/store"
)

// buildNodes derives the nodes of a run from its stored events and
// receipts (spec/ledger.md §7.2, §7.3): one primary node per event, a
// child per tool call of an assistant message right after it, tool
// results linked to their call, and a call's output and endedAt taken
// from its matching result.
func buildNodes(run ledger.Run, msgs []store.Message, recs []store.Receipt) []*ledger.Node {
	var nodes []*ledger.Node
	var calls []*ledger.Node // tool_call nodes seen so far, in order
	for i, m := range msgs {
		v, err := ledger.Parse(m.Data)
		if err != nil {
			continue
		}
		ev, _ := v.(map[string]any)
		receiptID, started := "", int64(0)
		if i < len(recs) {
			receiptID, started = recs[i].ID, recs[i].Timestamp
		}
		started = eventTime(ev, started)
		agent := run.AgentID
		if a, ok := ev["agent"].(string); ok && a != "" {
			agent = a
		}
		id := ""
		if len(m.NodeIDs) > 0 {
			id = m.NodeIDs[0]
		}
		n := &ledger.Node{ID: id, RunID: run.ID, AgentID: agent, ActionType: actionType(ev),
			Address: "messages." + itoa(i), EventIndex: i, StartedAt: started, ReceiptID: receiptID, Error: ev["error"]}
		nodes = append(nodes, n)
		if ev["type"] == "receipt" {
			// SDK receipt events: the node is the receipt (§7.4).
			n.ID, n.Input, n.Output = receiptID, ev["input"], ev["output"]
			if rid, ok := ev["receipt_id"].(string); ok {
				n.ID = rid
			}
			continue
		}
		switch n.ActionType {
		case ledger.ActionMessage:
			n.Input = map[string]any{"role": ev["role"], "content": ev["content"]}
		case ledger.ActionLLMStep:
			n.Output = ev["content"]
			tcs, _ := ev["tool_calls"].([]any)
			for j, tc := range tcs {
				tco, _ := tc.(map[string]any)
				child := &ledger.Node{RunID: run.ID, AgentID: agent, ActionType: ledger.ActionToolCall,
					Address: "messages." + itoa(i) + ".tool_calls." + itoa(j), EventIndex: i, StartedAt: started, ReceiptID: receiptID}
				if j+1 < len(m.NodeIDs) {
					child.ID = m.NodeIDs[j+1]
				}
				parent := n.ID
				child.ParentID = &parent
				child.Input, child.ToolCallID = callInput(tco)
				nodes = append(nodes, child)
				calls = append(calls, child)
			}
		case ledger.ActionToolCall:
			n.Input, n.ToolCallID = callInput(ev)
			calls = append(calls, n)
		case ledger.ActionToolResult:
			tcid, hasID := ev["tool_call_id"].(string)
			n.Input = map[string]any{"tool_call_id": ev["tool_call_id"]}
			n.Output = ev["content"]
			var match *ledger.Node
			for k := len(calls) - 1; k >= 0; k-- {
				if !hasID || calls[k].ToolCallID == tcid {
					match = calls[k]
					break
				}
			}
			if match != nil {
				p := match.ID
				n.ParentID = &p
				match.Output = ev["content"]
				end := n.StartedAt
				match.EndedAt = &end
			}
		default:
			n.Input = ev
		}
	}
	if nodes == nil {
		nodes = []*ledger.Node{}
	}
	return nodes
}

// callInput returns {"id","name","arguments"} of a tool call object and
// its id.
func callInput(tc map[string]any) (map[string]any, string) {
	fn, _ := tc["function"].(map[string]any)
	id, _ := tc["id"].(string)
	return map[string]any{"id": tc["id"], "name": fn["name"], "arguments": fn["arguments"]}, id
}

// eventTime returns the event's timestamp in ms when it is a number or an
// RFC 3339 string, else def.
func eventTime(ev map[string]any, def int64) int64 {
	switch ts := ev["timestamp"].(type) {
	case float64:
		return int64(ts)
	case string:
		if t, err := time.Parse(time.RFC3339Nano, ts); err == nil {
			return t.UnixMilli()
		}
	}
	return def
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}
