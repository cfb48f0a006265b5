#!/usr/bin/env bash
# soak.sh - a bounded soak run (not part of CI): one local Cassandra node, the proxy, and a
# mixed closed-loop workload for SOAK_DURATION (default 10m). Prints the proxy's RSS,
# goroutines, open connections and orphaned streams at the start and at the end, so that a
# leak shows as growth between the two.
#
#   SOAK_DURATION=10m SOAK_WORKERS=256 scripts/soak.sh
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readonly REPO
readonly ADDR=${SOAK_CASSANDRA_ADDR:-127.0.10.1}
readonly DIR=${SOAK_CASSANDRA_DIR:-/tmp/cqlgate-soak}
readonly LISTEN=${SOAK_PROXY_LISTEN:-127.0.0.1:19442}
readonly ADMIN=${SOAK_PROXY_ADMIN:-127.0.0.1:19480}
readonly DURATION=${SOAK_DURATION:-10m}
readonly WORKERS=${SOAK_WORKERS:-256}

note() { echo "soak: $*" >&2; }
port_open() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

work=$(mktemp -d "${TMPDIR:-/tmp}/cqlgate-soak.XXXXXX")
proxy_pid=""
started=0
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [[ -n $proxy_pid ]] && kill -0 "$proxy_pid" 2>/dev/null; then
    kill -TERM "$proxy_pid" 2>/dev/null || true
    wait "$proxy_pid" 2>/dev/null || true
  fi
  if [[ $started == 1 ]]; then
    "$REPO/scripts/cassandra-local.sh" stop --dir "$DIR" >&2 || rc=1
  fi
  rm -rf -- "$work"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

cd "$REPO"
if ! port_open "$ADDR" 9042; then
  started=1
  "$REPO/scripts/cassandra-local.sh" start --nodes 1 --addresses "$ADDR" --dir "$DIR" >&2
fi
go build -o "$work/cqlgate" ./cmd/proxy
go build -o "$work/loadgen" ./cmd/loadgen
"$work/cqlgate" --listen "$LISTEN" --contact-points "$ADDR:9042" --admin-listen "$ADMIN" >"$work/proxy.log" 2>&1 &
proxy_pid=$!
for _ in $(seq 150); do
  curl -fsS -o /dev/null --max-time 1 "http://$ADMIN/readyz" 2>/dev/null && break
  sleep 0.2
done
"$work/loadgen" setup --hosts "$ADDR:9042" >&2

snapshot() {
  local rss
  rss=$(awk '/^VmRSS/ {print $2}' "/proc/$proxy_pid/status")
  curl -fsS "http://$ADMIN/metrics" | awk -v label="$1" -v rss="$rss" '
    /^go_goroutines / {g=$2}
    /^cqlgate_client_connections / {c=$2}
    /^cqlgate_backend_orphaned_streams / {o=$2}
    /^cqlgate_limiter_queue_depth / {q=$2}
    END {printf "%-6s rss %6.1f MiB  goroutines %5d  client connections %3d  orphaned streams %4d  queued %d\n", label, rss/1024, g, c, o, q}'
}
# Warm up, then take the start snapshot with the load still connected.
"$work/loadgen" run --hosts "$LISTEN" --workers "$WORKERS" --duration 20s --quiet --workload mixed >/dev/null
snapshot start
"$work/loadgen" run --hosts "$LISTEN" --workers "$WORKERS" --duration "$DURATION" --workload mixed --proxy-pid "$proxy_pid"
sleep 2
snapshot end
