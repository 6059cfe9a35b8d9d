#!/usr/bin/env bash
# The distributed mode under sustained writes while it is broken on purpose,
# then a check that nothing was lost, duplicated, left pending or dead.
#
# Deployment: every role its own release process on loopback over one
# Postgres (a fresh database) and NATS JetStream (a fresh stream prefix):
# `--roles ingest`, `--roles reconciler` and three `--roles deriver`,
# deriving with a scripted OpenAI-compatible model (loadtests/scripted_llm.py
# --all-lines: one fact per transcript line, so each message's fact carries
# its marker). Short leases (10 s) and a 30 s lost-work sweep, so recovery
# happens within the run.
#
# Load: `roncho-loadtest chaos-write`: writers, each in its own session (a
# speaker and a watcher who observes others), send batches of 10 messages
# with idempotency keys and retry a failed batch with the same key until it
# is acknowledged.
#
# Chaos, one action every few seconds while the writers run, cycling through:
# SIGKILL a random deriver (and start it again), SIGKILL ingest, SIGKILL
# the reconciler, SIGKILL two derivers at once, restart Postgres (fast
# mode: every connection cut), restart NATS, and a model outage (every call
# answers 503 for 40 s).
#
# Check, after the writers stop and the queue drains (psql against the run's
# database): every acknowledged message is stored exactly once; every
# message has exactly one live observation in each observer's collection
# (the speaker's own and the watcher's); no task is pending or dead.
#
#   loadtests/run-chaos.sh [seconds, default 180] [writers, default 4] [seconds between actions, default 10]
#
# It restarts this machine's PostgreSQL cluster and nats-server: run it
# where nothing else depends on them.
set -euo pipefail
cd "$(dirname "$0")/.."
port=21300
source loadtests/common.sh
seconds=${1:-180}
writers=${2:-4}
every=${3:-10}
nats_url=${RONCHO_TEST_NATS_URL:-nats://127.0.0.1:4222}
loadtest=$CARGO_TARGET_DIR/release/roncho-loadtest
cluster=$(ls /etc/postgresql | head -n1)
nats_start=(start-stop-daemon --start --oknodo --background --exec /usr/sbin/nats-server --
  -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server -l /var/log/nats-server.log)

python3 loadtests/scripted_llm.py --latency 0.05 --all-lines > "$work/llm.port" &
llm_pid=$!
for _ in $(seq 1 50); do [ -s "$work/llm.port" ] && break; sleep 0.1; done
llm_url=http://127.0.0.1:$(head -1 "$work/llm.port")

db_args=$(postgres_args)
db_url=${db_args#--database-url=}
export RONCHO_EMBEDDING_PROVIDER=none RONCHO_LLM_BASE_URL=$llm_url/v1 RONCHO_LLM_MODEL=scripted
export RONCHO_NATS_URL=$nats_url RONCHO_NATS_PREFIX=chaos_$$_$RANDOM
export RONCHO_DERIVER_LEASE_SECS=10 RONCHO_NATS_ACK_WAIT_SECS=10 RONCHO_NATS_REDELIVER_AFTER_SECS=30
export RONCHO_WORKER_OUTAGE_BACKOFF_MAX_SECS=30 RONCHO_STARTUP_TIMEOUT_SECS=600
# No dreams (the model would be every role's, and a dream waits an hour of quiet).
export RONCHO_DREAM_DOCUMENT_THRESHOLD=1000000000

declare -A role port_of pid_of
role[ingest]=ingest
role[reconciler]=reconciler
port_of[ingest]=$port
port_of[reconciler]=$((port + 1))
derivers=(deriver1 deriver2 deriver3)
for i in 1 2 3; do
  role[deriver$i]=deriver
  port_of[deriver$i]=$((port + 10 + i))
done

# launch name: starts the role's process (in the background; it waits for
# the database and NATS itself).
launch() {
  "$roncho" serve --listen "127.0.0.1:${port_of[$1]}" --log warn --roles "${role[$1]}" "$db_args" \
    >>"$work/$1.log" 2>&1 &
  pid_of[$1]=$!
}
# crash name: SIGKILL, then start again a moment later.
crash() {
  kill -KILL "${pid_of[$1]}" 2>/dev/null || true
  wait "${pid_of[$1]}" 2>/dev/null || true
  killed[$1]=$((${killed[$1]:-0} + 1))
}
stop_all() {
  for name in "${!pid_of[@]}"; do kill -TERM "${pid_of[$name]}" 2>/dev/null || true; done
  for name in "${!pid_of[@]}"; do wait "${pid_of[$name]}" 2>/dev/null || true; done
}
restore() {
  curl -s "$llm_url/outage/off" >/dev/null || true
  if ! (exec 3<>/dev/tcp/127.0.0.1/4222) 2>/dev/null; then "${nats_start[@]}"; fi
  pg_isready -q -h 127.0.0.1 || pg_ctlcluster --skip-systemctl-redirect "$cluster" main start
}
trap 'restore; stop_all; kill $llm_pid 2>/dev/null; cleanup' EXIT
declare -A killed
sql() { psql "$db_url" -qAtc "$1"; }

for name in ingest reconciler "${derivers[@]}"; do launch "$name"; done
for _ in $(seq 1 100); do
  "$roncho" status --listen "127.0.0.1:$port" "$db_args" 2>/dev/null | grep -q "^server .*ok" && break
  sleep 0.2
done

echo "# $(date -u +%F) $(nproc) cores; chaos for ${seconds} s, ${writers} writers, an action every ${every} s"
"$loadtest" --target "http://127.0.0.1:$port" --json --label chaos chaos-write \
  --seconds "$seconds" --writers "$writers" --batch-size 10 >"$work/written.json" &
writer=$!

actions=(kill_deriver model_outage kill_ingest restart_postgres kill_two_derivers restart_nats kill_reconciler kill_deriver)
pg_restarts=0 nats_restarts=0 outages=0
started=$(date +%s)
step=0
while kill -0 "$writer" 2>/dev/null && [ $(($(date +%s) - started)) -lt "$((seconds - every))" ]; do
  sleep "$every"
  action=${actions[$((step % ${#actions[@]}))]}
  step=$((step + 1))
  echo "t+$(($(date +%s) - started))s: $action"
  case $action in
    kill_deriver)
      victim=${derivers[$((RANDOM % 3))]}
      crash "$victim"; sleep 2; launch "$victim" ;;
    kill_two_derivers)
      first=$((RANDOM % 3))
      for victim in "${derivers[$first]}" "${derivers[$(((first + 1) % 3))]}"; do crash "$victim"; done
      sleep 3
      for victim in "${derivers[@]}"; do kill -0 "${pid_of[$victim]}" 2>/dev/null || launch "$victim"; done ;;
    kill_ingest) crash ingest; sleep 2; launch ingest ;;
    kill_reconciler) crash reconciler; sleep 2; launch reconciler ;;
    restart_postgres)
      pg_ctlcluster --skip-systemctl-redirect "$cluster" main restart -m fast
      pg_restarts=$((pg_restarts + 1)) ;;
    restart_nats)
      start-stop-daemon --stop --oknodo --retry 10 --exec /usr/sbin/nats-server >/dev/null
      sleep 3
      "${nats_start[@]}"
      nats_restarts=$((nats_restarts + 1)) ;;
    model_outage)
      curl -s "$llm_url/outage/on" >/dev/null
      (sleep 40; curl -s "$llm_url/outage/off" >/dev/null) &
      outages=$((outages + 1)) ;;
  esac
