package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzSession feeds arbitrary messages in both directions to a guarded
// session: nothing may panic, every direct reply to the client must be
// JSON, and what is forwarded to the server is the input itself or a
// JSON array of some of its elements.
func FuzzSession(f *testing.F) {
	seeds := []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","clientInfo":{"name":"c","version":"1"}}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"forbidden"}}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":null}}`,
		`{"jsonrpc":"2.0","id":"x","method":"tools/call","params":[]}`,
		`[{"jsonrpc":"2.0","id":4,"method":"tools/list"},{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}]`,
		`[]`, `[1,2]`, `{}`, `null`, `"x"`, `{"id":null,"result":{}}`, `not json`,
		`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"blocked_echo"}}`,
	}
	for _, s := range seeds {
		f.Add(s, `{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"SECRET"}]}}`)
		f.Add(s, `{"jsonrpc":"2.0","id":4,"result":{"tools":[{"name":"echo","description":"d"},{"name":7}],"nextCursor":null}}`)
	}
	r, err := LoadRule("g", "rule", "raise \"no\" if:\n    (out: ToolOutput)\n    \"SECRET\" in out.content\n", "block")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, fromClient, fromServer string) {
		s := NewSession(Options{Guard: &Guard{Rules: []*Rule{r}}})
		ctx := context.Background()
		fwd, reply := s.FromClient(ctx, []byte(fromClient))
		if reply != nil && !json.Valid(reply) {
			t.Fatalf("reply is not JSON: %s", reply)
		}
		if fwd != nil && !bytes.Equal(fwd, []byte(fromClient)) && !json.Valid(fwd) {
			t.Fatalf("forwarded %q for %q", fwd, fromClient)
		}
		out := s.FromServer(ctx, []byte(fromServer))
		if out == nil {
			t.Fatal("FromServer returned nil")
		}
		s.Abort("gone")
		s.Close(ctx)
	})
}

// FuzzRelaySSE parses arbitrary event streams: the relay must not panic
// and must end when the stream does.
func FuzzRelaySSE(f *testing.F) {
	f.Add("id: 1\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n")
	f.Add("retry: 500\nid: e1\ndata: \n\n: comment\nevent: message\ndata: {\"a\":\ndata: 1}\n\n")
	f.Add("data: x")
	f.Add("\r\n\r\n:\n")
	f.Fuzz(func(t *testing.T, stream string) {
		p := NewProxy(ProxyConfig{})
		w := httptest.NewRecorder()
		p.relaySSE(context.Background(), w, strings.NewReader(stream), NewSession(Options{}), nil)
		sc := bufio.NewScanner(w.Body)
		for sc.Scan() {
		}
	})
}
