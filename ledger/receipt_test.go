package ledger

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// specChain returns the §4.4 chain from testdata/vectors/chain_4_4.json:
// the file's bytes and each receipt's exact text.
func specChain(t testing.TB) ([]byte, []string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "vectors", "chain_4_4.json"))
	if err != nil {
		t.Fatal(err)
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(b, &raws); err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(raws))
	for i, r := range raws {
		out[i] = string(r)
	}
	return b, out
}

// The §4.4 table, as the spec prints it.
var specHashes = []struct{ hash, sig string }{
	{"7c9d1a73868bedb0ce044a92923c5852721f57aca348c5a80f3c7aada4a435a2", "e3ea70abc16bca8bafdb5f598d401078cd94fff9bf5fe151a62ac30fe533604c65b0da3a6f57ad9d90dd456f6d5d00f124f99504c452ccca3079de56fa3ee00e"},
	{"d35473927e933202a8160ef5172877b1f7ea9785b7053e6415d7f9875cb93b73", "c81c678652c53d733d146b73b8cca2bf7f1fad2bbc694853e5a4940cd3ed5b3c0873d30b1fbf524ea56ab7de4c1a3064caff9cdd9269d1bdee810619caad8404"},
	{"e03762e3cbe7936b13af3f8d26f37b8ae8becd8e4a552d61254fb0cf7a39dd9f", "53070330c03e66c09a140abcf503b87b5ce016b704c1c8dffa86e01efcb331a59d3cbd7315ede47881145734d003938d864993e60bc73f79577c9cf8c16a240f"},
}

const specReceipt2 = `{"id":"01KDVDNCW6BVPG000000000003","sessionId":"01KDVDN90RBSAH00000000005B","agent":"agent/refund-bot","action":"http_request","input":{"url":"https://api.example.com/refund"},"error":"timeout","timestamp":1767225602950,"hash":"e03762e3cbe7936b13af3f8d26f37b8ae8becd8e4a552d61254fb0cf7a39dd9f","previousHash":"d35473927e933202a8160ef5172877b1f7ea9785b7053e6415d7f9875cb93b73","signature":"53070330c03e66c09a140abcf503b87b5ce016b704c1c8dffa86e01efcb331a59d3cbd7315ede47881145734d003938d864993e60bc73f79577c9cf8c16a240f"}`

// appendSpecChain builds the §4.4 chain with Append.
func appendSpecChain(t testing.TB) []*Receipt {
	t.Helper()
	key, err := ParsePrivateKey(specSeed)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		id, action, input string
		output            any
		err               any
		ts                int64
	}
	rows := []row{
		{"01KDVDNA00BVPG000000000001", "tool_call", `{"tool":"orders.lookup","orderId":"A-1001"}`, map[string]any{"status": "shipped", "total": 42.5}, nil, 1767225600000},
		{"01KDVDNB5GBVPG000000000002", "llm_step", `{"prompt":"Draft a reply <short>"}`, map[string]any{"text": "Your order has shipped."}, nil, 1767225601200},
		{"01KDVDNCW6BVPG000000000003", "http_request", `{"url":"https://api.example.com/refund"}`, nil, "timeout", 1767225602950},
	}
	var tail Tail
	var chain []*Receipt
	for _, r := range rows {
		in, err := Parse([]byte(r.input))
		if err != nil {
			t.Fatal(err)
		}
		rc, err := Append(tail, Action{ID: r.id, SessionID: "01KDVDN90RBSAH00000000005B", Agent: "agent/refund-bot",
			Action: r.action, Input: in, Output: r.output, Error: r.err, Timestamp: &r.ts}, key)
		if err != nil {
			t.Fatal(err)
		}
		chain = append(chain, rc)
		tail = rc.Tail()
	}
	return chain
}

