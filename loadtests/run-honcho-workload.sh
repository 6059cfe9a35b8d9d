#!/usr/bin/env bash
# The Honcho side-by-side workload (../shared/bench/honcho_workload.py: one
# client writes 5,000 messages of 20–60 words, then context, session search,
# workspace search and list at 5k; 8 clients grow the workspace to 50,000;
# the reads again) against roncho's REST edge, two builds interleaved, on
# both backends:
#   embedded  `roncho serve` on a fresh data directory (SQLite)
#   postgres  `roncho serve --database-url` on a fresh database
# each with every role in the process (the deriver deriving from the
# messages as they arrive; on Postgres the reconciler indexing their text
# beside ingest and recall, as a deployment runs it), and no embedding
# model, as Honcho ran (RONCHO_WORKLOAD_EMBEDDING=auto: the local model
# when installed).
# RONCHO_WORKLOAD_ROLES=ingest,recall,reconciler runs the roles the
# workload's README measured roncho with beside Honcho (whose deriver was
# off): the side-by-side rows of issue 58 are read from that run.
# Each (round, backend) runs OLD then NEW; the table at the end gives every
# row's p50 (throughput for ingest) per run. The machine is noisy: read the
# rounds side by side.
#
#   loadtests/run-honcho-workload.sh OLD_BINARY NEW_BINARY [rounds] [backends]
#   (default 2 rounds, "embedded postgres"; RONCHO_WORKLOAD_ARGS adds flags
#   to the workload, e.g. --quick)
set -euo pipefail
cd "$(dirname "$0")/.."
usage="run-honcho-workload.sh OLD NEW [rounds] [backends]"
source loadtests/workload-common.sh
database=roncho_workload_$$
trap 'stop; psql "$server_url" -qc "DROP DATABASE IF EXISTS $database WITH (FORCE)" >/dev/null 2>&1; rm -rf "$work"' EXIT

for round in $(seq 1 "$rounds"); do
  for backend in $backends; do
    for build in old new; do
      bin=$old
      [ "$build" = new ] && bin=$new
      store=(--data-dir "$work/data")
      if [ "$backend" = postgres ]; then
        psql "$server_url" -qc "DROP DATABASE IF EXISTS $database WITH (FORCE)" >/dev/null
        psql "$server_url" -qc "CREATE DATABASE $database" >/dev/null
        store=(--database-url "${server_url%/*}/$database")
      fi
      rm -rf "$work/data"
      grpc=$(free_port)
      rest=$(free_port)
      env -u RONCHO_EMBEDDING_MODEL_DIR RONCHO_EMBEDDING_PROVIDER="${RONCHO_WORKLOAD_EMBEDDING:-none}" \
        "$bin" serve ${RONCHO_WORKLOAD_ROLES:+--roles "$RONCHO_WORKLOAD_ROLES"} --listen "127.0.0.1:$grpc" --rest-listen "127.0.0.1:$rest" "${store[@]}" --log warn \
        >"$work/server.log" 2>&1 &
      server=$!
      for _ in $(seq 1 150); do curl -sf "http://127.0.0.1:$rest/health" >/dev/null && break; sleep 0.2; done
      echo "== round $round, $backend, $build ($bin)"
      # shellcheck disable=SC2086
      "$venv/bin/python" "$workload" --base-url "http://127.0.0.1:$rest" --server roncho --backend "$backend" \
        --out "$work/r$round-$backend-$build.json" ${RONCHO_WORKLOAD_ARGS:-} | grep -E "^(ingest|session|workspace|list) "
      stop
    done
  done
done

"$venv/bin/python" - "$work" <<'EOF'
import glob, json, os, sys
rows = [("ingest seq, 1 client (msg/s)", "ingest_seq", "msg_per_s"), ("ingest 8 clients (msg/s)", "ingest_conc", "msg_per_s")]
for stage, size in (("small", "5k"), ("large", "50k")):
    for key in ("context", "list_messages", "search_session", "search_workspace"):
        rows.append((f"{key} @{size} p50 / p99 (ms)", f"{key}@{stage}", "lat"))
runs = sorted(glob.glob(os.path.join(sys.argv[1], "r*.json")), key=lambda run: run.replace("-old", "-0").replace("-new", "-1"))
names = [os.path.basename(r)[:-5] for r in runs]
data = [json.load(open(r))["results"] for r in runs]
print("\n| row | " + " | ".join(names) + " |")
print("|---|" + "---|" * len(names))
for label, key, field in rows:
    cells = []
    for d in data:
        r = d.get(key)
        if r is None:
            cells.append("–")
        elif field == "lat":
            cells.append(f"{r['lat_ms']['p50']:.2f} / {r['lat_ms']['p99']:.1f}")
        else:
            cells.append(f"{r[field]:,.0f}")
    print(f"| {label} | " + " | ".join(cells) + " |")
EOF