done
wait "$writer"
load_end=$(date +%s)
restore
for name in ingest reconciler "${derivers[@]}"; do kill -0 "${pid_of[$name]}" 2>/dev/null || launch "$name"; done

# The queue drains: nothing pending (postponed work included).
drained=""
for _ in $(seq 1 600); do
  if [ "$(sql "SELECT count(*) FROM work_tasks WHERE state = 'pending'")" = 0 ]; then
    drained=$(($(date +%s) - load_end))
    break
  fi
  sleep 1
done

marker="substring(content from '\[w[0-9]+\.b[0-9]+\.m[0-9]+\]')"
read -r acknowledged abandoned retried < <(python3 -c "import json,sys
w = json.load(open('$work/written.json'))['derivation']
print(w['messages'], w['abandoned_batches'], sum(w['retried_failures'].values()))")
failures=$(python3 -c "import json;print(', '.join(f'{k} {v}' for k, v in json.load(open('$work/written.json'))['derivation']['retried_failures'].items()) or 'none')")
IFS='|' read -r stored distinct < <(sql "SELECT count(*), count(DISTINCT $marker) FROM messages WHERE workspace_name = 'chaos'")
IFS='|' read -r expected lost duplicated < <(sql "
  WITH m AS MATERIALIZED (SELECT $marker AS marker, peer_name FROM messages WHERE workspace_name = 'chaos'),
  e AS MATERIALIZED (SELECT m.marker, m.peer_name AS observed, o.observer FROM m
        CROSS JOIN LATERAL (VALUES (m.peer_name), ('watcher')) AS o (observer)),
  d AS MATERIALIZED (SELECT $marker AS marker, observer, observed, count(*) AS n FROM documents
        WHERE workspace_name = 'chaos' AND deleted_at IS NULL GROUP BY 1, 2, 3)
  SELECT count(*), count(*) FILTER (WHERE d.n IS NULL), coalesce(sum(d.n - 1) FILTER (WHERE d.n > 1), 0)
  FROM e LEFT JOIN d USING (marker, observer, observed)")
IFS='|' read -r pending dead < <(sql "SELECT count(*) FILTER (WHERE state = 'pending'), count(*) FILTER (WHERE state = 'dead') FROM work_tasks")
kills=0
shown=()
for name in "${!killed[@]}"; do kills=$((kills + killed[$name])); shown+=("$name ${killed[$name]}"); done
llm=$(curl -s "$llm_url")

echo "processes killed (SIGKILL): $kills ($(IFS=,; echo "${shown[*]}" | sed 's/,/, /g')); Postgres restarts: $pg_restarts; NATS restarts: $nats_restarts; model outages (40 s of 503): $outages; model: $llm"
echo "writer: $acknowledged messages acknowledged, $retried failed attempts retried ($failures), $abandoned batches abandoned"
echo "messages: stored $stored, distinct $distinct, lost $((acknowledged - distinct)), duplicated $((stored - distinct))"
echo "observations: expected $expected, lost $lost, duplicated $duplicated"
echo "queue: pending $pending, dead $dead; drained ${drained:-NOT within 600} s after the load"
if [ "$abandoned" != 0 ] || [ "$acknowledged" != "$distinct" ] || [ "$stored" != "$distinct" ] \
  || [ "$lost" != 0 ] || [ "$duplicated" != 0 ] || [ "$pending" != 0 ] || [ "$dead" != 0 ]; then
  echo "CHAOS CHECK FAILED (logs: $work, kept)" >&2
  trap - EXIT
  restore; stop_all; kill $llm_pid 2>/dev/null
  exit 1
fi
echo "chaos check passed"
