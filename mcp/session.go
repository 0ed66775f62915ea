package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vigilhq/vigil/client"
	"github.com/vigilhq/vigil/server"
)

// Options configure a Session. The zero value proxies without
// guardrails, pinning or recording.
type Options struct {
	// SessionID names the session (the trace's metadata.session_id and
	// the session record's id); "" generates "vgl-<ULID>".
	SessionID string
	// ServerName is the pinning identity when set (--server-name or the
	// configured server); else serverInfo.name, else Upstream.
	ServerName string
	// Upstream is the command basename or the URL host and path.
	Upstream string
	// Transport is "stdio" or "streamable-http".
	Transport string
	// Dataset records the session into this dataset; "" records nothing.
	Dataset string
	// SessionKey ("h:<Invariant-Session value>") makes the session
	// record into the open trace of the dataset with that key, such as
	// the one the LLM gateway keeps for the same agent session. "" means
	// "m:<session id>", which a proxy restarted under a live session
	// finds again.
	SessionKey string
	// Store judges pins and records; nil disables both.
	Store Store
	// Guard holds the blocking rules; nil applies none.
	Guard *Guard
	// RugPullAction is "block" (default) or "log" (spec/gateway.md §9.4).
	RugPullAction string
	// FailureFormat is "error" (default) or "content" (§9.2).
	FailureFormat string
	// Metadata are custom trace metadata fields (--metadata-<k>=<v>).
	Metadata map[string]any
	// SystemUser is user@host of the wrapper's process ("" on HTTP).
	SystemUser string
	// Logger receives protocol problems and store failures; nil
	// discards them.
	Logger *slog.Logger
}

// impl is a client's or server's name and version.
type impl struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// pendingReq is a client request waiting for the server's answer.
type pendingReq struct {
	method string
	callID string // tools/call
	tool   string // tools/call
}

// Session is the state of one MCP session between a client and a server:
// the requests awaiting answers, the trace recorded so far, the tools
// blocked by pinning. Its two entry points, FromClient and FromServer,
// are called by the transports (stdio wrapper, streamable HTTP proxy) for
// each message in its direction; each direction is processed in order
// by its caller, and both may run at once.
type Session struct {
	opt Options
	log *slog.Logger
	rec *recorder

	mu           sync.Mutex
	events       []json.RawMessage
	pending      map[string]*pendingReq
	callIDs      map[string]int
	client       impl
	server       impl
	protocol     string
	blocked      map[string]GuardError // tool name → the pin error blocking it
	tools        json.RawMessage       // the latest tools/list page
	instructions string                // the server's instructions
	blockedCalls int
	traceID      string
	ended        bool
	// guarded: blocking rules may apply, so the events are kept as the
	// past of later checks; inert: nothing is checked or recorded, so no
	// event is even built.
	guarded, inert bool
	// checkMu serialises checks with the recording of what they judged,
	// so the monitors' events stay aligned with the session's.
	checkMu sync.Mutex
	mons    monitors
}

// NewSession starts a session.
func NewSession(opt Options) *Session {
	if opt.SessionID == "" {
		opt.SessionID = "vgl-" + newULID()
	}
	if opt.RugPullAction == "" {
		opt.RugPullAction = "block"
	}
	if opt.FailureFormat == "" {
		opt.FailureFormat = "error"
	}
	s := &Session{opt: opt, log: opt.Logger, pending: map[string]*pendingReq{}, callIDs: map[string]int{}, blocked: map[string]GuardError{}}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if opt.Store != nil && opt.Dataset != "" {
		s.rec = newRecorder(opt.Store, opt.Dataset, s.sessionKey, s.ID, s.log, s.traceMetadata, s.traceCreated)
	}
	s.guarded = opt.Guard != nil
	s.inert = !s.guarded && s.rec == nil
	return s
}

// ID is the session id.
func (s *Session) ID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.opt.SessionID
}

