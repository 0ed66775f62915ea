package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/tools/txtar"

	"github.com/vigilhq/vigil/ledger"
)

const (
	specSeed      = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
	specPublicKey = "03a107bff3ce10be1d70dd18e74bc09967e4d6309ba50d5f1ddc8664125531b8"
)

var vectorsDir = filepath.Join("..", "..", "ledger", "testdata", "vectors")

func readVector(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(vectorsDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestReceiptsCanonVectors feeds every canonical JSON vector to
// `vigil receipts canon`: the .want sections are its exact stdout.
func TestReceiptsCanonVectors(t *testing.T) {
	ar, err := txtar.ParseFile(filepath.Join(vectorsDir, "canon.txtar"))
	if err != nil {
		t.Fatal(err)
	}
	inputs := map[string]string{}
	for _, f := range ar.Files {
		name, ext, _ := strings.Cut(f.Name, ".")
		switch ext {
		case "json":
			inputs[name] = string(f.Data)
		case "want", "err":
			t.Run(name, func(t *testing.T) {
				code, out, errOut := runVigil(t, inputs[name], "receipts", "canon")
				if ext == "want" {
					if code != 0 || out != string(f.Data) || errOut != "" {
						t.Fatalf("exit %d stdout %q stderr %q; want %q", code, out, errOut, f.Data)
					}
					return
				}
				if code != 2 || out != "" || !strings.HasPrefix(errOut, "vigil: receipts canon: stdin: invalid JSON at line ") {
					t.Fatalf("exit %d stdout %q stderr %q; want exit 2 and a positioned error", code, out, errOut)
				}
			})
		}
	}
}

func TestReceiptsCanonErrors(t *testing.T) {
	tests := []struct {
		name, stdin string
		args        []string
		errMatch    string
	}{
		{"invalid_utf8", "\"\xff\"", nil, "invalid UTF-8"},
		{"extra_argument", "1", []string{"file.json"}, "unexpected argument"},
		{"unknown_flag", "1", []string{"--pretty"}, "flag provided but not defined"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runVigil(t, tt.stdin, append([]string{"receipts", "canon"}, tt.args...)...)
			if code != 2 || out != "" || !strings.Contains(errOut, tt.errMatch) {
				t.Fatalf("exit %d stdout %q stderr %q", code, out, errOut)
			}
		})
	}
	// Raw U+2028 passes through; lines are split on \n only.
	code, out, _ := runVigil(t, `{"b":"\u2028","a":"\u0085"}`, "receipts", "canon")
	if code != 0 || out != "{\"a\":\"\u0085\",\"b\":\"\u2028\"}\n"+ledger.HashBytes([]byte("{\"a\":\"\u0085\",\"b\":\"\u2028\"}"))+"\n" {
		t.Fatalf("exit %d stdout %q", code, out)
	}
}

// TestReceiptsSignSpecChain: fed the §4.4 records and seed, sign MUST
// print exactly the §4.4 chain (§9).
func TestReceiptsSignSpecChain(t *testing.T) {
	records, want := readVector(t, "records_4_4.json"), readVector(t, "chain_4_4.json")
	for _, args := range [][]string{
		{"receipts", "sign", "--private-key", specSeed},
		{"receipts", "sign", "--private-key=" + strings.ToUpper(specSeed)},
		{"receipts", "sign", "--session-id", "01KDVDN90RBSAH00000000005B", "--private-key", specSeed},
	} {
		code, out, errOut := runVigil(t, records, args...)
		if code != 0 || out != want || errOut != "" {
			t.Fatalf("%q: exit %d stderr %q\n got %s\nwant %s", args, code, errOut, out, want)
		}
	}
	t.Setenv("VIGIL_PRIVATE_KEY", specSeed)
	if code, out, _ := runVigil(t, records, "receipts", "sign"); code != 0 || out != want {
		t.Fatalf("key from VIGIL_PRIVATE_KEY: exit %d\n%s", code, out)
	}
	code, out, _ := runVigil(t, records, "receipts", "sign", "--pretty")
	var pretty, compact any
	if code != 0 || !strings.Contains(out, "\n  {\n    \"id\"") || json.Unmarshal([]byte(out), &pretty) != nil {
		t.Fatalf("--pretty: exit %d\n%s", code, out)
	}
	json.Unmarshal([]byte(want), &compact)
	pb, _ := json.Marshal(pretty)
	cb, _ := json.Marshal(compact)
	if string(pb) != string(cb) {
		t.Fatal("--pretty changed the content")
	}
}

func TestReceiptsSignDefaults(t *testing.T) {
	t.Setenv("VIGIL_PRIVATE_KEY", "")
	in := `[{"agent":"a","action":"x","input":{"q":1}},{"action":"y","input":null,"output":null,"error":null,"extra":1,"hash":"ignored"},{"action":"z","input":[],"contractId":"c-1"}]`
	code, out, errOut := runVigil(t, in, "receipts", "sign", "--agent", "fallback", "--private-key", specSeed)
	if code != 0 {
		t.Fatalf("exit %d stderr %q", code, errOut)
	}
	if !strings.Contains(errOut, `record 1: ignoring unknown member "extra"`) || strings.Contains(errOut, "hash") {
		t.Errorf("stderr %q: want one warning for the unknown member only", errOut)
	}
	var chain []*ledger.Receipt
	if err := json.Unmarshal([]byte(out), &chain); err != nil {
		t.Fatal(err)
	}
	if len(chain) != 3 || chain[0].Agent != "a" || chain[1].Agent != "fallback" {
		t.Fatalf("chain %s", out)
	}
	sid := chain[0].SessionID
	if len(sid) != 26 || chain[1].SessionID != sid || chain[0].ID == chain[1].ID || len(chain[0].ID) != 26 {
		t.Fatalf("generated ids: %s", out)
	}
	if chain[2].ContractID != "c-1" || chain[1].Output != nil || chain[1].Error != nil || chain[1].InputAbsent {
		t.Fatalf("members: %s", out)
	}
	for i := 1; i < len(chain); i++ {
		if chain[i].Timestamp < chain[i-1].Timestamp || chain[i].ID <= chain[i-1].ID {
			t.Fatalf("generated timestamps/ids not monotonic: %s", out)
		}
	}
	pub, _ := ledger.ParsePublicKey(specPublicKey)
	res, err := ledger.VerifyChain(chain, ledger.VerifyOptions{PublicKey: pub, SessionID: sid})
	if err != nil || !res.Valid {
		t.Fatalf("signed chain does not verify: %+v %v", res, err)
	}
	if code, out, _ := runVigil(t, "[]", "receipts", "sign", "--private-key", specSeed); code != 0 || out != "[]\n" {
		t.Fatalf("empty array: exit %d %q", code, out)
	}
}

func TestReceiptsSignErrors(t *testing.T) {
	t.Setenv("VIGIL_PRIVATE_KEY", "")
	rec := func(extra string) string {
		return `{"agent":"a","action":"x","input":1` + extra + `}`
	}
	tests := []struct {
		name, stdin string
		args        []string
		errMatch    string
	}{
		{"no_key", `[]`, []string{}, "no key"},
		{"bad_key", `[]`, []string{"--private-key", "abc"}, "private key: want 64 hex characters"},
		{"not_json", `[`, nil, "stdin: invalid JSON at line 1:2"},
		{"not_array", `{}`, nil, "want a JSON array"},
		{"record_not_object", `[` + rec("") + `,7]`, nil, "record 1: want an object"},
		{"agent_missing", `[{"action":"x","input":1}]`, nil, "record 0: agent: want a non-empty string"},
		{"agent_empty", `[{"agent":"","action":"x","input":1}]`, nil, "record 0: agent"},
		{"action_missing", `[{"agent":"a","input":1}]`, nil, "record 0: action: want a non-empty string"},
		{"action_number", `[{"agent":"a","action":3,"input":1}]`, nil, "record 0: action"},
		{"input_missing", `[` + rec("") + `,{"agent":"a","action":"x"}]`, nil, "record 1: input: missing"},
		{"error_not_string", `[` + rec(`,"error":{"code":1}`) + `]`, nil, "record 0: error: want a string or null"},
		{"timestamp_fraction", `[` + rec(`,"timestamp":1.5`) + `]`, nil, "record 0: timestamp: want an integer"},
		{"timestamp_negative", `[` + rec(`,"timestamp":-1`) + `]`, nil, "record 0: timestamp"},
		{"timestamp_too_big", `[` + rec(`,"timestamp":9007199254740992`) + `]`, nil, "record 0: timestamp"},
		{"timestamp_string", `[` + rec(`,"timestamp":"5"`) + `]`, nil, "record 0: timestamp"},
		{"timestamp_backwards", `[` + rec(`,"timestamp":10`) + `,` + rec(`,"timestamp":9`) + `]`, nil, "record 1: timestamp: 9 is lower than the previous record's 10"},
		{"session_mismatch", `[` + rec(`,"sessionId":"S1"`) + `,` + rec(`,"sessionId":"S2"`) + `]`, nil, `record 1: sessionId: does not match the session id "S1"`},
		{"session_flag_mismatch", `[` + rec(`,"sessionId":"S1"`) + `]`, []string{"--session-id", "S0", "--private-key", specSeed}, `record 0: sessionId: does not match the session id "S0"`},
		{"duplicate_id", `[` + rec(`,"id":"A"`) + `,` + rec(`,"id":"A"`) + `]`, nil, `record 1: id: "A" already used by record 0`},
		{"id_not_string", `[` + rec(`,"id":1`) + `]`, nil, "record 0: id"},
		{"contract_not_string", `[` + rec(`,"contractId":1`) + `]`, nil, "record 0: contractId"},
		{"positional", `[]`, []string{"file.json"}, "unexpected argument"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"receipts", "sign"}, tt.args...)
			if tt.args == nil {
				args = append(args, "--private-key", specSeed)
			}
			code, out, errOut := runVigil(t, tt.stdin, args...)
			if code != 2 || out != "" || !strings.Contains(errOut, tt.errMatch) || !strings.HasPrefix(errOut, "vigil: ") {
				t.Fatalf("exit %d stdout %q stderr %q; want exit 2 with %q", code, out, errOut, tt.errMatch)
			}
		})
	}
}

