package ledger

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// runNode runs testdata/interop/chain.mjs in mode with req as its stdin and
// decodes its stdout into resp. It skips the test when node or
// VIGIL_TEST_NOBLE (a node_modules folder with @noble/ed25519@3 and
// @noble/hashes@2) is missing.
func runNode(t *testing.T, mode string, req, resp any) {
	t.Helper()
	noble := os.Getenv("VIGIL_TEST_NOBLE")
	if noble == "" {
		t.Skip("VIGIL_TEST_NOBLE not set (a node_modules with @noble/ed25519@3 and @noble/hashes@2)")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node not installed")
	}
	// ESM resolves packages from the script's folder: put the script next
	// to a node_modules symlink.
	dir := t.TempDir()
	script, err := os.ReadFile(filepath.Join("testdata", "interop", "chain.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "chain.mjs"), script, 0o644); err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs(noble)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(abs, filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	in, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, filepath.Join(dir, "chain.mjs"), mode)
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node chain.mjs %s: %v\n%s", mode, err, stderr.Bytes())
	}
	if err := json.Unmarshal(out, resp); err != nil {
		t.Fatalf("node chain.mjs %s: decode %q: %v", mode, out, err)
	}
}

// TestNodeCanonVectors runs every vector of canon.txtar through JSON.parse
// and a sorted JSON.stringify in Node (§12 Node cross-check).
func TestNodeCanonVectors(t *testing.T) {
	_, cases := loadCanonVectors(t)
	var req [][]byte
	for _, c := range cases {
		req = append(req, c.input) // []byte marshals as base64
	}
	var resp []struct {
		Canon *string `json:"canon"`
		Hash  string  `json:"hash"`
		Error string  `json:"error"`
	}
	runNode(t, "canon", req, &resp)
	if len(resp) != len(cases) {
		t.Fatalf("node returned %d results for %d cases", len(resp), len(cases))
	}
	for i, c := range cases {
		r := resp[i]
		if c.err != "" {
			if r.Error == "" {
				t.Errorf("%s: Vigil rejects the input, JSON.parse accepts it: %q", c.name, *r.Canon)
			}
			continue
		}
		if r.Canon == nil {
			t.Errorf("%s: JSON.parse rejects the input: %s", c.name, r.Error)
			continue
		}
		if got := *r.Canon + "\n" + r.Hash + "\n"; got != string(c.want) {
			t.Errorf("%s: node\n got %s\nwant %s", c.name, got, c.want)
		}
	}
}

// interopRecords are action records with tricky canonical content.
const interopRecords = `[
 {"id":"01KDVDNA00BVPG000000000001","sessionId":"S-interop","agent":"agent/🔑","action":"tool_call",
  "input":{"ｂ":1,"🔑":2,"a":"<tag> & \u2028 \u0085 \u007f \ud800 \udfff","n":[1e21,1e-7,-0,12345678901234567890,0.1,2.5e-7]},
  "output":{"total":42.5,"z":null},"timestamp":1767225600000},
 {"id":"01KDVDNB5GBVPG000000000002","sessionId":"S-interop","agent":"agent/🔑","action":"llm_step",
  "input":null,"error":"boom \"quoted\"\n","timestamp":1767225600000},
 {"id":"01KDVDNCW6BVPG000000000003","sessionId":"S-interop","agent":"agent/🔑","action":"no_input",
  "output":[{"10":1,"9":2}],"timestamp":1767225600001.5}
]`

func TestNodeSignsGoVerifies(t *testing.T) {
	key, err := ParsePrivateKey(specSeed)
	if err != nil {
		t.Fatal(err)
	}
	records := json.RawMessage(interopRecords)
	var chain json.RawMessage
	runNode(t, "sign", map[string]any{"seed": specSeed, "records": records}, &chain)
	pub := PublicOf(key)
	res, _, err := VerifyStream(bytes.NewReader(chain), VerifyOptions{PublicKey: pub})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Valid {
		t.Fatalf("Go rejects the chain JavaScript made: %+v\n%s", res.Errors, chain)
	}
	// And Go makes the very same hashes and signatures from the records.
	goChain := goChainFromRecords(t, interopRecords)
	v, err := Parse(chain)
	if err != nil {
		t.Fatal(err)
	}
	for i, x := range v.([]any) {
		m := x.(map[string]any)
		if m["hash"] != goChain[i].Hash || m["signature"] != goChain[i].Signature {
			t.Errorf("receipt %d: node hash %v, Go %s", i, m["hash"], goChain[i].Hash)
		}
	}
}

func TestGoSignsNodeVerifies(t *testing.T) {
	chain := goChainFromRecords(t, interopRecords)
	var raws []json.RawMessage
	for _, r := range chain {
		raws = append(raws, r.Raw)
	}
	var resp struct {
		Valid  bool          `json:"valid"`
		Errors []VerifyError `json:"errors"`
	}
	runNode(t, "verify", map[string]any{"publicKey": specPublicKey, "receipts": raws}, &resp)
	if !resp.Valid {
		t.Fatalf("JavaScript rejects the chain Go made: %+v", resp.Errors)
	}
	// Both accept a signature whose R has a torsion component (ZIP-215),
	// which crypto/ed25519 alone would reject.
	torsion := *chain[0]
	torsion.Signature = torsionSignature(t, specSeed, []byte(torsion.Hash))
	raw0, _ := torsion.MarshalJSON()
	runNode(t, "verify", map[string]any{"publicKey": specPublicKey, "receipts": []json.RawMessage{raw0}}, &resp)
	if res, _ := VerifyChain([]*Receipt{&torsion}, VerifyOptions{PublicKey: PublicOf(mustKey(t, specSeed))}); !resp.Valid || !res.Valid {
		t.Fatalf("torsion signature: node valid=%v, Go valid=%v", resp.Valid, res.Valid)
	}
	// A tampered copy must fail in JavaScript too.
	tampered := strings.Replace(string(raws[1]), `boom`, `bOOm`, 1)
	raws[1] = json.RawMessage(tampered)
	runNode(t, "verify", map[string]any{"publicKey": specPublicKey, "receipts": raws}, &resp)
	if resp.Valid || resp.Errors[0] != (VerifyError{Index: 1, Reason: ReasonHashMismatch}) {
		t.Fatalf("JavaScript result for a tampered chain: %+v", resp)
	}
}

// goChainFromRecords signs the records of a JSON array with the spec key.
func goChainFromRecords(t *testing.T, records string) []*Receipt {
	t.Helper()
	key, err := ParsePrivateKey(specSeed)
	if err != nil {
		t.Fatal(err)
	}
	v, err := Parse([]byte(records))
	if err != nil {
		t.Fatal(err)
	}
	prev := "0"
	var chain []*Receipt
	for _, x := range v.([]any) {
		// Built by hand rather than with Append: timestamps may be fractional.
		m := x.(map[string]any)
		r := &Receipt{ID: m["id"].(string), SessionID: m["sessionId"].(string), Agent: m["agent"].(string),
			Action: m["action"].(string), Output: m["output"], Error: m["error"],
			Timestamp: m["timestamp"].(float64), PreviousHash: prev}
		var present bool
		r.Input, present = m["input"]
		r.InputAbsent = !present
		if r.Hash, err = r.ComputeHash(); err != nil {
			t.Fatal(err)
		}
		r.Signature = SignHash(key, r.Hash)
		if r.Raw, err = r.MarshalJSON(); err != nil {
			t.Fatal(err)
		}
		chain = append(chain, r)
		prev = r.Hash
	}
	return chain
}