func (s *Session) sessionKey() string {
	if s.opt.SessionKey != "" {
		return s.opt.SessionKey
	}
	return "m:" + s.ID()
}

// setID renames the session before its trace exists (the proxy learns
// the upstream's Mcp-Session-Id from the initialize answer).
func (s *Session) setID(id string) {
	s.mu.Lock()
	s.opt.SessionID = id
	s.mu.Unlock()
}

// TraceID is the id of the session's trace, "" until it is created.
func (s *Session) TraceID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.traceID
}

func (s *Session) traceCreated(id string) {
	s.mu.Lock()
	s.traceID = id
	s.mu.Unlock()
	s.putSession(nil)
}

// serverName is the pinning identity (spec/gateway.md §9.4).
func (s *Session) serverName() string {
	if s.opt.ServerName != "" {
		return s.opt.ServerName
	}
	if s.server.Name != "" {
		return s.server.Name
	}
	return s.opt.Upstream
}

func (s *Session) traceMetadata() map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := map[string]any{}
	for k, v := range s.opt.Metadata {
		m[k] = v
	}
	m["source"] = "mcp"
	m["session_id"] = s.opt.SessionID
	m["system_user"] = s.opt.SystemUser
	m["mcp_client"] = s.client.Name
	m["client_version"] = s.client.Version
	m["mcp_server"] = s.serverName()
	m["server_version"] = s.server.Version
	m["protocol_version"] = s.protocol
	m["transport"] = s.opt.Transport
	if s.tools != nil {
		m["tools"] = s.tools
	}
	m["vigil"] = map[string]any{"blocked_calls": s.blockedCalls}
	return m
}

func (s *Session) putSession(ended *time.Time) {
	if s.opt.Store == nil {
		return
	}
	s.mu.Lock()
	rec := client.MCPSession{ID: s.opt.SessionID, TraceID: s.traceID, Dataset: s.opt.Dataset, Transport: s.opt.Transport,
		ServerName: s.serverName(), ProtocolVersion: s.protocol, Upstream: s.opt.Upstream, SystemUser: s.opt.SystemUser, EndedAt: ended}
	if s.client.Name != "" {
		rec.Client, _ = json.Marshal(s.client)
	}
	if s.server.Name != "" {
		rec.Server, _ = json.Marshal(s.server)
	}
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.opt.Store.PutSession(ctx, rec); err != nil {
		s.log.Warn("mcp: session record not stored", "session", s.ID(), "err", err)
	}
}

// Close ends the session: pending tools/call requests are recorded as
// unanswered, the records are written (waiting at most until ctx ends)
// and the session record gets its end time.
func (s *Session) Close(ctx context.Context) {
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return
	}
	s.ended = true
	var out []json.RawMessage
	for _, p := range s.pending {
		if p.method == "tools/call" {
			out = append(out, errorEvent(p.callID, codeInternalError, "the MCP server gave no answer before the session ended"))
		}
	}
	s.pending = map[string]*pendingReq{}
	s.mu.Unlock()
	s.checkMu.Lock()
	s.record(out...)
	s.checkMu.Unlock()
	if s.rec != nil {
		s.rec.close(ctx)
		now := time.Now()
		if id := s.TraceID(); id != "" {
			s.putSession(&now)
			s.finalMetadata(ctx, id)
		}
	}
}

// finalMetadata brings the trace metadata up to date at the end of the
// session: the latest tools (on a trace of this session's own) and the
// number of blocked calls.
func (s *Session) finalMetadata(ctx context.Context, traceID string) {
	s.rec.mu.Lock()
	own := s.rec.created
	s.rec.mu.Unlock()
	s.mu.Lock()
	patch := map[string]any{}
	if own {
		if s.tools != nil {
			patch["tools"] = s.tools
		}
		patch["vigil"] = map[string]any{"blocked_calls": s.blockedCalls}
	} else {
		patch["vigil"] = map[string]any{"mcp_blocked_calls": s.blockedCalls}
	}
	s.mu.Unlock()
	if err := s.opt.Store.MergeMetadata(ctx, traceID, patch); err != nil {
		s.log.Warn("mcp: trace metadata not updated", "trace", traceID, "err", err)
	}
}

