#!/usr/bin/env bash
# What authentication and TLS cost: the same embedded server plain, and with
# API keys (HS256 JWTs) and TLS (a CA and a server certificate made here by
# openssl), interleaved in one run (plain, secured, plain, secured, ...) so
# both see the same machine. Each round writes with `roncho-loadtest ingest`
# (CreateMessages batches of 100, then ListMessages pages), then writes a
# 10,000-message corpus and runs the search benchmark (SearchMessages and
# GetSessionContext; test hashing vectors). The machine is noisy: the summary
# compares the medians of the rounds.
#
#   loadtests/run-security.sh [rounds]     (default 4 of each)
set -euo pipefail
cd "$(dirname "$0")/.."
port=50975
health=50976
source loadtests/common.sh
loadtest=$CARGO_TARGET_DIR/release/roncho-loadtest
rounds=${1:-4}
export RONCHO_EMBEDDING_PROVIDER=test-hashing RONCHO_EMBEDDING_DIMENSIONS=384

tls=$work/tls
scripts/make-test-certs.sh "$tls"
secret=$(openssl rand -hex 32)
key=$("$roncho" keys create --admin --auth-jwt-secret "$secret")

round() { # plain|secured number
  local mode=$1 n=$2
  local serve=(--data-dir "$work/data-$mode-$n") client=(--target "http://127.0.0.1:$port")
  if [ "$mode" = secured ]; then
    serve+=(--auth-jwt-secret "$secret" --tls-cert-file "$tls/server.pem" --tls-key-file "$tls/server.key"
      --health-listen "127.0.0.1:$health")
    client=(--target "https://localhost:$port" --ca-file "$tls/ca.pem" --key "$key")
  fi
  start_server "${serve[@]}"
  "$loadtest" "${client[@]}" --json --label "$mode" ingest | tee -a "$work/results.jsonl"
  "$loadtest" "${client[@]}" --label "$mode" search-ingest --messages 10000 >/dev/null
  local started=$SECONDS
  until "$roncho" status --listen "127.0.0.1:$port" "${serve[@]}" 2>/dev/null \
    | grep -Eq "^message vectors +ok +[0-9]+ synced, 0 pending"; do
    [ $((SECONDS - started)) -gt 600 ] && { echo "vectors did not sync"; exit 1; }
    sleep 1
  done
  "$loadtest" "${client[@]}" --json --label "$mode" search --queries 2000 | tee -a "$work/results.jsonl"
  stop_server
  rm -rf "$work/data-$mode-$n"
}

echo "# $(date -u +%F) $(nproc) cores; $rounds rounds of each, interleaved"
for n in $(seq 1 "$rounds"); do
  round plain "$n"
  round secured "$n"
done

python3 - "$work/results.jsonl" <<'PY'
import json, statistics, sys
runs = [json.loads(line) for line in open(sys.argv[1]) if line.startswith("{")]
by = {}
for run in runs:
    for phase in run["phases"]:
        by.setdefault((phase["rpc"], run["label"]), []).append(phase)
print("| RPC | plain (median) | keys + TLS (median) | cost | p50 plain / secured |")
print("|---|---|---|---|---|")
for rpc in ["CreateMessages", "ListMessages", "SearchMessages", "GetSessionContext"]:
    plain, secured = by[(rpc, "plain")], by[(rpc, "secured")]
    unit = "messages/s" if rpc == "CreateMessages" else "req/s"
    key = "items_per_s" if rpc == "CreateMessages" else "requests_per_s"
    a = statistics.median(p[key] for p in plain)
    b = statistics.median(p[key] for p in secured)
    pa = statistics.median(p["p50_ms"] for p in plain)
    pb = statistics.median(p["p50_ms"] for p in secured)
    print(f"| {rpc} | {a:,.0f} {unit} | {b:,.0f} {unit} | {100 * (a - b) / a:+.1f} % | {pa:.2f} / {pb:.2f} ms |")
PY
