#!/usr/bin/env bash
# bench-syscalls.sh - where the proxy's CPU goes per request: perf counts its system calls by kind,
# its context switches and its CPU time while loadgen drives it at several concurrencies; with a
# second binary the two alternate in rotated rounds, so their figures come from one sitting.
#
# Run `scripts/bench-syscalls.sh --help` for usage.
set -euo pipefail

readonly PROG=${0##*/}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readonly REPO

readonly CASSANDRA_ADDR=${SYSCALLS_CASSANDRA_ADDR:-127.0.10.1}
readonly CASSANDRA_CQL=$CASSANDRA_ADDR:9042
readonly CASSANDRA_DIR=${SYSCALLS_CASSANDRA_DIR:-/tmp/cqlgate-bench}
readonly PROXY_LISTEN=${SYSCALLS_PROXY_LISTEN:-127.0.0.1:19044}
readonly ADMIN=${SYSCALLS_PROXY_ADMIN:-127.0.0.1:19182}
readonly WORKERS=${SYSCALLS_WORKERS:-1,4,16,128}
readonly WORKLOADS=${SYSCALLS_WORKLOADS:-read,write}
readonly WINDOW=${SYSCALLS_WINDOW:-8}
readonly ROUNDS=${SYSCALLS_ROUNDS:-2}
readonly EVENTS=task-clock,context-switches,raw_syscalls:sys_enter,syscalls:sys_enter_read,syscalls:sys_enter_write,syscalls:sys_enter_epoll_pwait,syscalls:sys_enter_futex,syscalls:sys_enter_nanosleep

usage() {
  cat <<EOF
$PROG - the proxy's system calls, context switches and CPU per request, counted by perf

Usage: $PROG [--help]

Starts Cassandra on $CASSANDRA_CQL (scripts/cassandra-local.sh, dir $CASSANDRA_DIR) unless
something already answers there, builds ./cmd/proxy and ./cmd/loadgen, and for each round, each
proxy binary (in rotated order), each workload and each number of workers: starts the proxy on
$PROXY_LISTEN (admin $ADMIN), runs "loadgen run" against it and, from 2 s into the run, counts
for $WINDOW s with "perf stat -p PID": the proxy's CPU time (task-clock), context switches, and
system calls (all, and read, write, epoll_pwait, futex, nanosleep). Requests are the increase of
cqlgate_requests_total over the same window. Prints one Markdown row per binary, workload and
concurrency, the rounds added up.

Environment: SYSCALLS_WORKERS (default $WORKERS), SYSCALLS_WORKLOADS (default $WORKLOADS),
SYSCALLS_WINDOW (seconds counted per run, default $WINDOW), SYSCALLS_ROUNDS (default $ROUNDS),
SYSCALLS_PROXY_BIN (the binary under test instead of building ./cmd/proxy), SYSCALLS_BASELINE_BIN
(a second binary, e.g. built from another commit, measured in the same rounds as "baseline"),
SYSCALLS_PROXY_FLAGS (extra proxy flags), SYSCALLS_CASSANDRA_ADDR, SYSCALLS_CASSANDRA_DIR,
SYSCALLS_PROXY_LISTEN, SYSCALLS_PROXY_ADMIN, KEEP_CASSANDRA=1.
Needs perf with the raw_syscalls and syscalls tracepoints (root, or perf_event_paranoid <= -1),
go, curl and jq.
EOF
}

# shellcheck source-path=SCRIPTDIR source=bench-lib.sh
source "$REPO/scripts/bench-lib.sh"

case ${1:-} in
  -h|--help) usage; exit 0;;
esac
command -v perf >/dev/null || die "perf is not on PATH"
perf stat -e raw_syscalls:sys_enter -- true >/dev/null 2>&1 ||
  die "perf cannot count the raw_syscalls tracepoint here (root, or perf_event_paranoid <= -1)"
bench_main syscalls "${SYSCALLS_PROXY_BIN:-}" "" "$@"

