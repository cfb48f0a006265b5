#!/usr/bin/env bash
# rules-demo.sh - a rule isolating a heavy statement, with loadgen against one Cassandra node
# (`make rules-demo`; not part of CI): a mixed workload alone, then beside a heavy multi-partition
# IN; the proxy's statement statistics must put the heavy statement first by p99 and count its
# calls and errors as loadgen does; then a rule capping it (written to the rules file, applied
# with SIGHUP) must bring the other statements' p99 back to within 1.5x of their p99 without the
# heavy load, while the heavy statement is throttled.
#
# Run `scripts/rules-demo.sh --help` for usage.
set -euo pipefail

readonly PROG=${0##*/}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readonly REPO

readonly CASSANDRA_ADDR=${RULES_DEMO_CASSANDRA_ADDR:-127.0.10.1}
readonly CASSANDRA_CQL=$CASSANDRA_ADDR:9042
readonly CASSANDRA_DIR=${RULES_DEMO_CASSANDRA_DIR:-/tmp/cqlgate-rules-demo}
readonly LISTEN=${RULES_DEMO_PROXY_LISTEN:-127.0.0.1:19046}
readonly ADMIN=${RULES_DEMO_PROXY_ADMIN:-127.0.0.1:19184}
readonly DURATION=${RULES_DEMO_DURATION:-20s}
readonly WARMUP=${RULES_DEMO_WARMUP:-5s}
readonly CASSANDRA_WARMUP=${RULES_DEMO_CASSANDRA_WARMUP:-15s}
readonly WORKERS=${RULES_DEMO_WORKERS:-16}
readonly HEAVY_WORKERS=${RULES_DEMO_HEAVY_WORKERS:-8}
readonly HEAVY_KEYS=${RULES_DEMO_HEAVY_KEYS:-500}
readonly CAP=${RULES_DEMO_CAP:-1}
readonly MAX_WAIT=${RULES_DEMO_MAX_WAIT:-500ms}
readonly KEYSPACE=${RULES_DEMO_KEYSPACE:-cqlgate_rules_demo}
readonly HEAVY_TEXT='SELECT k, v FROM kv WHERE k IN ?'

usage() {
  cat <<USAGE
$PROG - cap a heavy statement with a rule and see the other statements recover

Usage: $PROG [--help]

Starts Cassandra on $CASSANDRA_CQL (scripts/cassandra-local.sh, dir $CASSANDRA_DIR) unless something
already answers there, builds ./cmd/proxy and ./cmd/loadgen, loads $KEYSPACE.kv (10,000 rows), and
starts the proxy on $LISTEN (admin $ADMIN) with an empty --rules-file. Phases, each "loadgen heavy"
for $WARMUP + $DURATION after POST /statements/reset, with $WORKERS workers of single-partition
reads and writes (90% reads):
  baseline    the mixed workload alone
  heavy       plus $HEAVY_WORKERS workers of "$HEAVY_TEXT" ($HEAVY_KEYS keys)
  capped      the same, after a rule on the heavy statement's id (max_in_flight $CAP,
              queue_length 16, max_queue_wait $MAX_WAIT) was written and applied with SIGHUP:
              heavy requests that wait longer get OVERLOADED, which loadgen counts as errors
  baseline2   the mixed workload alone again (drift)
Checks: after heavy, the heavy statement is first in /statements?sort=p99 and in
"cqlgate statements --sort p99"; after heavy and capped, each statement's calls and errors in
/statements equal loadgen's (calls + rejected = loadgen's calls); after capped, the reads' and
writes' p99 are within 1.5x of their p99 in the baselines (the mean of the two).
Reports (JSON of loadgen and /statements, the terminal tables) are kept under \$RULES_DEMO_OUT
(default: a temporary directory, removed at exit).

