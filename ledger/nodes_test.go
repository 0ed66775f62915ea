package ledger

import (
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// A trace touching every §7.3 row.
var nodeEvents = []string{
	`{"role":"system","content":"You are a refund bot."}`,
	`{"role":"user","content":"Refund order A-1001","timestamp":"2026-01-01T00:00:01Z"}`,
	`{"role":"assistant","content":null,"agent":"agent/planner","tool_calls":[
	  {"id":"c1","type":"function","function":{"name":"lookup","arguments":{"order":"A-1001"}}},
	  {"id":"c2","type":"function","function":{"name":"refund","arguments":{"amount":42.5}}}]}`,
	`{"role":"tool","tool_call_id":"c2","content":"refunded","timestamp":1767225605000}`,
	`{"role":"tool","tool_call_id":"c1","content":"shipped","error":"slow"}`,
	`{"type":"function","id":"c3","function":{"name":"notify","arguments":{}}}`,
	`{"role":"tool","content":"sent"}`,
	`{"role":"tool","tool_call_id":"nope","content":"orphan"}`,
	`{"action_type":"checkpoint","note":"x"}`,
	`{"something":"else"}`,
	`[1,2]`,
	`{"role":"developer","content":[{"type":"text","text":"be brief"}]}`,
	`{"role":"critic","content":"odd role"}`,
	`{"role":null,"type":"function","function":{"name":"f"}}`,
}

// want: actionType@address^parentAddress(agent) for every node, in order.
var nodeWant = [][]string{
	{"message@messages.0^(vigil)"},
	{"message@messages.1^(vigil)"},
	{"llm_step@messages.2^(agent/planner)", "tool_call@messages.2.tool_calls.0^messages.2(agent/planner)", "tool_call@messages.2.tool_calls.1^messages.2(agent/planner)"},
	{"tool_result@messages.3^messages.2.tool_calls.1(vigil)"},
	{"tool_result@messages.4^messages.2.tool_calls.0(vigil)"},
	{"tool_call@messages.5^(vigil)"},
	{"tool_result@messages.6^messages.5(vigil)"},
	{"tool_result@messages.7^(vigil)"},
	{"checkpoint@messages.8^(vigil)"},
	{"log@messages.9^(vigil)"},
	{"log@messages.10^(vigil)"},
	{"message@messages.11^(vigil)"},
	{"log@messages.12^(vigil)"},
	{"log@messages.13^(vigil)"},
}

// buildRun binds nodeEvents into a server-signed run and returns the
// evidence VerifyRun reads, plus all nodes.
func buildRun(t *testing.T, key ed25519.PrivateKey) (RunEvidence, []Node) {
	t.Helper()
	defer func(f func() int64) { Now = f }(Now)
	Now = func() int64 { return 1767225600000 }
	runID := "01KDVDN90RBSAH00000000RUN1"
	pub := PublicKeyHex(PublicOf(key))
	s := &Session{ID: runID, Signer: SignerServer, SignerPublicKey: &pub}
	ev := RunEvidence{RunID: runID, Session: s}
	var all []Node
	b := NewNodeBuilder(runID, "vigil", nil)
	for i, e := range nodeEvents {
		// Half way, continue with a fresh builder fed the stored nodes, as
		// a store does for a later append.
		if i == 5 {
			b = NewNodeBuilder(runID, "vigil", all)
		}
		bind, err := b.Bind(i, []byte(e), s.Tail())
		if err != nil {
			t.Fatal(err)
		}
		r, err := s.Append(bind.Action, key)
		if err != nil {
			t.Fatal(err)
		}
		ev.Receipts = append(ev.Receipts, r)
		ev.Events = append(ev.Events, []byte(e))
		ev.NodeIDs = append(ev.NodeIDs, NodeIDs(bind.Nodes))
		all = append(all, bind.Nodes...)
	}
	return ev, all
}

func TestEventNodes(t *testing.T) {
	key := mustKey(t, specSeed)
	ev, nodes := buildRun(t, key)
	addr := map[string]string{}
	for _, n := range nodes {
		addr[n.ID] = n.Address
	}
	k := 0
	for i, want := range nodeWant {
		for j, w := range want {
			n := nodes[k]
			k++
			parent := ""
			if n.ParentID != nil {
				parent = addr[*n.ParentID]
			}
			if got := fmt.Sprintf("%s@%s^%s(%s)", n.ActionType, n.Address, parent, n.AgentID); got != w {
				t.Errorf("event %d node %d: %s, want %s", i, j, got, w)
			}
			if n.EventIndex != i || n.ReceiptID != ev.Receipts[i].ID || n.RunID != ev.RunID || len(n.ID) != 26 {
				t.Errorf("event %d node %d: %+v", i, j, n)
			}
		}
	}
	if k != len(nodes) {
		t.Fatalf("%d nodes, want %d", len(nodes), k)
	}
	// Inputs, outputs, errors and times.
	checks := []struct {
		node int
		what string
		got  any
		want string
	}{
		{0, "input", nodes[0].Input, `{"content":"You are a refund bot.","role":"system"}`},
		{1, "startedAt", nodes[1].StartedAt, `1767225601000`},
		{0, "startedAt", nodes[0].StartedAt, `1767225600000`},
		{2, "llm input", nodes[2].Input, `null`},
		{3, "tool_call input", nodes[3].Input, `{"arguments":{"order":"A-1001"},"id":"c1","name":"lookup"}`},
		{5, "tool_result input", nodes[5].Input, `{"tool_call_id":"c2"}`},
		{5, "tool_result output", nodes[5].Output, `"refunded"`},
		{5, "tool_result startedAt", nodes[5].StartedAt, `1767225605000`},
		{6, "error", nodes[6].Error, `"slow"`},
		{10, "checkpoint input", nodes[10].Input, `{"action_type":"checkpoint","note":"x"}`},
		{12, "non-object input", nodes[12].Input, `[1,2]`},
	}
	for _, c := range checks {
		if got, _ := Marshal(c.got); string(got) != c.want {
			t.Errorf("node %d %s = %s, want %s", c.node, c.what, got, c.want)
		}
	}
	// Tool call output and end are derived on read.
	LinkResults(nodes)
	if nodes[4].Output != "refunded" || nodes[4].EndedAt == nil || *nodes[4].EndedAt != 1767225605000 || nodes[3].Output != "shipped" {
		t.Errorf("LinkResults: %+v / %+v", nodes[3], nodes[4])
	}
	// The receipt of event 2 commits to the event, its index, node ids, run.
	r := ev.Receipts[2]
	in, _ := Marshal(r.Input)
	ev2, _ := Canonicalize([]byte(nodeEvents[2]))
	want := fmt.Sprintf(`{"event":%s,"index":2,"nodeIds":["%s","%s","%s"],"runId":"%s"}`, ev2, nodes[2].ID, nodes[3].ID, nodes[4].ID, ev.RunID)
	if string(in) != want || r.Agent != "agent/planner" || r.Action != "llm_step" || r.Output != nil || r.Error != nil {
		t.Errorf("receipt 2: %s\nwant input %s", r.Raw, want)
	}
}

func TestVerifyRun(t *testing.T) {
	key := mustKey(t, specSeed)
	keys := SessionKeys{Ring: []ed25519.PublicKey{PublicOf(key)}}
	tests := []struct {
		name   string
		mutate func(ev *RunEvidence)
		want   string
	}{
		{"intact", func(*RunEvidence) {}, `[]`},
		{"event_edited_in_database", func(ev *RunEvidence) {
			ev.Events[1] = []byte(strings.Replace(string(ev.Events[1]), "A-1001", "A-9999", 1))
		}, `[{"index":1,"reason":"event_mismatch"}]`},
		{"event_reformatted_is_fine", func(ev *RunEvidence) {
			ev.Events[0] = []byte(`{ "content" : "You are a refund bot.", "role":"system" }`)
		}, `[]`},
		{"node_ids_swapped", func(ev *RunEvidence) {
			ids := ev.NodeIDs[2]
			ids[1], ids[2] = ids[2], ids[1]
		}, `[{"index":2,"reason":"event_mismatch"}]`},
		{"events_swapped", func(ev *RunEvidence) {
			ev.Events[3], ev.Events[4] = ev.Events[4], ev.Events[3]
			ev.NodeIDs[3], ev.NodeIDs[4] = ev.NodeIDs[4], ev.NodeIDs[3]
		}, `[{"index":3,"reason":"event_mismatch"},{"index":4,"reason":"event_mismatch"}]`},
		{"last_event_deleted", func(ev *RunEvidence) {
			ev.Events = ev.Events[:len(ev.Events)-1]
		}, `[{"index":13,"reason":"missing_event"}]`},
		{"event_without_receipt", func(ev *RunEvidence) {
			ev.Events = append(ev.Events, []byte(`{"role":"user","content":"sneaked in"}`))
		}, `[{"index":14,"reason":"missing_receipt"}]`},
		{"receipts_of_another_run", func(ev *RunEvidence) {
			ev.RunID = "other"
		}, `[{"index":0,"reason":"event_mismatch"},{"index":1,"reason":"event_mismatch"},{"index":2,"reason":"event_mismatch"},{"index":3,"reason":"event_mismatch"},{"index":4,"reason":"event_mismatch"},{"index":5,"reason":"event_mismatch"},{"index":6,"reason":"event_mismatch"},{"index":7,"reason":"event_mismatch"},{"index":8,"reason":"event_mismatch"},{"index":9,"reason":"event_mismatch"},{"index":10,"reason":"event_mismatch"},{"index":11,"reason":"event_mismatch"},{"index":12,"reason":"event_mismatch"},{"index":13,"reason":"event_mismatch"}]`},
		{"receipt_input_rewritten_and_rehashed", func(ev *RunEvidence) {
			r := *ev.Receipts[1]
			r.Input = ReceiptInput(ev.RunID, 1, "forged", []any{ev.NodeIDs[1][0]})
			r.Hash, _ = r.ComputeHash()
			ev.Receipts[1] = &r
		}, `[{"index":1,"reason":"signature"},{"index":1,"reason":"event_mismatch"},{"index":2,"reason":"linkage"}]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev, _ := buildRun(t, key)
			tt.mutate(&ev)
			res, err := VerifyRun(ev, keys, 7)
			if err != nil {
				t.Fatal(err)
			}
			if got := asJSON(res.Errors); got != tt.want {
				t.Fatalf("errors %s\nwant %s", got, tt.want)
			}
			if res.Valid != (tt.want == `[]`) || (res.Status == StatusTampered) == res.Valid {
				t.Fatalf("valid %v status %s", res.Valid, res.Status)
			}
		})
	}
}

func TestAgentSignedRun(t *testing.T) {
	agentKey := mustKey(t, seed42)
	serverKey := mustKey(t, specSeed)
	// The agent's chain, as @invariance/sdk would send it.
	b, _ := specChain(t)
	var rs []*Receipt
	if err := json.Unmarshal(b, &rs); err != nil {
		t.Fatal(err)
	}
	s := &Session{ID: "01KDVDN90RBSAH00000000005B", Signer: SignerAgent}
	ev := RunEvidence{RunID: "run-1", Session: s}
	for i, r := range rs {
		if errs := CheckNext(prevOf(rs, i), i, r, VerifyOptions{PublicKey: PublicOf(mustKey(t, specSeed)), SessionID: s.ID}); len(errs) != 0 {
			t.Fatalf("CheckNext(%d) = %v", i, errs)
		}
		s.Advance(r)
		e, _ := Marshal(ReceiptEvent(r))
		ev.Events = append(ev.Events, e)
		ev.Receipts = append(ev.Receipts, r)
		if n := ReceiptNode("run-1", i, r); n.ID != r.ID || n.ActionType != r.Action || n.ReceiptID != r.ID {
			t.Fatalf("ReceiptNode %+v", n)
		}
	}
	e2, _ := Marshal(ReceiptEvent(rs[2]))
	if want := `{"action":"http_request","agent":"agent/refund-bot","error":"timeout","input":{"url":"https://api.example.com/refund"},"receipt_id":"01KDVDNCW6BVPG000000000003","timestamp":1767225602950,"type":"receipt"}`; string(e2) != want {
		t.Fatalf("ReceiptEvent %s", e2)
	}
	res, err := VerifyRun(ev, SessionKeys{AgentKey: PublicOf(mustKey(t, specSeed))}, 1)
	if err != nil || !res.Valid {
		t.Fatalf("%+v %v", res, err)
	}
	ev.Events[0] = []byte(strings.Replace(string(ev.Events[0]), "A-1001", "A-1002", 1))
	res, _ = VerifyRun(ev, SessionKeys{AgentKey: PublicOf(mustKey(t, specSeed))}, 1)
	if asJSON(res.Errors) != `[{"index":0,"reason":"event_mismatch"}]` {
		t.Fatalf("%+v", res.Errors)
	}
	// CheckNext flags what the store must keep-and-flag.
	if errs := CheckNext(nil, 0, rs[1], VerifyOptions{PublicKey: PublicOf(agentKey), SessionID: "x"}); asJSON(errs) != `[{"index":0,"reason":"linkage"},{"index":0,"reason":"signature"},{"index":0,"reason":"session_mismatch"}]` {
		t.Fatalf("CheckNext: %v", asJSON(errs))
	}
	// An agent without a registered key: the server countersigns.
	c := *rs[0]
	if err := Countersign(&c, serverKey); err != nil {
		t.Fatal(err)
	}
	if c.ClientSignature != rs[0].Signature || !VerifySignature(PublicOf(serverKey), c.Hash, c.Signature) || !strings.Contains(string(c.Raw), `"clientSignature":"`+rs[0].Signature+`"`) {
		t.Fatalf("Countersign: %s", c.Raw)
	}
	if h, _ := c.ComputeHash(); h != c.Hash {
		t.Fatal("countersigning changed the hash")
	}
}

func prevOf(rs []*Receipt, i int) *Receipt {
	if i == 0 {
		return nil
	}
	return rs[i-1]
}

// FuzzBind: any stored event gives at least one node and a receipt whose
// input commits to the event's canonical form.
func FuzzBind(f *testing.F) {
	for _, e := range nodeEvents {
		f.Add([]byte(e))
	}
	f.Fuzz(func(t *testing.T, event []byte) {
		b := NewNodeBuilder("run", "vigil", nil)
		bind, err := b.Bind(3, event, Tail{})
		if err != nil {
			if _, perr := Parse(event); perr == nil {
				t.Fatalf("Bind rejected parseable JSON: %v", err)
			}
			return
		}
		if len(bind.Nodes) == 0 || bind.Nodes[0].ParentID != nil && bind.Nodes[0].ActionType != ActionToolResult {
			t.Fatalf("nodes %+v", bind.Nodes)
		}
		r, err := bind.Seal(Tail{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !serverEventMatches("run", 3, event, NodeIDs(bind.Nodes), r) {
			t.Fatalf("receipt does not commit to the event: %s", r.Raw)
		}
	})
}

// TestStoredNodesMatchBind: nodes derived on read from the stored node ids
// equal those Bind made at ingest; BindIDs keeps given ids.
func TestStoredNodesMatchBind(t *testing.T) {
	key := mustKey(t, specSeed)
	ev, bound := buildRun(t, key)
	b := NewNodeBuilder(ev.RunID, "vigil", nil)
	var got []Node
	for i, e := range ev.Events {
		ns, err := b.Stored(i, e, ev.NodeIDs[i], ev.Receipts[i].ID, ev.Receipts[i].Millis())
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ns...)
	}
	a, _ := json.Marshal(got)
	w, _ := json.Marshal(bound)
	if string(a) != string(w) {
		t.Fatalf("Stored:\n%s\nBind:\n%s", a, w)
	}
	ids := []string{"01KDVDN90RBSAH0000000NODE0", "01KDVDN90RBSAH0000000NODE1"}
	eb, err := NewNodeBuilder("r", "vigil", nil).BindIDs(0, []byte(nodeEvents[2]), ids, Tail{})
	if err != nil {
		t.Fatal(err)
	}
	if eb.Nodes[0].ID != ids[0] || eb.Nodes[1].ID != ids[1] || len(eb.Nodes[2].ID) != 26 || eb.Nodes[2].ID == ids[1] {
		t.Errorf("BindIDs ids: %v", NodeIDs(eb.Nodes))
	}
	if eb.Action.SessionID != "r" {
		t.Errorf("session id %q, want the run id", eb.Action.SessionID)
	}
}

// TestEmptyAgentIsRunAgent: an empty "agent" string is no agent (§7.3; a
// receipt's agent is non-empty), so the run's agent id is used.
func TestEmptyAgentIsRunAgent(t *testing.T) {
	eb, err := NewNodeBuilder("r", "dataset:d", nil).Bind(0, []byte(`{"role":"user","content":"x","agent":""}`), Tail{})
	if err != nil {
		t.Fatal(err)
	}
	if eb.Nodes[0].AgentID != "dataset:d" || eb.Action.Agent != "dataset:d" {
		t.Errorf("agent %q / %q, want dataset:d", eb.Nodes[0].AgentID, eb.Action.Agent)
	}
}

// TestReceiptActionMatchesBind: the receipt ingest makes without node
// values is the one BindIDs makes, for every §7.3 row.
func TestReceiptActionMatchesBind(t *testing.T) {
	defer func(f func() int64) { Now = f }(Now)
	Now = func() int64 { return 1767225600000 }
	full, lite := NewNodeBuilder("r", "vigil", nil), NewNodeBuilder("r", "vigil", nil)
	for i, e := range nodeEvents {
		eb, err := full.BindIDs(i, []byte(e), nil, Tail{})
		if err != nil {
			t.Fatal(err)
		}
		a, err := lite.ReceiptAction(i, []byte(e), NodeIDs(eb.Nodes), Tail{})
		if err != nil {
			t.Fatal(err)
		}
		a.ID = eb.Action.ID
		got, _ := json.Marshal(a)
		want, _ := json.Marshal(eb.Action)
		if string(got) != string(want) {
			t.Errorf("event %d: %s, want %s", i, got, want)
		}
	}
}

// TestCountersignedRunEvents: an SDK run the server countersigned (signer
// server, events derived from receipts) is checked as an agent-signed one
// when RunEvidence.ReceiptEvents is set.
func TestCountersignedRunEvents(t *testing.T) {
	serverKey := mustKey(t, specSeed)
	b, _ := specChain(t)
	var rs []*Receipt
	if err := json.Unmarshal(b, &rs); err != nil {
		t.Fatal(err)
	}
	pub := PublicKeyHex(PublicOf(serverKey))
	s := &Session{ID: "01KDVDN90RBSAH00000000005B", Signer: SignerServer, SignerPublicKey: &pub}
	ev := RunEvidence{RunID: "run-1", Session: s, ReceiptEvents: true}
	for _, r := range rs {
		if err := Countersign(r, serverKey); err != nil {
			t.Fatal(err)
		}
		s.Advance(r)
		e, _ := Marshal(ReceiptEvent(r))
		ev.Events = append(ev.Events, e)
		ev.Receipts = append(ev.Receipts, r)
	}
	keys := SessionKeys{Ring: []ed25519.PublicKey{PublicOf(serverKey)}}
	if res, err := VerifyRun(ev, keys, 1); err != nil || !res.Valid || !res.SignaturesChecked {
		t.Fatalf("%+v %v", res, err)
	}
	ev.ReceiptEvents = false
	if res, _ := VerifyRun(ev, keys, 1); res.Valid || res.Errors[0].Reason != ReasonEventMismatch {
		t.Fatalf("without ReceiptEvents: %+v", res.Errors)
	}
}