// TestReceiptsVerifyVectors runs every chain verification vector through
// `vigil receipts verify`, from a file and from stdin, flags before and
// after the file.
func TestReceiptsVerifyVectors(t *testing.T) {
	ar, err := txtar.ParseFile(filepath.Join(vectorsDir, "verify.txtar"))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]map[string][]byte{}
	var names []string
	for _, f := range ar.Files {
		name, ext, _ := strings.Cut(f.Name, ".")
		if files[name] == nil {
			files[name] = map[string][]byte{}
			names = append(names, name)
		}
		files[name][ext] = f.Data
	}
	dir := t.TempDir()
	for i, name := range names {
		c := files[name]
		t.Run(name, func(t *testing.T) {
			var o struct{ PublicKey, SessionID, CloseHash string }
			if err := json.Unmarshal(c["opts"], &o); err != nil {
				t.Fatal(err)
			}
			var flags []string
			if o.PublicKey != "" {
				flags = append(flags, "--public-key", o.PublicKey)
			}
			if o.SessionID != "" {
				flags = append(flags, "--session-id="+o.SessionID)
			}
			if o.CloseHash != "" {
				flags = append(flags, "--close-hash", o.CloseHash)
			}
			path := filepath.Join(dir, name+".json")
			if err := os.WriteFile(path, c["json"], 0o644); err != nil {
				t.Fatal(err)
			}
			var args []string
			stdin := ""
			switch i % 3 { // vary the argument layout
			case 0:
				args = append(append([]string{"receipts", "verify"}, flags...), path)
			case 1:
				args = append([]string{"receipts", "verify", path}, flags...)
			default:
				args = append([]string{"receipts", "verify", "-"}, flags...)
				stdin = string(c["json"])
			}
			code, out, errOut := runVigil(t, stdin, args...)
			if want, ok := c["want"]; ok {
				wantCode := 1
				if strings.HasPrefix(string(want), `{"valid":true`) {
					wantCode = 0
				}
				if code != wantCode || out != string(want) {
					t.Fatalf("%q: exit %d stdout %q stderr %q; want exit %d stdout %q", args, code, out, errOut, wantCode, want)
				}
				if noKey := o.PublicKey == ""; noKey != strings.Contains(errOut, "signatures are not checked") {
					t.Errorf("stderr %q: the no-key notice must appear exactly without --public-key", errOut)
				}
				return
			}
			msg := strings.TrimSpace(string(c["err"]))
			if code != 2 || out != "" || !strings.Contains(errOut, msg) {
				t.Fatalf("%q: exit %d stdout %q stderr %q; want exit 2 with %q", args, code, out, errOut, msg)
			}
		})
	}
}

