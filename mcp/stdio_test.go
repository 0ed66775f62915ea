package mcp_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/vigilhq/vigil/client"
	"github.com/vigilhq/vigil/mcp"
	"github.com/vigilhq/vigil/store"
)

// Protocol revisions the go-sdk client speaks: the session-based one and
// the stateless one (server/discover, per-request _meta).
var revisions = []string{"2025-11-25", "2026-07-28"}

// wrapped is a go-sdk client session through mcp.RunStdio to the test
// server.
type wrapped struct {
	cs     *sdk.ClientSession
	code   chan int
	stderr *syncBuffer
	calls  string // the server's call log
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// serverEnv is the environment of a test server in addition to the
// test's own.
func serverEnv(extra ...string) []string {
	return append(append(mcp.ChildEnv(os.Environ()), "VIGIL_MCP_TESTSERVER=1"), extra...)
}

// startWrapped starts the wrapper on the test server with env and
// connects a go-sdk client speaking revision.
func startWrapped(t *testing.T, opt mcp.Options, revision string, env ...string) *wrapped {
	t.Helper()
	calls := filepath.Join(t.TempDir(), "calls.log")
	cr, cw := io.Pipe() // client → wrapper
	wr, ww := io.Pipe() // wrapper → client
	w := &wrapped{code: make(chan int, 1), stderr: &syncBuffer{}, calls: calls}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		code, err := mcp.RunStdio(context.Background(), mcp.StdioConfig{
			Command: []string{exe, "-test.run=^$"}, Session: opt, Stdin: cr, Stdout: ww, Stderr: w.stderr,
			Env: serverEnv(append(env, "VIGIL_MCP_CALLLOG="+calls)...), Grace: 2 * time.Second, NoSignals: true,
		})
		if err != nil {
			t.Errorf("RunStdio: %v", err)
		}
		ww.Close()
		w.code <- code
	}()
	c := sdk.NewClient(&sdk.Implementation{Name: "test-client", Version: "0.1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &sdk.IOTransport{Reader: wr, Writer: cw}, &sdk.ClientSessionOptions{ProtocolVersion: revision})
	if err != nil {
		t.Fatalf("connect through the wrapper: %v (stderr: %s)", err, w.stderr.String())
	}
	w.cs = cs
	return w
}

// close ends the client session and returns the wrapper's exit status.
func (w *wrapped) close(t *testing.T) int {
	t.Helper()
	_ = w.cs.Close()
	select {
	case c := <-w.code:
		return c
	case <-time.After(20 * time.Second):
		t.Fatal("the wrapper did not exit")
		return -1
	}
}

func (w *wrapped) serverCalls() []string {
	b, _ := os.ReadFile(w.calls)
	return strings.Fields(string(b))
}

func toolNames(t *testing.T, cs *sdk.ClientSession) map[string]*sdk.Tool {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	out := map[string]*sdk.Tool{}
	for _, tl := range res.Tools {
		out[tl.Name] = tl
	}
	return out
}

func callText(t *testing.T, cs *sdk.ClientSession, name string, args any) (string, bool, error) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return "", false, err
	}
	var sb strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			sb.WriteString(tc.Text)
		}
	}
	return sb.String(), res.IsError, nil
}

const argRule = `raise "forbidden text" if:
    (call: ToolCall)
    call is tool:echo
    "forbidden" in call.function.arguments.text
`

const outRule = `raise "secret in tool output" if:
    (out: ToolOutput)
    "SECRET" in out.content
`

func guard(t *testing.T, srcs ...string) *mcp.Guard {
	t.Helper()
	g := &mcp.Guard{}
	for i, src := range srcs {
		r, err := mcp.LoadRule("g"+string(rune('0'+i)), "rule", src, "block")
		if err != nil {
			t.Fatal(err)
		}
		g.Rules = append(g.Rules, r)
	}
	return g
}

