# cqlgate: a CQL sidecar proxy. `make help` lists the targets.

GO       ?= go
BIN      ?= bin
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -s -w -X main.version=$(VERSION)
FUZZTIME ?= 30s
STATICCHECK_VERSION ?= v0.8.2
SHELLCHECK ?= shellcheck
FLEETSIM_OUT ?= $(CURDIR)/fleetsim-out
FLEETSIM_ONLY ?=
FLEET_OUT ?= $(CURDIR)/fleet-out
FLEET_QUICK ?=

.DEFAULT_GOAL := help

.PHONY: help
help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-18s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## build bin/cqlgate (the proxy) and bin/loadgen
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/cqlgate ./cmd/proxy
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/loadgen ./cmd/loadgen

.PHONY: demo
demo: ## start a local Cassandra, the proxy, and compare loadgen direct vs proxied, then stop everything
	bash scripts/demo.sh

.PHONY: test
test: ## the whole suite, with -race, against real Cassandra nodes started (and stopped) for it
	bash scripts/test.sh

.PHONY: unit
unit: ## the tests that need no Cassandra (fast)
	CQLGATE_SKIP_CASSANDRA=1 CQLGATE_SKIP_PYTHON=1 $(GO) test -race -count=1 ./pkg/... ./cmd/... ./internal/loadgen/...

.PHONY: bench
bench: ## proxied vs direct on one local node at 1, 4, 16, 128 workers, read and write: throughput, p50, CPU per request (proxy, loadgen, machine), proxy syscalls (BENCH_RELAYS=1: beside a do-nothing Go relay and C relay)
	bash scripts/bench.sh

.PHONY: bench-syscalls
bench-syscalls: ## the proxy's syscalls by kind, context switches and CPU per request under perf, at 1, 4, 16, 128 workers (SYSCALLS_BASELINE_BIN: a second binary in the same rounds)
	bash scripts/bench-syscalls.sh

.PHONY: seed
seed: ## the seed experiment: 50,000 goroutines x 200 SELECTs, gocql defaults, direct and proxied (SEED_WORKERS, SEED_QUERIES)
	bash scripts/seed.sh

.PHONY: soak
soak: ## a bounded soak (SOAK_DURATION, default 10m): proxy RSS, goroutines, connections, orphaned streams at the start and the end
	bash scripts/soak.sh

.PHONY: overload
overload: ## open loop at 2x, 5x, 10x one node's capacity through the proxy (raw-frame generator): goodput, p99, OVERLOADED latency, bytes per queued request
	$(GO) test -v -count=1 -run '^$$' -bench '^BenchmarkOverload$$' -benchtime 1x -timeout 20m ./test/integration

.PHONY: overload-remote
overload-remote: ## the same against a node 2 ms away (fault injector), the built proxy in its own process, 1 ms queue target
	CQLGATE_OVERLOAD_LATENCY=2ms CQLGATE_OVERLOAD_PROXY=process CQLGATE_OVERLOAD_TARGET=1ms $(GO) test -v -count=1 -run '^$$' -bench '^BenchmarkOverload$$' -benchtime 1x -timeout 20m ./test/integration

.PHONY: fleetsim
fleetsim: ## the fleet simulator's sweep (no Cassandra): K = 1..1,000 sidecars, adaptive vs fixed, a table and a PNG per scenario in FLEETSIM_OUT (FLEETSIM_ONLY: a regexp on names)
	CQLGATE_FLEETSIM=1 CQLGATE_FLEETSIM_OUT=$(FLEETSIM_OUT) CQLGATE_FLEETSIM_ONLY='$(FLEETSIM_ONLY)' $(GO) test -count=1 -run '^TestFleetSweep$$' -v -timeout 60m ./internal/fleetsim

