#!/usr/bin/env bash
# seed.sh - the seed experiment as a benchmark (`make seed`; not part of CI): one gocql session at
# DEFAULT settings, N goroutines each running K sequential single-row SELECTs of one key (the
# published program: 50,000 x 200), directly against one Cassandra node and through cqlgate; then
# 2N goroutines directly and through cqlgate listening on two addresses (gocql then sees two nodes
# and opens twice the connections). Prints wall time and errors by kind for each run.
#
# Run `scripts/seed.sh --help` for usage.
set -euo pipefail

readonly PROG=${0##*/}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readonly REPO

readonly CASSANDRA_ADDR=${SEED_CASSANDRA_ADDR:-127.0.10.1}
readonly CASSANDRA_CQL=$CASSANDRA_ADDR:9042
readonly CASSANDRA_DIR=${SEED_CASSANDRA_DIR:-/tmp/cqlgate-seed}
readonly LISTEN1=${SEED_PROXY_LISTEN:-127.0.0.1:19043}
readonly LISTEN2=${SEED_PROXY_LISTEN2:-127.0.0.2:19043}
readonly ADMIN=${SEED_PROXY_ADMIN:-127.0.0.1:19181}
readonly WORKERS=${SEED_WORKERS:-50000}
readonly QUERIES=${SEED_QUERIES:-200}
readonly WORKERS_LARGE=${SEED_WORKERS_LARGE:-$((2 * WORKERS))}
readonly KEYSPACE=${SEED_KEYSPACE:-cqlgate_seed}
readonly RUNS=${SEED_RUNS:-direct proxy proxy2 direct-large proxy2-large}

usage() {
  cat <<EOF
$PROG - the seed experiment: a flood of goroutines from one gocql client, direct and proxied

Usage: $PROG [--help]

Starts Cassandra on $CASSANDRA_CQL (scripts/cassandra-local.sh, dir $CASSANDRA_DIR) unless something
already answers there, builds ./cmd/proxy and ./cmd/loadgen, loads $KEYSPACE.kv, and runs
"loadgen workers" (gocql defaults: 2 connections per host, 11 s timeout, QUORUM):
  direct        $WORKERS x $QUERIES against $CASSANDRA_CQL
  proxy         $WORKERS x $QUERIES through cqlgate on $LISTEN1
  proxy2        $WORKERS x $QUERIES through cqlgate on $LISTEN1 and $LISTEN2
  direct-large  $WORKERS_LARGE x $QUERIES against $CASSANDRA_CQL
  proxy2-large  $WORKERS_LARGE x $QUERIES through cqlgate on $LISTEN1 and $LISTEN2
The proxy runs with its default settings, is restarted for each run, and its queue depth and
RSS are sampled (admin $ADMIN). A summary table follows the runs; each run's JSON report is
kept under \$SEED_OUT (default: a temporary directory, removed at exit).

Environment: SEED_WORKERS (50000), SEED_QUERIES (200), SEED_WORKERS_LARGE (2 x SEED_WORKERS),
SEED_RUNS (which runs, in order; default "$RUNS"), SEED_PROXY_FLAGS (extra proxy flags),
SEED_CASSANDRA_ADDR, SEED_CASSANDRA_DIR, SEED_PROXY_LISTEN, SEED_PROXY_LISTEN2, SEED_PROXY_ADMIN,
SEED_KEYSPACE, SEED_OUT, SEED_PROXY_BIN (a proxy binary to use instead of building ./cmd/proxy),
KEEP_CASSANDRA=1 (leave a node this script started running), SEED_GOCQL_DIAG=1 (build loadgen with
scripts/gocql-diag.sh: gocql then logs why it ran out of stream ids). Each run's stderr is kept in
\$SEED_OUT/N-RUN.log beside its report.
Needs go, curl and jq. Memory: 100,000 goroutines with gocql take a few GiB.
EOF
}

# shellcheck source-path=SCRIPTDIR source=bench-lib.sh
source "$REPO/scripts/bench-lib.sh"

bench_main seed "${SEED_PROXY_BIN:-}" "${SEED_OUT:-}" "$@"

# seed NAME WORKERS HOSTS [LOADGEN FLAGS...]: one run; its JSON report goes to $out/N-NAME.json,
# N counting the runs, so that a run named twice in SEED_RUNS keeps both reports.
nrun=0
seed() {
  local name=$1 workers=$2 hosts=$3
  shift 3
  nrun=$((nrun + 1))
  note "run $name: $workers goroutines x $QUERIES SELECTs via $hosts"
  "$workdir/loadgen" workers --hosts "$hosts" --keyspace "$KEYSPACE" --rows 1000 \
    --workers "$workers" --queries "$QUERIES" --interval 5s --json "$@" >"$out/$nrun-$name.json" \
    2> >(tee "$out/$nrun-$name.log" >&2)
}

if [[ ${SEED_GOCQL_DIAG:-} == 1 ]]; then
  note "building loadgen with the gocql diagnostics (scripts/gocql-diag.sh)"
  "$REPO/scripts/gocql-diag.sh" "$workdir/loadgen"
fi

"$workdir/loadgen" setup --hosts "$CASSANDRA_CQL" --keyspace "$KEYSPACE" --rows 1000

for run in $RUNS; do
  case $run in
    direct) seed direct "$WORKERS" "$CASSANDRA_CQL";;
    direct-large) seed direct-large "$WORKERS_LARGE" "$CASSANDRA_CQL";;
    proxy | proxy2 | proxy2-large)
      listen=$LISTEN1 workers=$WORKERS
      case $run in
        proxy2) listen=$LISTEN1,$LISTEN2;;
        proxy2-large) listen=$LISTEN1,$LISTEN2 workers=$WORKERS_LARGE;;
      esac
      # shellcheck disable=SC2086 # SEED_PROXY_FLAGS is a list of flags
      start_proxy "$listen" ${SEED_PROXY_FLAGS:-}
      seed "$run" "$workers" "$listen" --proxy-metrics "http://$ADMIN/metrics" --proxy-pid "$proxy_pid"
      stop_proxy
      ;;
    *) die "unknown run '$run' in SEED_RUNS";;
  esac
done

echo
printf '%-14s %8s %7s %8s %10s %9s %9s  %s\n' run workers queries "wall s" ok "queue max" "proxy MiB" "errors by kind"
n=0
for run in $RUNS; do
  n=$((n + 1))
  jq -r --arg run "$run" '[$run, .settings.workers, .settings.queries, (.wall_s * 100 | round / 100),
      .target.ops,
      (if .proxy then (.proxy.gauges["cqlgate_limiter_queue_depth"].peak // "-") else "-" end),
      (if .proxy then (.proxy.rss_peak_bytes / 1048576 | round) else "-" end),
      ([.target.errors | to_entries[] | select(.value > 0) | "\(.key)=\(.value)"] | join(" ") | if . == "" then "0" else . end)]
    | @tsv' "$out/$n-$run.json" |
    awk -F'\t' '{printf "%-14s %8s %7s %8s %10s %9s %9s  %s\n", $1, $2, $3, $4, $5, $6, $7, $8}'
done
