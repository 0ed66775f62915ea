package main

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"flag"
	"fmt"
	"io"

	"github.com/vigilhq/vigil/ledger"
)

func init() {
	register(command{name: "keygen", summary: "generate an Ed25519 key pair for signing receipts", run: runKeygen})
}

// keyPairJSON is the output of vigil keygen: the hex seed and public key.
type keyPairJSON struct {
	PrivateKey string `json:"privateKey"`
	PublicKey  string `json:"publicKey"`
}

func runKeygen(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("keygen", "keygen [--from-private-key HEX]",
		"Print a new Ed25519 key pair for signing receipts as\n"+
			`{"privateKey":"<64 hex>","publicKey":"<64 hex>"}; the private key is the 32-byte seed.`+"\n"+
			"With --from-private-key, print the pair of that seed instead.", stderr)
	from := fs.String("from-private-key", "", "derive the pair from this 64-hex private key (seed)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		fs.Usage()
		return fmt.Errorf("keygen: unexpected argument %q", pos[0])
	}
	fromSet := false
	fs.Visit(func(f *flag.Flag) { fromSet = fromSet || f.Name == "from-private-key" })
	var key ed25519.PrivateKey
	if fromSet {
		if key, err = ledger.ParsePrivateKey(*from); err != nil {
			return fmt.Errorf("keygen: --from-private-key: %w", err)
		}
	} else if key, err = ledger.GenerateKey(); err != nil {
		return fmt.Errorf("keygen: %w", err)
	}
	out, err := json.Marshal(keyPairJSON{PrivateKey: ledger.PrivateKeyHex(key), PublicKey: ledger.PublicKeyHex(ledger.PublicOf(key))})
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "%s\n", out)
	return err
}