func TestReceiptsVerifyUsage(t *testing.T) {
	chain := filepath.Join(vectorsDir, "chain_4_4.json")
	tests := []struct {
		name     string
		args     []string
		code     int
		errMatch string
	}{
		{"ok_equals_form", []string{chain, "--public-key=" + specPublicKey}, 0, ""},
		{"missing_file_argument", nil, 2, "missing FILE"},
		{"two_files", []string{chain, chain}, 2, "unexpected argument"},
		{"no_such_file", []string{filepath.Join(t.TempDir(), "nope.json")}, 2, "no such file"},
		{"bad_public_key", []string{chain, "--public-key", "zz"}, 2, "--public-key"},
		{"empty_public_key", []string{chain, "--public-key="}, 2, "--public-key"},
		{"empty_close_hash", []string{chain, "--close-hash="}, 2, "--close-hash"},
		{"unknown_flag", []string{chain, "--lenient"}, 2, "flag provided but not defined"},
		{"help", []string{"-h"}, 0, "Usage: vigil receipts verify"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runVigil(t, "", append([]string{"receipts", "verify"}, tt.args...)...)
			if code != tt.code || !strings.Contains(errOut, tt.errMatch) || (code == 2 && out != "") {
				t.Fatalf("exit %d stdout %q stderr %q; want exit %d with %q", code, out, errOut, tt.code, tt.errMatch)
			}
		})
	}
	for _, args := range [][]string{{"receipts"}, {"receipts", "prove"}} {
		if code, _, errOut := runVigil(t, "", args...); code != 2 || !strings.Contains(errOut, "Usage: vigil receipts") {
			t.Errorf("%q: exit %d stderr %q", args, code, errOut)
		}
	}
	if code, _, _ := runVigil(t, "", "receipts", "-h"); code != 0 {
		t.Errorf("receipts -h: exit %d", code)
	}
}

