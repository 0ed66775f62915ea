package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/vigilhq/vigil/ledger"
)

func TestKeygen(t *testing.T) {
	code, out, errOut := runVigil(t, "", "keygen")
	if code != 0 || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	if !regexp.MustCompile(`^\{"privateKey":"[0-9a-f]{64}","publicKey":"[0-9a-f]{64}"\}\n$`).MatchString(out) {
		t.Fatalf("stdout %q", out)
	}
	var kp struct{ PrivateKey, PublicKey string }
	if err := json.Unmarshal([]byte(out), &kp); err != nil {
		t.Fatal(err)
	}
	k, err := ledger.ParsePrivateKey(kp.PrivateKey)
	if err != nil || ledger.PublicKeyHex(ledger.PublicOf(k)) != kp.PublicKey {
		t.Fatalf("public key does not belong to the private key: %s", out)
	}
	if _, again, _ := runVigil(t, "", "keygen"); again == out {
		t.Fatal("two runs gave the same key")
	}
}

func TestKeygenFromPrivateKey(t *testing.T) {
	const seed = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
	const want = `{"privateKey":"000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f","publicKey":"03a107bff3ce10be1d70dd18e74bc09967e4d6309ba50d5f1ddc8664125531b8"}` + "\n"
	tests := []struct {
		name     string
		args     []string
		code     int
		stdout   string
		errMatch string
	}{
		{"spec_seed", []string{"keygen", "--from-private-key", seed}, 0, want, ""},
		{"equals_form", []string{"keygen", "--from-private-key=" + seed}, 0, want, ""},
		{"uppercase_in_lowercase_out", []string{"keygen", "--from-private-key", strings.ToUpper(seed)}, 0, want, ""},
		{"short", []string{"keygen", "--from-private-key", seed[:62]}, 2, "", "want 64 hex characters"},
		{"not_hex", []string{"keygen", "--from-private-key", "x" + seed[1:]}, 2, "", "not hex"},
		{"empty", []string{"keygen", "--from-private-key="}, 2, "", "invalid key"},
		{"extra_argument", []string{"keygen", "now"}, 2, "", "unexpected argument"},
		{"unknown_flag", []string{"keygen", "--bits", "256"}, 2, "", "flag provided but not defined"},
		{"help", []string{"keygen", "-h"}, 0, "", "Usage: vigil keygen"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runVigil(t, "", tt.args...)
			if code != tt.code || out != tt.stdout || !strings.Contains(errOut, tt.errMatch) {
				t.Fatalf("exit %d stdout %q stderr %q; want exit %d stdout %q stderr containing %q", code, out, errOut, tt.code, tt.stdout, tt.errMatch)
			}
		})
	}
}
