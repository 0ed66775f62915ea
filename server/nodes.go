package server

import (
	"github.com/vigilhq/vigil/ledger"
	"github.com/vigilhq/vigil/store"
)

// buildNodes derives the nodes of a run from its stored events and
// receipts with the ledger's rules (spec/ledger.md §7.2, §7.3): one primary
// node per event, a child per tool call of an assistant message right
// after it, tool results linked to their call, and a call's output and
// endedAt taken from its matching result. The events of an SDK session
// (receiptEvents) are receipts and each gives ledger.ReceiptNode (§7.4).
// Events that are not JSON give no node.
func buildNodes(run ledger.Run, msgs []store.Message, recs []store.Receipt, receiptEvents bool) []ledger.Node {
	nodes := []ledger.Node{}
	b := ledger.NewNodeBuilder(run.ID, run.AgentID, nil)
	for i, m := range msgs {
		receiptID, started := "", int64(0)
		if i < len(recs) {
			receiptID, started = recs[i].ID, recs[i].Timestamp
			if receiptEvents {
				if rc, err := ledger.ParseReceipt([]byte(recs[i].Text)); err == nil {
					nodes = append(nodes, ledger.ReceiptNode(run.ID, i, rc))
					continue
				}
			}
		}
		ns, err := b.Stored(i, m.Data, m.NodeIDs, receiptID, started)
		if err != nil {
			continue
		}
		nodes = append(nodes, ns...)
	}
	ledger.LinkResults(nodes)
	return nodes
}
