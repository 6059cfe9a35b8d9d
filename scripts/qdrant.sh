# Sourced by scripts/test.sh and loadtests/common.sh: runs the real Qdrant
# server from ../shared/tools/qdrant (it cannot come from a package
# registry) or RONCHO_QDRANT_BIN on loopback.
#
#   start_qdrant DIR   starts it on free ports with storage in DIR, telemetry
#                      off; sets qdrant_pid, qdrant_url (its gRPC URL) and
#                      qdrant_http_url (its REST URL).
#                      Returns 1 when there is no binary.

qdrant_binary() {
  local candidate
  for candidate in "${RONCHO_QDRANT_BIN:-}" ../shared/tools/qdrant/qdrant /work/shared/tools/qdrant/qdrant; do
    if [ -n "$candidate" ] && [ -x "$candidate" ]; then echo "$candidate"; return 0; fi
  done
  return 1
}

start_qdrant() {
  local dir=$1 bin http_port grpc_port
  bin=$(qdrant_binary) || return 1
  mkdir -p "$dir"
  read -r http_port grpc_port < <(python3 -c 'import socket
a, b = socket.socket(), socket.socket()
a.bind(("127.0.0.1", 0)); b.bind(("127.0.0.1", 0))
print(a.getsockname()[1], b.getsockname()[1])')
  QDRANT__SERVICE__HOST=127.0.0.1 QDRANT__SERVICE__HTTP_PORT=$http_port QDRANT__SERVICE__GRPC_PORT=$grpc_port \
    QDRANT__STORAGE__STORAGE_PATH=$dir/storage QDRANT__STORAGE__SNAPSHOTS_PATH=$dir/snapshots \
    QDRANT__TELEMETRY_DISABLED=true QDRANT__SERVICE__ENABLE_STATIC_CONTENT=false \
    QDRANT_INIT_FILE_PATH=$dir/.qdrant-initialized "$bin" >"$dir/qdrant.log" 2>&1 &
  qdrant_pid=$!
  for _ in $(seq 1 100); do (exec 3<>"/dev/tcp/127.0.0.1/$grpc_port") 2>/dev/null && break; sleep 0.1; done
  qdrant_url=http://127.0.0.1:$grpc_port
  qdrant_http_url=http://127.0.0.1:$http_port
  echo "Qdrant $("$bin" --version 2>/dev/null | head -n1) at $qdrant_url" >&2
}