.PHONY: fleet
fleet: ## N = 1, 4, 8 proxy processes in front of one node of emulated capacity, open loop at 0.5x, 2x, 5x with a capacity step, fixed vs fleet limits, each run beside its simulated twin; a table, a PNG per run in FLEET_OUT (FLEET_QUICK=1: N = 8 at 2x and 5x, a few minutes)
	CQLGATE_FLEET_QUICK=$(FLEET_QUICK) CQLGATE_FLEET_OUT=$(FLEET_OUT) $(GO) test -v -count=1 -run '^$$' -bench '^BenchmarkFleet$$' -benchtime 1x -timeout 30m ./test/integration

.PHONY: overload-loadgen
overload-loadgen: ## the same steps offered by loadgen (gocql), which falls behind past about 1x on two cores
	bash scripts/overload.sh

.PHONY: rules-demo
rules-demo: ## a rule capping a heavy statement (loadgen heavy, one local node): statistics checked against loadgen, p99 of the rest restored
	bash scripts/rules-demo.sh

SEEDS ?= 10000
CHAOS_FROM ?= 1
CHAOS_PARALLEL ?= 8

.PHONY: chaos
chaos: ## the chaos test (pkg/proxy TestChaos) over SEEDS seeds from CHAOS_FROM, with -race; a failing seed reruns with -chaos.seed=S
	CQLGATE_SKIP_CASSANDRA=1 $(GO) test -race -count=1 -timeout 0 -run '^TestChaos$$' ./pkg/proxy/ -chaos.seeds=$(SEEDS) -chaos.from=$(CHAOS_FROM) -chaos.parallel=$(CHAOS_PARALLEL)

.PHONY: microbench
microbench: ## Go benchmarks of the frame layer and the hot path
	$(GO) test -run '^$$' -bench . -benchmem ./pkg/frame/ ./pkg/systables/ ./pkg/proxy/ ./pkg/token/ ./pkg/speculative/ ./pkg/idempotency/ ./pkg/limiter/

.PHONY: fuzz
fuzz: ## run every fuzz target for FUZZTIME each (default 30s)
	@set -e; for pkg in ./pkg/frame ./pkg/systables ./pkg/token ./pkg/idempotency; do \
	  for t in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    echo "== $$pkg $$t"; $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; \
	done

.PHONY: lint
lint: ## go vet, gofmt, go mod tidy, shellcheck (scripts/*.sh, .ci/run) and staticcheck (downloaded by go run)
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }
	@$(GO) mod tidy -diff || { echo "go.mod/go.sum are not tidy: run go mod tidy"; exit 1; }
	@command -v $(SHELLCHECK) >/dev/null || { echo "$(SHELLCHECK) not found: apt-get install shellcheck (scripts/ci-install.sh does)"; exit 1; }
	$(SHELLCHECK) -x scripts/*.sh .ci/run
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...

.PHONY: docs
docs: ## regenerate docs/settings.md, docs/metrics.md and docs/errors.md from the code (runs a proxy against Cassandra)
	$(GO) test -count=1 -run '^TestDocs' ./test/deploy -update

.PHONY: deploy-check
deploy-check: ## check deploy/ (Dockerfile, Kubernetes, compose, alerts, dashboard) and the docs without Cassandra
	CQLGATE_SKIP_CASSANDRA=1 $(GO) test -count=1 ./test/deploy ./internal/docgen

.PHONY: image
image: ## build the container images cqlgate/cqlgate and cqlgate/loadgen (tagged with the git version and dev) with docker
	docker build -f deploy/Dockerfile --target cqlgate --build-arg VERSION=$(VERSION) -t cqlgate/cqlgate:$(VERSION) -t cqlgate/cqlgate:dev .
	docker build -f deploy/Dockerfile --target loadgen --build-arg VERSION=$(VERSION) -t cqlgate/loadgen:$(VERSION) -t cqlgate/loadgen:dev .

.PHONY: cassandra-start
cassandra-start: ## start a 1-node local Cassandra on 127.0.10.1 (NODES=3 for a cluster)
	bash scripts/cassandra-local.sh start --nodes $(or $(NODES),1)

.PHONY: cassandra-stop
cassandra-stop: ## stop the local Cassandra started by cassandra-start
	bash scripts/cassandra-local.sh stop

.PHONY: clean
clean: ## remove build output
	rm -rf $(BIN)
