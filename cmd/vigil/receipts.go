package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"sync"

	"github.com/vigilhq/vigil/ledger"
)

func init() {
	register(command{name: "receipts", summary: "canonicalize JSON, sign and verify receipt chains", run: runReceipts})
}

// maxReceiptsInput bounds what canon and sign read from stdin.
const maxReceiptsInput = 64 << 20

const receiptsUsage = `Usage: vigil receipts <canon|sign|verify> [flags] [arguments]

Work with receipt chains (hash-chained, Ed25519-signed action records,
wire-compatible with the Invariance SDK). Machine output is one line of JSON
on stdout; diagnostics go to stderr.

  canon    read one JSON value on stdin; print its canonical form and SHA-256
  sign     read a JSON array of action records on stdin; print the signed chain
  verify   verify a chain in FILE (or - for stdin); exit 0 valid, 1 invalid

Run 'vigil receipts <subcommand> -h' for its flags.
`

func runReceipts(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, receiptsUsage)
		return errors.New("receipts: missing subcommand (canon, sign or verify)")
	}
	switch args[0] {
	case "-h", "--help", "-help", "help":
		fmt.Fprint(stderr, receiptsUsage)
		return errHelpShown
	case "canon":
		return runReceiptsCanon(args[1:], stdin, stdout, stderr)
	case "sign":
		return runReceiptsSign(args[1:], stdin, stdout, stderr)
	case "verify":
		return runReceiptsVerify(ctx, args[1:], stdin, stdout, stderr)
	}
	fmt.Fprint(stderr, receiptsUsage)
	return fmt.Errorf("receipts: unknown subcommand %q", args[0])
}

// readLimited reads all of r, failing beyond maxReceiptsInput bytes.
func readLimited(r io.Reader, what string) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxReceiptsInput+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", what, err)
	}
	if len(b) > maxReceiptsInput {
		return nil, fmt.Errorf("read %s: input larger than %d MiB", what, maxReceiptsInput>>20)
	}
	return b, nil
}

func runReceiptsCanon(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("receipts canon", "receipts canon < value.json",
		"Read one JSON value on stdin and print its canonical form (JS JSON.stringify\n"+
			"with sorted keys) on line 1 and the lowercase hex SHA-256\n"+
			"of that line on line 2. Split the output on \\n only: line 1 may contain raw\n"+
			"U+2028, U+2029 or U+0085.", stderr)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("receipts canon: unexpected argument %q (the value is read from stdin)", pos[0])
	}
	in, err := readLimited(stdin, "stdin")
	if err != nil {
		return fmt.Errorf("receipts canon: %w", err)
	}
	out, err := ledger.Canonicalize(in)
	if err != nil {
		return fmt.Errorf("receipts canon: stdin: %w", err)
	}
	buf := make([]byte, 0, len(out)+66)
	buf = append(buf, out...)
	buf = append(buf, '\n')
	buf = append(buf, ledger.HashBytes(out)...)
	buf = append(buf, '\n')
	_, err = stdout.Write(buf)
	return err
}

func runReceiptsSign(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("receipts sign", "receipts sign --private-key HEX [--session-id ID] [--agent NAME] [--pretty] < records.json",
		"Read a JSON array of action records {agent, action, input, output?, error?,\n"+
			"timestamp?, sessionId?, id?, contractId?, counterAgentId?, counterSignature?}\n"+
			"on stdin and print the signed receipt chain as a JSON array. The key comes\n"+
			"from --private-key, else the VIGIL_PRIVATE_KEY environment variable.", stderr)
	keyHex := fs.String("private-key", "", "64-hex private key (seed) that signs the receipts (default $VIGIL_PRIVATE_KEY)")
	sessionID := fs.String("session-id", "", "session id of the chain (default: the first record's sessionId, else a new ULID)")
	agent := fs.String("agent", "", "agent for records without one")
	pretty := fs.Bool("pretty", false, "indent the output")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("receipts sign: unexpected argument %q (records are read from stdin)", pos[0])
	}
	if *keyHex == "" {
		*keyHex = os.Getenv("VIGIL_PRIVATE_KEY")
	}
	if *keyHex == "" {
		return errors.New("receipts sign: no key: pass --private-key HEX or set VIGIL_PRIVATE_KEY")
	}
	key, err := ledger.ParsePrivateKey(*keyHex)
	if err != nil {
		return fmt.Errorf("receipts sign: %w", err)
	}
	in, err := readLimited(stdin, "stdin")
	if err != nil {
		return fmt.Errorf("receipts sign: %w", err)
	}
	chain, err := signRecords(in, key, *sessionID, *agent, stderr)
	if err != nil {
		return fmt.Errorf("receipts sign: %w", err)
	}
	if *pretty {
		var ind bytes.Buffer
		if err := json.Indent(&ind, chain, "", "  "); err != nil {
			return fmt.Errorf("receipts sign: %w", err)
		}
		chain = ind.Bytes()
	}
	chain = append(chain, '\n')
	_, err = stdout.Write(chain)
	return err
}

