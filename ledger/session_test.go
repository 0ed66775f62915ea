package ledger

import (
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// newServerSession returns an open server-signed session with n receipts.
func newServerSession(t *testing.T, key ed25519.PrivateKey, n int) (*Session, []*Receipt) {
	t.Helper()
	pub := PublicKeyHex(PublicOf(key))
	s := &Session{ID: "01KDVDN90RBSAH00000000005B", Name: "refund", Agent: "agent/refund-bot", Signer: SignerServer, SignerPublicKey: &pub, CreatedAt: 1767225600000}
	var rs []*Receipt
	for i := range n {
		ts := int64(1767225600000 + i)
		r, err := s.Append(Action{Agent: s.Agent, Action: "message", Input: map[string]any{"i": float64(i)}, Timestamp: &ts}, key)
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	return s, rs
}

func TestSessionLifecycle(t *testing.T) {
	key := mustKey(t, specSeed)
	ring := SessionKeys{Ring: []ed25519.PublicKey{PublicOf(key)}}
	s, rs := newServerSession(t, key, 3)
	if s.Status() != StatusOpen || s.ReceiptCount != 3 || *s.RootHash != rs[0].Hash || s.TailHash != rs[2].Hash {
		t.Fatalf("open session: %+v", s)
	}
	if err := s.Close(1767225700000, key); err != nil {
		t.Fatal(err)
	}
	if s.Status() != StatusClosed || *s.CloseHash != rs[2].Hash || s.CloseSignature == nil || len(*s.CloseSignature) != 128 {
		t.Fatalf("closed session: %+v", s)
	}
	if err := s.Close(1767225700001, key); !errors.Is(err, ErrSessionClosed) {
		t.Fatalf("second close: %v", err)
	}
	if _, err := s.Append(Action{Agent: "a", Action: "x"}, key); !errors.Is(err, ErrSessionClosed) {
		t.Fatalf("append after close: %v", err)
	}
	res, err := VerifySession(s, rs, ring, 1767225800000)
	if err != nil || !res.Valid || !res.SignaturesChecked || res.Status != StatusClosed || res.ReceiptCount != 3 {
		t.Fatalf("VerifySession: %+v %v", res, err)
	}
	b, _ := json.Marshal(res)
	if !strings.HasPrefix(string(b), `{"valid":true,"brokenAt":null,"reason":null,"errors":[],"sessionId":"01KDVDN90RBSAH00000000005B","status":"closed","receiptCount":3,"signer":"server","signaturesChecked":true}`) {
		t.Errorf("JSON %s", b)
	}
	// The close statement is exactly the spec's canonical object.
	stmt, _ := CloseStatement(s.ID, *s.CloseHash, *s.ClosedAt, 3)
	want := `{"closeHash":"` + rs[2].Hash + `","closedAt":1767225700000,"receiptCount":3,"sessionId":"01KDVDN90RBSAH00000000005B"}`
	if string(stmt) != want || !VerifySignature(PublicOf(key), want, *s.CloseSignature) {
		t.Fatalf("close statement %s", stmt)
	}
}

func TestSessionVerificationFailures(t *testing.T) {
	key := mustKey(t, specSeed)
	other := mustKey(t, seed42)
	ring := SessionKeys{Ring: []ed25519.PublicKey{PublicOf(other), PublicOf(key)}} // retired + active
	closed := func(t *testing.T) (*Session, []*Receipt) {
		s, rs := newServerSession(t, key, 3)
		if err := s.Close(1767225700000, key); err != nil {
			t.Fatal(err)
		}
		return s, rs
	}
	tests := []struct {
		name   string
		setup  func(t *testing.T) (*Session, []*Receipt, SessionKeys)
		want   []VerifyError
		status string
	}{
		{"truncated_tail_caught_by_close_hash", func(t *testing.T) (*Session, []*Receipt, SessionKeys) {
			s, rs := closed(t)
			return s, rs[:2], ring
		}, []VerifyError{{2, ReasonCloseHashMismatch}}, StatusTampered},
		{"tail_deleted_and_close_hash_rewritten", func(t *testing.T) (*Session, []*Receipt, SessionKeys) {
			s, rs := closed(t)
			h := rs[1].Hash
			s.CloseHash = &h // a database edit; the close signature no longer matches
			s.ReceiptCount = 2
			return s, rs[:2], ring
		}, []VerifyError{{2, ReasonCloseSignature}}, StatusTampered},
		{"receipt_added_after_close", func(t *testing.T) (*Session, []*Receipt, SessionKeys) {
			s, rs := closed(t)
			extra, err := Append(rs[2].Tail(), Action{SessionID: s.ID, Agent: "a", Action: "late", Input: nil}, key)
			if err != nil {
				t.Fatal(err)
			}
			return s, append(rs, extra), ring
		}, []VerifyError{{3, ReasonCloseHashMismatch}}, StatusTampered},
		{"signer_key_not_in_ring", func(t *testing.T) (*Session, []*Receipt, SessionKeys) {
			s, rs := newServerSession(t, key, 2)
			return s, rs, SessionKeys{Ring: []ed25519.PublicKey{PublicOf(other)}}
		}, []VerifyError{{0, ReasonSignature}, {1, ReasonSignature}}, StatusTampered},
		{"retired_key_still_verifies", func(t *testing.T) (*Session, []*Receipt, SessionKeys) {
			s, rs := newServerSession(t, other, 2)
			return s, rs, ring
		}, nil, StatusOpen},
		{"close_signature_by_unknown_key", func(t *testing.T) (*Session, []*Receipt, SessionKeys) {
			s, rs := newServerSession(t, key, 1)
			if err := s.Close(1767225700000, mustKey(t, strings.Repeat("11", 32))); err != nil {
				t.Fatal(err)
			}
			return s, rs, ring
		}, []VerifyError{{1, ReasonCloseSignature}}, StatusTampered},
		{"other_session_receipt_spliced_in", func(t *testing.T) (*Session, []*Receipt, SessionKeys) {
			s, rs := newServerSession(t, key, 2)
			foreign, err := Append(rs[1].Tail(), Action{SessionID: "other", Agent: "a", Action: "x"}, key)
			if err != nil {
				t.Fatal(err)
			}
			s.Advance(foreign)
			return s, append(rs, foreign), ring
		}, []VerifyError{{2, ReasonSessionMismatch}}, StatusTampered},
		{"agent_signer_without_key", func(t *testing.T) (*Session, []*Receipt, SessionKeys) {
			s, rs := newServerSession(t, key, 1)
			s.Signer = SignerAgent
			return s, rs, ring
		}, []VerifyError{{0, ReasonSignature}}, StatusTampered},
		{"agent_signer_with_key", func(t *testing.T) (*Session, []*Receipt, SessionKeys) {
			s, rs := newServerSession(t, other, 1)
			s.Signer = SignerAgent
			return s, rs, SessionKeys{AgentKey: PublicOf(other)}
		}, nil, StatusOpen},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, rs, keys := tt.setup(t)
			res, err := VerifySession(s, rs, keys, 42)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := asJSON(res.Errors), asJSON(orEmpty(tt.want)); got != want {
				t.Fatalf("errors %s, want %s", got, want)
			}
			if res.Status != tt.status {
				t.Fatalf("status %s, want %s", res.Status, tt.status)
			}
			if tt.want != nil && (s.TamperedAt == nil || *s.TamperedAt != 42 || s.TamperReason.Reason != tt.want[0].Reason || *s.TamperReason.Index != tt.want[0].Index) {
				t.Fatalf("tamper mark %+v %+v", s.TamperedAt, s.TamperReason)
			}
		})
	}
}

