package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/vigilhq/vigil/ledger"
	"github.com/vigilhq/vigil/store"
)

// MCP tool pinning (spec/gateway.md §9.4, explorer-api §13): the
// trust-on-first-use verdicts on each tools/list page a gateway or stdio
// wrapper sees, kept per (owner, server identity) through the store. The
// embedded MCP proxy calls ObserveMCPTools in-process; stdio wrappers and
// standalone gateways call POST /api/v1/mcp/pins/observe, which runs the
// same function. The HTTP handlers are in mcpapi.go.

// MCPPinMonitor is the monitorId of the findings pinning writes.
const MCPPinMonitor = "mcp-pin"

// MCP pin observations (the verdict's Observation).
const (
	PinFirstUse = "first_use"
	PinSame     = "same"
	PinAdded    = "added"
	PinChanged  = "changed"
	PinRemoved  = "removed"
)

// MCPPinVerdict is the verdict on one tool of an observed tools/list
// page (explorer-api §13). Approved is false only for a changed tool
// whose new version waits for approval. Fields lists the definition
// fields that differ from the approved version (changed only);
// RenamedFrom names the pinned tool, missing from the same page, whose
// definition an added tool repeats under a new name.
type MCPPinVerdict struct {
	Tool        string   `json:"tool"`
	Observation string   `json:"observation"`
	Approved    bool     `json:"approved"`
	Hash        string   `json:"hash"`
	Fields      []string `json:"fields,omitempty"`
	RenamedFrom string   `json:"renamed_from,omitempty"`
}

// MCPObservation is one tools/list page seen by a gateway: the server
// identity, the trace the session records into ("" when not recording:
// no findings are written then), the tools as the server sent them and
// whether every page of the list has now been seen (only then are
// missing tools reported removed).
type MCPObservation struct {
	Server   string            `json:"server"`
	TraceID  string            `json:"trace_id,omitempty"`
	Tools    []json.RawMessage `json:"tools"`
	Complete bool              `json:"complete"`
}

// mcpToolFields are the fields of a tool's wire object that its
// fingerprint covers, in the order MCPToolFingerprint's object lists
// them, with the key they have in a pin's stored definition.
var mcpToolFields = []struct{ wire, pinned string }{
	{"name", "name"},
	{"title", "title"},
	{"description", "description"},
	{"inputSchema", "input_schema"},
	{"outputSchema", "output_schema"},
	{"annotations", "annotations"},
}

// MCPToolDefinition is a tool's wire object reduced to the fingerprinted
// fields, keyed as a pin stores them ({name, title, description,
// input_schema, output_schema, annotations}; absent fields omitted).
func MCPToolDefinition(tool json.RawMessage) (map[string]json.RawMessage, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(tool, &obj); err != nil || obj == nil {
		return nil, fmt.Errorf("tool is not a JSON object")
	}
	def := make(map[string]json.RawMessage, len(mcpToolFields))
	for _, f := range mcpToolFields {
		if v, ok := obj[f.wire]; ok && string(v) != "null" {
			def[f.pinned] = v
		}
	}
	return def, nil
}

// MCPToolFingerprint is the hex SHA-256 of the canonical JSON (ledger
// canonical form) of the tool's {name, title, description, inputSchema,
// outputSchema, annotations} (spec/gateway.md §9.4), and the tool's name.
func MCPToolFingerprint(tool json.RawMessage) (hash, name string, err error) {
	def, err := MCPToolDefinition(tool)
	if err != nil {
		return "", "", err
	}
	if err := json.Unmarshal(def["name"], &name); err != nil || name == "" {
		return "", "", fmt.Errorf("tool has no name")
	}
	return fingerprintDef(def), name, nil
}

func fingerprintDef(def map[string]json.RawMessage) string {
	obj := make(map[string]any, len(def))
	for _, f := range mcpToolFields {
		if v, ok := def[f.pinned]; ok {
			x, err := ledger.Parse(v)
			if err != nil {
				x = string(v)
			}
			obj[f.wire] = x
		}
	}
	b, err := ledger.Marshal(obj)
	if err != nil {
		b, _ = json.Marshal(obj)
	}
	return ledger.HashBytes(b)
}

// changedFields lists the fingerprinted fields whose canonical values
// differ between two definitions.
func changedFields(old, new map[string]json.RawMessage) []string {
	var out []string
	for _, f := range mcpToolFields {
		if !sameJSON(old[f.pinned], new[f.pinned]) {
			out = append(out, f.pinned)
		}
	}
	return out
}

func sameJSON(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	ca, err1 := ledger.Canonicalize(a)
	cb, err2 := ledger.Canonicalize(b)
	if err1 != nil || err2 != nil {
		return string(a) == string(b)
	}
	return string(ca) == string(cb)
}

// withoutName is the fingerprint of a definition with its name removed:
// equal for a tool and the same tool renamed.
func withoutName(def map[string]json.RawMessage) string {
	d := make(map[string]json.RawMessage, len(def))
	for k, v := range def {
		if k != "name" {
			d[k] = v
		}
	}
	return fingerprintDef(d)
}