Environment: RULES_DEMO_DURATION, RULES_DEMO_WARMUP, RULES_DEMO_CASSANDRA_WARMUP (direct load
before the first phase), RULES_DEMO_WORKERS, RULES_DEMO_HEAVY_WORKERS, RULES_DEMO_HEAVY_KEYS,
RULES_DEMO_CAP, RULES_DEMO_MAX_WAIT, RULES_DEMO_CASSANDRA_ADDR, RULES_DEMO_CASSANDRA_DIR, RULES_DEMO_PROXY_LISTEN,
RULES_DEMO_PROXY_ADMIN, RULES_DEMO_KEYSPACE, RULES_DEMO_OUT, RULES_DEMO_PROXY_BIN (a proxy binary
to use instead of building ./cmd/proxy), KEEP_CASSANDRA=1. Needs go, curl and jq.
USAGE
}

# shellcheck source-path=SCRIPTDIR source=bench-lib.sh
source "$REPO/scripts/bench-lib.sh"

bench_main rules-demo "${RULES_DEMO_PROXY_BIN:-}" "${RULES_DEMO_OUT:-}" "$@"

failed=0
check() { # check OK-EXPRESSION-RESULT MESSAGE
  if [[ $1 == true ]]; then
    echo "ok:   $2"
  else
    echo "FAIL: $2"
    failed=1
  fi
}

# phase NAME LOADGEN-FLAGS...: reset the statistics, run loadgen heavy through the proxy, keep its
# JSON, /statements by p99 and the terminal table.
phase() {
  local name=$1
  shift
  curl -fsS -X POST -o /dev/null "http://$ADMIN/statements/reset"
  note "phase $name: loadgen heavy $*"
  "$workdir/loadgen" heavy --hosts "$LISTEN" --keyspace "$KEYSPACE" --workers "$WORKERS" \
    --heavy-keys "$HEAVY_KEYS" --warmup "$WARMUP" --duration "$DURATION" --timeout 10s --quiet --json "$@" \
    >"$out/$name.json"
  curl -fsS "http://$ADMIN/statements?sort=p99&limit=20" >"$out/$name.statements.json"
  "$workdir/proxy" statements --admin "$ADMIN" --sort p99 --limit 5 --width 50 >"$out/$name.table.txt"
}

