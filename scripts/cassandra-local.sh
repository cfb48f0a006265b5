#!/usr/bin/env bash
# cassandra-local.sh - run a throwaway Apache Cassandra 5.0 cluster on loopback addresses,
# without Docker and without the Cassandra tarball (the jars come from Maven Central).
#
# Run `scripts/cassandra-local.sh --help` for usage.
set -euo pipefail

readonly CASSANDRA_VERSION=5.0.4
readonly PROG=${0##*/}
SELF=$(cd "$(dirname "$0")" && pwd)/${0##*/}
CACHE_DIR=${CQLGATE_CASSANDRA_CACHE:-$HOME/.cache/cqlgate/cassandra-$CASSANDRA_VERSION}
DEFAULT_DIR=${CQLGATE_CASSANDRA_DIR:-/tmp/cqlgate-cassandra}
readonly CQL_PORT=9042 STORAGE_PORT=7000

usage() {
  cat <<EOF
$PROG - local Apache Cassandra $CASSANDRA_VERSION cluster for cqlgate tests (no Docker needed)

Usage:
  $PROG fetch
      Download cassandra-all $CASSANDRA_VERSION and its dependency jars with Maven into
      \$CQLGATE_CASSANDRA_CACHE/lib (default: ~/.cache/cqlgate/cassandra-$CASSANDRA_VERSION/lib).
      Idempotent: a marker file written after success makes later runs a no-op.

  $PROG start [--nodes N] [--addresses A1,A2,...] [--dir DIR] [--heap SIZE] [--auth]
              [--cluster-name NAME] [--yaml-extra FILE] [--timeout SECS] [--jmx-base PORT]
              [--owner-pid PID]
      Fetch if needed, write DIR/nodeK/{cassandra.yaml,logback.xml,data,commitlog,...} and start
      node 1..N one after another, each on ADDR:$CQL_PORT (CQL) and ADDR:$STORAGE_PORT (gossip),
      waiting until its CQL port answers an OPTIONS request before starting the next one.
      Prints "node K ADDR:$CQL_PORT pid PID ready in Xs" per node.
        --nodes N          number of nodes (default 1, or the number of --addresses)
        --addresses LIST   comma-separated loopback addresses (default 127.0.10.1..127.0.10.N;
                           never 127.0.0.1, which may host a Cassandra of your own)
        --dir DIR          cluster directory (default \$CQLGATE_CASSANDRA_DIR or /tmp/cqlgate-cassandra)
        --heap SIZE        JVM heap per node, -Xms=-Xmx (default 512m)
        --auth             PasswordAuthenticator + CassandraAuthorizer (superuser cassandra/cassandra;
                           it can log in a fraction of a second after the CQL port opens)
        --cluster-name N   cluster_name (default cqlgate-test)
        --yaml-extra FILE  YAML appended to every node's cassandra.yaml (e.g. client TLS options);
                           keys in it must not repeat keys the script writes
        --timeout SECS     per-node readiness timeout (default \$CQLGATE_CASSANDRA_START_TIMEOUT or 120)
        --owner-pid PID    stop the cluster automatically once process PID has exited (a
                           detached watchdog; used by internal/cassandratest)
        --jmx-base PORT    JMX port of node 1 (node K uses PORT+K-1); JMX listens on 127.0.0.1.
                           Default: derived from node 1's address (17000 + last 3 octets mod 15000)
      Starting an already running cluster is a no-op. A DIR that holds a cluster with other
      addresses or another cluster name is refused (run clean first).

  $PROG stop [--dir DIR] [--node K]
      SIGTERM the node(s) started from DIR (verified through /proc/PID/cmdline), SIGKILL after 30 s.

  $PROG start-node --node K [--dir DIR] [--timeout SECS]
      Start one previously configured node again (same yaml and data) and wait for CQL.

  $PROG status [--dir DIR]
      One line per node: K, address, pid, running/stopped, CQL answering or not.

  $PROG nodetool [--dir DIR] [--node K] -- ARGS...
      Run nodetool (from the cached jars) against node K (default 1) over JMX, e.g. "-- status".

  $PROG warmup [--address ADDR]
      Create the JVM class data sharing archive (faster node starts) if missing, by starting and
      stopping a throwaway node on ADDR (default 127.0.99.1). Otherwise the first node that is
      stopped cleanly writes it.

  $PROG clean [--dir DIR]
      Stop all nodes, then remove DIR.

Environment: CQLGATE_CASSANDRA_CACHE, CQLGATE_CASSANDRA_DIR, JAVA (java binary, default: java on PATH),
             MVN (default: mvn).
EOF
}

die() { echo "$PROG: error: $*" >&2; exit 1; }
note() { echo "$PROG: $*" >&2; }

now() { echo "${EPOCHREALTIME:-$(date +%s.%N)}"; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

LIB_DIR=$CACHE_DIR/lib
MARKER=$CACHE_DIR/lib.complete

# ---------------------------------------------------------------------------------------------
# fetch
# ---------------------------------------------------------------------------------------------
fetch_complete() { [[ -f $MARKER && -d $LIB_DIR ]] && compgen -G "$LIB_DIR/cassandra-all-$CASSANDRA_VERSION.jar" >/dev/null; }

cmd_fetch() {
  [[ $# -eq 0 ]] || die "fetch takes no arguments"
  fetch_complete && return 0
  mkdir -p "$CACHE_DIR"
  # Serialize concurrent fetches (e.g. several test packages starting at once).
  exec 9>"$CACHE_DIR/fetch.lock"
  flock 9
  if fetch_complete; then exec 9>&-; return 0; fi
  local mvn=${MVN:-mvn}
  command -v "$mvn" >/dev/null || die "Maven ('$mvn') not found; install it (apt-get install maven) or run scripts/ci-install.sh"
  local work; work=$(mktemp -d "$CACHE_DIR/fetch.XXXXXX")
  cat >"$work/pom.xml" <<EOF
<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>io.cqlgate.local</groupId>
  <artifactId>cassandra-local-fetch</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.cassandra</groupId>
      <artifactId>cassandra-all</artifactId>
      <version>$CASSANDRA_VERSION</version>
    </dependency>
  </dependencies>
</project>
EOF
  local t0; t0=$(now)
  note "fetching cassandra-all $CASSANDRA_VERSION and dependencies into $LIB_DIR (Maven) ..."
  if ! (cd "$work" && "$mvn" -B -q dependency:copy-dependencies -DincludeScope=runtime \
        -DoutputDirectory="$work/lib" >"$work/mvn.log" 2>&1); then
    tail -n 40 "$work/mvn.log" >&2 || true
    rm -rf "$work"
    die "Maven failed to fetch cassandra-all $CASSANDRA_VERSION (log above)"
  fi
  [[ -f $work/lib/cassandra-all-$CASSANDRA_VERSION.jar ]] || { rm -rf "$work"; die "Maven finished but cassandra-all-$CASSANDRA_VERSION.jar is missing"; }
  rm -rf "$LIB_DIR"
  mv "$work/lib" "$LIB_DIR"
  rm -rf "$work"
  date -u +%FT%TZ >"$MARKER"
  local jars=("$LIB_DIR"/*.jar)
  note "fetched ${#jars[@]} jars ($(du -sh "$LIB_DIR" | cut -f1)) in $(elapsed "$t0")s"
  exec 9>&-
}

# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------
java_bin() {
  local j=${JAVA:-java}
  command -v "$j" >/dev/null || die "java not found; install Java 17 (apt-get install openjdk-17-jre-headless) or run scripts/ci-install.sh"
  echo "$j"
}

# check_java_version JAVA: dies unless Java 17+; sets CDS_ARCHIVE (per JVM build) as a side effect.
check_java_version() {
  local j=$1 props v vm
  props=$("$j" -XshowSettings:properties -version 2>&1) || true
  v=$(awk -F' = ' '/java.specification.version/ {print $2; exit}' <<<"$props")
  vm=$(awk -F' = ' '/java.vm.version/ {print $2; exit}' <<<"$props")
  [[ -n $v ]] || die "cannot determine the version of $j"
  [[ ${v%%.*} -ge 17 ]] || die "Cassandra $CASSANDRA_VERSION needs Java 17 or newer here, $j is Java $v"
  CDS_ARCHIVE=$CACHE_DIR/cds-java-${vm//[^A-Za-z0-9._-]/_}.jsa
}

# Class data sharing: a dynamic CDS archive of the classes Cassandra loads at startup cuts JVM
# start time by ~40% on a busy 2-core machine. It is written by the first node that exits cleanly
# (-XX:ArchiveClassesAtExit, see stop_one) and used by every later start. A stale archive (other
# jars or JVM) is ignored by the JVM. CQLGATE_CASSANDRA_CDS=0 disables both.
CDS_ARCHIVE=""
cds_enabled() { [[ ${CQLGATE_CASSANDRA_CDS:-1} != 0 && -n $CDS_ARCHIVE ]]; }

# install_cds K: after node K exited cleanly, move the archive it dumped into the cache.
install_cds() {
  local nd; nd=$(node_dir "$1")
  [[ -s $nd/cds.jsa.tmp ]] || { rm -f "$nd/cds.jsa.tmp"; return 0; }
  local cds; cds=$(sed -n 's/^CDS_ARCHIVE=//p' "$nd/cds.env" 2>/dev/null | tr -d "'")
  if [[ -n $cds && ! -f $cds ]]; then
    mkdir -p "${cds%/*}"
    cp "$nd/cds.jsa.tmp" "$cds.$$" && mv -f "$cds.$$" "$cds" && note "wrote class data sharing archive $cds"
    # Archives of other JVM builds (e.g. before a JDK upgrade) are useless now.
    find "${cds%/*}" -maxdepth 1 -name 'cds-java-*.jsa' ! -name "${cds##*/}" -delete 2>/dev/null || true
  fi
  rm -f "$nd/cds.jsa.tmp" "$nd/cds.env"
}

# tcp_open ADDR PORT: true if something accepts TCP connections there.
# shellcheck disable=SC2016 # $1 and $2 are the inner bash's arguments, not this shell's
tcp_open() { timeout 2 bash -c 'exec 3<>"/dev/tcp/$1/$2"' _ "$1" "$2" 2>/dev/null; }

# cql_ready ADDR PORT: true if ADDR:PORT answers a native protocol v4 OPTIONS with SUPPORTED.
# Request: version 0x04, flags 0, stream 1, opcode 0x05 (OPTIONS), body length 0.
# Reply header: version 0x84, flags, stream 0x0001, opcode 0x06 (SUPPORTED).
cql_ready() {
  local hdr
  # shellcheck disable=SC2016 # $1 and $2 are the inner bash's arguments, not this shell's
  hdr=$(timeout 3 bash -c 'exec 3<>"/dev/tcp/$1/$2" || exit 1
        printf "\x04\x00\x00\x01\x05\x00\x00\x00\x00" >&3
        head -c 5 <&3 | od -An -tx1' _ "$1" "$2" 2>/dev/null) || return 1
  hdr=${hdr//[[:space:]]/}
  [[ $hdr == 8400000106 ]]
}

valid_ipv4() {
  local IFS=. a; read -r -a a <<<"$1"
  [[ ${#a[@]} -eq 4 ]] || return 1
  local o; for o in "${a[@]}"; do [[ $o =~ ^[0-9]{1,3}$ && $o -le 255 ]] || return 1; done
}

abs_path() { case $1 in /*) echo "$1";; *) echo "$PWD/$1";; esac; }

node_dir() { echo "$DIR/node$1"; }
pid_file() { echo "$DIR/node$1/pid"; }

# proc_alive PID: the process exists and is not a zombie. (A JVM whose main thread has exited
# shows state Z while its other threads still run: that still counts as alive.)
proc_alive() {
  local st
  st=$(awk '{sub(/^.*\) /, ""); print $1}' "/proc/$1/stat" 2>/dev/null) || return 1
  [[ -n $st ]] || return 1
  [[ $st != Z ]] && return 0
  local n; n=$(find "/proc/$1/task" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
  [[ $n -gt 1 ]]
}

# is_our_pid PID K: the process is a CassandraDaemon started for DIR/nodeK.
is_our_pid() {
  local pid=$1 k=$2 cmd
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  [[ -r /proc/$pid/cmdline ]] || return 1
  cmd=$(tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null) || return 1
  grep -qx 'org.apache.cassandra.service.CassandraDaemon' <<<"$cmd" || return 1
  grep -qxF -- "-Dcassandra.config=file://$(node_dir "$k")/cassandra.yaml" <<<"$cmd"
}

# running_pid K: prints the pid of our live node K, or fails.
running_pid() {
  local f pid; f=$(pid_file "$1")
  [[ -f $f ]] || return 1
  pid=$(<"$f")
  is_our_pid "$pid" "$1" && proc_alive "$pid" || return 1
  echo "$pid"
}

load_cluster() {
  [[ -f $DIR/cluster.env ]] || die "$DIR holds no cluster (no cluster.env); use start first"
  # shellcheck disable=SC1091
  source "$DIR/cluster.env"
  IFS=, read -r -a ADDRS <<<"$ADDRESSES"
  NODES=${#ADDRS[@]}
}

# ---------------------------------------------------------------------------------------------
# configuration
# ---------------------------------------------------------------------------------------------
write_yaml() {
  local k=$1 addr=$2 nd; nd=$(node_dir "$k")
  local authn=AllowAllAuthenticator authz=AllowAllAuthorizer rolem=CassandraRoleManager
  if [[ $AUTH == 1 ]]; then authn=PasswordAuthenticator; authz=CassandraAuthorizer; fi
  cat >"$nd/cassandra.yaml" <<EOF
# Generated by scripts/cassandra-local.sh (node $k of $CLUSTER_NAME). Rewritten by every "start".
cluster_name: '$CLUSTER_NAME'
num_tokens: 16
allocate_tokens_for_local_replication_factor: 3
partitioner: org.apache.cassandra.dht.Murmur3Partitioner
endpoint_snitch: SimpleSnitch
seed_provider:
  - class_name: org.apache.cassandra.locator.SimpleSeedProvider
    parameters:
      - seeds: "$SEED:$STORAGE_PORT"
listen_address: $addr
rpc_address: $addr
storage_port: $STORAGE_PORT
native_transport_port: $CQL_PORT
start_native_transport: true

data_file_directories:
  - $nd/data
commitlog_directory: $nd/commitlog
saved_caches_directory: $nd/saved_caches
hints_directory: $nd/hints
cdc_raw_directory: $nd/cdc_raw
commitlog_sync: periodic
commitlog_sync_period: 10000ms

authenticator: $authn
authorizer: $authz
role_manager: $rolem
network_authorizer: AllowAllNetworkAuthorizer

# Small-machine tuning (2 cores, several nodes per host); correctness-relevant defaults kept.
concurrent_reads: 8
concurrent_writes: 8
concurrent_counter_writes: 8
concurrent_compactors: 1
memtable_heap_space: 64MiB
memtable_offheap_space: 64MiB
key_cache_size: 8MiB
counter_cache_size: 0MiB
file_cache_size: 32MiB
networking_cache_size: 16MiB
index_summary_capacity: 8MiB
auto_snapshot: false
snapshot_before_compaction: false
materialized_views_enabled: false
sasi_indexes_enabled: false
user_defined_functions_enabled: false
cdc_enabled: false
EOF
  if [[ -n $YAML_EXTRA ]]; then
    { echo; echo "# --- appended from $YAML_EXTRA ---"; cat "$YAML_EXTRA"; } >>"$nd/cassandra.yaml"
  fi
}

write_logback() {
  local nd; nd=$(node_dir "$1")
  cat >"$nd/logback.xml" <<EOF
<configuration scan="false">
  <appender name="FILE" class="ch.qos.logback.core.FileAppender">
    <file>$nd/system.log</file>
    <append>true</append>
    <encoder>
      <pattern>%-5level [%thread] %date{ISO8601} %F:%L - %msg%n</pattern>
    </encoder>
  </appender>
  <logger name="org.apache.cassandra" level="INFO"/>
  <logger name="com.datastax" level="WARN"/>
  <logger name="io.netty" level="WARN"/>
  <root level="INFO">
    <appender-ref ref="FILE"/>
  </root>
</configuration>
EOF
}

# --add-exports/--add-opens of Cassandra 5.0's conf/jvm17-server.options (also needed by nodetool).
jvm_module_flags() {
  local m
  for m in java.base/jdk.internal.misc java.management.rmi/com.sun.jmx.remote.internal.rmi \
           java.rmi/sun.rmi.registry java.rmi/sun.rmi.server java.sql/java.sql java.base/java.lang.ref \
           jdk.unsupported/sun.misc jdk.compiler/com.sun.tools.javac.file jdk.attach/sun.tools.attach; do
    printf '%s\n' --add-exports "$m=ALL-UNNAMED"
  done
  for m in java.base/java.lang.module java.base/jdk.internal.loader java.base/jdk.internal.ref \
           java.base/jdk.internal.reflect java.base/jdk.internal.math java.base/jdk.internal.module \
           java.base/jdk.internal.util.jar jdk.management/com.sun.management.internal java.base/sun.nio.ch \
           java.base/java.io java.base/java.lang.reflect jdk.compiler/com.sun.tools.javac java.base/java.lang \
           java.base/java.util; do
    printf '%s\n' --add-opens "$m=ALL-UNNAMED"
  done
}

# JVM options for node K: the Java 17 flags plus what running from a plain classpath needs.
jvm_opts() {
  local k=$1 nd; nd=$(node_dir "$k")
  local jmx=$((JMX_BASE + k - 1))
  # ring_delay_ms: 100 ms on the seed (node 1). A joining node must hear from a seed within
  # 2 x ring_delay (at least 1 s; else "Unable to gossip with any peers") and again before it
  # bootstraps, after sleeping ring_delay ("Unable to contact any seeds"). Both fail easily with
  # 100 ms on a busy 2-core machine. 1 s costs about 1 s per joining node; a retry (see
  # start_one) uses 5 s.
  local ring_delay=100
  if [[ ${ADDRS[$((k - 1))]} != "$SEED" ]]; then
    ring_delay=${CQLGATE_CASSANDRA_RING_DELAY_MS:-1000}
    [[ ${START_ATTEMPT:-1} -eq 1 ]] || ring_delay=5000
  fi
  local o=(
    "-Xms$HEAP" "-Xmx$HEAP" -Xss256k -XX:+UseG1GC -XX:+PerfDisableSharedMem -XX:+ExitOnOutOfMemoryError
    -Djava.net.preferIPv4Stack=true -Djava.awt.headless=true
    -Djdk.attach.allowAttachSelf=true -Dio.netty.tryReflectionSetAccessible=true
  )
  local -a mods; mapfile -t mods < <(jvm_module_flags)
  o+=("${mods[@]}")
  rm -f "$nd/cds.jsa.tmp" "$nd/cds.env"
  if cds_enabled; then
    if [[ -f $CDS_ARCHIVE ]]; then
      o+=("-XX:SharedArchiveFile=$CDS_ARCHIVE" -Xlog:cds=off -Xlog:cds+dynamic=off)
    elif [[ $k == "${CDS_DUMP_NODE:-}" ]]; then
      o+=("-XX:ArchiveClassesAtExit=$nd/cds.jsa.tmp" -Xlog:cds=off -Xlog:cds+dynamic=off)
      echo "CDS_ARCHIVE='$CDS_ARCHIVE'" >"$nd/cds.env"
    fi
  fi
  o+=(
    "-Dcassandra.config=file://$nd/cassandra.yaml"
    "-Dlogback.configurationFile=$nd/logback.xml"
    "-Dcassandra.storagedir=$nd"
    "-Dcassandra.logdir=$nd"
    -Dcassandra-foreground=yes
    "-Dcassandra.jmx.local.port=$jmx"
    -Djava.rmi.server.hostname=127.0.0.1
    -Dcassandra.skip_wait_for_gossip_to_settle=0
    "-Dcassandra.ring_delay_ms=$ring_delay"
  )
  # Auth on several nodes: replicate system_auth to min(N,3) nodes from the start so that the
  # superuser can still log in while a node is down (RF 1 would put the role on one node only).
  # The default role is written at QUORUM, so node 1 alone cannot create it: its setup task
  # fails and reschedules itself after superuser_setup_delay_ms until node 2 has joined. With 0
  # that is a busy loop (>200k log lines in 30 s), hence 1 s there; 0 on a single node (login
  # works ~0.3 s after the CQL port opens).
  if [[ $AUTH == 1 && $NODES -gt 1 ]]; then
    o+=("-Dcassandra.system_auth.default_rf=$(( NODES < 3 ? NODES : 3 ))" -Dcassandra.superuser_setup_delay_ms=1000)
  else
    o+=(-Dcassandra.superuser_setup_delay_ms=0)
  fi
  # Extra JVM options (whitespace-separated), placed last so they override the ones above.
  # shellcheck disable=SC2206
  [[ -z ${CQLGATE_CASSANDRA_JVM_OPTS:-} ]] || o+=(${CQLGATE_CASSANDRA_JVM_OPTS})
  o+=(
    -cp "$LIB_DIR/*"
    org.apache.cassandra.service.CassandraDaemon
  )
  printf '%s\n' "${o[@]}"
}

# ---------------------------------------------------------------------------------------------
# start / wait
# ---------------------------------------------------------------------------------------------

# launch_node K: starts node K in the background (own session), writes its pid file.
launch_node() {
  local k=$1 nd java; nd=$(node_dir "$k"); java=$(java_bin)
  local -a opts; mapfile -t opts < <(jvm_opts "$k")
  mkdir -p "$nd"/{data,commitlog,saved_caches,hints,cdc_raw}
  rm -f "$nd/pid"
  echo "=== $(date -u +%FT%TZ) starting node $k" >>"$nd/stdout.log"
  # setsid: the node must not die with the caller's process group (e.g. Ctrl-C on a test run).
  # stdin/stdout/stderr and fd 9 are redirected so no pipe or lock of the caller stays open.
  local -a wrap=()
  # As root (CAP_IPC_LOCK) Cassandra's unconditional mlockall() succeeds: it pins the whole heap
  # (RSS = heap from the start) and costs ~2 s of startup. Drop that one capability so mlockall
  # fails harmlessly (one WARN line). CQLGATE_CASSANDRA_MLOCK=1 keeps it.
  if [[ ${CQLGATE_CASSANDRA_MLOCK:-0} != 1 && $(id -u) == 0 ]] && command -v setpriv >/dev/null; then
    wrap=(setpriv --bounding-set -ipc_lock --inh-caps -ipc_lock)
  fi
  # shellcheck disable=SC2016 # $$ and $1 are the inner bash's: its pid (exec keeps it) and the pid file
  setsid bash -c 'echo $$ >"$1"; shift; exec "$@"' _ "$nd/pid" \
    "${wrap[@]}" "$java" "${opts[@]}" </dev/null >>"$nd/stdout.log" 2>&1 9>&- &
  local i
  for i in $(seq 1 100); do [[ -s $nd/pid ]] && break; sleep 0.02; done
  [[ -s $nd/pid ]] || die "node $k: could not start java (see $nd/stdout.log)"
}

# wait_ready K ADDR T0: waits until the node's CQL port answers and prints the ready line.
# Returns 1 if the node process exited (pid file removed), 2 on timeout (node left running).
wait_ready() {
  local k=$1 addr=$2 t0=$3 nd pid deadline; nd=$(node_dir "$k")
  pid=$(<"$nd/pid")
  deadline=$(( $(date +%s) + TIMEOUT ))
  while :; do
    # Checked twice, half a second apart: once in a CI run a node that went on to serve was taken
    # for dead by a single check, and left running with no pid file.
    if { ! proc_alive "$pid" || ! is_our_pid "$pid" "$k"; } &&
       { sleep 0.5; ! proc_alive "$pid" || ! is_our_pid "$pid" "$k"; }; then
      # Exited (or exiting: wait for the last thread so that its ports are free again).
      local i; for ((i = 0; i < 300; i++)); do proc_alive "$pid" || break; sleep 0.1; done
      rm -f "$nd/pid"
      return 1
    fi
    if cql_ready "$addr" "$CQL_PORT"; then break; fi
    if (( $(date +%s) >= deadline )); then return 2; fi
    sleep 0.2
  done
  echo "node $k $addr:$CQL_PORT pid $pid ready in $(elapsed "$t0")s"
}

show_logs() {
  local nd; nd=$(node_dir "$1")
  note "last lines of $nd/system.log:"
  tail -n 40 "$nd/system.log" >&2 2>/dev/null || true
  note "last lines of $nd/stdout.log:"
  tail -n 15 "$nd/stdout.log" >&2 2>/dev/null || true
}

# check_ports_free K ADDR: refuse to start when someone else holds our ports.
check_ports_free() {
  local k=$1 addr=$2 p
  for p in "$CQL_PORT" "$STORAGE_PORT"; do
    if tcp_open "$addr" "$p"; then
      die "node $k: $addr:$p is already in use by a process that is not node $k of $DIR (another Cassandra? check with: ss -ltnp | grep ':$p'); stop it or choose other --addresses"
    fi
  done
  if tcp_open 127.0.0.1 "$((JMX_BASE + k - 1))"; then
    die "node $k: JMX port 127.0.0.1:$((JMX_BASE + k - 1)) is already in use; pass --jmx-base"
  fi
}

start_one() {
  local k=$1 addr=${ADDRS[$(( $1 - 1 ))]} pid t0
  if pid=$(running_pid "$k"); then
    t0=$(now)
    local rc=0; wait_ready "$k" "$addr" "$t0" >/dev/null || rc=$?
    if [[ $rc != 0 ]]; then
      show_logs "$k"
      die "node $k: already running (pid $pid) but $addr:$CQL_PORT does not answer CQL within ${TIMEOUT}s"
    fi
    echo "node $k $addr:$CQL_PORT pid $pid ready in 0.0s (already running)"
    return 0
  fi
  local attempt rc log_lines
  for attempt in 1 2 3; do
    START_ATTEMPT=$attempt
    check_ports_free "$k" "$addr"
    t0=$(now)
    log_lines=0
    [[ ! -f $(node_dir "$k")/system.log ]] || log_lines=$(wc -l <"$(node_dir "$k")/system.log")
    launch_node "$k"
    rc=0; wait_ready "$k" "$addr" "$t0" || rc=$?
    case $rc in
      0) return 0;;
      2) show_logs "$k"
         die "node $k: $addr:$CQL_PORT not answering CQL after ${TIMEOUT}s (node left running, pid $(<"$(node_dir "$k")/pid"); use stop)";;
    esac
    # A joining node that did not hear from the seed in time (see ring_delay in jvm_opts) on a
    # busy machine: retry with a longer ring delay.
    if tail -n +"$((log_lines + 1))" "$(node_dir "$k")/system.log" 2>/dev/null |
         grep -qE 'Unable to gossip with any peers|Unable to contact any seeds' && [[ $attempt -lt 3 ]]; then
      note "node $k: could not reach the seed in time (busy machine?); retrying ($attempt/3)"
      continue
    fi
    show_logs "$k"
    die "node $k ($addr) exited during startup (logs: $(node_dir "$k")/system.log, stdout.log)"
  done
}

# JMX listens on 127.0.0.1 whatever the node address, so clusters on different addresses need
# different JMX ports: 17000 + (last three octets mod 15000), below the ephemeral port range.
default_jmx_base() {
  local IFS=. a; read -r -a a <<<"$1"
  echo $(( 17000 + ((a[1] * 65536 + a[2] * 256 + a[3]) % 15000) ))
}

cmd_start() {
  local nodes="" addresses="" heap=512m auth=0 cname=cqlgate-test yextra="" timeout=${CQLGATE_CASSANDRA_START_TIMEOUT:-120} jmxbase="" owner=""
  DIR=$DEFAULT_DIR
  while [[ $# -gt 0 ]]; do
    case $1 in
      --nodes) nodes=${2:?}; shift 2;;
      --addresses) addresses=${2:?}; shift 2;;
      --dir) DIR=${2:?}; shift 2;;
      --heap) heap=${2:?}; shift 2;;
      --auth) auth=1; shift;;
      --cluster-name) cname=${2:?}; shift 2;;
      --yaml-extra) yextra=${2:?}; shift 2;;
      --timeout) timeout=${2:?}; shift 2;;
      --jmx-base) jmxbase=${2:?}; shift 2;;
      --owner-pid) owner=${2:?}; shift 2;;
      -h|--help) usage; exit 0;;
      *) die "start: unknown option '$1' (see --help)";;
    esac
  done
  DIR=$(abs_path "$DIR"); DIR=${DIR%/}
  if [[ -n $addresses ]]; then
    IFS=, read -r -a ADDRS <<<"$addresses"
    [[ -z $nodes || $nodes == "${#ADDRS[@]}" ]] || die "--nodes $nodes does not match ${#ADDRS[@]} --addresses"
  else
    nodes=${nodes:-1}
    [[ $nodes =~ ^[1-9][0-9]*$ && $nodes -le 250 ]] || die "--nodes must be 1..250"
    ADDRS=(); local i; for ((i = 1; i <= nodes; i++)); do ADDRS+=("127.0.10.$i"); done
  fi
  local a
  for a in "${ADDRS[@]}"; do
    valid_ipv4 "$a" || die "not an IPv4 address: '$a'"
    [[ $a == 127.* ]] || die "$a is not a loopback address (127.0.0.0/8); only loopback clusters are supported"
  done
  [[ $(printf '%s\n' "${ADDRS[@]}" | sort | uniq -d) == "" ]] || die "duplicate address in --addresses"
  [[ $timeout =~ ^[0-9]+$ ]] || die "--timeout must be whole seconds"
  [[ $heap =~ ^[0-9]+[kKmMgG]$ ]] || die "--heap must look like 512m or 1g"
  [[ -z $yextra || -r $yextra ]] || die "--yaml-extra file '$yextra' not readable"
  [[ -z $yextra ]] || yextra=$(abs_path "$yextra")
  [[ $cname =~ ^[A-Za-z0-9._-]+$ ]] || die "--cluster-name may only contain letters, digits, . _ -"
  NODES=${#ADDRS[@]}; SEED=${ADDRS[0]}; HEAP=$heap; AUTH=$auth; CLUSTER_NAME=$cname
  YAML_EXTRA=$yextra; TIMEOUT=$timeout
  JMX_BASE=${jmxbase:-$(default_jmx_base "$SEED")}
  [[ $JMX_BASE =~ ^[0-9]+$ && $JMX_BASE -gt 1024 && $((JMX_BASE + NODES)) -lt 65536 ]] || die "bad --jmx-base"
  local joined; joined=$(IFS=,; echo "${ADDRS[*]}")

  if [[ -f $DIR/cluster.env ]]; then
    local ADDRESSES="" CLUSTER_NAME_OLD=""
    CLUSTER_NAME_OLD=$(sed -n "s/^CLUSTER_NAME=//p" "$DIR/cluster.env" | tr -d "'\"")
    ADDRESSES=$(sed -n "s/^ADDRESSES=//p" "$DIR/cluster.env" | tr -d "'\"")
    if [[ $ADDRESSES != "$joined" || $CLUSTER_NAME_OLD != "$cname" ]]; then
      die "$DIR already holds cluster '$CLUSTER_NAME_OLD' on $ADDRESSES; run '$PROG clean --dir $DIR' first or use another --dir"
    fi
  elif [[ -e $DIR && -n $(ls -A "$DIR" 2>/dev/null) ]]; then
    die "$DIR exists, is not empty and holds no cluster.env; refusing to use it"
  fi

  # Refuse early (before writing anything) if someone else holds a node's ports.
  local k
  for ((k = 1; k <= NODES; k++)); do
    running_pid "$k" >/dev/null || check_ports_free "$k" "${ADDRS[$((k - 1))]}"
  done
  local java; java=$(java_bin); check_java_version "$java"
  cmd_fetch
  mkdir -p "$DIR"
  cat >"$DIR/cluster.env" <<EOF
# Written by $PROG start; read by stop/start-node/status/clean.
CLUSTER_NAME='$CLUSTER_NAME'
ADDRESSES='$joined'
SEED='$SEED'
HEAP='$HEAP'
AUTH='$AUTH'
YAML_EXTRA='$YAML_EXTRA'
JMX_BASE='$JMX_BASE'
EOF
  for ((k = 1; k <= NODES; k++)); do
    mkdir -p "$(node_dir "$k")"
    write_yaml "$k" "${ADDRS[$((k - 1))]}"
    write_logback "$k"
  done
  # The first node launched writes the class data sharing archive when it exits, if none exists.
  CDS_DUMP_NODE=1
  local t0; t0=$(now)
  for ((k = 1; k <= NODES; k++)); do
    start_one "$k"
  done
  [[ $NODES -eq 1 ]] || note "all $NODES nodes ready in $(elapsed "$t0")s"
  [[ -z $owner ]] || start_watchdog "$owner"
}

# start_watchdog PID: a detached loop that stops the cluster once PID is gone, so nodes do not
# outlive a test process that was killed (go test -timeout, SIGKILL) before its cleanup ran.
start_watchdog() {
  local owner=$1
  if ! [[ $owner =~ ^[0-9]+$ ]] || ! kill -0 "$owner" 2>/dev/null; then
    die "--owner-pid $owner: no such process"
  fi
  kill_watchdog
  # shellcheck disable=SC2016 # $1..$3 are the inner bash's arguments, expanded when the owner is gone
  setsid bash -c 'while kill -0 "$1" 2>/dev/null; do sleep 1; done
                  echo "$(date -u +%FT%TZ) owner pid $1 gone; stopping the cluster"
                  exec "$2" stop --dir "$3"' cqlgate-cassandra-watchdog "$owner" "$SELF" "$DIR" \
    </dev/null >>"$DIR/watchdog.log" 2>&1 9>&- &
  echo "$!" >"$DIR/watchdog.pid"
}

kill_watchdog() {
  local f=$DIR/watchdog.pid pid
  [[ -f $f ]] || return 0
  pid=$(<"$f")
  if [[ $pid =~ ^[0-9]+$ && -r /proc/$pid/cmdline ]] &&
     tr '\0' '\n' <"/proc/$pid/cmdline" | grep -qx cqlgate-cassandra-watchdog &&
     tr '\0' '\n' <"/proc/$pid/cmdline" | grep -qxF -- "$DIR"; then
    kill "$pid" 2>/dev/null || true
  fi
  rm -f "$f"
}

# warmup [--address A]: make sure the class data sharing archive exists by starting and stopping a
# throwaway single node (about 15-25 s, once per JVM build and jar set).
cmd_warmup() {
  local addr=127.0.99.1
  while [[ $# -gt 0 ]]; do
    case $1 in
      --address) addr=${2:?}; shift 2;;
      *) die "warmup: unknown option '$1'";;
    esac
  done
  local java; java=$(java_bin); check_java_version "$java"
  cds_enabled || { note "class data sharing disabled (CQLGATE_CASSANDRA_CDS=0); nothing to warm up"; return 0; }
  if [[ -f $CDS_ARCHIVE ]]; then return 0; fi
  cmd_fetch
  local d; d=$(mktemp -d /tmp/cqlgate-cassandra-warmup.XXXXXX)
  rmdir "$d"
  local rc=0
  ( "$SELF" start --dir "$d" --addresses "$addr" >/dev/null && "$SELF" stop --dir "$d" >/dev/null ) || rc=$?
  "$SELF" clean --dir "$d" >/dev/null 2>&1 || true
  [[ $rc == 0 ]] || die "warmup node failed to start (address $addr; pass --address to pick another)"
  [[ -f $CDS_ARCHIVE ]] || die "warmup did not produce $CDS_ARCHIVE"
}

cmd_start_node() {
  local k="" timeout=${CQLGATE_CASSANDRA_START_TIMEOUT:-120}
  DIR=$DEFAULT_DIR
  while [[ $# -gt 0 ]]; do
    case $1 in
      --node) k=${2:?}; shift 2;;
      --dir) DIR=${2:?}; shift 2;;
      --timeout) timeout=${2:?}; shift 2;;
      *) die "start-node: unknown option '$1'";;
    esac
  done
  [[ -n $k ]] || die "start-node needs --node K"
  DIR=$(abs_path "$DIR"); DIR=${DIR%/}
  TIMEOUT=$timeout
  load_cluster
  [[ $k =~ ^[0-9]+$ && $k -ge 1 && $k -le $NODES ]] || die "node $k does not exist (cluster has $NODES)"
  [[ -f $(node_dir "$k")/cassandra.yaml ]] || die "node $k has no cassandra.yaml; use start"
  local java; java=$(java_bin); check_java_version "$java"
  fetch_complete || cmd_fetch
  CDS_DUMP_NODE=$k
  start_one "$k"
}

# ---------------------------------------------------------------------------------------------
# stop / status / clean
# ---------------------------------------------------------------------------------------------
stop_one() {
  local k=$1 f pid i; f=$(pid_file "$k")
  [[ -f $f ]] || return 0
  pid=$(<"$f")
  if ! is_our_pid "$pid" "$k"; then
    note "node $k: pid $pid is not running (or not ours); removing stale pid file"
    rm -f "$f"; return 0
  fi
  kill -CONT "$pid" 2>/dev/null || true   # a paused (SIGSTOPped) node cannot handle SIGTERM
  kill -TERM "$pid" 2>/dev/null || true
  # Verified as ours above; from here on only liveness counts: an exiting JVM whose main thread
  # is gone has an empty /proc/PID/cmdline while other threads still run (and hold its ports).
  for ((i = 0; i < 300; i++)); do
    proc_alive "$pid" || break
    sleep 0.1
  done
  if proc_alive "$pid"; then
    note "node $k: pid $pid still alive 30s after SIGTERM, sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do proc_alive "$pid" || break; sleep 0.1; done
    rm -f "$(node_dir "$k")/cds.jsa.tmp"   # possibly half-written
  fi
  install_cds "$k"
  rm -f "$f"
  echo "node $k stopped (pid $pid)"
}

parse_dir_node() {
  NODE=""; DIR=$DEFAULT_DIR; EXTRA_ARGS=()
  while [[ $# -gt 0 ]]; do
    case $1 in
      --dir) DIR=${2:?}; shift 2;;
      --node) NODE=${2:?}; shift 2;;
      --) shift; EXTRA_ARGS=("$@"); break;;
      *) die "unknown option '$1' (see --help)";;
    esac
  done
  DIR=$(abs_path "$DIR"); DIR=${DIR%/}
}

cmd_stop() {
  parse_dir_node "$@"
  if [[ ! -f $DIR/cluster.env ]]; then note "no cluster in $DIR; nothing to stop"; return 0; fi
  load_cluster
  if [[ -n $NODE ]]; then
    [[ $NODE =~ ^[0-9]+$ && $NODE -ge 1 && $NODE -le $NODES ]] || die "node $NODE does not exist (cluster has $NODES)"
    stop_one "$NODE"; return 0
  fi
  local k
  # Stop in reverse order; the seed last.
  for ((k = NODES; k >= 1; k--)); do stop_one "$k"; done
  kill_watchdog
}

cmd_status() {
  parse_dir_node "$@"
  if [[ ! -f $DIR/cluster.env ]]; then echo "no cluster in $DIR"; return 0; fi
  load_cluster
  local k addr pid state cql
  for ((k = 1; k <= NODES; k++)); do
    addr=${ADDRS[$((k - 1))]}
    if pid=$(running_pid "$k"); then
      state=running
      [[ $(awk '{sub(/^.*\) /, ""); print $1}' "/proc/$pid/stat") == T ]] && state=paused
      cql=no; cql_ready "$addr" "$CQL_PORT" && cql=yes
      printf 'node %d %s:%d pid %s %s cql=%s\n' "$k" "$addr" "$CQL_PORT" "$pid" "$state" "$cql"
    else
      printf 'node %d %s:%d pid - stopped\n' "$k" "$addr" "$CQL_PORT"
    fi
  done
}

cmd_nodetool() {
  parse_dir_node "$@"
  load_cluster
  local k=${NODE:-1} java; java=$(java_bin)
  fetch_complete || die "jars not fetched; run $PROG fetch"
  [[ -f $DIR/logback-tools.xml ]] || cat >"$DIR/logback-tools.xml" <<'EOF'
<configuration>
  <appender name="STDERR" class="ch.qos.logback.core.ConsoleAppender">
    <target>System.err</target>
    <encoder><pattern>%-5level %logger{20} - %msg%n</pattern></encoder>
  </appender>
  <root level="WARN"><appender-ref ref="STDERR"/></root>
</configuration>
EOF
  local -a mods; mapfile -t mods < <(jvm_module_flags)
  exec "$java" -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 "${mods[@]}" \
    -Dcassandra.logdir="$DIR" -Dlogback.configurationFile="$DIR/logback-tools.xml" -cp "$LIB_DIR/*" org.apache.cassandra.tools.NodeTool -h 127.0.0.1 -p "$((JMX_BASE + k - 1))" "${EXTRA_ARGS[@]}"
}

cmd_clean() {
  parse_dir_node "$@"
  [[ -e $DIR ]] || return 0
  case $DIR in /|/tmp|/home|/root|"$HOME") die "refusing to remove $DIR";; esac
  if [[ ! -f $DIR/cluster.env ]]; then
    [[ -z $(ls -A "$DIR" 2>/dev/null) ]] || die "$DIR holds no cluster.env; refusing to remove it"
    rmdir "$DIR"; return 0
  fi
  cmd_stop --dir "$DIR"
  rm -rf "$DIR"
  echo "removed $DIR"
}

main() {
  [[ $# -gt 0 ]] || { usage >&2; exit 2; }
  local cmd=$1; shift
  case $cmd in
    fetch) cmd_fetch "$@";;
    start) cmd_start "$@";;
    start-node) cmd_start_node "$@";;
    stop) cmd_stop "$@";;
    status) cmd_status "$@";;
    nodetool) cmd_nodetool "$@";;
    warmup) cmd_warmup "$@";;
    clean) cmd_clean "$@";;
    -h|--help|help) usage;;
    *) usage >&2; die "unknown command '$cmd'";;
  esac
}

main "$@"