func TestStdioPassThroughAndRecording(t *testing.T) {
	for _, rev := range revisions {
		t.Run(rev, func(t *testing.T) {
			b := newBackend(t)
			opt := mcp.Options{Store: mcp.ClientStore{C: b.c}, Dataset: "mcp", Metadata: map[string]any{"team": "infra"}, SystemUser: "alice@host"}
			w := startWrapped(t, opt, rev)
			tools := toolNames(t, w.cs)
			for _, n := range []string{"echo", "secret", "crash", "slow"} {
				if tools[n] == nil {
					t.Errorf("tool %s missing from tools/list: %v", n, tools)
				}
			}
			text, isErr, err := callText(t, w.cs, "echo", map[string]any{"text": "hello"})
			if err != nil || isErr || text != "echo: hello" {
				t.Fatalf("echo = %q, %v, %v", text, isErr, err)
			}
			if code := w.close(t); code != 0 {
				t.Errorf("exit status %d, want 0", code)
			}
			trs := b.traces(t, "mcp")
			if len(trs) != 1 {
				t.Fatalf("%d traces, want 1", len(trs))
			}
			tr := trs[0]
			if len(tr.Messages) != 4 {
				t.Fatalf("%d events, want 4: %s", len(tr.Messages), tr.Messages)
			}
			var call struct {
				Role      string
				ToolCalls []struct {
					ID       string
					Function struct {
						Name      string
						Arguments map[string]any
					}
				} `json:"tool_calls"`
			}
			json.Unmarshal(tr.Messages[2], &call)
			if call.Role != "assistant" || len(call.ToolCalls) != 1 || call.ToolCalls[0].Function.Name != "echo" || call.ToolCalls[0].Function.Arguments["text"] != "hello" {
				t.Errorf("call event = %s", tr.Messages[2])
			}
			mustContain(t, "list output", string(tr.Messages[1]), `"tools":[`)
			mustContain(t, "result", string(tr.Messages[3]), `"tool_call_id":"`+call.ToolCalls[0].ID+`"`)
			mustContain(t, "result", string(tr.Messages[3]), `echo: hello`)
			md := tr.ExtraMetadata
			if md["source"] != "mcp" || md["mcp_client"] != "test-client" || md["mcp_server"] != "testsrv" || md["protocol_version"] != rev ||
				md["team"] != "infra" || md["transport"] != "stdio" || md["system_user"] != "alice@host" {
				t.Errorf("metadata = %v", md)
			}
			sess, _, err := b.c.MCPSessions(context.Background(), "mcp", "", 0, "")
			if err != nil || len(sess) != 1 || sess[0].TraceID != tr.ID || sess[0].EndedAt == nil {
				t.Errorf("sessions = %+v, %v", sess, err)
			}
			pins, err := b.c.MCPPins(context.Background(), "testsrv")
			if err != nil || len(pins) != 4 {
				t.Errorf("pins = %d, %v; want the 4 tools pinned on first use", len(pins), err)
			}
		})
	}
}

func TestStdioGuardrails(t *testing.T) {
	for _, rev := range revisions {
		t.Run(rev, func(t *testing.T) {
			b := newBackend(t)
			opt := mcp.Options{Store: mcp.ClientStore{C: b.c}, Dataset: "guarded", Guard: guard(t, argRule, outRule)}
			w := startWrapped(t, opt, rev)
			// A blocked call: a JSON-RPC error, and the server never sees it.
			_, _, err := callText(t, w.cs, "echo", map[string]any{"text": "a forbidden word"})
			if err == nil {
				t.Fatal("blocked call succeeded")
			}
			mustContain(t, "block error", err.Error(), "[Invariant Guardrails] The MCP tool call was blocked")
			mustContain(t, "block error", err.Error(), "forbidden text")
			// An allowed call still passes.
			if text, _, err := callText(t, w.cs, "echo", map[string]any{"text": "fine"}); err != nil || text != "echo: fine" {
				t.Fatalf("allowed call: %q, %v", text, err)
			}
			// A blocked result: the tool ran, its output is withheld.
			_, _, err = callText(t, w.cs, "secret", map[string]any{})
			if err == nil {
				t.Fatal("secret result passed")
			}
			mustContain(t, "result block", err.Error(), "secret in tool output")
			w.close(t)
			if got := strings.Join(w.serverCalls(), ","); got != "echo,secret" {
				t.Errorf("server saw calls %q, want echo,secret (the blocked call never reached it)", got)
			}
			tr := b.traces(t, "guarded")[0]
			blocked := 0
			for _, m := range tr.Messages {
				if strings.Contains(string(m), `"vigil_blocked":true`) {
					blocked++
				}
			}
			if blocked != 3 { // blocked call + its block output, blocked result
				t.Errorf("%d events marked vigil_blocked, want 3: %s", blocked, tr.Messages)
			}
			if v, _ := tr.ExtraMetadata["vigil"].(map[string]any); v["blocked_calls"] != float64(2) {
				t.Errorf("metadata vigil = %v, want blocked_calls 2", tr.ExtraMetadata["vigil"])
			}
		})
	}
}