// ObserveMCPTools applies the pinning table of spec/gateway.md §9.4 to
// one tools/list page for the owner: on a server without pins every tool
// is pinned approved (first_use); a new tool on a pinned server is pinned
// approved with an "added" finding (warn); a different fingerprint keeps
// the approved pin, stores the new version as pending and writes a
// "changed" finding (critical); with obs.Complete, a pinned tool missing
// from the page gets a "removed" finding (info). Findings are written
// only when obs.TraceID is set, on that trace, deduplicated on
// "<observation>:<server>/<tool>:<fingerprint>". A verdict is returned
// per tool of the page, in order, then one per removed tool.
func (s *Server) ObserveMCPTools(ctx context.Context, ownerID string, obs MCPObservation) ([]MCPPinVerdict, error) {
	if obs.Server == "" {
		return nil, badRequest("server must be a non-empty string")
	}
	type seen struct {
		name string
		hash string
		def  map[string]json.RawMessage
	}
	page := make([]seen, 0, len(obs.Tools))
	for i, raw := range obs.Tools {
		hash, name, err := MCPToolFingerprint(raw)
		if err != nil {
			return nil, badRequest("tools[%d]: %v", i, err)
		}
		def, _ := MCPToolDefinition(raw)
		page = append(page, seen{name, hash, def})
	}
	now := s.now()
	var verdicts []MCPPinVerdict
	type finding struct {
		obs, tool, hash, severity string
		fields                    []string
		renamedFrom               string
	}
	var findings []finding
	_, err := s.st.UpdateMCPPins(ctx, ownerID, obs.Server, func(pins []*store.MCPPin) ([]*store.MCPPin, error) {
		verdicts, findings = verdicts[:0], findings[:0]
		byTool := make(map[string]*store.MCPPin, len(pins))
		for _, p := range pins {
			byTool[p.Tool] = p
		}
		onPage := make(map[string]bool, len(page))
		for _, t := range page {
			onPage[t.name] = true
		}
		// Pinned tools missing from the page, by the fingerprint of
		// their definition without its name, to recognise renames.
		missing := map[string]string{}
		for _, p := range pins {
			if !onPage[p.Tool] {
				var def map[string]json.RawMessage
				if json.Unmarshal(p.Pinned, &def) == nil {
					def["name"], _ = json.Marshal(p.Tool)
					missing[withoutName(def)] = p.Tool
				}
			}
		}
		var out []*store.MCPPin
		for _, t := range page {
			pinned, _ := json.Marshal(t.def)
			p := byTool[t.name]
			switch {
			case len(pins) == 0:
				out = append(out, &store.MCPPin{Tool: t.name, Hash: t.hash, Pinned: pinned, Status: store.PinApproved, TimeApproved: &now, TimeCreated: now})
				verdicts = append(verdicts, MCPPinVerdict{Tool: t.name, Observation: PinFirstUse, Approved: true, Hash: t.hash})
				byTool[t.name] = out[len(out)-1]
			case p == nil:
				np := &store.MCPPin{Tool: t.name, Hash: t.hash, Pinned: pinned, Status: store.PinApproved, TimeApproved: &now, TimeCreated: now}
				out = append(out, np)
				byTool[t.name] = np
				v := MCPPinVerdict{Tool: t.name, Observation: PinAdded, Approved: true, Hash: t.hash, RenamedFrom: missing[withoutName(t.def)]}
				verdicts = append(verdicts, v)
				findings = append(findings, finding{PinAdded, t.name, t.hash, store.SeverityWarn, nil, v.RenamedFrom})
			case p.Hash == t.hash:
				verdicts = append(verdicts, MCPPinVerdict{Tool: t.name, Observation: PinSame, Approved: true, Hash: t.hash})
			default:
				var old map[string]json.RawMessage
				_ = json.Unmarshal(p.Pinned, &old)
				if old != nil {
					old["name"], _ = json.Marshal(p.Tool)
				}
				fields := changedFields(old, t.def)
				if p.Status != store.PinPending || p.PendingHash != t.hash {
					q := *p
					q.Status, q.PendingHash, q.Pending = store.PinPending, t.hash, pinned
					first := now
					q.PendingFirstSeen = &first
					out = append(out, &q)
					byTool[t.name] = &q
				}
				verdicts = append(verdicts, MCPPinVerdict{Tool: t.name, Observation: PinChanged, Approved: false, Hash: t.hash, Fields: fields})
				findings = append(findings, finding{PinChanged, t.name, t.hash, store.SeverityCritical, fields, ""})
			}
		}
		if obs.Complete {
			for _, p := range pins {
				if !onPage[p.Tool] {
					verdicts = append(verdicts, MCPPinVerdict{Tool: p.Tool, Observation: PinRemoved, Approved: p.Status == store.PinApproved, Hash: p.Hash})
					findings = append(findings, finding{PinRemoved, p.Tool, p.Hash, store.SeverityInfo, nil, ""})
				}
			}
		}
		return out, nil
	})
	if err != nil {
		return nil, fmt.Errorf("observe MCP tools of %s: %w", obs.Server, err)
	}
	if obs.TraceID == "" || len(findings) == 0 {
		return verdicts, nil
	}
	cites := s.toolsListCitation(ctx, obs.TraceID)
	for _, f := range findings {
		ctxObj := map[string]any{"observation": f.obs, "server": obs.Server, "tool": f.tool, "hash": f.hash, "location": "tools_list"}
		if len(f.fields) > 0 {
			ctxObj["fields"] = f.fields
		}
		if f.renamedFrom != "" {
			ctxObj["renamed_from"] = f.renamedFrom
		}
		cj, _ := json.Marshal(ctxObj)
		sf := &store.Finding{
			RunID: obs.TraceID, OwnerID: ownerID, MonitorID: MCPPinMonitor, Monitor: MCPPinMonitor,
			Key:   f.obs + ":" + obs.Server + "/" + f.tool + ":" + f.hash,
			Title: mcpPinTitle(f.obs, obs.Server, f.tool), Severity: f.severity, Context: cj, Citations: cites.json,
			NodeID: cites.node, CreatedAt: now, UpdatedAt: now,
		}
		if _, _, err := s.st.UpsertFinding(ctx, sf); err != nil {
			return verdicts, fmt.Errorf("store %s finding of trace %s: %w", f.obs, obs.TraceID, err)
		}
	}
	return verdicts, nil
}