# counts_match NAME: each loadgen statement's calls and errors against /statements.
counts_match() {
  local name=$1 st
  for st in read write heavy; do
    local lg px
    lg=$(jq -r --arg n "$st" '.statements[] | select(.name == $n) | "\(.calls) \(.errors) \(.text)"' "$out/$name.json")
    local calls=${lg%% *} rest=${lg#* }
    local errors=${rest%% *} text=${rest#* }
    ((calls > 0)) || continue
    px=$(jq -r --arg t "$text" '[.statements[] | select(.text == $t)] |
      "\(map(.calls + .rejected) | add // 0) \(map(.errors) | add // 0)"' "$out/$name.statements.json")
    check "$([[ "$px" == "$calls $errors" ]] && echo true || echo false)" \
      "$name: $st: loadgen sent $calls and saw $errors errors; /statements counts $px (calls+rejected, errors)"
  done
}

rules=$out/rules.yaml
echo "rules: []" >"$rules"
start_proxy "$LISTEN" --rules-file "$rules"
"$workdir/loadgen" setup --hosts "$CASSANDRA_CQL" --keyspace "$KEYSPACE" --rows 10000
note "warming Cassandra up for $CASSANDRA_WARMUP (direct, not reported)"
"$workdir/loadgen" heavy --hosts "$CASSANDRA_CQL" --keyspace "$KEYSPACE" --workers "$WORKERS" \
  --heavy-workers "$HEAVY_WORKERS" --heavy-keys "$HEAVY_KEYS" --warmup 0s --duration "$CASSANDRA_WARMUP" \
  --quiet --json >/dev/null

phase baseline --heavy-workers 0
phase heavy --heavy-workers "$HEAVY_WORKERS"

echo
echo "== after the heavy phase: cqlgate statements --sort p99 --limit 5"
cat "$out/heavy.table.txt"
echo
first=$(jq -r '.statements[0].text' "$out/heavy.statements.json")
check "$([[ $first == "$HEAVY_TEXT" ]] && echo true || echo false)" "/statements?sort=p99 lists the heavy statement first ($first)"
row=$(sed -n 5p "$out/heavy.table.txt")
check "$([[ $row == *"$HEAVY_TEXT"* ]] && echo true || echo false)" "cqlgate statements lists it first"
counts_match heavy

id=$(jq -r --arg t "$HEAVY_TEXT" '.statements[] | select(.text == $t) | .id' "$out/heavy.statements.json" | head -n 1)
[[ -n $id ]] || die "the heavy statement is not in /statements"
cat >"$rules" <<RULES
rules:
  - name: heavy-in
    statement: $id
    max_in_flight: $CAP
    queue_length: 16
    max_queue_wait: $MAX_WAIT
RULES
kill -HUP "$proxy_pid"
for ((i = 0; i < 50; i++)); do
  [[ $(curl -fsS "http://$ADMIN/statements?limit=1" | jq -r '.rules[0].name // ""') == heavy-in ]] && break
  sleep 0.1
done
((i < 50)) || die "the rule was not applied after SIGHUP"
note "rule heavy-in applied: statement $id, $CAP in flight"

phase capped --heavy-workers "$HEAVY_WORKERS"
counts_match capped
phase baseline2 --heavy-workers 0

echo
echo "== after the capped phase: cqlgate statements --sort p99 --limit 5 (with the rules)"
cat "$out/capped.table.txt"
echo
printf '%-10s %10s %10s %10s %10s %10s %12s %12s\n' phase "read p99" "write p99" "read/s" "heavy p99" "heavy/s" "heavy calls" "overloaded"
for p in baseline heavy capped baseline2; do
  jq -r --arg p "$p" '
    def s($n): .statements[] | select(.name == $n);
    [$p, (s("read").latency_us.p99 / 1000), (s("write").latency_us.p99 / 1000), (s("read").ops_per_s | floor),
     (s("heavy").latency_us.p99 / 1000), (s("heavy").ops_per_s | floor), s("heavy").calls,
     s("heavy").errors_by_kind.overloaded // 0] | @tsv' "$out/$p.json" |
    awk -F'\t' '{printf "%-10s %8.2fms %8.2fms %10s %8.2fms %10s %12s %12s\n", $1, $2, $3, $4, $5, $6, $7, $8}'
done
echo
for st in read write; do
  base=$(jq -s --arg n "$st" '[.[] | .statements[] | select(.name == $n) | .latency_us.p99] | add / length' \
    "$out/baseline.json" "$out/baseline2.json")
  capped=$(jq -r --arg n "$st" '.statements[] | select(.name == $n) | .latency_us.p99' "$out/capped.json")
  heavy=$(jq -r --arg n "$st" '.statements[] | select(.name == $n) | .latency_us.p99' "$out/heavy.json")
  check "$(jq -n --argjson c "$capped" --argjson b "$base" '$c <= 1.5 * $b')" \
    "$st p99: $(jq -n "$base / 1000 | . * 100 | round / 100") ms without the heavy load (mean of the baselines), $(jq -n "$heavy / 1000 | . * 100 | round / 100") ms beside it ($(jq -n "$heavy / $base | . * 100 | round / 100")x), $(jq -n "$capped / 1000 | . * 100 | round / 100") ms with the rule ($(jq -n "$capped / $base | . * 100 | round / 100")x; at most 1.5x)"
done
hp=$(jq -r '.statements[] | select(.name == "heavy") | .latency_us.p99' "$out/heavy.json")
cp=$(jq -r '.statements[] | select(.name == "heavy") | .latency_us.p99' "$out/capped.json")
inflight=$(jq -r '.rules[0] | "\(.admitted) admitted, \(.waited) after waiting, \(.rejected) rejected"' "$out/capped.statements.json")
echo "heavy statement: p99 $(jq -n "$hp / 1000 | round") ms uncapped, $(jq -n "$cp / 1000 | round") ms capped to $CAP in flight (rule: $inflight)"
echo "commit $(git -C "$REPO" rev-parse --short HEAD); $(date -u +%Y-%m-%dT%H:%MZ); $(nproc) CPUs"
exit "$failed"