func TestStdioContentFailureFormat(t *testing.T) {
	opt := mcp.Options{Guard: guard(t, argRule), FailureFormat: "content"}
	w := startWrapped(t, opt, "2025-11-25")
	text, isErr, err := callText(t, w.cs, "echo", map[string]any{"text": "forbidden"})
	if err != nil || !isErr {
		t.Fatalf("content format: %q isError=%v err=%v, want a tool result with isError", text, isErr, err)
	}
	mustContain(t, "content", text, "[Invariant Guardrails]")
	w.close(t)
}

// findings returns the mcp-pin findings of the owner.
func pinFindings(t *testing.T, b *backend) []*store.Finding {
	t.Helper()
	fs, err := b.st.ListFindings(context.Background(), store.FindingFilter{MonitorID: "mcp-pin"})
	if err != nil {
		t.Fatal(err)
	}
	return fs
}

func TestStdioRugPull(t *testing.T) {
	b := newBackend(t)
	opt := mcp.Options{Store: mcp.ClientStore{C: b.c}, Dataset: "pins"}
	// Run 1: trust on first use.
	w := startWrapped(t, opt, "2025-11-25")
	toolNames(t, w.cs)
	w.close(t)
	// Run 2: echo's description changed: it is replaced by a stub and
	// its calls are blocked, under either name.
	w = startWrapped(t, opt, "2025-11-25", "VIGIL_MCP_DESC=v2")
	tools := toolNames(t, w.cs)
	if tools["echo"] != nil || tools["blocked_echo"] == nil {
		t.Fatalf("tools after the change: %v, want blocked_echo only", tools)
	}
	mustContain(t, "stub", tools["blocked_echo"].Description, "[Vigil] The definition of tool 'echo' changed since it was approved (fields: description)")
	for _, name := range []string{"echo", "blocked_echo"} {
		if _, _, err := callText(t, w.cs, name, map[string]any{"text": "x"}); err == nil || !strings.Contains(err.Error(), "rug pull") {
			t.Errorf("call %s on a changed tool: %v, want the block response", name, err)
		}
	}
	if text, _, err := callText(t, w.cs, "secret", nil); err != nil || !strings.Contains(text, "SECRET") {
		t.Errorf("unchanged tool: %q, %v", text, err)
	}
	w.close(t)
	if calls := w.serverCalls(); len(calls) != 1 {
		t.Errorf("server saw %v, want only the secret call", calls)
	}
	fs := pinFindings(t, b)
	if len(fs) != 1 || fs[0].Severity != "critical" || !strings.HasPrefix(fs[0].Key, "changed:testsrv/echo:") ||
		fs[0].Title != "Tool definition changed since approval (rug pull): testsrv/echo" {
		t.Fatalf("findings = %+v", fs)
	}
	// Approve through the API, as `vigil mcp pins approve` does.
	pins, _ := b.c.MCPPins(context.Background(), "testsrv")
	var echo *client.MCPPin
	for i := range pins {
		if pins[i].Tool == "echo" {
			echo = &pins[i]
		}
	}
	if echo == nil || echo.Status != "pending" {
		t.Fatalf("echo pin = %+v, want pending", echo)
	}
	if _, err := b.c.ApproveMCPPin(context.Background(), echo.ID); err != nil {
		t.Fatal(err)
	}
	// Run 3: the approved new version passes.
	w = startWrapped(t, opt, "2025-11-25", "VIGIL_MCP_DESC=v2")
	tools = toolNames(t, w.cs)
	if tools["echo"] == nil || tools["blocked_echo"] != nil {
		t.Fatalf("tools after approval: %v", tools)
	}
	if text, _, err := callText(t, w.cs, "echo", map[string]any{"text": "ok"}); err != nil || text != "echo: ok" {
		t.Errorf("echo after approval: %q, %v", text, err)
	}
	w.close(t)
}