// Abort answers every request still waiting for the server with a
// JSON-RPC error carrying reason (the server crashed or went away) and
// records the error replies; it returns the replies for the client.
func (s *Session) Abort(reason string) [][]byte {
	s.mu.Lock()
	var replies [][]byte
	var evs []json.RawMessage
	for key, p := range s.pending {
		replies = append(replies, errorResponse(json.RawMessage(key), codeInternalError, reason, nil))
		if p.method == "tools/call" {
			evs = append(evs, errorEvent(p.callID, codeInternalError, reason))
		}
	}
	s.pending = map[string]*pendingReq{}
	s.mu.Unlock()
	s.checkMu.Lock()
	s.record(evs...)
	s.checkMu.Unlock()
	return replies
}

// record appends events to the session trace and queues them for the
// store.
func (s *Session) record(events ...json.RawMessage) {
	if len(events) == 0 {
		return
	}
	if s.guarded {
		s.mu.Lock()
		s.events = append(s.events, events...)
		s.mu.Unlock()
	}
	if s.rec != nil {
		s.rec.add(events...)
	}
}

// checkPending applies the blocking rules that admit the session's
// names to the pending events, which follow the session's events. The
// caller holds checkMu and records the events right after.
func (s *Session) checkPending(ctx context.Context, pending ...json.RawMessage) []GuardError {
	if !s.guarded {
		return nil
	}
	s.mu.Lock()
	rules := s.opt.Guard.blocking(s.serverName(), s.client.Name)
	if len(rules) == 0 && !s.opt.Guard.unavailable() {
		s.mu.Unlock()
		return nil
	}
	recorded := s.events[:len(s.events):len(s.events)]
	s.mu.Unlock()
	return s.opt.Guard.check(ctx, &s.mons, rules, recorded, pending, s.params)
}

func (s *Session) params() map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	meta := map[string]any{}
	for k, v := range s.opt.Metadata {
		meta[k] = v
	}
	return map[string]any{"session_id": s.opt.SessionID, "mcp_server": s.serverName(), "mcp_client": s.client.Name,
		"metadata": meta, "action": "block", "dataset": s.opt.Dataset}
}

// FromClient handles a message (or batch) from the client. It returns
// what to forward to the server (nil: nothing) and what to answer the
// client directly (nil: nothing): a blocked tools/call is answered here
// and never reaches the server. A message that is not JSON-RPC is
// answered with a JSON-RPC error.
func (s *Session) FromClient(ctx context.Context, raw []byte) (forward, reply []byte) {
	if len(raw) > MaxMessageBytes {
		return nil, errorResponse(nil, codeInvalidRequest, fmt.Sprintf("message of %d bytes is over the %d-byte limit", len(raw), MaxMessageBytes), nil)
	}
	elems, batch := splitBatch(raw)
	if !batch {
		m, err := parseMessage(raw)
		if err != nil {
			return nil, errorResponse(nil, codeParseError, "Vigil: invalid JSON-RPC message from the client: "+err.Error(), nil)
		}
		f, r := s.clientMessage(ctx, m)
		if !f {
			return nil, r
		}
		return raw, r
	}
	if len(elems) == 0 {
		return nil, errorResponse(nil, codeInvalidRequest, "Vigil: empty JSON-RPC batch", nil)
	}
	var fwd, rep [][]byte
	for i, e := range elems {
		m, err := parseMessage(e)
		if err != nil {
			rep = append(rep, errorResponse(nil, codeInvalidRequest, fmt.Sprintf("Vigil: batch element %d: %v", i, err), nil))
			continue
		}
		f, r := s.clientMessage(ctx, m)
		if f {
			fwd = append(fwd, e)
		}
		if r != nil {
			rep = append(rep, r)
		}
	}
	return joinBatch(fwd, false), joinBatch(rep, false)
}

