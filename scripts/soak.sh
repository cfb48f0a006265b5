#!/usr/bin/env bash
# soak.sh - a bounded soak run (`make soak`; not part of CI): one local Cassandra node, the proxy,
# and a mixed closed-loop workload for SOAK_DURATION (default 10m). Prints the proxy's RSS,
# goroutines, open connections and orphaned streams at the start and at the end, so that a leak
# shows as growth between the two.
#
# Run `scripts/soak.sh --help` for usage.
set -euo pipefail

readonly PROG=${0##*/}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readonly REPO

readonly CASSANDRA_ADDR=${SOAK_CASSANDRA_ADDR:-127.0.10.1}
readonly CASSANDRA_CQL=$CASSANDRA_ADDR:9042
readonly CASSANDRA_DIR=${SOAK_CASSANDRA_DIR:-/tmp/cqlgate-soak}
readonly LISTEN=${SOAK_PROXY_LISTEN:-127.0.0.1:19442}
readonly ADMIN=${SOAK_PROXY_ADMIN:-127.0.0.1:19480}
readonly DURATION=${SOAK_DURATION:-10m}
readonly WORKERS=${SOAK_WORKERS:-256}

usage() {
  cat <<EOF_USAGE
$PROG - a bounded soak run: the proxy under a mixed closed loop, measured at the start and the end

Usage: $PROG [--help]

Starts Cassandra on $CASSANDRA_CQL (scripts/cassandra-local.sh, dir $CASSANDRA_DIR) unless something
already answers there, builds ./cmd/proxy and ./cmd/loadgen, starts the proxy on $LISTEN (admin
$ADMIN), warms up for 20 s and runs "loadgen run --workload mixed" with $WORKERS workers for
$DURATION. A leak shows as growth between the two snapshots (RSS, goroutines, client connections,
orphaned streams, queued requests).

Environment: SOAK_DURATION (10m), SOAK_WORKERS (256), SOAK_CASSANDRA_ADDR, SOAK_CASSANDRA_DIR,
SOAK_PROXY_LISTEN, SOAK_PROXY_ADMIN, KEEP_CASSANDRA=1 (leave a node this script started running).
EOF_USAGE
}

# shellcheck source-path=SCRIPTDIR source=bench-lib.sh
source "$REPO/scripts/bench-lib.sh"

bench_main soak "" "" "$@"

"$workdir/loadgen" setup --hosts "$CASSANDRA_CQL" >&2
start_proxy "$LISTEN"

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
"$workdir/loadgen" run --hosts "$LISTEN" --workers "$WORKERS" --duration 20s --quiet --workload mixed >/dev/null
snapshot start
"$workdir/loadgen" run --hosts "$LISTEN" --workers "$WORKERS" --duration "$DURATION" --workload mixed --proxy-pid "$proxy_pid"
sleep 2
snapshot end