func TestSpecChain(t *testing.T) {
	chain := appendSpecChain(t)
	_, golden := specChain(t)
	const hashInput0 = `{"action":"tool_call","agent":"agent/refund-bot","error":null,"id":"01KDVDNA00BVPG000000000001","input":{"orderId":"A-1001","tool":"orders.lookup"},"output":{"status":"shipped","total":42.5},"previousHash":"0","sessionId":"01KDVDN90RBSAH00000000005B","timestamp":1767225600000}`
	hi, err := chain[0].HashInput()
	if err != nil || string(hi) != hashInput0 {
		t.Fatalf("hash input of receipt 0:\n got %s\nwant %s", hi, hashInput0)
	}
	for i, r := range chain {
		if r.Hash != specHashes[i].hash || r.Signature != specHashes[i].sig {
			t.Errorf("receipt %d: hash %s sig %s, want the §4.4 values", i, r.Hash, r.Signature)
		}
		if string(r.Raw) != golden[i] {
			t.Errorf("receipt %d emitted\n %s\nwant (chain_4_4.json)\n %s", i, r.Raw, golden[i])
		}
	}
	if string(chain[2].Raw) != specReceipt2 {
		t.Errorf("receipt 2 is not byte for byte the §4.4 text:\n%s", chain[2].Raw)
	}
	if pub := PublicKeyHex(PublicOf(mustKey(t, specSeed))); pub != specPublicKey {
		t.Errorf("public key %s, want %s", pub, specPublicKey)
	}
}

