#!/usr/bin/env bash
# Postgres full-text search in the three phases issue 37 names, two builds
# interleaved, no model, every role in the process (as
# run-honcho-workload.sh runs them):
#   after the burst  the Honcho workload itself (its search rows at 50k come
#                    right after 45,000 messages arrive from 8 clients);
#   steady state     the same database served again once its text index
#                    caught up: the workload's 210 queries, session and
#                    workspace (loadtests/search_phases.py);
#   catch-up         the words of the 45,000 messages outside S0 put back
#                    into the text index's queue, the server started, and the
#                    queries sent back to back for 6 s while the text
#                    indexer takes them (p50 by second, to see the catch-up).
#
#   loadtests/run-search-phases.sh OLD_BINARY NEW_BINARY [rounds]
set -euo pipefail
cd "$(dirname "$0")/.."
usage="run-search-phases.sh OLD NEW [rounds]"
source loadtests/workload-common.sh
trap 'stop; for b in old new; do psql "$server_url" -qc "DROP DATABASE IF EXISTS roncho_phases_$$_$b WITH (FORCE)" >/dev/null 2>&1; done; rm -rf "$work"' EXIT

serve() { # serve BINARY DATABASE_URL: every role, no model; sets server and rest
  rest=$(free_port)
  env -u RONCHO_EMBEDDING_MODEL_DIR RONCHO_EMBEDDING_PROVIDER=none \
    "$1" serve --listen "127.0.0.1:$(free_port)" --rest-listen "127.0.0.1:$rest" --database-url "$2" --log warn \
    >>"$work/server.log" 2>&1 &
  server=$!
  for _ in $(seq 1 150); do curl -sf "http://127.0.0.1:$rest/health" >/dev/null && break; sleep 0.2; done
}
searches() { # searches LABEL WORKSPACE SCOPE [SECONDS]
  "$venv/bin/python" loadtests/search_phases.py --base-url "http://127.0.0.1:$rest" --workspace "$2" \
    --scope "$3" --seconds "${4:-0}" --label "$1" --workload "$workload"
}

for round in $(seq 1 "$rounds"); do
  for build in old new; do
    bin=$old
    [ "$build" = new ] && bin=$new
    database=roncho_phases_$$_$build
    url="${server_url%/*}/$database"
    psql "$server_url" -qc "DROP DATABASE IF EXISTS $database WITH (FORCE)" >/dev/null
    psql "$server_url" -qc "CREATE DATABASE $database" >/dev/null
    echo "== round $round, $build ($bin)"
    serve "$bin" "$url"
    "$venv/bin/python" "$workload" --base-url "http://127.0.0.1:$rest" --server roncho --backend postgres \
      --out "$work/r$round-$build.json" | grep -E "^(session|workspace) search.*ws 50k" | sed 's/^/after the burst: /'
    stop
    ws=$(psql "$url" -Atc "SELECT workspace_name FROM sessions LIMIT 1")
    serve "$bin" "$url"
    searches "steady state: " "$ws" session
    searches "steady state: " "$ws" workspace
    stop
    for scope in session workspace; do
      psql "$url" -q \
        -c "INSERT INTO message_unindexed SELECT message_id FROM message_text WHERE message_id IN (SELECT id FROM messages WHERE session_name <> 's0')" \
        -c "DELETE FROM message_text WHERE message_id IN (SELECT id FROM messages WHERE session_name <> 's0')" \
        -c "VACUUM message_text, message_unindexed"
      serve "$bin" "$url"
      searches "catch-up: " "$ws" "$scope" 6
      stop
    done
  done
done
