# bench-lib.sh - what the benchmark scripts (bench.sh, seed.sh, soak.sh, overload.sh) share:
# cleanup on exit, a local Cassandra node started only if none answers, the binaries, and a proxy
# started and stopped by pid. Source it after setting PROG, REPO, CASSANDRA_ADDR, CASSANDRA_CQL,
# CASSANDRA_DIR and ADMIN.
# shellcheck shell=bash

note() { echo "$PROG: $*" >&2; }
die() { echo "$PROG: error: $*" >&2; exit 1; }
port_open() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

workdir=""
proxy_pid=""
# extra_pids are other processes a script started (a second proxy): stopped on exit.
extra_pids=()
started_cassandra=0

# stop_proxy stops the proxy this script started (SIGTERM, then SIGKILL after 10 s).
stop_proxy() {
  if [[ -n $proxy_pid ]] && kill -0 "$proxy_pid" 2>/dev/null; then
    kill -TERM "$proxy_pid" 2>/dev/null || true
    local i
    for ((i = 0; i < 100; i++)); do
      kill -0 "$proxy_pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$proxy_pid" 2>/dev/null || true
    wait "$proxy_pid" 2>/dev/null || true
  fi
  proxy_pid=""
}

bench_cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  stop_proxy
  local pid
  for pid in "${extra_pids[@]}"; do
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  if [[ $started_cassandra == 1 && ${KEEP_CASSANDRA:-0} == 1 ]]; then
    note "leaving Cassandra running on $CASSANDRA_CQL (stop: scripts/cassandra-local.sh stop --dir $CASSANDRA_DIR)"
  elif [[ $started_cassandra == 1 ]]; then
    note "stopping Cassandra"
    "$REPO/scripts/cassandra-local.sh" stop --dir "$CASSANDRA_DIR" || rc=1
  fi
  if [[ -n $workdir ]]; then
    rm -rf -- "$workdir"
  fi
  exit "$rc"
}
trap bench_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# bench_setup NAME PROXY_BIN [START_FLAGS...]: start Cassandra (with scripts/cassandra-local.sh
# start's START_FLAGS, e.g. --heap 1G) unless something answers on $CASSANDRA_CQL, make $workdir
# (cqlgate-NAME.XXXXXX) and put the proxy (PROXY_BIN, or built from ./cmd/proxy) and loadgen there.
bench_setup() {
  local name=$1 bin=$2
  shift 2
  cd "$REPO" || die "cannot cd to $REPO"
  if port_open "$CASSANDRA_ADDR" 9042; then
    note "Cassandra already answers on $CASSANDRA_CQL; using it (and leaving it running)"
  else
    # Set before starting: a start that fails half-way must still be cleaned up.
    started_cassandra=1
    "$REPO/scripts/cassandra-local.sh" start --nodes 1 --addresses "$CASSANDRA_ADDR" --dir "$CASSANDRA_DIR" "$@" >&2
  fi
  workdir=$(mktemp -d "${TMPDIR:-/tmp}/cqlgate-$name.XXXXXX")
  note "building proxy and loadgen into $workdir"
  if [[ -n $bin ]]; then
    [[ -x $bin ]] || die "proxy binary $bin is not executable"
    ln -s "$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")" "$workdir/proxy"
  else
    go build -o "$workdir/proxy" ./cmd/proxy
  fi
  go build -o "$workdir/loadgen" ./cmd/loadgen
}

# bench_main NAME PROXY_BIN OUT [ARGS...]: the common start of a benchmark script: --help (the
# script's usage function), the tools it needs, bench_setup, and the report directory in $out
# (OUT, or the work directory when OUT is empty).
bench_main() {
  local name=$1 bin=$2
  out=$3
  shift 3
  case ${1:-} in
    -h|--help) usage; exit 0;;
    "") ;;
    *) die "unknown argument '$1' (see --help)";;
  esac
  local tool
  for tool in go curl jq; do
    command -v "$tool" >/dev/null || die "$tool is not on PATH"
  done
  bench_setup "$name" "$bin"
  if [[ -z $out ]]; then
    out=$workdir
  fi
  mkdir -p "$out"
}

# start_proxy LISTEN[,LISTEN] [FLAGS...]: start cqlgate and wait until it is ready (at most
# PROXY_READY_TIMEOUT seconds, default 30).
start_proxy() {
  local listen=$1 first=${1%%,*}
  shift
  if port_open "${first%:*}" "${first##*:}"; then
    die "something already listens on $first"
  fi
  "$workdir/proxy" --listen "$listen" --contact-points "$CASSANDRA_CQL" --admin-listen "$ADMIN" \
    --log-level warn "$@" >>"$workdir/proxy.log" 2>&1 &
  proxy_pid=$!
  local timeout=${PROXY_READY_TIMEOUT:-30}
  local deadline=$((SECONDS + timeout))
  until port_open "${first%:*}" "${first##*:}" &&
    curl -fsS -o /dev/null --max-time 2 "http://$ADMIN/readyz" 2>/dev/null; do
    kill -0 "$proxy_pid" 2>/dev/null || { proxy_log_tail; die "the proxy exited"; }
    ((SECONDS < deadline)) || { proxy_log_tail; die "the proxy was not ready within $timeout s"; }
    sleep 0.2
  done
}

# proxy_log_tail prints the end of the proxy's log, if it wrote one.
proxy_log_tail() {
  if [[ -s $workdir/proxy.log ]]; then
    note "last lines of the proxy log:"
    tail -n 30 "$workdir/proxy.log" >&2
  fi
}