// maxSafeInteger is 2^53−1, the largest timestamp sign accepts.
const maxSafeInteger = 1<<53 - 1

// signRecords turns the records array in into the compact JSON array of the
// signed chain (vigil receipts sign).
func signRecords(in []byte, key ed25519.PrivateKey, sessionID, defaultAgent string, stderr io.Writer) ([]byte, error) {
	v, err := ledger.Parse(in)
	if err != nil {
		return nil, fmt.Errorf("stdin: %w", err)
	}
	records, ok := v.([]any)
	if !ok {
		return nil, errors.New("stdin: want a JSON array of action records")
	}
	if sessionID == "" && len(records) > 0 {
		if m, ok := records[0].(map[string]any); ok {
			sessionID, _ = m["sessionId"].(string)
		}
	}
	if sessionID == "" {
		sessionID = ledger.NewID()
	}
	out := []byte{'['}
	var tail ledger.Tail
	chain := make([]*ledger.Receipt, 0, len(records))
	ids := map[string]int{}
	warned := map[string]bool{}
	for i, rec := range records {
		m, ok := rec.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("record %d: want an object", i)
		}
		bad := func(field, format string, args ...any) error {
			return fmt.Errorf("record %d: %s: %s", i, field, fmt.Sprintf(format, args...))
		}
		a := ledger.Action{SessionID: sessionID}
		for k := range m {
			switch k {
			case "agent", "action", "input", "output", "error", "timestamp", "sessionId", "id",
				"contractId", "counterAgentId", "counterSignature", "hash", "previousHash", "signature":
			default:
				if !warned[k] {
					warned[k] = true
					fmt.Fprintf(stderr, "vigil: receipts sign: record %d: ignoring unknown member %q\n", i, k)
				}
			}
		}
		if s, ok := m["agent"].(string); ok && s != "" {
			a.Agent = s
		} else if defaultAgent != "" {
			a.Agent = defaultAgent
		} else {
			return nil, bad("agent", "want a non-empty string (or pass --agent)")
		}
		if s, ok := m["action"].(string); ok && s != "" {
			a.Action = s
		} else {
			return nil, bad("action", "want a non-empty string")
		}
		in, present := m["input"]
		if !present {
			return nil, bad("input", "missing")
		}
		a.Input = in
		a.Output = m["output"]
		switch e := m["error"].(type) {
		case nil:
		case string:
			a.Error = e
		default:
			return nil, bad("error", "want a string or null")
		}
		if x, present := m["timestamp"]; present {
			f, ok := x.(float64)
			if !ok || f != math.Trunc(f) || f < 0 || f > maxSafeInteger {
				return nil, bad("timestamp", "want an integer in [0, 2^53-1]")
			}
			if i > 0 && f < tail.Timestamp {
				return nil, bad("timestamp", "%s is lower than the previous record's %s", ledger.FormatNumber(f), ledger.FormatNumber(tail.Timestamp))
			}
			ts := int64(f)
			a.Timestamp = &ts
		}
		if x, present := m["sessionId"]; present {
			if s, ok := x.(string); !ok || s != sessionID {
				return nil, bad("sessionId", "does not match the session id %q", sessionID)
			}
		}
		if x, present := m["id"]; present {
			s, ok := x.(string)
			if !ok || s == "" {
				return nil, bad("id", "want a non-empty string")
			}
			if j, dup := ids[s]; dup {
				return nil, bad("id", "%q already used by record %d", s, j)
			}
			a.ID = s
		}
		for _, f := range []struct {
			name string
			dst  *string
		}{{"contractId", &a.ContractID}, {"counterAgentId", &a.CounterAgentID}, {"counterSignature", &a.CounterSignature}} {
			switch s := m[f.name].(type) {
			case nil:
			case string:
				*f.dst = s
			default:
				return nil, bad(f.name, "want a string or null")
			}
		}
		// Hash now (the chain is sequential); sign below, in parallel.
		r, err := ledger.Append(tail, a, nil)
		if err != nil {
			return nil, fmt.Errorf("record %d: %w", i, err)
		}
		if _, dup := ids[r.ID]; dup { // a generated id met a given one
			return nil, bad("id", "%q already used", r.ID)
		}
		ids[r.ID] = i
		tail = r.Tail()
		chain = append(chain, r)
	}
	if err := signAll(chain, key); err != nil {
		return nil, err
	}
	for i, r := range chain {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, r.Raw...)
	}
	return append(out, ']'), nil
}

