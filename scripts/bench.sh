#!/usr/bin/env bash
# bench.sh - the project's benchmark: the same closed-loop workload against one local Cassandra
# node directly and through cqlgate, in alternating rounds, with the proxy's CPU per request.
#
# Run `scripts/bench.sh --help` for usage.
set -euo pipefail

readonly PROG=${0##*/}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readonly REPO

# The addresses can be moved (environment below) so that a benchmark can run beside another
# Cassandra or proxy on the same machine.
readonly CASSANDRA_ADDR=${BENCH_CASSANDRA_ADDR:-127.0.10.1}
readonly CASSANDRA_CQL=$CASSANDRA_ADDR:9042
readonly CASSANDRA_DIR=${BENCH_CASSANDRA_DIR:-/tmp/cqlgate-bench}
readonly PROXY_LISTEN=${BENCH_PROXY_LISTEN:-127.0.0.1:19042}
readonly PROXY_HOST=${PROXY_LISTEN%:*} PROXY_PORT=${PROXY_LISTEN##*:}
readonly PROXY_ADMIN=${BENCH_PROXY_ADMIN:-127.0.0.1:19180}
readonly PROXY_READY_TIMEOUT=${BENCH_PROXY_TIMEOUT:-30}

usage() {
  cat <<EOF
$PROG - benchmark cqlgate against a direct connection to one local Cassandra node

Usage: $PROG [--duration D] [--rounds N] [--workers N] [--json] [--keep-cassandra] [-- LOADGEN-FLAGS...]

Starts Cassandra on $CASSANDRA_CQL (scripts/cassandra-local.sh, dir $CASSANDRA_DIR) unless
something already answers there, builds ./cmd/proxy and ./cmd/loadgen, starts the proxy on
$PROXY_HOST:$PROXY_PORT (admin $PROXY_ADMIN), runs "loadgen setup" and then
"loadgen compare --target direct=$CASSANDRA_CQL --target proxy=$PROXY_HOST:$PROXY_PORT".
On exit it stops the proxy and, unless asked to keep it, the Cassandra node it started.
A Cassandra node that was already running is never stopped.

Options (each also settable by environment):
  --duration D        measured window per round   (BENCH_DURATION, default 5s)
  --rounds N          rounds per target, ABBA      (BENCH_ROUNDS, default 4)
  --workers N         closed-loop workers          (BENCH_WORKERS, default 128)
  --json              print loadgen's JSON report instead of the table (BENCH_JSON=1)
  --keep-cassandra    leave the Cassandra node running for the next run (KEEP_CASSANDRA=1)
  -- FLAGS...         passed on to "loadgen compare" (e.g. -- --workload mixed)

Other environment: BENCH_CASSANDRA_ADDR (default 127.0.10.1), BENCH_CASSANDRA_DIR (default
/tmp/cqlgate-bench), BENCH_CASSANDRA_HEAP (passed as --heap), BENCH_PROXY_LISTEN (default
127.0.0.1:19042), BENCH_PROXY_ADMIN (default 127.0.0.1:19180), BENCH_PROXY_TIMEOUT (seconds to
wait for the proxy, default 30), BENCH_PROXY_BIN (a proxy binary to use instead of building
./cmd/proxy).
Stop a kept node with: scripts/cassandra-local.sh stop --dir $CASSANDRA_DIR
EOF
}

note() { echo "$PROG: $*" >&2; }
die() { echo "$PROG: error: $*" >&2; exit 1; }

duration=${BENCH_DURATION:-5s}
rounds=${BENCH_ROUNDS:-4}
workers=${BENCH_WORKERS:-128}
json=${BENCH_JSON:-0}
keep_cassandra=${KEEP_CASSANDRA:-0}
extra=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --duration) duration=${2:?--duration needs a value}; shift 2;;
    --rounds) rounds=${2:?--rounds needs a value}; shift 2;;
    --workers) workers=${2:?--workers needs a value}; shift 2;;
    --json) json=1; shift;;
    --keep-cassandra) keep_cassandra=1; shift;;
    -h|--help) usage; exit 0;;
    --) shift; extra=("$@"); break;;
    *) die "unknown option '$1' (see --help)";;
  esac
done

command -v go >/dev/null || die "go is not on PATH"
command -v curl >/dev/null || die "curl is not on PATH (needed to probe the proxy's /readyz)"

