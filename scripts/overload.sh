#!/usr/bin/env bash
# overload.sh - the overload experiment with loadgen (`make overload-loadgen`; not part of CI; `make
# overload` runs the same steps with a raw-frame generator, which can offer 10x): measure the capacity of
# one Cassandra node through cqlgate with a closed loop, then offer open-loop load at 1x, 2x, 5x and
# 10x that capacity through the proxy and report, for each step: goodput against the peak, the
# admitted requests' p99 against the unloaded p99, the p99 of the OVERLOADED answers, and the
# proxy's RSS growth per queued request.
#
# Run `scripts/overload.sh --help` for usage.
set -euo pipefail

readonly PROG=${0##*/}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readonly REPO

readonly CASSANDRA_ADDR=${OVERLOAD_CASSANDRA_ADDR:-127.0.10.1}
readonly CASSANDRA_CQL=$CASSANDRA_ADDR:9042
readonly CASSANDRA_DIR=${OVERLOAD_CASSANDRA_DIR:-/tmp/cqlgate-overload}
readonly LISTEN=${OVERLOAD_PROXY_LISTEN:-127.0.0.1:19044}
readonly ADMIN=${OVERLOAD_PROXY_ADMIN:-127.0.0.1:19182}
readonly PROXY_FLAGS=${OVERLOAD_PROXY_FLAGS:---queue-max-wait 100ms --queue-target 5ms --node-limit 32}
readonly MULTIPLES=${OVERLOAD_MULTIPLES:-1 2 5 10}
readonly DURATION=${OVERLOAD_DURATION:-10s}
readonly WARMUP=${OVERLOAD_WARMUP:-2s}
readonly CASSANDRA_WARMUP=${OVERLOAD_CASSANDRA_WARMUP:-20s}
readonly WORKERS=${OVERLOAD_WORKERS:-128}
readonly MAX_IN_FLIGHT=${OVERLOAD_MAX_IN_FLIGHT:-4096}
readonly KEYSPACE=${OVERLOAD_KEYSPACE:-cqlgate_overload}

usage() {
  cat <<USAGE
$PROG - offer 1x..10x a node's capacity through cqlgate and see what the limiter makes of it

Usage: $PROG [--help]

Starts Cassandra on $CASSANDRA_CQL (scripts/cassandra-local.sh, dir $CASSANDRA_DIR) unless something
already answers there, builds ./cmd/proxy and ./cmd/loadgen, loads $KEYSPACE.kv, and starts the
proxy on $LISTEN (admin $ADMIN) with: $PROXY_FLAGS
(the rest at defaults: a queue of 131,072 requests). The proxy is restarted for every step, so that each starts
from the same memory. Steps:
  capacity   closed loop, $WORKERS workers, $DURATION: the peak goodput
  unloaded   open loop at a tenth of the peak: the unloaded p99
  Nx         open loop at N x the peak for N in: $MULTIPLES ($DURATION each, at most
             $MAX_IN_FLIGHT requests in flight)
Latencies of admitted requests are service times (send to answer); the open loop's latency
from the intended start is shown beside them, and a step in which loadgen fell behind its
schedule says so. Each step's JSON report is kept under \$OVERLOAD_OUT (default: a temporary
directory, removed at exit).

Environment: OVERLOAD_MULTIPLES, OVERLOAD_DURATION (10s), OVERLOAD_WARMUP (2s),
OVERLOAD_CASSANDRA_WARMUP (20s of direct load before the first step), OVERLOAD_WORKERS
(128), OVERLOAD_MAX_IN_FLIGHT (4096), OVERLOAD_PROXY_FLAGS ("--queue-max-wait 100ms --queue-target 5ms
--node-limit 32"),
OVERLOAD_CASSANDRA_ADDR, OVERLOAD_CASSANDRA_DIR, OVERLOAD_PROXY_LISTEN, OVERLOAD_PROXY_ADMIN,
OVERLOAD_KEYSPACE, OVERLOAD_OUT, OVERLOAD_PROXY_BIN (a proxy binary to use instead of building
./cmd/proxy), KEEP_CASSANDRA=1. Needs go, curl and jq.

Targets: goodput >= 95% of the peak; admitted p99 <= 2x the unloaded p99; OVERLOADED p99
<= 1 ms; proxy memory <= ~1 KiB per queued request.
USAGE
}

# shellcheck source-path=SCRIPTDIR source=bench-lib.sh
source "$REPO/scripts/bench-lib.sh"

bench_main overload "${OVERLOAD_PROXY_BIN:-}" "${OVERLOAD_OUT:-}" "$@"

# step NAME LOADGEN-RUN-FLAGS...: restart the proxy, run loadgen through it, keep the JSON report.
step() {
  local name=$1
  shift
  stop_proxy
  # shellcheck disable=SC2086 # PROXY_FLAGS is a list of flags
  start_proxy "$LISTEN" $PROXY_FLAGS
  note "step $name: loadgen run $*"
  "$workdir/loadgen" run --hosts "$LISTEN" --keyspace "$KEYSPACE" --warmup "$WARMUP" --duration "$DURATION" \
    --proxy-metrics "http://$ADMIN/metrics" --proxy-pid "$proxy_pid" --interval 250ms --json "$@" >"$out/$name.json"
}

"$workdir/loadgen" setup --hosts "$CASSANDRA_CQL" --keyspace "$KEYSPACE" --rows 10000
# A fresh node serves a fraction of its capacity until its JIT has compiled the read path:
# without this, the capacity step measures the warm-up and every later step looks like more.
note "warming Cassandra up for $CASSANDRA_WARMUP (direct, $WORKERS workers, not reported)"
"$workdir/loadgen" run --hosts "$CASSANDRA_CQL" --keyspace "$KEYSPACE" --workers "$WORKERS" \
  --warmup 0s --duration "$CASSANDRA_WARMUP" --quiet >/dev/null

step capacity --workers "$WORKERS"
peak=$(jq -r '.target.throughput_ops_s | floor' "$out/capacity.json")
((peak > 0)) || die "the capacity step completed no request"
note "capacity through the proxy: $peak ops/s"
step unloaded --rate $((peak / 10 > 0 ? peak / 10 : 1)) --max-in-flight "$MAX_IN_FLIGHT"
for m in $MULTIPLES; do
  step "${m}x" --rate $((peak * m)) --max-in-flight "$MAX_IN_FLIGHT"
done

unloaded_p99=$(jq -r '.target.service_time_us.p99' "$out/unloaded.json")
echo
echo "peak (closed loop, $WORKERS workers): $peak ops/s; unloaded p99 (open loop at $((peak / 10))/s): ${unloaded_p99} µs"
echo "proxy: $PROXY_FLAGS (other settings default); $DURATION per step"
echo
printf '%-5s %8s %8s %7s %10s %7s %10s %10s %9s %8s %10s %8s %s\n' \
  step offered goodput "of peak" "p99 µs" "x unld" "p99 CO µs" overloaded "OL p99" "queue" "rss +MiB" "B/queued" "loadgen"
for m in $MULTIPLES; do
  jq -r --arg step "${m}x" --argjson peak "$peak" --argjson unloaded "$unloaded_p99" '
    .target as $t | .proxy as $p |
    ($p.gauges["cqlgate_limiter_queue_depth"].peak // 0) as $q |
    ($p.rss_peak_bytes - $p.rss_before_bytes) as $grow |
    [$step, .settings.rate, ($t.throughput_ops_s | floor),
     ("\($t.throughput_ops_s / $peak * 100 | floor)%"),
     $t.service_time_us.p99, ($t.service_time_us.p99 / $unloaded * 100 | round / 100),
     $t.latency_us.p99, $t.errors.overloaded,
     (if $t.error_latency_us.overloaded then "\($t.error_latency_us.overloaded.p99)µs" else "-" end),
     $q, ($grow / 1048576 * 10 | round / 10),
     (if $q > 0 then ($grow / $q | round) else "-" end),
     (if $t.schedule.behind then "BEHIND (\($t.schedule.late_requests) late, \($t.schedule.unsent) unsent)"
      elif $t.loadgen_maybe_bottleneck then "cpu-bound" else "ok" end)]
    | @tsv' "$out/${m}x.json" |
    awk -F'\t' '{printf "%-5s %8s %8s %7s %10s %7s %10s %10s %9s %8s %10s %8s %s\n", $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13}'
done
cat <<NOTE

p99 µs: admitted requests' service time; x unld: that over the unloaded p99; p99 CO µs: the same
requests from their intended start (includes any lag of the generator); OL p99: service time of
the OVERLOADED answers; queue: peak of cqlgate_limiter_queue_depth (sampled every 250 ms);
rss +MiB: peak minus start of the proxy's VmRSS; B/queued: that per request at the queue's peak.
Targets: of peak >= 95%, x unld <= 2, OL p99 <= 1000µs, B/queued <= ~1024.
NOTE
