#!/usr/bin/env bash
# bench.sh - the project's benchmark: the same closed-loop workloads against one local Cassandra
# node directly and through cqlgate, in alternating rounds, at several concurrencies, with the
# proxy's CPU, system calls and context switches per request and the machine's CPU per request.
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
readonly ADMIN=${BENCH_PROXY_ADMIN:-127.0.0.1:19180}
readonly PROXY_READY_TIMEOUT=${BENCH_PROXY_TIMEOUT:-30}
readonly BASELINE_LISTEN=${BENCH_BASELINE_LISTEN:-127.0.0.1:19045}
readonly BASELINE_ADMIN=${BENCH_BASELINE_ADMIN:-127.0.0.1:19185}
readonly CONTROL_LISTEN=${BENCH_CONTROL_LISTEN:-127.0.0.1:19048}
readonly CONTROL_ADMIN=${BENCH_CONTROL_ADMIN:-127.0.0.1:19188}
# The relays listen on the node's own address: gocql opens its pool on every address the node
# advertises, at the port it was given, so a relay elsewhere would be bypassed.
readonly RELAY_GO=$CASSANDRA_ADDR:${BENCH_RELAY_GO_PORT:-19046}
readonly RELAY_C=$CASSANDRA_ADDR:${BENCH_RELAY_C_PORT:-19047}

