#!/usr/bin/env bash
# The gateway benchmark (spec gateway §11) on a 2-core machine: every
# server under test (the gateway, and the plain httputil.ReverseProxy
# floor) is pinned to core 0 with GOMAXPROCS=1; the mock upstream and the
# load generator run on core 1. Results go to bench-results.json and
# bench-summary.md in the current directory.
#
#   bash bench/gateway/run.sh            # full run (N=2000 at c=1, load sweep)
#   QUICK=1 bash bench/gateway/run.sh    # reduced run (G1, S1, M1 and M2 at c=1, 500 requests): what CI runs
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=$(pwd)
tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; sleep 0.2; rm -rf "$tmp"; }
trap cleanup EXIT
pin0() { if command -v taskset >/dev/null; then exec taskset -c 0 env GOMAXPROCS=1 "$@"; else exec env GOMAXPROCS=1 "$@"; fi; }
pin1() { if command -v taskset >/dev/null; then taskset -c 1 "$@"; else "$@"; fi; }
bg1() { if command -v taskset >/dev/null; then exec taskset -c 1 "$@"; else exec "$@"; fi; }

for p in 19000 19001 19002 19003 19004 19005 19010 19011 19012 19013; do
  if curl -s -o /dev/null "http://127.0.0.1:$p/"; then echo "port $p is in use: stop what runs there first" >&2; exit 1; fi
done
(cd "$root" && go build -o "$tmp/vigil" ./cmd/vigil)
V="$tmp/vigil"
N=${N:-2000}; WARM=${WARM:-200}
if [ -n "${QUICK:-}" ]; then N=500; WARM=100; fi
KEY=vgl_bench_0123456789abcdef0123456789

wait_up() { for _ in $(seq 100); do curl -sf -o /dev/null "$1" && return 0; sleep 0.05; done; echo "not up: $1" >&2; return 1; }

