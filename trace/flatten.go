package trace

// ItemKind is the type of a normalised event (policy-language §7.3).
type ItemKind uint8

// The normalised event types.
const (
	ItemMessage ItemKind = iota
	ItemToolCall
	ItemToolOutput
	ItemTool
)

var itemKindNames = [...]string{"Message", "ToolCall", "ToolOutput", "Tool"}

// String returns the policy type name: Message, ToolCall, ToolOutput, Tool.
func (k ItemKind) String() string {
	if int(k) < len(itemKindNames) {
		return itemKindNames[k]
	}
	return "invalid"
}

// Item is one entry of the flattened event sequence (policy-language §7.5).
type Item struct {
	Kind ItemKind
	// Index is the trace index (§7.4): normalised events are numbered from
	// 0; a tool call inside a message has its message's index; a bare
	// tool call and each Tool have their own.
	Index int
	// Element is the position of the input element in Trace.Events.
	Element int
	// Sub is the position of the call in its message's tool_calls (for a
	// tool call inside a message) or of the tool in its tools element;
	// -1 otherwise.
	Sub int
	// Event is the input element the item comes from.
	Event *Event
	// Call is the tool call of an ItemToolCall.
	Call *ToolCall
	// Tool is the tool of an ItemTool.
	Tool *Tool
	// ToolCallID is, for an ItemToolOutput, its effective tool_call_id:
	// as given, or when the key is absent the id of the most recent tool
	// call (nil if that call has no id or none was seen).
	ToolCallID *string
	// Linked is, for an ItemToolOutput, the position in the flattened
	// sequence of the tool call it is linked to (the most recent earlier
	// call whose id equals ToolCallID, nil equal to nil), or -1.
	Linked int
	// Address is the item's address in the normalised trace, as the policy
	// engine emits it: messages.I or messages.I.tool_calls.J.
	Address Address
	// Stored is the item's address in the stored trace: the same, except
	// for a Tool: messages.E.tools.J (§11.4).
	Stored Address
}

// Server returns the item's server: metadata.server of the event (a tool
// call's own, else its message's; a tool's own, else its element's).
func (it *Item) Server() *string {
	switch it.Kind {
	case ItemToolCall:
		return it.Call.Server
	case ItemTool:
		return it.Tool.Server
	}
	return it.Event.Server
}

// Flatten returns the flattened event sequence of t in evaluation order
// (policy-language §7.5): each normalised event in order, each message
// immediately followed by its tool calls, bare tool calls and every Tool of
// a tools element as events of their own. Invalid elements are skipped
// (they still take a trace index). Tool outputs are linked to their calls.
func (t *Trace) Flatten() []Item {
	n := len(t.Events)
	for _, e := range t.Events {
		n += len(e.ToolCalls) + len(e.Tools)
	}
	items := make([]Item, 0, n)
	// All addresses share one backing array of steps (at most 3 per
	// address, two addresses per item), so flattening allocates O(1) times.
	arena := make([]Step, 0, 6*n)
	addr := func(steps ...Step) Address {
		start := len(arena)
		arena = append(arena, steps...)
		return Address{Steps: arena[start:len(arena):len(arena)]}
	}
	msg := func(i int) Step { return Step{Key: itoa(i), Index: i} }
	toolCalls := Step{Key: "tool_calls", Index: -1}
	toolsStep := Step{Key: "tools", Index: -1}
	idx := 0
	lastCall := -1 // flattened position of the most recent tool call
	byID := map[string]int{}
	nilID := -1
	addCall := func(pos int, c *ToolCall) {
		lastCall = pos
		if c.ID == nil {
			nilID = pos
		} else {
			byID[*c.ID] = pos
		}
	}
	for ei, e := range t.Events {
		switch e.Kind {
		case KindMessage:
			a := addr(msg(idx))
			stored := a
			if ei != idx {
				stored = addr(msg(ei))
			}
			items = append(items, Item{Kind: ItemMessage, Index: idx, Element: ei, Sub: -1, Event: e, Linked: -1, Address: a, Stored: stored})
			for j, c := range e.ToolCalls {
				ca := addr(msg(idx), toolCalls, msg(j))
				cs := ca
				if ei != idx {
					cs = addr(msg(ei), toolCalls, msg(j))
				}
				items = append(items, Item{Kind: ItemToolCall, Index: idx, Element: ei, Sub: j, Event: e, Call: c, Linked: -1, Address: ca, Stored: cs})
				addCall(len(items)-1, c)
			}
			idx++
		case KindToolCall:
			a := addr(msg(idx))
			stored := a
			if ei != idx {
				stored = addr(msg(ei))
			}
			items = append(items, Item{Kind: ItemToolCall, Index: idx, Element: ei, Sub: -1, Event: e, Call: e.Call, Linked: -1, Address: a, Stored: stored})
			addCall(len(items)-1, e.Call)
			idx++
		case KindToolOutput:
			a := addr(msg(idx))
			stored := a
			if ei != idx {
				stored = addr(msg(ei))
			}
			it := Item{Kind: ItemToolOutput, Index: idx, Element: ei, Sub: -1, Event: e, Linked: -1, Address: a, Stored: stored}
			if e.HasToolCallID {
				it.ToolCallID = e.ToolCallID
			} else if lastCall >= 0 {
				it.ToolCallID = items[lastCall].Call.ID
			}
			if it.ToolCallID == nil {
				it.Linked = nilID
			} else if p, ok := byID[*it.ToolCallID]; ok {
				it.Linked = p
			}
			items = append(items, it)
			idx++
		case KindTools:
			for j, tool := range e.Tools {
				items = append(items, Item{Kind: ItemTool, Index: idx, Element: ei, Sub: j, Event: e, Tool: tool, Linked: -1,
					Address: addr(msg(idx)), Stored: addr(msg(ei), toolsStep, msg(j))})
				idx++
			}
			if e.Tools == nil {
				idx++ // an invalid tools value still took an index
			}
		default:
			idx++
		}
	}
	return items
}

// StoredAddress maps an address in the normalised trace (as the policy
// engine emits it) to the stored trace (policy-language §11.4): a trace
// index becomes the input element's position, and a Tool's
// messages.I.rest becomes messages.E.tools.J.rest, with a path into
// inputSchema cut back to the tool. items must be t.Flatten(). It returns
// false when the address names no event.
func StoredAddress(items []Item, a Address) (Address, bool) {
	if a.Root || len(a.Steps) == 0 || a.Steps[0].Index < 0 || a.Steps[0].ID != "" {
		return a, a.Root
	}
	for i := range items {
		it := &items[i]
		if it.Index != a.Steps[0].Index || it.Kind == ItemToolCall && it.Sub >= 0 {
			continue
		}
		out := Address{Steps: append([]Step(nil), it.Stored.Steps...), Selector: a.Selector}
		rest := a.Steps[1:]
		if it.Kind == ItemTool {
			for k, s := range rest {
				if s.Key == "inputSchema" && k+1 < len(rest) {
					rest, out.Selector = rest[:k+1], Selector{}
					break
				}
			}
		}
		out.Steps = append(out.Steps, rest...)
		return out, true
	}
	return a, false
}