func TestTamperedIsSticky(t *testing.T) {
	s := &Session{ID: "s"}
	s.MarkTampered(1, TamperReason{Reason: ReasonClientReported})
	i := 3
	s.MarkTampered(2, TamperReason{Index: &i, Reason: ReasonLinkage})
	if *s.TamperedAt != 1 || s.TamperReason.Reason != ReasonClientReported || s.Status() != StatusTampered {
		t.Fatalf("%+v", s)
	}
	// A tampered open session keeps recording (§6.2).
	if _, err := s.Append(Action{Agent: "a", Action: "x"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(5, nil); err != nil || s.Status() != StatusTampered || *s.CloseHash != s.TailHash {
		t.Fatalf("close tampered: %v %+v", err, s)
	}
	empty := &Session{ID: "e"}
	if err := empty.Close(5, nil); err != nil || *empty.CloseHash != "0" {
		t.Fatalf("empty close hash: %v", err)
	}
}

func asJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func orEmpty(e []VerifyError) []VerifyError {
	if e == nil {
		return []VerifyError{}
	}
	return e
}

func TestServerKeyFile(t *testing.T) {
	dir := t.TempDir()
	k1, err := LoadServerKey(ServerKeyOptions{DataDir: filepath.Join(dir, "data")})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "data", KeyFileName)
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v, %v; want 0600", st.Mode(), err)
	}
	b, _ := os.ReadFile(path)
	if strings.TrimSpace(string(b)) != PrivateKeyHex(k1) {
		t.Fatalf("file holds %q", b)
	}
	k2, err := LoadServerKey(ServerKeyOptions{DataDir: filepath.Join(dir, "data")})
	if err != nil || !k1.Equal(k2) {
		t.Fatal("second start got another key")
	}
	// --ledger-key-file, then VIGIL_LEDGER_KEY, take precedence.
	custom := filepath.Join(dir, "custom.key")
	os.WriteFile(custom, []byte(strings.ToUpper(specSeed)+"\n"), 0o600)
	k3, err := LoadServerKey(ServerKeyOptions{DataDir: dir, File: custom})
	if err != nil || PrivateKeyHex(k3) != specSeed {
		t.Fatalf("key file: %v", err)
	}
	k4, err := LoadServerKey(ServerKeyOptions{DataDir: dir, File: custom, Hex: seed42})
	if err != nil || PrivateKeyHex(k4) != seed42 {
		t.Fatalf("env key: %v", err)
	}
	if _, err := LoadServerKey(ServerKeyOptions{Hex: "nope"}); !errors.Is(err, ErrInvalidKey) || !strings.Contains(err.Error(), KeyEnv) {
		t.Fatalf("bad env key: %v", err)
	}
	os.WriteFile(custom, []byte("not a key"), 0o600)
	if _, err := LoadServerKey(ServerKeyOptions{File: custom}); !errors.Is(err, ErrInvalidKey) || !strings.Contains(err.Error(), custom) {
		t.Fatalf("bad key file: %v", err)
	}
	if _, err := LoadServerKey(ServerKeyOptions{}); err == nil {
		t.Fatal("no data dir: want an error")
	}
}