binaries=(proxy)
# bench_setup left the binary under test at $workdir/proxy (built, or a link to it); each round
# points $workdir/proxy at the binary it runs.
mv "$workdir/proxy" "$workdir/bin-proxy"
if [[ -n ${SYSCALLS_BASELINE_BIN:-} ]]; then
  [[ -x $SYSCALLS_BASELINE_BIN ]] || die "$SYSCALLS_BASELINE_BIN is not executable"
  ln -s "$(readlink -f "$SYSCALLS_BASELINE_BIN")" "$workdir/bin-baseline"
  binaries=(baseline proxy)
fi
read -r -a proxy_flags <<<"${SYSCALLS_PROXY_FLAGS:-}"
"$workdir/loadgen" setup --hosts "$CASSANDRA_CQL" >&2

requests() {
  curl -fsS "http://$ADMIN/metrics" | awk '/^cqlgate_requests_total/ {s += $2} END {printf "%d\n", s}'
}

IFS=, read -r -a worker_list <<<"$WORKERS"
IFS=, read -r -a workload_list <<<"$WORKLOADS"
# Each line of $workdir/counts: binary workload workers requests event value.
for ((round = 0; round < ROUNDS; round++)); do
  order=("${binaries[@]}")
  if ((round % 2 == 1)); then
    order=()
    for ((i = ${#binaries[@]} - 1; i >= 0; i--)); do order+=("${binaries[i]}"); done
  fi
  for bin in "${order[@]}"; do
    ln -sfn "bin-$bin" "$workdir/proxy"
    start_proxy "$PROXY_LISTEN" "${proxy_flags[@]}"
    for workload in "${workload_list[@]}"; do
      for n in "${worker_list[@]}"; do
        note "round $((round + 1)): $bin, $workload, $n workers"
        "$workdir/loadgen" run --hosts "$PROXY_LISTEN" --workload "$workload" --workers "$n" \
          --duration "$((WINDOW + 4))s" --json >/dev/null 2>"$workdir/loadgen.log" &
        lg=$!
        sleep 2
        r0=$(requests)
        perf stat -x, -e "$EVENTS" -p "$proxy_pid" -o "$workdir/perf.csv" -- sleep "$WINDOW" >/dev/null 2>&1
        r1=$(requests)
        wait "$lg" || { tail -n 20 "$workdir/loadgen.log" >&2; die "loadgen run failed"; }
        awk -F, -v b="$bin" -v w="$workload" -v n="$n" -v r=$((r1 - r0)) \
          'NF > 3 && $1 ~ /^[0-9.]+$/ {print b, w, n, r, $3, $1}' "$workdir/perf.csv" >>"$workdir/counts"
      done
    done
    stop_proxy
  done
done

echo "| workers | workload | binary | requests | CPU µs/req | syscalls/req | read | write | epoll_pwait | futex | nanosleep | context switches/req |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
awk '
  { key = $3 " " $2 " " $1
    if (!(key in seen)) { seen[key] = 1; keys[++nkeys] = key }
    v[key, $5] += $6
    if ($5 == "task-clock") reqs[key] += $4 }
  END {
    for (i = 1; i <= nkeys; i++) {
      k = keys[i]; split(k, f, " "); r = reqs[k]
      if (r == 0) continue
      printf "| %s | %s | %s | %d | %.1f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |\n", f[1], f[2], f[3], r,
        v[k, "task-clock"] * 1000 / r, v[k, "raw_syscalls:sys_enter"] / r, v[k, "syscalls:sys_enter_read"] / r,
        v[k, "syscalls:sys_enter_write"] / r, v[k, "syscalls:sys_enter_epoll_pwait"] / r,
        v[k, "syscalls:sys_enter_futex"] / r, v[k, "syscalls:sys_enter_nanosleep"] / r,
        v[k, "context-switches"] / r
    }
  }' "$workdir/counts" | sort -t'|' -k3,3 -k2,2n -k4,4
