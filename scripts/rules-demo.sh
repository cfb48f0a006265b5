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
readonly DURATION=${RULES_DEMO_DURATION:-15s}
readonly WARMUP=${RULES_DEMO_WARMUP:-5s}
readonly CASSANDRA_WARMUP=${RULES_DEMO_CASSANDRA_WARMUP:-15s}
readonly WORKERS=${RULES_DEMO_WORKERS:-16}
readonly HEAVY_WORKERS=${RULES_DEMO_HEAVY_WORKERS:-8}
readonly HEAVY_KEYS=${RULES_DEMO_HEAVY_KEYS:-500}
readonly CAP=${RULES_DEMO_CAP:-1}
readonly MAX_WAIT=${RULES_DEMO_MAX_WAIT:-500ms}
readonly ROUNDS=${RULES_DEMO_ROUNDS:-3}
readonly KEYSPACE=${RULES_DEMO_KEYSPACE:-cqlgate_rules_demo}
readonly HEAVY_TEXT='SELECT k, v FROM kv WHERE k IN ?'

usage() {
  cat <<USAGE
$PROG - cap a heavy statement with a rule and see the other statements recover

Usage: $PROG [--help]

Starts Cassandra on $CASSANDRA_CQL (scripts/cassandra-local.sh, dir $CASSANDRA_DIR) unless something
already answers there, builds ./cmd/proxy and ./cmd/loadgen, loads $KEYSPACE.kv (10,000 rows), and
starts the proxy on $LISTEN (admin $ADMIN) with an empty --rules-file. Then $ROUNDS rounds of three
phases, each "loadgen heavy" for $WARMUP + $DURATION after POST /statements/reset, with $WORKERS
workers of single-partition reads and writes (90% reads):
  heavy-N     plus $HEAVY_WORKERS workers of "$HEAVY_TEXT" ($HEAVY_KEYS keys) in a loadgen
              process of its own, as a report job is another application
  capped-N    the same, with a rule on the heavy statement's id (max_in_flight $CAP,
              queue_length 16, max_queue_wait $MAX_WAIT) written to the rules file and applied
              with SIGHUP: heavy requests that wait longer get OVERLOADED, counted as errors
  baseline-N  the mixed workload alone (the rules file emptied, SIGHUP again)
Checks: after heavy-1, the heavy statement is first in /statements?sort=p99 and in
"cqlgate statements --sort p99"; after every heavy and capped phase, each statement's calls and
errors in /statements equal loadgen's (calls + rejected = loadgen's calls); the reads' and writes'
p99 in capped-N over their p99 in baseline-N, the median over the rounds, is at most 1.5.
Reports (JSON of loadgen and /statements, the terminal tables) are kept under \$RULES_DEMO_OUT
(default: a temporary directory, removed at exit).

Environment: RULES_DEMO_DURATION, RULES_DEMO_WARMUP, RULES_DEMO_CASSANDRA_WARMUP (direct load
before the first phase), RULES_DEMO_WORKERS, RULES_DEMO_HEAVY_WORKERS, RULES_DEMO_HEAVY_KEYS,
RULES_DEMO_CAP, RULES_DEMO_MAX_WAIT, RULES_DEMO_ROUNDS, RULES_DEMO_CASSANDRA_ADDR, RULES_DEMO_CASSANDRA_DIR, RULES_DEMO_PROXY_LISTEN,
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