(bg1 "$V" bench mock --listen 127.0.0.1:19000 2>/dev/null) & pids+=($!)
(bg1 "$V" bench mock --listen 127.0.0.1:19010 --chunk-chars 8 --response-chars 512 --chunk-delay 20ms 2>/dev/null) & pids+=($!)
(pin0 "$V" bench proxy --listen 127.0.0.1:19001 --upstream http://127.0.0.1:19000 2>/dev/null) & pids+=($!)
(pin0 "$V" bench proxy --listen 127.0.0.1:19011 --upstream http://127.0.0.1:19010 2>/dev/null) & pids+=($!)

# G0: no rules. G1/G2: the standard rule set as a global guardrail; G2
# records to SQLite (dataset path and key). S1/S3: streaming in
# incremental and passthrough modes, against the paced mock.
serve() { # name port mock-port extra-yaml-lines…
  mkdir -p "$tmp/$1"
  { printf 'gateway:\n  upstreams:\n    - {name: openai, base_url: "http://127.0.0.1:%s/v1"}\n' "$3"
    for l in "${@:4}"; do printf '  %s\n' "$l"; done; } > "$tmp/$1/vigil.yaml"
  (export VIGIL_API_KEY=$KEY; pin0 "$V" serve --listen 127.0.0.1:"$2" --data-dir "$tmp/$1" --config "$tmp/$1/vigil.yaml" \
    --log-level error --monitor-workers -1 2>"$tmp/$1/log") & pids+=($!)
  eval "pid_$1=$!"
  wait_up "http://127.0.0.1:$2/healthz" || { cat "$tmp/$1/log" >&2; exit 1; }
}
rules="guardrails_file: $here/rules.gr"
serve g0 19002 19000
serve g1 19003 19000 "$rules"
# G2 records on an instance of its own: the load sweep below measures G1
# (no recording), and an instance that has just recorded holds its
# sessions' stitching index (a few KB a call until they go idle), which
# makes every garbage collection longer.
if [ -z "${QUICK:-}" ]; then serve g2 19005 19000 "$rules"; fi
serve s1 19012 19010 "$rules" "stream: {mode: incremental}"
serve s3 19013 19010 "$rules" "stream: {mode: passthrough}"
for p in 19000 19010; do wait_up "http://127.0.0.1:$p/v1/models"; done

res="$out/bench-results.json"; md="$out/bench-summary.md"
run() { pin1 "$V" bench run --requests "$N" --warmup "$WARM" --out "$res" --md "$md" "$@"; }
D=http://127.0.0.1:19000/v1/chat/completions
F=http://127.0.0.1:19001/v1/chat/completions
if [ -z "${QUICK:-}" ]; then
  run --config-id G0 --direct $D --floor $F --gateway http://127.0.0.1:19002/api/v1/gateway/openai/chat/completions --gateway-pid "$pid_g0"
fi
run --config-id G1 --direct $D --floor $F --gateway http://127.0.0.1:19003/api/v1/gateway/openai/chat/completions --gateway-pid "$pid_g1"
if [ -z "${QUICK:-}" ]; then
  run --config-id G2 --direct $D --floor $F --gateway http://127.0.0.1:19005/api/v1/gateway/bench/openai/chat/completions \
    --header "Invariant-Authorization: Bearer $KEY" --gateway-pid "$pid_g2"
  # Under load (after the c=1 runs: an overloaded instance would skew them).
  # The open loop goes upward until failure (spec §11): the frontier is the
  # highest rate whose added p99 stays within the limit; the direct target's
  # p99 at each rate shows whether the load generator itself (on core 1 with
  # the mock) keeps up.
  run --config-id G1 --requests 20 --warmup 10 --rounds 1 --direct $D --floor $F --gateway http://127.0.0.1:19003/api/v1/gateway/openai/chat/completions \
    --gateway-pid "$pid_g1" --concurrency "${CONCURRENCY:-16,64}" --rates "${RATES:-500,1000,2000,3000,4000,5000,6000}"
fi
SD=http://127.0.0.1:19010/v1/chat/completions; SF=http://127.0.0.1:19011/v1/chat/completions
SN=${SN:-14}  # streamed requests per target: each takes ~1.3 s (64 chunks, 20 ms apart)
pin1 "$V" bench run --stream --requests "$SN" --warmup 2 --rounds 7 --out "$res" --md "$md" --config-id S1 --direct $SD --floor $SF \
  --gateway http://127.0.0.1:19012/api/v1/gateway/openai/chat/completions
if [ -z "${QUICK:-}" ]; then
  pin1 "$V" bench run --stream --requests "$SN" --warmup 2 --rounds 7 --out "$res" --md "$md" --config-id S3 --direct $SD --floor $SF \
    --gateway http://127.0.0.1:19013/api/v1/gateway/openai/chat/completions
fi
# M1, M2: MCP tools/call through the stdio wrapper and through the
# streamable proxy of the g0 instance, against the mock's MCP server.
# Fair per §11: Vigil (and the raw relay, the hardware floor: io.Copy both
# ways, nothing else) on core 0 with GOMAXPROCS=1; the MCP server behind
# the wrapper or relay back on core 1 with the direct server's environment
# (affinity and GOMAXPROCS as the load generator gives them).
if command -v taskset >/dev/null; then P0="taskset -c 0 env GOMAXPROCS=1"; P1="taskset -c 1 env -u GOMAXPROCS"; else P0="env GOMAXPROCS=1"; P1="env -u GOMAXPROCS"; fi
MS=${MCP_SESSIONS:-32}
if [ -n "${QUICK:-}" ]; then MS=""; fi
(pin0 "$V" bench relay --listen 127.0.0.1:19004 --upstream 127.0.0.1:19000 2>/dev/null) & pids+=($!)
wait_up http://127.0.0.1:19004/v1/models
pin1 "$V" bench mcp --requests "$N" --warmup "$WARM" --out "$res" --md "$md" --config-id M2 --sessions "$MS" \
  --direct http://127.0.0.1:19000/mcp/ --relay http://127.0.0.1:19004/mcp/ --floor http://127.0.0.1:19001/mcp/ \
  --gateway http://127.0.0.1:19002/api/v1/gateway/mcp/streamable --header "MCP-SERVER-BASE-URL: http://127.0.0.1:19000"
(unset VIGIL_API_KEY; pin1 "$V" bench mcp --requests "$N" --warmup "$WARM" --out "$res" --md "$md" --config-id M1 --sessions "$MS" \
  --direct-command "$V bench mock --mcp-stdio" \
  --relay-command "$P0 $V bench relay -- $P1 $V bench mock --mcp-stdio" \
  --gateway-command "$P0 $V mcp run --log-file $tmp/mcp.log --cache-dir $tmp/mcp-cache --spool-dir $tmp/mcp-spool -- $P1 $V bench mock --mcp-stdio")
echo "results: $res, $md"