# --- cleanup: stop only what this run started, by pid --------------------------------------------
workdir=""
proxy_pid=""
started_cassandra=0
cassandra_ready=0

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [[ -n $proxy_pid ]] && kill -0 "$proxy_pid" 2>/dev/null; then
    note "stopping proxy (pid $proxy_pid)"
    kill -TERM "$proxy_pid" 2>/dev/null || true
    # Give it time to drain; a proxy that ignores SIGTERM must still not outlive the benchmark.
    local i
    for ((i = 0; i < 100; i++)); do
      kill -0 "$proxy_pid" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "$proxy_pid" 2>/dev/null; then
      note "proxy did not exit after 10 s; killing it"
      kill -KILL "$proxy_pid" 2>/dev/null || true
    fi
    wait "$proxy_pid" 2>/dev/null || true
  fi
  if [[ $started_cassandra == 1 ]]; then
    # A node that never became ready is stopped even when asked to keep it: the next run could
    # not use it anyway.
    if [[ $keep_cassandra == 1 && $cassandra_ready == 1 ]]; then
      note "leaving Cassandra running on $CASSANDRA_CQL (stop: scripts/cassandra-local.sh stop --dir $CASSANDRA_DIR)"
    else
      note "stopping Cassandra"
      "$REPO/scripts/cassandra-local.sh" stop --dir "$CASSANDRA_DIR" || rc=1
    fi
  fi
  if [[ -n $workdir ]]; then
    rm -rf -- "$workdir"
  fi
  exit "$rc"
}
trap cleanup EXIT
# On a signal, exit through the EXIT trap with the conventional status.
trap 'exit 130' INT
trap 'exit 143' TERM

# port_open HOST PORT: does a TCP connect succeed?
port_open() {
  (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null
}

proxy_log_tail() {
  if [[ -s $workdir/proxy.log ]]; then
    note "last lines of the proxy log:"
    tail -n 30 "$workdir/proxy.log" >&2
  fi
}

# --- Cassandra -----------------------------------------------------------------------------------
cd "$REPO"
if port_open "$CASSANDRA_ADDR" 9042; then
  note "Cassandra already answers on $CASSANDRA_CQL; using it (and leaving it running)"
else
  heap=()
  if [[ -n ${BENCH_CASSANDRA_HEAP:-} ]]; then
    heap=(--heap "$BENCH_CASSANDRA_HEAP")
  fi
  # Set before starting: a start that fails half-way must still be cleaned up.
  started_cassandra=1
  # Its progress goes to stderr: stdout carries only the report (JSON with --json).
  "$REPO/scripts/cassandra-local.sh" start --nodes 1 --addresses "$CASSANDRA_ADDR" --dir "$CASSANDRA_DIR" "${heap[@]}" >&2
fi
cassandra_ready=1

# --- build ---------------------------------------------------------------------------------------
workdir=$(mktemp -d "${TMPDIR:-/tmp}/cqlgate-bench.XXXXXX")
proxy_bin=${BENCH_PROXY_BIN:-}
if [[ -n $proxy_bin ]]; then
  [[ -x $proxy_bin ]] || die "BENCH_PROXY_BIN=$proxy_bin is not executable"
  note "using proxy binary $proxy_bin; building loadgen into $workdir"
else
  note "building proxy and loadgen into $workdir"
  proxy_bin=$workdir/proxy
  go build -o "$proxy_bin" ./cmd/proxy
fi
go build -o "$workdir/loadgen" ./cmd/loadgen

# --- proxy ---------------------------------------------------------------------------------------
if port_open "$PROXY_HOST" "$PROXY_PORT"; then
  die "something already listens on $PROXY_HOST:$PROXY_PORT; stop it first"
fi
"$proxy_bin" --listen "$PROXY_HOST:$PROXY_PORT" --contact-points "$CASSANDRA_CQL" \
  --admin-listen "$PROXY_ADMIN" >"$workdir/proxy.log" 2>&1 &
proxy_pid=$!
note "proxy started (pid $proxy_pid), waiting for $PROXY_HOST:$PROXY_PORT and http://$PROXY_ADMIN/readyz"

deadline=$((SECONDS + PROXY_READY_TIMEOUT))
until port_open "$PROXY_HOST" "$PROXY_PORT" &&
  curl -fsS -o /dev/null --max-time 2 "http://$PROXY_ADMIN/readyz" 2>/dev/null; do
  if ! kill -0 "$proxy_pid" 2>/dev/null; then
    proxy_log_tail
    die "the proxy exited before becoming ready"
  fi
  if ((SECONDS >= deadline)); then
    proxy_log_tail
    die "the proxy was not ready within ${PROXY_READY_TIMEOUT}s"
  fi
  sleep 0.2
done
note "proxy ready"

# --- load ----------------------------------------------------------------------------------------
"$workdir/loadgen" setup --hosts "$CASSANDRA_CQL"

compare=(
  compare
  --target "direct=$CASSANDRA_CQL"
  --target "proxy=$PROXY_HOST:$PROXY_PORT"
  --workers "$workers"
  --duration "$duration"
  --rounds "$rounds"
  --proxy-metrics "http://$PROXY_ADMIN/metrics"
)
if [[ $json == 1 ]]; then
  compare+=(--json)
fi
if ! "$workdir/loadgen" "${compare[@]}" "${extra[@]}"; then
  proxy_log_tail
  die "loadgen compare failed"
fi