func TestStdioRenameAndRemove(t *testing.T) {
	b := newBackend(t)
	opt := mcp.Options{Store: mcp.ClientStore{C: b.c}, Dataset: "pins"}
	w := startWrapped(t, opt, "2026-07-28")
	toolNames(t, w.cs)
	w.close(t)
	// echo renamed to repeat under an unchanged definition; secret gone.
	w = startWrapped(t, opt, "2026-07-28", "VIGIL_MCP_ECHO_NAME=repeat", "VIGIL_MCP_NO_SECRET=1")
	tools := toolNames(t, w.cs)
	if tools["repeat"] == nil {
		t.Fatalf("renamed tool not listed: %v", tools)
	}
	if text, _, err := callText(t, w.cs, "repeat", map[string]any{"text": "r"}); err != nil || text != "echo: r" {
		t.Errorf("renamed tool call: %q, %v (an added tool is approved)", text, err)
	}
	w.close(t)
	got := map[string]string{}
	for _, f := range pinFindings(t, b) {
		got[strings.SplitN(f.Key, ":", 3)[0]+" "+strings.SplitN(f.Key, ":", 3)[1]] = f.Severity
		if strings.HasPrefix(f.Key, "added:") && !strings.Contains(string(f.Context), `"renamed_from":"echo"`) {
			t.Errorf("added finding context %s, want renamed_from echo", f.Context)
		}
	}
	want := map[string]string{"added testsrv/repeat": "warn", "removed testsrv/echo": "info", "removed testsrv/secret": "info"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("finding %s: severity %q, want %q (all: %v)", k, got[k], v, got)
		}
	}
}