# phase NAME HEAVY-WORKERS: reset the statistics, run the mixed workload through the proxy and,
# with HEAVY-WORKERS above 0, the heavy statement beside it in a loadgen process of its own (a
# report job is another application: decoding its hundreds of rows per answer must not delay the
# mixed workload's own measurement), keep their JSON, /statements by p99 and the terminal table.
phase() {
  local name=$1 heavy=$2 hpid=""
  curl -fsS -X POST -o /dev/null "http://$ADMIN/statements/reset"
  note "phase $name: loadgen heavy --workers $WORKERS, and --heavy-workers $heavy beside it"
  if ((heavy > 0)); then
    "$workdir/loadgen" heavy --hosts "$LISTEN" --keyspace "$KEYSPACE" --workers 0 --heavy-workers "$heavy" \
      --heavy-keys "$HEAVY_KEYS" --warmup "$WARMUP" --duration "$DURATION" --timeout 10s --quiet --json \
      >"$out/$name.heavy.json" &
    hpid=$!
  fi
  "$workdir/loadgen" heavy --hosts "$LISTEN" --keyspace "$KEYSPACE" --workers "$WORKERS" --heavy-workers 0 \
    --heavy-keys "$HEAVY_KEYS" --warmup "$WARMUP" --duration "$DURATION" --timeout 10s --quiet --json \
    >"$out/$name.mixed.json"
  if [[ -n $hpid ]]; then
    wait "$hpid" || die "the heavy loadgen failed in phase $name"
    # Each report lists all three statements: read and write from the mixed one, heavy from its own.
    jq -s '{statements: ([.[0].statements[] | select(.name != "heavy")] + [.[1].statements[] | select(.name == "heavy")])}' \
      "$out/$name.mixed.json" "$out/$name.heavy.json" >"$out/$name.json"
  else
    cp "$out/$name.mixed.json" "$out/$name.json"
  fi
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

# set_rules YAML EXPECTED-FIRST-RULE: write the rules file, SIGHUP the proxy, wait until
# /statements shows the first rule named EXPECTED-FIRST-RULE ("" for none).
set_rules() {
  printf '%s\n' "$1" >"$rules"
  kill -HUP "$proxy_pid"
  local i
  for ((i = 0; i < 50; i++)); do
    [[ $(curl -fsS "http://$ADMIN/statements?limit=1" | jq -r '.rules[0].name // ""') == "$2" ]] && return 0
    sleep 0.1
  done
  die "the rules file was not applied after SIGHUP"
}

echo "rules: []" >"$rules"
start_proxy "$LISTEN" --rules-file "$rules"
"$workdir/loadgen" setup --hosts "$CASSANDRA_CQL" --keyspace "$KEYSPACE" --rows 10000
note "warming Cassandra up for $CASSANDRA_WARMUP (direct, not reported)"
"$workdir/loadgen" heavy --hosts "$CASSANDRA_CQL" --keyspace "$KEYSPACE" --workers "$WORKERS" \
  --heavy-workers "$HEAVY_WORKERS" --heavy-keys "$HEAVY_KEYS" --warmup 0s --duration "$CASSANDRA_WARMUP" \
  --quiet --json >/dev/null

# Each round: heavy (no rule), capped (the rule on), baseline (the mixed workload alone). The
# capped phase is compared with the baseline next to it, so that a drift of the machine's load
# between rounds (it may be shared) weighs on both.
rule=""
for ((r = 1; r <= ROUNDS; r++)); do
  phase "heavy-$r" "$HEAVY_WORKERS"
  if ((r == 1)); then
    echo
    echo "== after heavy-1: cqlgate statements --sort p99 --limit 5"
    cat "$out/heavy-1.table.txt"
    echo
    first=$(jq -r '.statements[0].text' "$out/heavy-1.statements.json")
    check "$([[ $first == "$HEAVY_TEXT" ]] && echo true || echo false)" "/statements?sort=p99 lists the heavy statement first ($first)"
    row=$(sed -n 5p "$out/heavy-1.table.txt")
    check "$([[ $row == *"$HEAVY_TEXT"* ]] && echo true || echo false)" "cqlgate statements lists it first"
    id=$(jq -r --arg t "$HEAVY_TEXT" '.statements[] | select(.text == $t) | .id' "$out/heavy-1.statements.json" | head -n 1)
    [[ -n $id ]] || die "the heavy statement is not in /statements"
    rule="rules:
  - name: heavy-in
    statement: $id
    max_in_flight: $CAP
    queue_length: 16
    max_queue_wait: $MAX_WAIT"
    note "rule heavy-in: statement $id, $CAP in flight"
  fi
  counts_match "heavy-$r"
  set_rules "$rule" heavy-in
  phase "capped-$r" "$HEAVY_WORKERS"
  counts_match "capped-$r"
  if ((r == 1)); then
    echo
    echo "== after capped-1: cqlgate statements --sort p99 --limit 5 (with the rules)"
    cat "$out/capped-1.table.txt"
    echo
  fi
  set_rules "rules: []" ""
  phase "baseline-$r" 0
done

echo
printf '%-11s %10s %10s %10s %10s %10s %12s %12s\n' phase "read p99" "write p99" "read/s" "heavy p99" "heavy/s" "heavy calls" "overloaded"
for ((r = 1; r <= ROUNDS; r++)); do
  for p in "heavy-$r" "capped-$r" "baseline-$r"; do
    jq -r --arg p "$p" '
      def s($n): .statements[] | select(.name == $n);
      [$p, (s("read").latency_us.p99 / 1000), (s("write").latency_us.p99 / 1000), (s("read").ops_per_s | floor),
       (s("heavy").latency_us.p99 / 1000), (s("heavy").ops_per_s | floor), s("heavy").calls,
       s("heavy").errors_by_kind.overloaded // 0] | @tsv' "$out/$p.json" |
      awk -F'\t' '{printf "%-11s %8.2fms %8.2fms %10s %8.2fms %10s %12s %12s\n", $1, $2, $3, $4, $5, $6, $7, $8}'
  done
done
echo
# p99 of statement $1 in phase $2, in µs.
p99() { jq -r --arg n "$1" '.statements[] | select(.name == $n) | .latency_us.p99' "$out/$2.json"; }
for st in read write; do
  ratios=() uncapped=()
  for ((r = 1; r <= ROUNDS; r++)); do
    base=$(p99 "$st" "baseline-$r")
    ratios+=("$(jq -n "$(p99 "$st" "capped-$r") / $base | . * 100 | round / 100")")
    uncapped+=("$(jq -n "$(p99 "$st" "heavy-$r") / $base | . * 100 | round / 100")")
  done
  median=$(printf '%s\n' "${ratios[@]}" | sort -g | awk '{a[NR] = $1} END {print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2)}')
  check "$(jq -n "$median <= 1.5")" \
    "$st p99 over its baseline's, by round: beside the heavy statement ${uncapped[*]}; with the rule ${ratios[*]} (median $median; at most 1.5)"
done
echo "heavy statement, round 1: p99 $(jq -n "$(p99 heavy heavy-1) / 1000 | round") ms uncapped, $(jq -n "$(p99 heavy capped-1) / 1000 | round") ms capped to $CAP in flight; rule: $(jq -r '.rules[0] | "\(.admitted) admitted, \(.waited) after waiting, \(.rejected) rejected"' "$out/capped-1.statements.json")"
echo "commit $(git -C "$REPO" rev-parse --short HEAD); $(date -u +%Y-%m-%dT%H:%MZ); $(nproc) CPUs; load average $(cut -d' ' -f1-3 /proc/loadavg)"
exit "$failed"
