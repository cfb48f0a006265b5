#!/usr/bin/env bash
# The whole test suite (`make test`): starts the real Cassandra nodes the
# tests share (one single node, one 3-node cluster), runs every package with
# -race, and stops the nodes again, whatever happened.
set -euo pipefail
cd "$(dirname "$0")/.."

launcher=scripts/cassandra-local.sh
single_dir=${CQLGATE_TEST_DIR:-/tmp/cqlgate-test}/single
cluster_dir=${CQLGATE_TEST_DIR:-/tmp/cqlgate-test}/cluster3
single_addrs=${CQLGATE_TEST_SINGLE_ADDRS:-127.0.10.1}
cluster_addrs=${CQLGATE_TEST_CLUSTER3_ADDRS:-127.0.11.1,127.0.11.2,127.0.11.3}

single_pid=
cleanup() {
  # A start still under way would leave a node behind: let it finish first.
  if [[ -n $single_pid ]]; then wait "$single_pid" 2>/dev/null || true; fi
  bash "$launcher" stop --dir "$single_dir" >/dev/null 2>&1 || true
  bash "$launcher" stop --dir "$cluster_dir" >/dev/null 2>&1 || true
}
trap cleanup EXIT

bash "$launcher" fetch
# Start both clusters at once: JVM start-up dominates and overlaps well.
bash "$launcher" start --dir "$single_dir" --addresses "$single_addrs" --cluster-name cqlgate-single &
single_pid=$!
bash "$launcher" start --dir "$cluster_dir" --addresses "$cluster_addrs" --cluster-name cqlgate-cluster3
wait "$single_pid"
single_pid=

export CQLGATE_TEST_CASSANDRA_SINGLE=${single_addrs//,/:9042,}:9042
export CQLGATE_TEST_CASSANDRA_SINGLE_DIR=$single_dir
export CQLGATE_TEST_CASSANDRA_CLUSTER3=${cluster_addrs//,/:9042,}:9042
export CQLGATE_TEST_CASSANDRA_CLUSTER3_DIR=$cluster_dir
# Test artifacts (the status page's screenshot from test/browser) are kept here.
export CQLGATE_ARTIFACTS=${CQLGATE_ARTIFACTS:-${CQLGATE_TEST_DIR:-/tmp/cqlgate-test}/artifacts}

# -p 1: packages share the clusters, and some tests stop and restart nodes.
go test -race -count=1 -p 1 -timeout 40m ./... "$@"

# Without -race, what the race detector would distort: the allocation checks of ./pkg/...
# (they skip under -race; the tests that need Cassandra ran above), the longest simulations of
# internal/fleetsim (single goroutine, virtual clock: skipped under -race), and the seed experiment
# shrunk (50,000 goroutines through the proxy's queue, at the node's real throughput).
if [[ $# -eq 0 ]]; then
  CQLGATE_SKIP_CASSANDRA=1 go test -count=1 -timeout 10m ./pkg/... ./internal/fleetsim
  go test -count=1 -timeout 10m -run '^TestSeedExperiment(Shrunk|TwoAddresses)$' ./cmd/loadgen
fi
