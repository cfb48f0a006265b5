#!/usr/bin/env bash
# `make demo`: start a local Cassandra node, the proxy in front of it, and
# drive the same read workload directly and through the proxy in alternating
# rounds; print the comparison; stop everything this script started.
#
# Environment (all optional):
#   CQLGATE_DEMO_ADDR      Cassandra node address      (default 127.0.13.1)
#   CQLGATE_DEMO_DIR       node directory              (default /tmp/cqlgate-demo)
#   CQLGATE_DEMO_LISTEN    proxy client address        (default 127.0.0.1:29042)
#   CQLGATE_DEMO_ADMIN     proxy admin/metrics address (default 127.0.0.1:29180)
#   DEMO_WORKERS, DEMO_DURATION, DEMO_ROUNDS  the workload (64, 5s, 2)
set -euo pipefail
cd "$(dirname "$0")/.."

addr=${CQLGATE_DEMO_ADDR:-127.0.13.1}
dir=${CQLGATE_DEMO_DIR:-/tmp/cqlgate-demo}
listen=${CQLGATE_DEMO_LISTEN:-127.0.0.1:29042}
admin=${CQLGATE_DEMO_ADMIN:-127.0.0.1:29180}
bin=$(mktemp -d)
proxy_pid=

cleanup() {
  if [[ -n $proxy_pid ]] && kill -0 "$proxy_pid" 2>/dev/null; then
    kill -TERM "$proxy_pid" 2>/dev/null || true
    wait "$proxy_pid" 2>/dev/null || true
  fi
  bash scripts/cassandra-local.sh stop --dir "$dir" >/dev/null 2>&1 || true
  rm -rf "$bin"
}
trap cleanup EXIT

step() { printf '\n== %s\n' "$*" >&2; }

bash scripts/ci-install.sh

step "building the proxy and the load generator"
go build -o "$bin/cqlgate" ./cmd/proxy
go build -o "$bin/loadgen" ./cmd/loadgen

step "starting Cassandra 5.0 on $addr:9042 (first run downloads ~70 MB of jars)"
bash scripts/cassandra-local.sh start --nodes 1 --addresses "$addr" --dir "$dir"

step "starting the proxy on $listen (metrics on http://$admin/metrics)"
"$bin/cqlgate" --listen "$listen" --contact-points "$addr:9042" --admin-listen "$admin" \
  --log-format console --log-level warn &
proxy_pid=$!
for _ in $(seq 1 100); do
  if curl -fsS "http://$admin/readyz" >/dev/null 2>&1; then break; fi
  kill -0 "$proxy_pid" 2>/dev/null || { echo "proxy exited" >&2; exit 1; }
  sleep 0.1
done
curl -fsS "http://$admin/readyz" >/dev/null

step "creating the demo table and loading rows"
"$bin/loadgen" setup --hosts "$addr:9042" --rows 10000

step "reading directly and through the proxy in alternating rounds"
"$bin/loadgen" compare \
  --target "direct=$addr:9042" --target "proxy=$listen" \
  --workers "${DEMO_WORKERS:-64}" --duration "${DEMO_DURATION:-5s}" --rounds "${DEMO_ROUNDS:-2}" \
  --proxy-metrics "http://$admin/metrics"

step "done; stopping the proxy and Cassandra"