// clientMessage handles one client message: whether to forward it, and
// a direct reply.
func (s *Session) clientMessage(ctx context.Context, m *message) (bool, []byte) {
	if !m.isRequest() {
		return true, nil
	}
	key := idKey(m.ID)
	switch m.Method {
	case "initialize", "server/discover":
		var p struct {
			ProtocolVersion string `json:"protocolVersion"`
			ClientInfo      impl   `json:"clientInfo"`
			Meta            struct {
				ProtocolVersion string `json:"io.modelcontextprotocol/protocolVersion"`
				ClientInfo      impl   `json:"io.modelcontextprotocol/clientInfo"`
			} `json:"_meta"`
		}
		_ = json.Unmarshal(m.Params, &p)
		s.mu.Lock()
		s.client = p.ClientInfo
		if s.client.Name == "" {
			s.client = p.Meta.ClientInfo
		}
		s.protocol = firstNonEmpty(p.ProtocolVersion, p.Meta.ProtocolVersion)
		s.pending[key] = &pendingReq{method: m.Method}
		s.mu.Unlock()
		return true, nil
	case "tools/list":
		s.mu.Lock()
		s.pending[key] = &pendingReq{method: m.Method}
		s.mu.Unlock()
		return true, nil
	case "tools/call":
		return s.toolCall(ctx, m, key)
	}
	s.noteClientMeta(m)
	return true, nil
}

// noteClientMeta takes the client's name and protocol version from the
// per-request _meta of the stateless revision (2026-07-28) when no
// initialize gave them.
func (s *Session) noteClientMeta(m *message) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.client.Name != "" && s.protocol != "" {
		return
	}
	var p struct {
		Meta struct {
			ProtocolVersion string `json:"io.modelcontextprotocol/protocolVersion"`
			ClientInfo      impl   `json:"io.modelcontextprotocol/clientInfo"`
		} `json:"_meta"`
	}
	if json.Unmarshal(m.Params, &p) != nil {
		return
	}
	if s.client.Name == "" {
		s.client = p.Meta.ClientInfo
	}
	if s.protocol == "" {
		s.protocol = p.Meta.ProtocolVersion
	}
}

func (s *Session) toolCall(ctx context.Context, m *message, key string) (bool, []byte) {
	s.noteClientMeta(m)
	var p struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if err := json.Unmarshal(m.Params, &p); err != nil || p.Name == "" {
		// Not ours to judge: the server answers with its own error.
		s.mu.Lock()
		s.pending[key] = &pendingReq{method: m.Method}
		s.mu.Unlock()
		return true, nil
	}
	if s.inert {
		s.mu.Lock()
		pinErr, pinBlocked := s.blocked[p.Name]
		if !pinBlocked && strings.HasPrefix(p.Name, "blocked_") {
			pinErr, pinBlocked = s.blocked[strings.TrimPrefix(p.Name, "blocked_")]
		}
		if pinBlocked {
			s.blockedCalls++
		}
		s.mu.Unlock()
		if !pinBlocked {
			return true, nil
		}
		reply, _ := s.blockResponse(m.ID, []GuardError{pinErr})
		return false, reply
	}
	args := p.Arguments
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	s.mu.Lock()
	callID := s.newCallIDLocked(m.ID)
	pinErr, pinBlocked := s.blocked[p.Name]
	if !pinBlocked && strings.HasPrefix(p.Name, "blocked_") {
		pinErr, pinBlocked = s.blocked[strings.TrimPrefix(p.Name, "blocked_")]
	}
	s.mu.Unlock()
	call := callEvent(callID, p.Name, args)
	var errs []GuardError
	s.checkMu.Lock()
	defer s.checkMu.Unlock()
	if pinBlocked {
		errs = []GuardError{pinErr}
	} else {
		errs = s.checkPending(ctx, call)
	}
	if len(errs) == 0 {
		s.mu.Lock()
		s.pending[key] = &pendingReq{method: m.Method, callID: callID, tool: p.Name}
		s.mu.Unlock()
		s.record(call)
		return true, nil
	}
	reply, text := s.blockResponse(m.ID, errs)
	s.mu.Lock()
	s.blockedCalls++
	s.mu.Unlock()
	s.record(markBlocked(call), markBlocked(outputEvent(callID, text, true)))
	s.log.Info("mcp: tools/call blocked", "session", s.ID(), "tool", p.Name, "errors", len(errs))
	return false, reply
}