func TestKeyRing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), KeyRingDirName)
	ring, err := LoadKeyRing(dir)
	if err != nil || len(ring) != 0 {
		t.Fatalf("missing dir: %v %v", ring, err)
	}
	os.MkdirAll(dir, 0o700)
	os.WriteFile(filepath.Join(dir, "b.pub"), []byte(wrongPublicKey+"\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "a.pub"), []byte(strings.ToUpper(specPublicKey)), 0o644)
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("ignored"), 0o644)
	ring, err = LoadKeyRing(dir)
	if err != nil || len(ring) != 2 || PublicKeyHex(ring[0]) != specPublicKey || PublicKeyHex(ring[1]) != wrongPublicKey {
		t.Fatalf("ring %v %v", ring, err)
	}
	os.WriteFile(filepath.Join(dir, "c.pub"), []byte("xyz"), 0o644)
	if _, err := LoadKeyRing(dir); !errors.Is(err, ErrInvalidKey) || !strings.Contains(err.Error(), "c.pub") {
		t.Fatalf("bad ring file: %v", err)
	}
}

func TestSessionJSON(t *testing.T) {
	closedAt := int64(9)
	s := &Session{ID: "s", Signer: SignerServer, ClosedAt: &closedAt, StatusValue: "stale"}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"s","runId":null,"name":"","agent":"","signer":"server","signerPublicKey":null,"status":"closed","createdAt":0,"closedAt":9,"tamperedAt":null,"tamperReason":null,"receiptCount":0,"rootHash":null,"closeHash":null,"closeSignature":null}`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
	// A Session value inside another struct marshals the same way.
	b, _ = json.Marshal(struct{ S Session }{*s})
	if string(b) != `{"S":`+want+`}` {
		t.Fatalf("by value: %s", b)
	}
}

// TestKeyFileConcurrentCreate: processes starting together on one data
// dir end up with one key.
func TestKeyFileConcurrentCreate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d", KeyFileName)
	keys := make([]ed25519.PrivateKey, 8)
	errs := make([]error, 8)
	var wg sync.WaitGroup
	for i := range keys {
		wg.Go(func() { keys[i], errs[i] = LoadOrCreateKeyFile(path) })
	}
	wg.Wait()
	for i := range keys {
		if errs[i] != nil || !keys[i].Equal(keys[0]) {
			t.Fatalf("creator %d: %v (keys differ: %v)", i, errs[i], !keys[i].Equal(keys[0]))
		}
	}
	if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
		t.Fatalf("left temp files behind: %v", entries)
	}
}