type citation struct {
	json json.RawMessage
	node string
}

// toolsListCitation cites the trace's latest tools/list output event
// (a tool event with a "tools" key), where pinning findings are shown;
// none when the trace has no such event.
func (s *Server) toolsListCitation(ctx context.Context, traceID string) citation {
	t, err := s.st.GetTrace(ctx, traceID, true)
	if err != nil {
		return citation{}
	}
	for i := len(t.Messages) - 1; i >= 0; i-- {
		var m struct {
			Role  string          `json:"role"`
			Tools json.RawMessage `json:"tools"`
		}
		if json.Unmarshal(t.Messages[i].Data, &m) != nil || m.Role != "tool" || len(m.Tools) == 0 {
			continue
		}
		var node any
		c := citation{}
		if len(t.Messages[i].NodeIDs) > 0 {
			node, c.node = t.Messages[i].NodeIDs[0], t.Messages[i].NodeIDs[0]
		}
		c.json, _ = json.Marshal([]any{map[string]any{"nodeId": node, "address": fmt.Sprintf("messages.%d", t.Messages[i].Index)}})
		return c
	}
	return citation{}
}

// mcpPinTitle is the content of a pinning finding.
func mcpPinTitle(obs, server, tool string) string {
	switch obs {
	case PinChanged:
		return "Tool definition changed since approval (rug pull): " + server + "/" + tool
	case PinAdded:
		return "Tool added to a pinned server: " + server + "/" + tool
	default:
		return "Pinned tool removed: " + server + "/" + tool
	}
}

// MCPChangedToolDescription is the description of the stub that replaces
// a tool whose definition changed since approval (spec/gateway.md §9.4).
func MCPChangedToolDescription(tool string, fields []string) string {
	return fmt.Sprintf("[Vigil] The definition of tool '%s' changed since it was approved (fields: %s). It is blocked until a user re-approves it.", tool, strings.Join(fields, ", "))
}

// ApproveMCPPin promotes pin id's pending version for the caller (owner
// or admin); 404 when the caller cannot see it, 409 when nothing waits.
func (s *Server) ApproveMCPPin(ctx context.Context, c *Caller, id string) (*store.MCPPin, error) {
	p, err := s.visiblePin(ctx, c, id)
	if err != nil {
		return nil, err
	}
	got, err := s.st.ApproveMCPPin(ctx, p.ID, c.User.Username, s.now())
	if errors.Is(err, store.ErrConflict) {
		return nil, apiErr(409, "version_conflict", "pin %s has no pending version to approve", id)
	}
	return got, err
}

func (s *Server) visiblePin(ctx context.Context, c *Caller, id string) (*store.MCPPin, error) {
	p, err := s.st.GetMCPPin(ctx, id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && !s.canWrite(c.principal(), p.OwnerID)) {
		return nil, notFound("MCP pin %s not found", id)
	}
	return p, err
}

// sortPins orders pins by server, then tool.
func sortPins(pins []*store.MCPPin) {
	slices.SortFunc(pins, func(a, b *store.MCPPin) int {
		if c := strings.Compare(a.Server, b.Server); c != 0 {
			return c
		}
		return strings.Compare(a.Tool, b.Tool)
	})
}

// mcpTime formats an optional time for the API, nil as null.
func mcpTime(t *time.Time) any {
	if t == nil {
		return nil
	}
	return formatTime(*t)
}
