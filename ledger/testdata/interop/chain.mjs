// Node.js side of the ledger interop test (ledger/interop_test.go).
// It implements spec/ledger.md with nothing but JSON.parse, a sorted
// JSON.stringify, @noble/hashes (SHA-256) and @noble/ed25519, the way
// @invariance/sdk does, so that Go and JavaScript check each other.
//
// Usage: node chain.mjs canon|sign|verify < request.json > response.json
//   canon:  ["<base64 of a JSON text>", ...] -> [{"canon","hash"} | {"error"}, ...]
//   sign:   {"seed","records":[{id,sessionId,agent,action,input?,output?,error?,timestamp}]}
//           -> the signed chain (a JSON array of receipts)
//   verify: {"publicKey","receipts":[...]} -> {"valid","errors":[{"index","reason"}]}
import * as ed from '@noble/ed25519';
import { sha256, sha512 } from '@noble/hashes/sha2.js';
import { bytesToHex, hexToBytes, utf8ToBytes } from '@noble/hashes/utils.js';

ed.hashes.sha512 = sha512;

// canon is the SDK's canonical JSON: JSON.stringify with keys sorted by
// Array.prototype.sort (UTF-16 code units); undefined members are dropped.
function canon(v) {
  if (v === null || typeof v !== 'object') return JSON.stringify(v);
  if (Array.isArray(v)) return '[' + v.map((e) => canon(e) ?? 'null').join(',') + ']';
  const parts = [];
  for (const k of Object.keys(v).sort()) {
    const s = canon(v[k]);
    if (s !== undefined) parts.push(JSON.stringify(k) + ':' + s);
  }
  return '{' + parts.join(',') + '}';
}

const hashHex = (s) => bytesToHex(sha256(utf8ToBytes(s)));

function receiptHash(r) {
  return hashHex(canon({
    id: r.id, sessionId: r.sessionId, agent: r.agent, action: r.action, input: r.input,
    output: r.output ?? null, error: r.error ?? null, timestamp: r.timestamp, previousHash: r.previousHash,
  }));
}

async function readStdin() {
  const chunks = [];
  for await (const c of process.stdin) chunks.push(c);
  return Buffer.concat(chunks).toString('utf8');
}

const mode = process.argv[2];
const req = JSON.parse(await readStdin());
let res;
if (mode === 'canon') {
  res = req.map((b64) => {
    try {
      const text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false }).decode(Buffer.from(b64, 'base64'));
      const c = canon(JSON.parse(text));
      return { canon: c, hash: hashHex(c) };
    } catch (e) {
      return { error: String(e.message) };
    }
  });
} else if (mode === 'sign') {
  const seed = hexToBytes(req.seed);
  let prev = '0';
  res = req.records.map((rec) => {
    const r = { ...rec, previousHash: prev };
    r.hash = receiptHash(r);
    r.signature = bytesToHex(ed.sign(utf8ToBytes(r.hash), seed));
    prev = r.hash;
    return r;
  });
} else if (mode === 'verify') {
  const pub = hexToBytes(req.publicKey);
  const errors = [];
  req.receipts.forEach((r, i) => {
    if (receiptHash(r) !== r.hash) errors.push({ index: i, reason: 'hash_mismatch' });
    const prev = i === 0 ? '0' : req.receipts[i - 1].hash;
    if (r.previousHash !== prev) errors.push({ index: i, reason: 'linkage' });
    let ok = false;
    try {
      ok = /^[0-9a-f]{128}$/.test(r.signature) && ed.verify(hexToBytes(r.signature), utf8ToBytes(r.hash), pub);
    } catch {
      ok = false;
    }
    if (!ok) errors.push({ index: i, reason: 'signature' });
  });
  res = { valid: errors.length === 0, errors };
} else {
  console.error('usage: node chain.mjs canon|sign|verify');
  process.exit(2);
}
process.stdout.write(JSON.stringify(res));
