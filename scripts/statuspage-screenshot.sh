#!/usr/bin/env bash
# statuspage-screenshot.sh NODE OUT.png: the screenshot of the status page in README.md, from a
# real run. In front of the running Cassandra node NODE (host:9042), it starts the proxy, drives
# it with loadgen (a mixed read/write workload, and multi-partition fetches as the heavy
# statements: sequential, concurrent, IN and IN with LIMIT), and while the load runs saves the
# page at / on the admin address as headless Chromium (Debian's chromium) renders it. It stops
# what it started.
#
# Environment (optional): SHOT_LISTEN, SHOT_ADMIN (proxy addresses; 127.0.0.1:29043, :29181),
# SHOT_WIDTH, SHOT_HEIGHT (the window, 1280x560).
set -euo pipefail
cd "$(dirname "$0")/.."

[[ $# == 2 ]] || { echo "usage: $0 NODE_HOST:9042 OUT.png" >&2; exit 2; }
node=$1
out=$(realpath -m "$2")
listen=${SHOT_LISTEN:-127.0.0.1:29043}
admin=${SHOT_ADMIN:-127.0.0.1:29181}
chromium=$(command -v chromium || command -v chromium-browser) || {
  echo "chromium not found (apt-get install chromium)" >&2
  exit 1
}
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

go build -o "$work/cqlgate" ./cmd/proxy
go build -o "$work/loadgen" ./cmd/loadgen

"$work/cqlgate" --listen "$listen" --contact-points "$node" --admin-listen "$admin" \
  --log-format console --log-level warn &
pids+=($!)
for _ in $(seq 1 100); do
  curl -fsS "http://$admin/readyz" >/dev/null 2>&1 && break
  sleep 0.1
done
curl -fsS "http://$admin/readyz" >/dev/null

"$work/loadgen" setup --hosts "$listen" --rows 10000 >/dev/null
"$work/loadgen" multiget --hosts "$listen" --setup --batches 1 --quiet >/dev/null
# The page is to show the workload, not the setup's inserts.
curl -fsS -X POST "http://$admin/statements/reset" >/dev/null
"$work/loadgen" run --hosts "$listen" --workload mixed --read-ratio 0.8 --keys zipf \
  --rows 10000 --workers 16 --duration 40s --quiet >/dev/null &
pids+=($!)
"$work/loadgen" multiget --hosts "$listen" --batches 100 --partitions 50 --quiet >/dev/null &
pids+=($!)

# The page's rates are per second since its previous render: render it once, then shoot.
sleep 15
curl -fsS "http://$admin/" >/dev/null
sleep 2
"$chromium" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync \
  --user-data-dir="$work/profile" --hide-scrollbars \
  --window-size="${SHOT_WIDTH:-1280},${SHOT_HEIGHT:-560}" \
  --screenshot="$out" "http://$admin/" 2>"$work/chromium.log" || {
  cat "$work/chromium.log" >&2
  exit 1
}
echo "saved $out" >&2