func (s *Session) newCallIDLocked(id json.RawMessage) string {
	base := "call_" + strings.Trim(idKey(id), `"`)
	n := s.callIDs[base]
	s.callIDs[base] = n + 1
	if n == 0 {
		return base
	}
	return base + "_" + strconv.Itoa(n)
}

// blockResponse is the §9.2 block response for request id, and its
// message text.
func (s *Session) blockResponse(id json.RawMessage, errs []GuardError) ([]byte, string) {
	ej, _ := json.Marshal(errs)
	text := "[Invariant Guardrails] The MCP tool call was blocked for security reasons. Do not attempt to circumvent this block, rather explain to the user based on the following output what went wrong: " + string(ej)
	if s.opt.FailureFormat == "content" {
		return resultResponse(id, map[string]any{"content": []any{map[string]any{"type": "text", "text": text}}, "isError": true}), text
	}
	return errorResponse(id, codeInvalidRequest, text, map[string]any{"errors": errs, "trace_id": s.TraceID()}), text
}

// FromServer handles a message (or batch) from the server and returns
// what to send to the client: the message itself, or the block response
// that replaces a result, or tools/list with stubs.
func (s *Session) FromServer(ctx context.Context, raw []byte) []byte {
	s.mu.Lock()
	waiting := len(s.pending)
	s.mu.Unlock()
	if waiting == 0 {
		// No intercepted request awaits an answer: nothing to look at.
		return raw
	}
	elems, batch := splitBatch(raw)
	if !batch {
		m, err := parseMessage(raw)
		if err != nil {
			return raw
		}
		if out := s.serverMessage(ctx, m); out != nil {
			return out
		}
		return raw
	}
	out := make([][]byte, len(elems))
	for i, e := range elems {
		out[i] = e
		if m, err := parseMessage(e); err == nil {
			if r := s.serverMessage(ctx, m); r != nil {
				out[i] = r
			}
		}
	}
	return joinBatch(out, false)
}

// serverMessage returns the replacement of a server message, or nil to
// send it unchanged.
func (s *Session) serverMessage(ctx context.Context, m *message) []byte {
	if !m.isResponse() {
		return nil
	}
	key := idKey(m.ID)
	s.mu.Lock()
	p := s.pending[key]
	delete(s.pending, key)
	s.mu.Unlock()
	if p == nil {
		return nil
	}
	switch p.method {
	case "initialize", "server/discover":
		var r struct {
			ProtocolVersion string   `json:"protocolVersion"`
			Instructions    string   `json:"instructions"`
			ServerInfo      impl     `json:"serverInfo"`
			Supported       []string `json:"supportedVersions"`
			Meta            struct {
				ServerInfo impl `json:"io.modelcontextprotocol/serverInfo"`
			} `json:"_meta"`
		}
		_ = json.Unmarshal(m.Result, &r)
		s.mu.Lock()
		s.server = r.ServerInfo
		if s.server.Name == "" {
			s.server = r.Meta.ServerInfo
		}
		if r.ProtocolVersion != "" {
			s.protocol = r.ProtocolVersion
		}
		s.instructions = r.Instructions
		s.mu.Unlock()
		return nil
	case "tools/list":
		return s.toolsList(ctx, m)
	case "tools/call":
		if p.callID == "" {
			return nil
		}
		return s.toolResult(ctx, m, p)
	}
	return nil
}