usage() {
  cat <<EOF
$PROG - benchmark cqlgate against a direct connection to one local Cassandra node

Usage: $PROG [--duration D] [--rounds N] [--workers LIST] [--workloads LIST] [--relays] [--json]
       [--keep-cassandra] [-- LOADGEN-FLAGS...]

Starts Cassandra on $CASSANDRA_CQL (scripts/cassandra-local.sh, dir $CASSANDRA_DIR) unless
something already answers there, builds ./cmd/proxy and ./cmd/loadgen, starts the proxy on
$PROXY_LISTEN (admin $ADMIN), runs "loadgen setup" and then
"loadgen compare --target direct=$CASSANDRA_CQL --target proxy=$PROXY_LISTEN" once per
workload and number of workers (one proxy process for all), printing each comparison's table
and then one summary table (Markdown) of the figures that say what the sidecar costs:
throughput and p50 against direct, added p50, the proxy's CPU per request (/proc/PID/stat)
beside loadgen's own (the driver's, gocql included), the machine's busy CPU per request direct
and proxied (/proc/stat), and the proxy's read and write system calls and voluntary context
switches per request (/proc/PID/io, /proc/PID/task/*/status).
On exit it stops the proxy and, unless asked to keep it, the Cassandra node it started.
A Cassandra node that was already running is never stopped.

Options (each also settable by environment):
  --duration D        measured window per round   (BENCH_DURATION, default 5s)
  --rounds N          rounds per target, ABBA      (BENCH_ROUNDS, default 4)
  --workers LIST      closed-loop workers, comma-separated (BENCH_WORKERS, default 1,4,16,128)
  --workloads LIST    loadgen workloads, comma-separated (BENCH_WORKLOADS, default read,write)
  --relays            also measure two do-nothing TCP relays in the same rounds (BENCH_RELAYS=1):
                      relay-go (scripts/relay: io.Copy both ways, GOMAXPROCS=1, on $RELAY_GO)
                      and relay-c (scripts/crelay/crelay.c, two blocking threads per connection,
                      on $RELAY_C; built with cc, skipped without it). What they add is what any
                      Go proxy, and any proxy, adds on this machine: the floor under the
                      proxy's added latency
  --json              print loadgen's JSON reports, one per line, instead of the tables (BENCH_JSON=1)
  --keep-cassandra    leave the Cassandra node running for the next run (KEEP_CASSANDRA=1)
  -- FLAGS...         passed on to "loadgen compare" (e.g. -- --workload mixed)

Other environment: BENCH_CASSANDRA_ADDR (default 127.0.10.1), BENCH_CASSANDRA_DIR (default
/tmp/cqlgate-bench), BENCH_CASSANDRA_HEAP (passed as --heap), BENCH_PROXY_LISTEN (default
127.0.0.1:19042), BENCH_PROXY_ADMIN (default 127.0.0.1:19180), BENCH_PROXY_TIMEOUT (seconds to
wait for the proxy, default 30), BENCH_PROXY_BIN (a proxy binary to use instead of building
./cmd/proxy), BENCH_BASELINE_BIN (a second proxy binary, e.g. built from an older commit: it
runs beside the first on BENCH_BASELINE_LISTEN, default $BASELINE_LISTEN, admin
BENCH_BASELINE_ADMIN, default $BASELINE_ADMIN, as the target "baseline" in the same rotated
rounds, so before and after come from one run; the proxy CPU, syscall and context-switch
figures are the first proxy's only), BENCH_CONTROL=1 (a second copy of the proxy under test,
started the same way on BENCH_CONTROL_LISTEN, default $CONTROL_LISTEN, admin BENCH_CONTROL_ADMIN,
default $CONTROL_ADMIN, as the target "control": two identical proxies differ only by this run's
noise, so control/proxy is what a baseline's ratio to the proxy is read against).
Stop a kept node with: scripts/cassandra-local.sh stop --dir $CASSANDRA_DIR

A node with PasswordAuthenticator (a node started here then gets --auth; the superuser is
cassandra/cassandra):
  BENCH_USERNAME, BENCH_PASSWORD   the role loadgen's load logs in as, directly and through the
                                   proxy (default: none, no login)
  BENCH_ADMIN_USERNAME, BENCH_ADMIN_PASSWORD
                                   who runs "loadgen setup" (creating the keyspace) and is the
                                   proxy's own user (--backend-username); default BENCH_USERNAME
  BENCH_CLIENT_AUTH                the proxy's --client-auth: none (default: the proxy asks the
                                   client for no login and runs its requests as its own user) or
                                   passthrough (it checks the client's password against Cassandra
                                   and, with the default --passthrough-identity role, runs its
                                   requests on pools logged in as that role)
Auth off against auth on, on the same node (the role must exist, with SELECT and MODIFY on the
keyspace cqlgate_bench, or on ALL KEYSPACES before setup creates it):
  BENCH_CASSANDRA_ADDR=127.0.23.1 BENCH_ADMIN_USERNAME=cassandra BENCH_ADMIN_PASSWORD=cassandra \\
    BENCH_USERNAME=bench BENCH_PASSWORD=pw BENCH_CLIENT_AUTH=passthrough $PROG
EOF
}

# shellcheck source-path=SCRIPTDIR source=bench-lib.sh
source "$REPO/scripts/bench-lib.sh"

duration=${BENCH_DURATION:-5s}
rounds=${BENCH_ROUNDS:-4}
workers=${BENCH_WORKERS:-1,4,16,128}
workloads=${BENCH_WORKLOADS:-read,write}
json=${BENCH_JSON:-0}
relays=${BENCH_RELAYS:-0}
extra=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --duration) duration=${2:?--duration needs a value}; shift 2;;
    --rounds) rounds=${2:?--rounds needs a value}; shift 2;;
    --workers) workers=${2:?--workers needs a value}; shift 2;;
    --workloads) workloads=${2:?--workloads needs a value}; shift 2;;
    --json) json=1; shift;;
    --relays) relays=1; shift;;
    --keep-cassandra) KEEP_CASSANDRA=1; shift;;
    -h|--help) usage; exit 0;;
    --) shift; extra=("$@"); break;;
    *) die "unknown option '$1' (see --help)";;
  esac
done

command -v go >/dev/null || die "go is not on PATH"
command -v curl >/dev/null || die "curl is not on PATH (needed to probe the proxy's /readyz)"
command -v jq >/dev/null || die "jq is not on PATH (needed for the summary table)"

start_flags=()
if [[ -n ${BENCH_CASSANDRA_HEAP:-} ]]; then
  start_flags=(--heap "$BENCH_CASSANDRA_HEAP")
fi
client_auth=${BENCH_CLIENT_AUTH:-none}
case $client_auth in
  none|passthrough) ;;
  *) die "BENCH_CLIENT_AUTH must be none or passthrough, got '$client_auth'";;
esac
user=${BENCH_USERNAME:-}
admin_user=${BENCH_ADMIN_USERNAME:-$user}
# Passwords travel in the environment, never on a command line (ps).
export LOADGEN_PASSWORD=${BENCH_ADMIN_PASSWORD:-${BENCH_PASSWORD:-}}
if [[ -n $admin_user ]]; then
  start_flags+=(--auth)
  export CQLGATE_BACKEND_USERNAME=$admin_user CQLGATE_BACKEND_PASSWORD=$LOADGEN_PASSWORD
fi

# Progress goes to stderr: stdout carries only the report (JSON with --json).
bench_setup bench "${BENCH_PROXY_BIN:-}" "${start_flags[@]}"
start_proxy "$PROXY_LISTEN" --client-auth "$client_auth"
note "proxy ready (pid $proxy_pid, --client-auth $client_auth${user:+, load as role $user})"
targets=(--target "direct=$CASSANDRA_CQL")
# start_target NAME BIN LISTEN ADMIN: a second proxy process, the loadgen target NAME.
start_target() {
  local name=$1 bin=$2 listen=$3 admin=$4 pid
  [[ -x $bin ]] || die "$bin is not executable"
  "$bin" --listen "$listen" --contact-points "$CASSANDRA_CQL" \
    --admin-listen "$admin" --log-level warn --client-auth "$client_auth" >>"$workdir/$name.log" 2>&1 &
  pid=$!
  extra_pids+=("$pid")
  until curl -fsS -o /dev/null --max-time 2 "http://$admin/readyz" 2>/dev/null; do
    kill -0 "$pid" 2>/dev/null || die "the $name proxy exited (log: $workdir/$name.log)"
    sleep 0.2
  done
  note "$name proxy ready (pid $pid)"
  targets+=(--target "$name=$listen")
}
if [[ -n ${BENCH_BASELINE_BIN:-} ]]; then
  start_target baseline "$BENCH_BASELINE_BIN" "$BASELINE_LISTEN" "$BASELINE_ADMIN"
fi
if [[ ${BENCH_CONTROL:-0} == 1 ]]; then
  start_target control "$workdir/proxy" "$CONTROL_LISTEN" "$CONTROL_ADMIN"
fi
targets+=(--target "proxy=$PROXY_LISTEN")
if [[ $relays == 1 ]]; then
  (cd "$REPO" && go build -o "$workdir/relay" ./scripts/relay) || die "cannot build scripts/relay"
  GOMAXPROCS=1 "$workdir/relay" --listen "$RELAY_GO" --up "$CASSANDRA_CQL" >>"$workdir/relay.log" 2>&1 &
  extra_pids+=("$!")
  targets+=(--target "relay-go=$RELAY_GO")
  relay_addrs=("$RELAY_GO")
  if command -v cc >/dev/null && cc -O2 -pthread -o "$workdir/crelay" "$REPO/scripts/crelay/crelay.c"; then
    "$workdir/crelay" "${RELAY_C%:*}" "${RELAY_C##*:}" "$CASSANDRA_ADDR" "${CASSANDRA_CQL##*:}" >>"$workdir/relay.log" 2>&1 &
    extra_pids+=("$!")
    targets+=(--target "relay-c=$RELAY_C")
    relay_addrs+=("$RELAY_C")
  else
    note "no C compiler: relay-c skipped"
  fi
  for relay in "${relay_addrs[@]}"; do
    deadline=$((SECONDS + 10))
    until port_open "${relay%:*}" "${relay##*:}"; do
      ((SECONDS < deadline)) || die "relay $relay did not listen within 10 s (log: $workdir/relay.log)"
      sleep 0.1
    done
  done
  note "relays ready"
fi

"$workdir/loadgen" setup --hosts "$CASSANDRA_CQL" --username "$admin_user" >&2
export LOADGEN_PASSWORD=${BENCH_PASSWORD:-}

IFS=, read -r -a worker_list <<<"$workers"
IFS=, read -r -a workload_list <<<"$workloads"
reports=()
for workload in "${workload_list[@]}"; do
  for n in "${worker_list[@]}"; do
    compare=(
      compare
      "${targets[@]}"
      --workload "$workload"
      --workers "$n"
      --duration "$duration"
      --rounds "$rounds"
      --proxy-metrics "http://$ADMIN/metrics"
      --proxy-pid "$proxy_pid"
      --username "$user"
      --json
    )
    note "$workload, $n workers"
    report=$workdir/compare-$workload-$n.json
    if ! "$workdir/loadgen" "${compare[@]}" "${extra[@]}" >"$report"; then
      proxy_log_tail
      die "loadgen compare failed ($workload, $n workers)"
    fi
    reports+=("$report")
    if [[ $json == 1 ]]; then
      jq -c . "$report"
    fi
  done
done
if [[ $json == 1 ]]; then
  exit 0
fi

# The summary: one row per workload, concurrency and proxied target, ratios within one run. "x"
# columns are proxied / direct; CPU figures are µs per request; loadgen's CPU is gocql's included.
echo "| workers | workload | target | throughput x direct | p50 direct µs | p50 x direct | added p50 µs | proxy CPU µs/req | loadgen CPU µs/req direct | loadgen CPU µs/req proxied | machine CPU µs/req direct | machine CPU µs/req proxied | machine x direct | proxy read+write syscalls/req | proxy voluntary switches/req | errors |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
jq -r -s '.[] | . as $r | .targets[0] as $d | .targets[1:][] as $p |
  def f(x; n): if x == null then "-" else (x * pow(10; n) | round / pow(10; n) | tostring) end;
  [ ($r.settings.workers | tostring), $r.settings.workload, $p.name,
    f($p.throughput_ratio; 2),
    ($d.latency_us.p50 | tostring),
    f(if $d.latency_us.p50 > 0 then $p.latency_us.p50 / $d.latency_us.p50 else null end; 2),
    ($p.added_latency_us.p50 | tostring),
    f($p.proxy_cpu_us_per_req; 1),
    f($d.loadgen_cpu_us_per_op; 1), f($p.loadgen_cpu_us_per_op; 1),
    f($d.machine_cpu_us_per_req; 1), f($p.machine_cpu_us_per_req; 1),
    f(if ($d.machine_cpu_us_per_req // 0) > 0 and $p.machine_cpu_us_per_req != null
      then $p.machine_cpu_us_per_req / $d.machine_cpu_us_per_req else null end; 2),
    f(if $p.proxy_calls_per_req == null then null
      else $p.proxy_calls_per_req.read_syscalls + $p.proxy_calls_per_req.write_syscalls end; 2),
    f($p.proxy_calls_per_req.voluntary_switches; 2),
    (($d.errors_total + $p.errors_total) | tostring)
  ] | "| " + join(" | ") + " |"' "${reports[@]}"
