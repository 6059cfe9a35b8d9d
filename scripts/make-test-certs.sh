#!/usr/bin/env bash
# Makes a throwaway CA and a server certificate for 127.0.0.1 and localhost
# (ECDSA P-256, two days), for tests and benchmarks of TLS:
#   DIR/ca.pem  DIR/server.pem  DIR/server.key
#
#   scripts/make-test-certs.sh DIR
set -euo pipefail
dir=${1:?usage: make-test-certs.sh DIR}
mkdir -p "$dir"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj "/CN=roncho test CA" \
  -keyout "$dir/ca.key" -out "$dir/ca.pem" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=roncho" \
  -keyout "$dir/server.key" -out "$dir/server.csr" 2>/dev/null
openssl x509 -req -in "$dir/server.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" -CAcreateserial -days 2 \
  -extfile <(printf 'subjectAltName=IP:127.0.0.1,DNS:localhost') -out "$dir/server.pem" 2>/dev/null