func (s *Session) toolResult(ctx context.Context, m *message, p *pendingReq) []byte {
	var out json.RawMessage
	if len(m.Error) > 0 {
		var e struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		}
		_ = json.Unmarshal(m.Error, &e)
		out = errorEvent(p.callID, e.Code, e.Message)
		s.checkMu.Lock()
		s.record(out)
		s.checkMu.Unlock()
		return nil
	}
	var r struct {
		Content           json.RawMessage `json:"content"`
		IsError           bool            `json:"isError"`
		StructuredContent json.RawMessage `json:"structuredContent"`
	}
	_ = json.Unmarshal(m.Result, &r)
	out = resultEvent(p.callID, r.Content, r.IsError, r.StructuredContent)
	s.checkMu.Lock()
	defer s.checkMu.Unlock()
	errs := s.checkPending(ctx, out)
	if len(errs) == 0 {
		s.record(out)
		return nil
	}
	reply, _ := s.blockResponse(m.ID, errs)
	s.mu.Lock()
	s.blockedCalls++
	s.mu.Unlock()
	s.record(markBlocked(out))
	s.log.Info("mcp: tools/call result blocked", "session", s.ID(), "tool", p.tool, "errors", len(errs))
	return reply
}

// toolsList pins the page's tools, replaces tools whose definition
// changed since approval by stubs, then applies the blocking rules to
// the list (a violation stubs every tool).
func (s *Session) toolsList(ctx context.Context, m *message) []byte {
	if len(m.Result) == 0 {
		return nil
	}
	var res map[string]json.RawMessage
	if json.Unmarshal(m.Result, &res) != nil || res == nil {
		return nil
	}
	var tools []json.RawMessage
	if json.Unmarshal(res["tools"], &tools) != nil {
		return nil
	}
	_, more := res["nextCursor"]
	if c := res["nextCursor"]; string(c) == "null" || string(c) == `""` {
		more = false
	}
	s.mu.Lock()
	callID := s.newCallIDLocked(m.ID)
	s.tools = res["tools"]
	s.mu.Unlock()
	call := callEvent(callID, "tools/list", json.RawMessage("{}"))
	out := listEvent(callID, tools)
	s.checkMu.Lock()
	s.record(call, out)
	s.mu.Lock()
	outIdx := len(s.events) - 1 // where the list output is, for its check
	s.mu.Unlock()
	s.checkMu.Unlock()

	changed := false
	if s.opt.Store != nil {
		traceID := ""
		if s.rec != nil {
			fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			traceID = s.rec.flush(fctx)
			cancel()
		}
		// The server's instructions are pinned with the last page, as a
		// pseudo-tool whose description they are.
		observed := tools
		s.mu.Lock()
		instr := s.instructions
		s.mu.Unlock()
		if instr != "" && !more {
			it, _ := json.Marshal(map[string]string{"name": InstructionsPin, "description": instr})
			observed = append(append([]json.RawMessage(nil), tools...), it)
		}
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		verdicts, err := s.opt.Store.ObservePins(pctx, s.serverName(), traceID, observed, !more)
		cancel()
		if err != nil {
			s.log.Warn("mcp: pin check failed; tools passed unpinned", "server", s.serverName(), "err", err)
		}
		byName := map[string]client.MCPPinVerdict{}
		for _, v := range verdicts {
			byName[v.Tool] = v
		}
		iv, instrChanged := byName[InstructionsPin]
		instrChanged = instrChanged && iv.Observation == server.PinChanged && !iv.Approved && s.opt.RugPullAction != "log"
		s.mu.Lock()
		for i, t := range tools {
			var tn struct {
				Name string `json:"name"`
			}
			_ = json.Unmarshal(t, &tn)
			v, ok := byName[tn.Name]
			if instrChanged {
				// Changed instructions can steer any tool: all are held.
				title := "Server instructions changed since approval (rug pull): " + s.serverName()
				s.blocked[tn.Name] = GuardError{Key: "changed:" + s.serverName() + "/" + InstructionsPin + ":" + iv.Hash, Args: []any{title},
					Kwargs: json.RawMessage("{}"), Ranges: []string{},
					Guardrail: map[string]any{"id": server.MCPPinMonitor, "name": "MCP tool pinning", "content": "", "action": "block", "version": 0}}
				tools[i] = instructionsStub(tn.Name, s.serverName())
				changed = true
				continue
			}
			if !ok {
				continue
			}
			if v.Observation == server.PinChanged && !v.Approved {
				if s.opt.RugPullAction != "log" {
					title := "Tool definition changed since approval (rug pull): " + s.serverName() + "/" + tn.Name
					s.blocked[tn.Name] = GuardError{Key: "changed:" + s.serverName() + "/" + tn.Name + ":" + v.Hash, Args: []any{title},
						Kwargs: json.RawMessage("{}"), Ranges: []string{},
						Guardrail: map[string]any{"id": server.MCPPinMonitor, "name": "MCP tool pinning", "content": "", "action": "block", "version": 0}}
					tools[i] = changedStub(tn.Name, v.Fields)
					changed = true
				}
			} else {
				delete(s.blocked, tn.Name)
			}
		}
		s.mu.Unlock()
	}

	var errs []GuardError
	if s.guarded {
		s.checkMu.Lock()
		s.mu.Lock()
		rules := s.opt.Guard.blocking(s.serverName(), s.client.Name)
		recorded := s.events[:outIdx:outIdx]
		last := s.events[outIdx : outIdx+1 : outIdx+1]
		s.mu.Unlock()
		// The list output is the pending event.
		errs = s.opt.Guard.check(ctx, &s.mons, rules, recorded, last, s.params)
		s.checkMu.Unlock()
	}
	if len(errs) > 0 {
		ej, _ := json.Marshal(errs)
		for i, t := range tools {
			var tn struct {
				Name string `json:"name"`
			}
			_ = json.Unmarshal(t, &tn)
			tools[i] = guardStub(tn.Name, string(ej))
		}
		changed = true
	}
	if !changed {
		return nil
	}
	res["tools"], _ = json.Marshal(tools)
	return resultResponse(m.ID, res)
}