// FuzzSignRecords: sign never panics, and whatever it accepts comes out as
// a chain that verifies under the signing key and session id.
func FuzzSignRecords(f *testing.F) {
	f.Add([]byte(readVectorF(f, "records_4_4.json")))
	f.Add([]byte(`[{"agent":"a","action":"x","input":{"\ud800":[1e400,-0]},"error":"e","output":null}]`))
	f.Add([]byte(`[{"agent":"a","action":"x","input":1,"timestamp":5},{"agent":"a","action":"y","input":2}]`))
	key, _ := ledger.ParsePrivateKey(specSeed)
	pub := ledger.PublicOf(key)
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := signRecords(in, key, "", "", io.Discard)
		if err != nil {
			return
		}
		chain, err := ledger.Parse(out)
		if err != nil {
			t.Fatalf("sign printed invalid JSON %q: %v", out, err)
		}
		sid := ""
		if list := chain.([]any); len(list) > 0 {
			sid = list[0].(map[string]any)["sessionId"].(string)
		}
		res, _, err := ledger.VerifyStream(bytes.NewReader(out), ledger.VerifyOptions{PublicKey: pub, SessionID: sid})
		if err != nil || !res.Valid {
			t.Fatalf("signed chain does not verify: %v %+v\n%s", err, res.Errors, out)
		}
	})
}

func readVectorF(f *testing.F, name string) string {
	b, err := os.ReadFile(filepath.Join(vectorsDir, name))
	if err != nil {
		f.Fatal(err)
	}
	return string(b)
}