// signAll signs every receipt of chain (hashes already set) on all cores
// and re-emits its JSON.
func signAll(chain []*ledger.Receipt, key ed25519.PrivateKey) error {
	workers := runtime.GOMAXPROCS(0)
	errs := make([]error, len(chain))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(chain); i += workers {
				r := chain[i]
				r.Signature = ledger.SignHash(key, r.Hash)
				r.Raw, errs[i] = r.MarshalJSON()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

func runReceiptsVerify(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("receipts verify", "receipts verify [--public-key HEX] [--close-hash HASH] [--session-id ID] FILE",
		"Verify the receipt chain in FILE (a path, or - for stdin): a JSON array of\n"+
			"receipts or an object with a \"receipts\" array (and optionally a string\n"+
			"\"closeHash\", used when --close-hash is absent). The file is streamed, so it\n"+
			"may be of any size. Prints {\"valid\",\"brokenAt\",\"reason\",\"errors\"}; exits 0\n"+
			"when valid, 1 when invalid, 2 for bad input. Without --public-key signatures\n"+
			"are not checked; the key is never taken from the file.", stderr)
	pubHex := fs.String("public-key", "", "64-hex public key that must have signed every receipt")
	closeHash := fs.String("close-hash", "", `hash the chain must end with ("0" for an empty chain)`)
	sessionID := fs.String("session-id", "", "session id every receipt must carry")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		fs.Usage()
		if len(pos) == 0 {
			return errors.New("receipts verify: missing FILE (use - for stdin)")
		}
		return fmt.Errorf("receipts verify: unexpected argument %q", pos[1])
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	opts := ledger.VerifyOptions{SessionID: *sessionID, CloseHash: *closeHash}
	if set["close-hash"] && *closeHash == "" {
		return errors.New(`receipts verify: --close-hash: want "0" or 64 lowercase hex characters`)
	}
	if set["public-key"] {
		if opts.PublicKey, err = ledger.ParsePublicKey(*pubHex); err != nil {
			return fmt.Errorf("receipts verify: --public-key: %w", err)
		}
	} else {
		fmt.Fprintln(stderr, "vigil: receipts verify: no --public-key given: signatures are not checked")
	}
	var in io.Reader = stdin
	name := "stdin"
	if pos[0] != "-" {
		f, err := os.Open(pos[0])
		if err != nil {
			return fmt.Errorf("receipts verify: %w", err)
		}
		defer f.Close()
		in, name = f, pos[0]
	}
	res, _, err := ledger.VerifyStream(in, opts)
	if err != nil {
		return fmt.Errorf("receipts verify: %s: %w", name, err)
	}
	out, err := json.Marshal(res)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(stdout, "%s\n", out); err != nil {
		return err
	}
	if !res.Valid {
		return exitCode(1, "")
	}
	return nil
}