func changedStub(name string, fields []string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"name": "blocked_" + name, "description": server.MCPChangedToolDescription(name, fields),
		"inputSchema": map[string]any{"type": "object", "properties": map[string]any{}, "required": []string{}},
		"annotations": map[string]any{"title": "This tool was blocked by Vigil: its definition changed since approval."}})
	return b
}

// InstructionsPin is the pin name of a server's instructions, which are
// pinned like a tool whose description they are (not a valid tool name).
const InstructionsPin = "[instructions]"

func instructionsStub(name, srv string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"name": "blocked_" + name,
		"description": fmt.Sprintf("[Vigil] The instructions of server '%s' changed since they were approved. Its tools are blocked until a user re-approves them.", srv),
		"inputSchema": map[string]any{"type": "object", "properties": map[string]any{}, "required": []string{}},
		"annotations": map[string]any{"title": "This tool was blocked by Vigil: the server's instructions changed since approval."}})
	return b
}

func guardStub(name, errs string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"name": "blocked_" + name,
		"description": "[Invariant Guardrails] This server was blocked from advertising its tools due to a security guardrail failure. " + errs,
		"inputSchema": map[string]any{"type": "object", "properties": map[string]any{}, "required": []string{}},
		"annotations": map[string]any{"title": "This tool was blocked by security guardrails."}})
	return b
}

func firstNonEmpty(a ...string) string {
	for _, s := range a {
		if s != "" {
			return s
		}
	}
	return ""
}