func mustKey(t testing.TB, seed string) ed25519.PrivateKey {
	key, err := ParsePrivateKey(seed)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func TestParseReceiptRoundTrip(t *testing.T) {
	_, golden := specChain(t)
	for i, raw := range golden {
		r, err := ParseReceipt([]byte(raw))
		if err != nil {
			t.Fatalf("receipt %d: %v", i, err)
		}
		out, err := r.MarshalJSON()
		if err != nil || string(out) != raw {
			t.Errorf("receipt %d: MarshalJSON(ParseReceipt(x)) = %s, %v", i, out, err)
		}
		if h, _ := r.ComputeHash(); h != r.Hash {
			t.Errorf("receipt %d: ComputeHash %s != stored %s", i, h, r.Hash)
		}
	}
	// encoding/json uses UnmarshalJSON, which keeps the exact text.
	var rs []*Receipt
	b, _ := specChain(t)
	if err := json.Unmarshal(b, &rs); err != nil {
		t.Fatal(err)
	}
	if string(rs[2].Raw) != specReceipt2 || rs[2].Error != "timeout" || rs[2].Output != nil {
		t.Errorf("UnmarshalJSON: %+v", rs[2])
	}
}

func TestInputAbsentVersusNull(t *testing.T) {
	base := Action{ID: "X", SessionID: "S", Agent: "a", Action: "act", Timestamp: new(int64)}
	absent := base
	absent.OmitInput = true
	null := base // Input nil and not omitted: hashed as null
	ra, err := Append(Tail{}, absent, nil)
	if err != nil {
		t.Fatal(err)
	}
	rn, err := Append(Tail{}, null, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ra.Hash == rn.Hash {
		t.Fatal("absent input hashes like null input; §4.2 says it must not")
	}
	if bytes.Contains(ra.Raw, []byte(`"input"`)) || !bytes.Contains(rn.Raw, []byte(`"input":null`)) {
		t.Fatalf("emitted: %s / %s", ra.Raw, rn.Raw)
	}
	// Absent output/error hash like null ones.
	p, err := ParseReceipt([]byte(strings.Replace(string(rn.Raw), `"input":null`, `"input":null,"output":null,"error":null`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	if h, _ := p.ComputeHash(); h != rn.Hash {
		t.Fatal("explicit null output/error changed the hash")
	}
	if ra.Signature != "" || !bytes.Contains(ra.Raw, []byte(`"signature":""`)) {
		t.Fatalf("unsigned receipt: %s", ra.Raw)
	}
}

func TestAppendTimestampAndIDs(t *testing.T) {
	defer func(f func() int64) { Now = f }(Now)
	Now = func() int64 { return 1000 }
	r1, err := Append(Tail{Hash: "abc", Timestamp: 5000}, Action{SessionID: "S", Agent: "a", Action: "x"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r1.Timestamp != 5000 || r1.PreviousHash != "abc" {
		t.Fatalf("timestamp %v previousHash %q: want max(now, tail) = 5000 and the tail hash", r1.Timestamp, r1.PreviousHash)
	}
	r2, err := Append(Tail{}, Action{SessionID: "S", Agent: "a", Action: "x"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r2.Timestamp != 1000 || r2.PreviousHash != "0" {
		t.Fatalf("timestamp %v previousHash %q", r2.Timestamp, r2.PreviousHash)
	}
	ids := map[string]bool{}
	prev := ""
	for range 1000 {
		id := NewID()
		if len(id) != 26 || strings.ContainsAny(id, "ILOUabcdefghijklmnopqrstuvwxyz") || ids[id] || id <= prev {
			t.Fatalf("NewID %q (previous %q) not a fresh monotonic uppercase ULID", id, prev)
		}
		ids[id], prev = true, id
	}
}

func TestParseReceiptShape(t *testing.T) {
	valid := `{"id":"i","sessionId":"s","agent":"a","action":"x","timestamp":1,"hash":"h","previousHash":"0"}`
	tests := []struct {
		name, in, field string
	}{
		{"not_object", `[1]`, ""},
		{"id_missing", `{"sessionId":"s","agent":"a","action":"x","timestamp":1,"hash":"h","previousHash":"0"}`, "id"},
		{"id_number", strings.Replace(valid, `"id":"i"`, `"id":1`, 1), "id"},
		{"agent_null", strings.Replace(valid, `"agent":"a"`, `"agent":null`, 1), "agent"},
		{"hash_missing", strings.Replace(valid, `"hash":"h",`, ``, 1), "hash"},
		{"previous_hash_bool", strings.Replace(valid, `"previousHash":"0"`, `"previousHash":false`, 1), "previousHash"},
		{"timestamp_string", strings.Replace(valid, `"timestamp":1`, `"timestamp":"1"`, 1), "timestamp"},
		{"timestamp_missing", strings.Replace(valid, `"timestamp":1,`, ``, 1), "timestamp"},
		{"signature_number", strings.Replace(valid, `}`, `,"signature":5}`, 1), "signature"},
		{"case_sensitive_names", strings.Replace(valid, `"hash"`, `"HASH"`, 1), "hash"},
		{"invalid_json", `{"id":`, ""},
		{"invalid_utf8", "{\"id\":\"\xff\"}", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseReceipt([]byte(tt.in))
			var ie *InputError
			if !errors.Is(err, ErrBadInput) || !errors.As(err, &ie) || ie.Field != tt.field {
				t.Fatalf("err = %v (%#v), want ErrBadInput for field %q", err, ie, tt.field)
			}
		})
	}
	for _, ok := range []string{valid, strings.Replace(valid, `}`, `,"signature":null,"extra":[1]}`, 1),
		strings.Replace(valid, `"timestamp":1`, `"timestamp":1.5e300`, 1)} {
		if _, err := ParseReceipt([]byte(ok)); err != nil {
			t.Errorf("ParseReceipt(%s): %v", ok, err)
		}
	}
}

func TestKeys(t *testing.T) {
	k, err := ParsePrivateKey(strings.ToUpper(specSeed))
	if err != nil || PrivateKeyHex(k) != specSeed {
		t.Fatalf("uppercase seed: %v %s", err, PrivateKeyHex(k))
	}
	if _, err := ParsePublicKey(strings.ToUpper(specPublicKey)); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"", "00", specSeed + "00", specSeed[:63] + "g", " " + specSeed[1:]} {
		if _, err := ParsePrivateKey(bad); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("ParsePrivateKey(%q) = %v, want ErrInvalidKey", bad, err)
		}
		if _, err := ParsePublicKey(bad); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("ParsePublicKey(%q) = %v, want ErrInvalidKey", bad, err)
		}
	}
	g, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	sig := SignHash(g, specHashes[0].hash)
	if !VerifySignature(PublicOf(g), specHashes[0].hash, sig) || len(sig) != 128 || sig != strings.ToLower(sig) {
		t.Fatal("sign/verify round trip")
	}
	if !VerifySignature(PublicOf(g), specHashes[0].hash, strings.ToUpper(sig)) {
		t.Error("uppercase signature hex must verify (only length and hex are checked)")
	}
	for _, bad := range []string{"", sig[:126], sig + "00", "zz" + sig[2:]} {
		if VerifySignature(PublicOf(g), specHashes[0].hash, bad) {
			t.Errorf("VerifySignature accepted %q", bad)
		}
	}
	if VerifySignature(PublicOf(g), specHashes[1].hash, sig) {
		t.Error("signature verified over another hash")
	}
}