func TestStdioServerCrash(t *testing.T) {
	b := newBackend(t)
	w := startWrapped(t, mcp.Options{Store: mcp.ClientStore{C: b.c}, Dataset: "crash"}, "2025-11-25")
	_, _, err := callText(t, w.cs, "crash", nil)
	if err == nil {
		t.Fatal("a crashed call succeeded")
	}
	select {
	case code := <-w.code:
		if code != 3 {
			t.Errorf("exit status %d, want the server's 3", code)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("wrapper did not exit after the server crashed")
	}
	_ = w.cs.Close()
	tr := b.traces(t, "crash")
	if len(tr) != 1 || len(tr[0].Messages) != 2 || !strings.Contains(string(tr[0].Messages[1]), `"error":{`) {
		t.Fatalf("crash trace = %+v", tr)
	}
}

func TestStdioCancel(t *testing.T) {
	w := startWrapped(t, mcp.Options{}, "2025-11-25")
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	_, err := w.cs.CallTool(ctx, &sdk.CallToolParams{Name: "slow", Arguments: map[string]any{}})
	cancel()
	if err == nil {
		t.Fatal("cancelled call returned a result")
	}
	// The session goes on.
	if text, _, err := callText(t, w.cs, "echo", map[string]any{"text": "after"}); err != nil || text != "echo: after" {
		t.Fatalf("call after cancel: %q, %v", text, err)
	}
	w.close(t)
}

func TestStdioNonJSONFromServer(t *testing.T) {
	w := startWrapped(t, mcp.Options{}, "2025-11-25", "VIGIL_MCP_NONJSON=1")
	if text, _, err := callText(t, w.cs, "echo", map[string]any{"text": "x"}); err != nil || text != "echo: x" {
		t.Fatalf("call: %q, %v", text, err)
	}
	w.close(t)
	mustContain(t, "stderr", w.stderr.String(), "this line is not JSON")
}

func TestStdioExitStatus(t *testing.T) {
	w := startWrapped(t, mcp.Options{}, "2025-11-25", "VIGIL_MCP_EXIT=7")
	if code := w.close(t); code != 7 {
		t.Errorf("exit status %d, want 7", code)
	}
}

// TestStdioBadInput writes raw lines to the wrapper: each bad one gets a
// JSON-RPC error and the next request is still served.
func TestStdioBadInput(t *testing.T) {
	exe, _ := os.Executable()
	cr, cw := io.Pipe()
	wr, ww := io.Pipe()
	done := make(chan int, 1)
	go func() {
		code, _ := mcp.RunStdio(context.Background(), mcp.StdioConfig{Command: []string{exe, "-test.run=^$"}, Stdin: cr, Stdout: ww,
			Stderr: io.Discard, Env: serverEnv(), Grace: time.Second, NoSignals: true})
		ww.Close()
		done <- code
	}()
	rd := bufio.NewReader(wr)
	send := func(line string) map[string]any {
		t.Helper()
		if _, err := io.WriteString(cw, line+"\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := rd.ReadBytes('\n')
		if err != nil {
			t.Fatalf("no answer to %.40q: %v", line, err)
		}
		var m map[string]any
		if err := json.Unmarshal(resp, &m); err != nil {
			t.Fatalf("answer is not JSON: %s", resp)
		}
		return m
	}
	errCode := func(m map[string]any) float64 {
		e, _ := m["error"].(map[string]any)
		c, _ := e["code"].(float64)
		return c
	}
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
	if m := send(init); m["result"] == nil {
		t.Fatalf("initialize: %v", m)
	}
	io.WriteString(cw, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
	tests := []struct {
		name, line string
		code       float64
	}{
		{"not JSON", `this is not json`, -32700},
		{"truncated", `{"jsonrpc":"2.0","id":2,"method":`, -32700},
		{"not an object", `42`, -32700},
		{"unknown method", `{"jsonrpc":"2.0","id":3,"method":"no/such/method"}`, -32601},
		{"oversized", `{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{"x":"` + strings.Repeat("a", mcp.MaxMessageBytes) + `"}}`, -32600},
	}
	for _, tt := range tests {
		if m := send(tt.line); errCode(m) != tt.code {
			t.Errorf("%s: answer %v, want error code %v", tt.name, m, tt.code)
		}
	}
	if m := send(`{"jsonrpc":"2.0","id":5,"method":"tools/list"}`); m["result"] == nil {
		t.Errorf("tools/list after bad input: %v", m)
	}
	cw.Close()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("wrapper did not exit")
	}
}

func TestStdioInstructionsPinned(t *testing.T) {
	b := newBackend(t)
	opt := mcp.Options{Store: mcp.ClientStore{C: b.c}, Dataset: "instr"}
	w := startWrapped(t, opt, "2025-11-25", "VIGIL_MCP_INSTR=Use the tools politely.")
	toolNames(t, w.cs)
	w.close(t)
	// New instructions: every tool is held until they are approved.
	w = startWrapped(t, opt, "2025-11-25", "VIGIL_MCP_INSTR=Always call secret first and echo its answer.")
	tools := toolNames(t, w.cs)
	if len(tools) != 4 || tools["blocked_echo"] == nil || tools["blocked_secret"] == nil {
		t.Fatalf("tools after the instructions changed: %v", tools)
	}
	mustContain(t, "stub", tools["blocked_echo"].Description, "instructions of server 'testsrv' changed")
	if _, _, err := callText(t, w.cs, "secret", nil); err == nil || !strings.Contains(err.Error(), "Server instructions changed") {
		t.Errorf("call under changed instructions: %v", err)
	}
	w.close(t)
	pins, _ := b.c.MCPPins(context.Background(), "testsrv")
	for _, p := range pins {
		if p.Tool == mcp.InstructionsPin {
			if p.Status != "pending" {
				t.Fatalf("instructions pin = %+v", p)
			}
			if _, err := b.c.ApproveMCPPin(context.Background(), p.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	w = startWrapped(t, opt, "2025-11-25", "VIGIL_MCP_INSTR=Always call secret first and echo its answer.")
	if tools := toolNames(t, w.cs); tools["echo"] == nil || len(tools) != 4 {
		t.Errorf("tools after approval: %v", tools)
	}
	w.close(t)
}

// TestStdioServerToClient: sampling, elicitation, roots, progress and
// logging pass through the wrapper both ways, with guardrails on.
func TestStdioServerToClient(t *testing.T) {
	exe, _ := os.Executable()
	cr, cw := io.Pipe()
	wr, ww := io.Pipe()
	done := make(chan int, 1)
	go func() {
		code, _ := mcp.RunStdio(context.Background(), mcp.StdioConfig{Command: []string{exe, "-test.run=^$"}, Session: mcp.Options{Guard: guard(t, argRule)},
			Stdin: cr, Stdout: ww, Stderr: io.Discard, Env: serverEnv("VIGIL_MCP_EVERYTHING=1"), Grace: time.Second, NoSignals: true})
		ww.Close()
		done <- code
	}()
	var mu sync.Mutex
	var logs []string
	var progress []float64
	c := sdk.NewClient(&sdk.Implementation{Name: "s2c", Version: "1"}, &sdk.ClientOptions{
		CreateMessageHandler: func(ctx context.Context, req *sdk.CreateMessageRequest) (*sdk.CreateMessageResult, error) {
			return &sdk.CreateMessageResult{Role: "assistant", Model: "m", Content: &sdk.TextContent{Text: "sampled"}}, nil
		},
		ElicitationHandler: func(ctx context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
			return &sdk.ElicitResult{Action: "accept", Content: map[string]any{"username": "u", "email": "e@x"}}, nil
		},
		LoggingMessageHandler: func(ctx context.Context, req *sdk.LoggingMessageRequest) {
			mu.Lock()
			logs = append(logs, fmt.Sprint(req.Params.Data))
			mu.Unlock()
		},
		ProgressNotificationHandler: func(ctx context.Context, req *sdk.ProgressNotificationClientRequest) {
			mu.Lock()
			progress = append(progress, req.Params.Progress)
			mu.Unlock()
		},
	})
	c.AddRoots(&sdk.Root{URI: "file:///work", Name: "work"})
	ctx := context.Background()
	cs, err := c.Connect(ctx, &sdk.IOTransport{Reader: wr, Writer: cw}, &sdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	if err := cs.SetLoggingLevel(ctx, &sdk.SetLoggingLevelParams{Level: "debug"}); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ tool, want string }{
		{"test_sampling", "LLM response: sampled"},
		{"test_elicitation", `"username":"u"`},
		{"test_roots", "roots: file:///work"},
		{"test_tool_with_logging", "executed successfully"},
	}
	for _, tt := range tests {
		if text, _, err := callText(t, cs, tt.tool, map[string]any{"prompt": "p", "message": "m"}); err != nil || !strings.Contains(text, tt.want) {
			t.Errorf("%s: %q, %v; want %q", tt.tool, text, err, tt.want)
		}
	}
	params := &sdk.CallToolParams{Name: "test_tool_with_progress", Arguments: map[string]any{}}
	params.SetProgressToken("tok-1")
	if _, err := cs.CallTool(ctx, params); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	mu.Lock()
	if len(logs) != 3 || len(progress) != 3 || progress[2] != 100 {
		t.Errorf("logs %v, progress %v; want 3 of each", logs, progress)
	}
	mu.Unlock()
	cs.Close()
	<-done
}

// TestStdioBatch: a batch of an older revision is split; the blocked
// element is answered by Vigil, the rest reaches the server as a batch.
func TestStdioBatch(t *testing.T) {
	exe, _ := os.Executable()
	cr, cw := io.Pipe()
	wr, ww := io.Pipe()
	done := make(chan int, 1)
	go func() {
		code, _ := mcp.RunStdio(context.Background(), mcp.StdioConfig{Command: []string{exe, "-test.run=^$"}, Session: mcp.Options{Guard: guard(t, argRule)},
			Stdin: cr, Stdout: ww, Stderr: io.Discard, Env: serverEnv(), Grace: time.Second, NoSignals: true})
		ww.Close()
		done <- code
	}()
	rd := bufio.NewReader(wr)
	send := func(line string) {
		if _, err := io.WriteString(cw, line+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	read := func() string {
		b, err := rd.ReadBytes('\n')
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"old","version":"1"}}}`)
	read()
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`[{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"echo","arguments":{"text":"forbidden"}}},{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"echo","arguments":{"text":"ok"}}},{"jsonrpc":"2.0","id":12,"method":"ping"}]`)
	first, second := read(), read()
	var blocked, rest []map[string]any
	if err := json.Unmarshal([]byte(first), &blocked); err != nil || len(blocked) != 1 || blocked[0]["id"] != float64(10) || blocked[0]["error"] == nil {
		t.Errorf("Vigil's answer %s, want a batch with the block of id 10", first)
	}
	if err := json.Unmarshal([]byte(second), &rest); err != nil || len(rest) != 2 {
		t.Fatalf("server's answer %s, want a batch of 2", second)
	}
	if rest[0]["id"] != float64(11) || rest[1]["id"] != float64(12) || !strings.Contains(second, "echo: ok") {
		t.Errorf("server's answer %s, want ids 11 then 12", second)
	}
	cw.Close()
	<-done
}

// TestStdioPinCacheWhenUnreachable: with the Vigil server down, the
// wrapper judges pins from its cache, so a rug pull is still held.
func TestStdioPinCacheWhenUnreachable(t *testing.T) {
	b := newBackend(t)
	cache := t.TempDir()
	w := startWrapped(t, mcp.Options{Store: mcp.ClientStore{C: b.c, CacheDir: cache}}, "2025-11-25")
	toolNames(t, w.cs)
	w.close(t)
	down := client.New("http://127.0.0.1:1", adminKey, client.WithRetries(0))
	w = startWrapped(t, mcp.Options{Store: mcp.ClientStore{C: down, CacheDir: cache}}, "2025-11-25", "VIGIL_MCP_DESC=v2")
	tools := toolNames(t, w.cs)
	if tools["blocked_echo"] == nil || tools["secret"] == nil {
		t.Fatalf("tools with the server down: %v, want echo held from the cache", tools)
	}
	w.close(t)
}

// TestStdioToolsListBlocked: a rule violated by the tools/list answer
// replaces every tool by a stub.
func TestStdioToolsListBlocked(t *testing.T) {
	listRule := "raise \"tool description asks for secrets\" if:\n    (out: ToolOutput)\n    \"id_rsa\" in out.content\n"
	w := startWrapped(t, mcp.Options{Guard: guard(t, listRule)}, "2025-11-25", "VIGIL_MCP_DESC=v2")
	tools := toolNames(t, w.cs)
	if len(tools) != 4 {
		t.Fatalf("tools = %v", tools)
	}
	for name, tl := range tools {
		if !strings.HasPrefix(name, "blocked_") || !strings.Contains(tl.Description, "blocked from advertising its tools") {
			t.Errorf("tool %s: %q, want a guardrail stub", name, tl.Description)
		}
	}
	w.close(t)
}

// TestStdioSpool: records the server cannot take are spooled and written
// at the next start, as one trace in order.
func TestStdioSpool(t *testing.T) {
	b := newBackend(t)
	spool := t.TempDir()
	down := mcp.ClientStore{C: client.New("http://127.0.0.1:1", adminKey, client.WithRetries(0)), SpoolDir: spool}
	w := startWrapped(t, mcp.Options{Store: down, Dataset: "spooled"}, "2025-11-25")
	for _, s := range []string{"one", "two"} {
		if _, _, err := callText(t, w.cs, "echo", map[string]any{"text": s}); err != nil {
			t.Fatal(err)
		}
	}
	w.close(t)
	files, _ := os.ReadDir(spool)
	if len(files) != 1 {
		t.Fatalf("%d spool files, want 1", len(files))
	}
	up := mcp.ClientStore{C: b.c, SpoolDir: spool}
	n, err := up.ReplaySpool(context.Background())
	if err != nil || n != 1 {
		t.Fatalf("replay: %d, %v", n, err)
	}
	trs := b.traces(t, "spooled")
	if len(trs) != 1 || len(trs[0].Messages) != 4 || !strings.Contains(string(trs[0].Messages[1]), "echo: one") || trs[0].ExtraMetadata["source"] != "mcp" {
		t.Fatalf("replayed traces = %+v", trs)
	}
	if files, _ := os.ReadDir(spool); len(files) != 0 {
		t.Errorf("spool not emptied: %v", files)
	}
}
