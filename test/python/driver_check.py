#!/usr/bin/env python3
"""End-to-end check of cqlgate with the DataStax/Apache Python driver.

Run it against a running proxy:

    pip install cassandra-driver lz4          # psutil is optional
    python3 driver_check.py --host 127.0.0.1 --port 9042 \
        --forbidden 127.0.12.1:9042

The driver is used with its default settings (Cluster([host], port=port)) and
once more with compression='lz4'. Every check is run even when an earlier one
failed; the last line of output is exactly "N passed, M failed" and the exit
status is non-zero when a check failed (2 when the driver is not installed).

--forbidden lists the Cassandra nodes behind the proxy (HOST or HOST:PORT,
comma-separated). The proxy presents itself as the only node, so the driver
must never connect to one of them: every socket.connect() of the process is
recorded, and at the end the process's open TCP connections are listed (with
psutil if installed, otherwise from /proc/self/net/tcp{,6} and /proc/self/fd).

--debug turns on the driver's debug logging (to stderr).
"""

import argparse
import ipaddress
import logging
import os
import socket
import sys
import threading
import time
import traceback
import uuid

# Record every outgoing connection attempt of this process before the driver
# creates any socket. The driver's reactors (libev, asyncore, asyncio) all
# connect through socket.socket.connect.
_CONNECT_LOG = []
_CONNECT_LOCK = threading.Lock()
_orig_connect = socket.socket.connect
_orig_connect_ex = socket.socket.connect_ex


def _record(sock, address):
    try:
        if sock.family in (socket.AF_INET, socket.AF_INET6) and isinstance(address, tuple):
            with _CONNECT_LOCK:
                _CONNECT_LOG.append((str(address[0]), int(address[1])))
    except Exception:  # never break the driver
        pass


def _connect(self, address):
    _record(self, address)
    return _orig_connect(self, address)


def _connect_ex(self, address):
    _record(self, address)
    return _orig_connect_ex(self, address)


socket.socket.connect = _connect
socket.socket.connect_ex = _connect_ex

try:
    import cassandra
    from cassandra import ConsistencyLevel, InvalidRequest, ProtocolVersion
    from cassandra.cluster import Cluster
    from cassandra.protocol import SyntaxException
    from cassandra.query import BatchStatement, BatchType, SimpleStatement
    from cassandra.concurrent import execute_concurrent
except ImportError as e:  # pragma: no cover - reported to the Go test
    print("cassandra-driver is not installed (%s); install it with: "
          "python3 -m pip install cassandra-driver lz4" % e)
    print("0 passed, 1 failed")
    sys.exit(2)

try:
    import lz4  # noqa: F401  (the driver imports lz4.block itself)
    HAVE_LZ4 = True
except ImportError:
    HAVE_LZ4 = False

try:
    import psutil
except ImportError:
    psutil = None

CONNECT_TIMEOUT = 15
REQUEST_TIMEOUT = 30


class CheckFailed(Exception):
    pass


def expect(cond, msg):
    if not cond:
        raise CheckFailed(msg)


def expect_eq(got, want, what):
    if got != want:
        raise CheckFailed("%s: got %r, want %r" % (what, _short(got), _short(want)))


def _short(v):
    if isinstance(v, (bytes, bytearray)) and len(v) > 64:
        return "<%d bytes %s...>" % (len(v), bytes(v[:16]).hex())
    return v


def resolve_ip(host):
    """First IP address of host (literal IPs are returned unchanged)."""
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        return socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)[0][4][0]


def norm_ip(ip):
    """Canonical text of ip; IPv4-mapped IPv6 becomes plain IPv4."""
    a = ipaddress.ip_address(ip.split("%")[0])
    if a.version == 6 and a.ipv4_mapped is not None:
        a = a.ipv4_mapped
    return str(a)


def parse_forbidden(spec):
    """'h1,h2:9042,[::1]:9042' -> [(ip, port or None)]."""
    out = []
    for item in (spec or "").split(","):
        item = item.strip()
        if not item:
            continue
        host, port = item, None
        if item.startswith("["):
            host, _, rest = item[1:].partition("]")
            if rest.startswith(":"):
                port = int(rest[1:])
        elif item.count(":") == 1:
            host, p = item.split(":")
            port = int(p)
        out.append((norm_ip(resolve_ip(host)), port))
    return out


def matches_forbidden(ip, port, forbidden):
    try:
        ip = norm_ip(ip)
    except ValueError:
        return False
    return any(ip == fip and (fport is None or fport == port) for fip, fport in forbidden)


# ---------------------------------------------------------------------------
# Open TCP connections of this process.


def _proc_hex_addr(text):
    hexip, hexport = text.split(":")
    port = int(hexport, 16)
    raw = bytes.fromhex(hexip)
    if len(raw) == 4:
        ip = socket.inet_ntop(socket.AF_INET, raw[::-1])
    else:  # four little-endian 32-bit words
        words = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
        ip = socket.inet_ntop(socket.AF_INET6, words)
    return ip, port


_TCP_STATES = {
    "01": "ESTABLISHED", "02": "SYN_SENT", "03": "SYN_RECV", "04": "FIN_WAIT1",
    "05": "FIN_WAIT2", "06": "TIME_WAIT", "07": "CLOSE", "08": "CLOSE_WAIT",
    "09": "LAST_ACK", "0A": "LISTEN", "0B": "CLOSING",
}


def own_tcp_connections():
    """[(remote_ip, remote_port, state)] of this process's TCP sockets, and
    the method used."""
    if psutil is not None:
        proc = psutil.Process()
        conns = proc.net_connections(kind="tcp") if hasattr(proc, "net_connections") \
            else proc.connections(kind="tcp")
        return [(c.raddr.ip, c.raddr.port, c.status) for c in conns if c.raddr], "psutil"
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink("/proc/self/fd/" + fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:["):-1])
    out = []
    for name in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
        try:
            with open(name) as f:
                lines = f.read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 10 or fields[9] not in inodes:
                continue
            ip, port = _proc_hex_addr(fields[2])
            if port == 0:
                continue
            out.append((ip, port, _TCP_STATES.get(fields[3], fields[3])))
    return out, "/proc/self/net/tcp{,6} + /proc/self/fd"


# ---------------------------------------------------------------------------
# The checks.


class Checker(object):
    def __init__(self, args):
        self.args = args
        self.host = args.host
        self.port = args.port
        self.host_ip = norm_ip(resolve_ip(args.host))
        self.forbidden = parse_forbidden(args.forbidden)
        suffix = uuid.uuid4().hex[:12]
        self.ks = "cqlgate_py_" + suffix
        self.cluster = None
        self.session = None
        self.lz4_cluster = None
        self.lz4_session = None
        self.passed = []
        self.failed = []
        self.sightings = {}  # (ip, port) of a forbidden connection -> first check it was seen after

    # -- bookkeeping --

    def run(self, name, fn):
        start = time.monotonic()
        try:
            info = fn()
        except Exception as e:  # noqa: BLE001 - every failure is reported
            dt = time.monotonic() - start
            detail = "%s: %s" % (type(e).__name__, e)
            if not isinstance(e, CheckFailed):
                detail += "\n" + "".join(traceback.format_exception(type(e), e, e.__traceback__))
            self.failed.append((name, detail))
            print("FAIL  %-40s %6.2fs  %s" % (name, dt, detail.rstrip().replace("\n", "\n      ")), flush=True)
        else:
            dt = time.monotonic() - start
            self.passed.append(name)
            print("ok    %-40s %6.2fs%s" % (name, dt, ("  " + info) if info else ""), flush=True)
        self._look_for_forbidden(name)

    def _look_for_forbidden(self, after):
        try:
            conns, _ = own_tcp_connections()
        except Exception:
            return
        for ip, port, state in conns:
            if matches_forbidden(ip, port, self.forbidden):
                self.sightings.setdefault("%s:%d" % (ip, port), "%s (%s)" % (after, state))

    def need_session(self):
        if self.session is None:
            raise CheckFailed("no session (connect failed)")
        return self.session

    def need_lz4(self):
        if self.lz4_session is None:
            raise CheckFailed("no lz4 session (lz4 connect failed)")
        return self.lz4_session

    def q(self, table):
        return "%s.%s" % (self.ks, table)

    # -- default cluster --

    def check_connect(self):
        self.cluster = Cluster([self.host], port=self.port, connect_timeout=CONNECT_TIMEOUT)
        self.session = self.cluster.connect()
        self.session.default_timeout = REQUEST_TIMEOUT
        row = self.session.execute("SELECT release_version, cluster_name FROM system.local").one()
        expect(row is not None, "system.local returned no row")
        return "release_version=%s cluster_name=%s driver=%s" % (
            row.release_version, row.cluster_name, cassandra.__version__)

    def check_protocol_version(self):
        expect(self.cluster is not None, "not connected")
        expect_eq(self.cluster.protocol_version, ProtocolVersion.V5, "cluster.protocol_version")
        for conn in self._connections(self.cluster):
            expect_eq(conn.protocol_version, ProtocolVersion.V5, "protocol_version of %s" % conn.endpoint)
        return "v%d" % self.cluster.protocol_version

    def check_single_host(self):
        expect(self.cluster is not None, "not connected")
        hosts = list(self.cluster.metadata.all_hosts())
        desc = ", ".join("%s (endpoint %s, dc %s, up %s)" % (h.address, h.endpoint, h.datacenter, h.is_up)
                         for h in hosts)
        expect_eq(len(hosts), 1, "number of hosts in metadata [%s]" % desc)
        h = hosts[0]
        expect_eq(norm_ip(str(h.address)), self.host_ip, "host address")
        expect_eq(norm_ip(str(h.endpoint.address)), self.host_ip, "host endpoint address")
        expect_eq(h.endpoint.port, self.port, "host endpoint port")
        expect(h.is_up, "host %s is not up" % h.address)
        tm = self.cluster.metadata.token_map
        if tm is not None:
            owners = set(tm.token_to_host_owner.values())
            expect(owners <= {h}, "token map owners: %r" % owners)
        peers = list(self.need_session().execute("SELECT peer FROM system.peers"))
        expect_eq(len(peers), 0, "rows in system.peers")
        for conn in self._connections(self.cluster):
            expect_eq(norm_ip(str(conn.endpoint.address)), self.host_ip, "connection endpoint %s" % conn.endpoint)
        return desc

    def check_create_schema(self):
        s = self.need_session()
        s.execute("CREATE KEYSPACE %s WITH replication = "
                  "{'class': 'SimpleStrategy', 'replication_factor': 1}" % self.ks)
        s.execute("CREATE TABLE %s (k int PRIMARY KEY, v text, b blob)" % self.q("kv"))
        s.execute("CREATE TABLE %s (p int, c int, v text, PRIMARY KEY (p, c))" % self.q("rows"))
        s.execute("CREATE TABLE %s (k text PRIMARY KEY, n counter)" % self.q("counters"))
        s.execute("CREATE TABLE %s (k int PRIMARY KEY, v text)" % self.q("lwt"))
        return "keyspace %s" % self.ks

    def check_prepared(self):
        s = self.need_session()
        ins = s.prepare("INSERT INTO %s (k, v) VALUES (?, ?)" % self.q("kv"))
        sel = s.prepare("SELECT k, v FROM %s WHERE k = ?" % self.q("kv"))
        for i in range(20):
            s.execute(ins, (i, "value-%d" % i))
        for i in range(20):
            row = s.execute(sel, (i,)).one()
            expect(row is not None, "no row for k=%d" % i)
            expect_eq((row.k, row.v), (i, "value-%d" % i), "row k=%d" % i)
        # Named-marker binding and a missing row.
        row = s.execute(sel, {"k": 7}).one()
        expect_eq(row.v, "value-7", "named bind k=7")
        expect(s.execute(sel, (10_000,)).one() is None, "k=10000 should not exist")
        # Preparing the same text again returns the same id.
        again = s.prepare("SELECT k, v FROM %s WHERE k = ?" % self.q("kv"))
        expect_eq(again.query_id, sel.query_id, "query id of re-prepared statement")
        # Token-aware routing: the token map built from the proxy's
        # system.local makes the proxy the replica of every key.
        hosts = list(self.cluster.metadata.all_hosts())
        bound = sel.bind((7,))
        replicas = self.cluster.metadata.get_replicas(self.ks, bound.routing_key)
        expect_eq(list(replicas), hosts, "replicas of k=7")
        return "query_id=%s" % sel.query_id.hex()

    def check_batch(self):
        s = self.need_session()
        ins = s.prepare("INSERT INTO %s (p, c, v) VALUES (?, ?, ?)" % self.q("rows"))
        b = BatchStatement(batch_type=BatchType.LOGGED)
        for c in range(10):
            b.add(ins, (1, c, "b%d" % c))
        b.add(SimpleStatement("INSERT INTO %s (p, c, v) VALUES (%%s, %%s, %%s)" % self.q("rows")), (1, 10, "b10"))
        s.execute(b)
        ub = BatchStatement(batch_type=BatchType.UNLOGGED)
        for c in range(5):
            ub.add(ins, (2, c, "u%d" % c))
        s.execute(ub)
        rows = list(s.execute("SELECT c, v FROM %s WHERE p = 1" % self.q("rows")))
        expect_eq([(r.c, r.v) for r in rows], [(c, "b%d" % c) for c in range(11)], "logged batch rows")
        rows = list(s.execute("SELECT c, v FROM %s WHERE p = 2" % self.q("rows")))
        expect_eq(len(rows), 5, "unlogged batch rows")
        return "11 + 5 rows"

    def _fill_paging(self, s):
        # 300 single-partition batches of 10 rows, 32 in flight at a time
        # (many concurrent streams on few connections).
        ins = s.prepare("INSERT INTO %s (p, c, v) VALUES (?, ?, ?)" % self.q("rows"))
        batches = []
        for start in range(0, 3000, 10):
            b = BatchStatement(batch_type=BatchType.UNLOGGED)
            for c in range(start, start + 10):
                b.add(ins, (100, c, "r%d" % c))
            batches.append(b)
        results = execute_concurrent(s, [(b, ()) for b in batches], concurrency=32, raise_on_first_error=True)
        expect(all(r.success for r in results), "some inserts failed")

    def _page_through(self, s, stmt, params=None):
        rs = s.execute(stmt, params)
        pages, seen = 1, []
        while True:
            seen.extend(rs.current_rows)
            if not rs.has_more_pages:
                break
            expect(len(rs.current_rows) <= 100, "page of %d rows > fetch_size" % len(rs.current_rows))
            rs.fetch_next_page()
            pages += 1
        return pages, seen

    def check_paging(self):
        s = self.need_session()
        self._fill_paging(s)
        stmt = SimpleStatement("SELECT c, v FROM %s WHERE p = 100" % self.q("rows"), fetch_size=100)
        pages, seen = self._page_through(s, stmt)
        expect_eq(len(seen), 3000, "rows seen")
        expect_eq([r.c for r in seen], list(range(3000)), "clustering order")
        expect(pages >= 30, "only %d pages" % pages)
        # Prepared statement paging with the implicit iterator.
        sel = s.prepare("SELECT c FROM %s WHERE p = ?" % self.q("rows"))
        sel.fetch_size = 100
        n = sum(1 for _ in s.execute(sel, (100,)))
        expect_eq(n, 3000, "rows via prepared iterator")
        # Resuming from a saved paging state.
        rs = s.execute(stmt)
        state = rs.paging_state
        expect(state is not None, "no paging_state after first page")
        rs2 = s.execute(stmt, paging_state=state)
        expect_eq(rs2.current_rows[0].c, 100, "first row after resuming from paging_state")
        return "%d pages of <=100 rows" % pages

    def _blob_roundtrip(self, s, key, data):
        ins = s.prepare("INSERT INTO %s (k, b) VALUES (?, ?)" % self.q("kv"))
        sel = s.prepare("SELECT b FROM %s WHERE k = ?" % self.q("kv"))
        s.execute(ins, (key, data))
        row = s.execute(sel, (key,)).one()
        expect(row is not None, "blob row missing")
        expect_eq(len(row.b), len(data), "blob length")
        expect(row.b == data, "blob content differs")

    def check_blob(self):
        s = self.need_session()
        data = os.urandom(1 << 20)
        self._blob_roundtrip(s, 1000, data)
        return "1 MiB random"

    def check_use_keyspace(self):
        s = self.need_session()
        s.execute("USE %s" % self.ks)
        expect_eq(s.keyspace, self.ks, "session.keyspace")
        # Run it enough times to hit every pooled connection.
        for _ in range(10):
            row = s.execute("SELECT v FROM kv WHERE k = 3").one()
            expect(row is not None and row.v == "value-3", "unqualified SELECT returned %r" % (row,))
        sel = s.prepare("SELECT v FROM kv WHERE k = ?")
        expect_eq(s.execute(sel, (4,)).one().v, "value-4", "unqualified prepared SELECT")
        s.execute("INSERT INTO kv (k, v) VALUES (5000, 'unqualified')")
        expect_eq(s.execute(sel, (5000,)).one().v, "unqualified", "unqualified INSERT")
        # Another session on the same cluster with a keyspace given at connect.
        s2 = self.cluster.connect(self.ks)
        try:
            expect_eq(s2.execute("SELECT v FROM kv WHERE k = 3").one().v, "value-3", "connect(keyspace) session")
        finally:
            s2.shutdown()
        return ""

    def check_errors(self):
        s = self.need_session()
        try:
            s.execute("SELEC * FROM nowhere")
        except SyntaxException as e:
            syn = str(e)
        except Exception as e:
            raise CheckFailed("syntax error raised %s: %s, want SyntaxException" % (type(e).__name__, e))
        else:
            raise CheckFailed("syntax error did not raise")
        try:
            s.execute("SELECT * FROM %s.no_such_table" % self.ks)
        except InvalidRequest as e:
            inv = str(e)
        except Exception as e:
            raise CheckFailed("missing table raised %s: %s, want InvalidRequest" % (type(e).__name__, e))
        else:
            raise CheckFailed("missing table did not raise")
        expect("no_such_table" in inv, "InvalidRequest message does not name the table: %s" % inv)
        quiet = logging.getLogger("cassandra.cluster")
        level = quiet.level
        quiet.setLevel(logging.CRITICAL)  # the driver logs the expected failure with a traceback
        try:
            s.prepare("SELECT * FROM %s.no_such_table WHERE k = ?" % self.ks)
        except InvalidRequest:
            pass
        else:
            raise CheckFailed("preparing against a missing table did not raise InvalidRequest")
        finally:
            quiet.setLevel(level)
        # The connection is still usable afterwards.
        expect(s.execute("SELECT release_version FROM system.local").one() is not None, "query after errors")
        return "%s | %s" % (syn[:80], inv[:80])

    def _wait_table(self, cluster, table, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ksm = cluster.metadata.keyspaces.get(self.ks)
            if ksm is not None and table in ksm.tables:
                return True
            time.sleep(0.1)
        return False

    def check_schema_metadata(self):
        s = self.need_session()
        s.execute("CREATE TABLE %s (id uuid PRIMARY KEY, n int)" % self.q("meta_direct"))
        how = "automatically"
        if not self._wait_table(self.cluster, "meta_direct", 10):
            self.cluster.refresh_schema_metadata(max_schema_agreement_wait=10)
            expect(self._wait_table(self.cluster, "meta_direct", 1),
                   "table meta_direct missing from metadata even after refresh_schema_metadata")
            how = "only after refresh_schema_metadata"
        tm = self.cluster.metadata.keyspaces[self.ks].tables["meta_direct"]
        expect_eq(sorted(tm.columns), ["id", "n"], "columns of meta_direct")
        expect_eq([c.name for c in tm.partition_key], ["id"], "partition key of meta_direct")
        expect(self.cluster.metadata.keyspaces[self.ks].replication_strategy is not None, "replication strategy")
        # An explicit table refresh must work too.
        self.cluster.refresh_table_metadata(self.ks, "meta_direct")
        expect("meta_direct" in self.cluster.metadata.keyspaces[self.ks].tables, "after refresh_table_metadata")
        return how

    def check_schema_event_other_client(self):
        # A table created through one client must show up in the other
        # client's metadata through a pushed SCHEMA_CHANGE event.
        s = self.need_session()
        self.need_lz4()
        self.lz4_session.execute("CREATE TABLE %s (k int PRIMARY KEY)" % self.q("meta_event"))
        t0 = time.monotonic()
        ok = self._wait_table(self.cluster, "meta_event", 10)
        expect(ok, "table created by another client did not appear in metadata within 10 s "
                   "(no SCHEMA_CHANGE event delivered?)")
        s.execute("SELECT * FROM %s" % self.q("meta_event"))
        return "seen after %.2fs" % (time.monotonic() - t0)

    def check_lwt(self):
        s = self.need_session()
        rs = s.execute("INSERT INTO %s (k, v) VALUES (1, 'first') IF NOT EXISTS" % self.q("lwt"))
        expect(rs.was_applied, "first INSERT IF NOT EXISTS not applied: %r" % (rs.one(),))
        rs = s.execute("INSERT INTO %s (k, v) VALUES (1, 'second') IF NOT EXISTS" % self.q("lwt"))
        expect(not rs.was_applied, "second INSERT IF NOT EXISTS applied")
        expect_eq(rs.one().v, "first", "existing value returned by failed LWT")
        ins = s.prepare("INSERT INTO %s (k, v) VALUES (?, ?) IF NOT EXISTS" % self.q("lwt"))
        ins.serial_consistency_level = ConsistencyLevel.LOCAL_SERIAL
        expect(s.execute(ins, (2, "p")).was_applied, "prepared LWT not applied")
        expect(not s.execute(ins, (2, "p")).was_applied, "prepared LWT applied twice")
        rs = s.execute("UPDATE %s SET v = 'third' WHERE k = 1 IF v = 'first'" % self.q("lwt"))
        expect(rs.was_applied, "conditional UPDATE not applied")
        rs = s.execute("UPDATE %s SET v = 'fourth' WHERE k = 1 IF v = 'first'" % self.q("lwt"))
        expect(not rs.was_applied, "stale conditional UPDATE applied")
        row = s.execute(SimpleStatement("SELECT v FROM %s WHERE k = 1" % self.q("lwt"),
                                        consistency_level=ConsistencyLevel.SERIAL)).one()
        expect_eq(row.v, "third", "SERIAL read")
        return ""

    def check_counters(self):
        s = self.need_session()
        upd = s.prepare("UPDATE %s SET n = n + ? WHERE k = ?" % self.q("counters"))
        for _ in range(5):
            s.execute(upd, (3, "a"))
        s.execute("UPDATE %s SET n = n - 4 WHERE k = 'a'" % self.q("counters"))
        b = BatchStatement(batch_type=BatchType.COUNTER)
        b.add(upd, (10, "b"))
        b.add(upd, (1, "b"))
        s.execute(b)
        got = {r.k: r.n for r in s.execute("SELECT k, n FROM %s" % self.q("counters"))}
        expect_eq(got, {"a": 11, "b": 11}, "counter values")
        return ""

    # -- lz4 cluster --

    def check_lz4_connect(self):
        expect(HAVE_LZ4, "the lz4 package is not installed (python3 -m pip install lz4)")
        self.lz4_cluster = Cluster([self.host], port=self.port, compression="lz4",
                                   connect_timeout=CONNECT_TIMEOUT)
        self.lz4_session = self.lz4_cluster.connect()
        self.lz4_session.default_timeout = REQUEST_TIMEOUT
        expect_eq(self.lz4_cluster.protocol_version, ProtocolVersion.V5, "lz4 cluster.protocol_version")
        from cassandra.connection import locally_supported_compressions
        want = locally_supported_compressions.get("lz4")
        expect(want is not None, "driver has no lz4 compressor")
        conns = self._connections(self.lz4_cluster)
        expect(conns, "no open connections")
        for conn in conns:
            ctype = getattr(conn, "_compression_type", None)
            if ctype is not None:
                expect_eq(ctype, "lz4", "negotiated compression of %s" % conn.endpoint)
            expect(conn.compressor is want[0], "compressor of %s is %r, want lz4" % (conn.endpoint, conn.compressor))
            codec = getattr(conn, "_segment_codec", None)
            if codec is not None and hasattr(codec, "compression"):
                expect(codec.compression, "v5 segment codec of %s is not compressing" % conn.endpoint)
        hosts = list(self.lz4_cluster.metadata.all_hosts())
        expect_eq([norm_ip(str(h.address)) for h in hosts], [self.host_ip], "lz4 cluster hosts")
        return "v%d, %d connection(s) with compression %s" % (
            self.lz4_cluster.protocol_version, len(conns), getattr(conns[0], "_compression_type", "lz4"))

    def check_lz4_queries(self):
        s = self.need_lz4()
        # Compressible and incompressible 1 MiB blobs.
        self._blob_roundtrip(s, 2000, (b"cqlgate-" * (1 << 17))[: 1 << 20])
        self._blob_roundtrip(s, 2001, os.urandom(1 << 20))
        # Paging over the 3,000 rows written by the default cluster.
        stmt = SimpleStatement("SELECT c, v FROM %s WHERE p = 100" % self.q("rows"), fetch_size=100)
        pages, seen = self._page_through(s, stmt)
        expect_eq(len(seen), 3000, "rows seen with lz4")
        expect_eq([r.v for r in seen[:3]], ["r0", "r1", "r2"], "first rows with lz4")
        sel = s.prepare("SELECT v FROM %s WHERE k = ?" % self.q("kv"))
        expect_eq(s.execute(sel, (3,)).one().v, "value-3", "prepared SELECT with lz4")
        try:
            s.execute("SELEC 1")
        except SyntaxException:
            pass
        else:
            raise CheckFailed("syntax error with lz4 did not raise SyntaxException")
        return "2 blobs, %d pages" % pages

    # -- connections --

    @staticmethod
    def _connections(cluster):
        out = []
        for holder in cluster.get_connection_holders():
            for conn in holder.get_connections():
                if conn is not None and not conn.is_closed:
                    out.append(conn)
        return out

    def check_no_forbidden_connections(self):
        expect(self.forbidden, "no --forbidden addresses given")
        conns, method = own_tcp_connections()
        bad = ["%s:%d %s" % c for c in conns if matches_forbidden(c[0], c[1], self.forbidden)]
        with _CONNECT_LOCK:
            attempts = list(_CONNECT_LOG)
        bad_attempts = sorted(set(a for a in attempts if matches_forbidden(a[0], a[1], self.forbidden)))
        problems = []
        if bad:
            problems.append("%d open connection(s) to forbidden addresses: %s" % (len(bad), ", ".join(bad)))
        if self.sightings:
            problems.append("forbidden connection(s) first seen after check: %s" % ", ".join(
                "%s after %s" % kv for kv in sorted(self.sightings.items())))
        if bad_attempts:
            problems.append("connect() to forbidden address(es): %s" % ", ".join("%s:%d" % a for a in bad_attempts))
        expect(not problems, "; ".join(problems))
        to_proxy = [c for c in conns if norm_ip(c[0]) == self.host_ip and c[1] == self.port]
        expect(to_proxy, "no open connection to the proxy found via %s (%r) - the check sees nothing" %
               (method, conns))
        targets = sorted(set("%s:%d" % a for a in attempts))
        return "via %s: %d open TCP connection(s), %d to the proxy; connect() targets: %s" % (
            method, len(conns), len(to_proxy), ", ".join(targets))

    def cleanup(self):
        if self.session is not None:
            try:
                self.session.execute("DROP KEYSPACE IF EXISTS %s" % self.ks, timeout=60)
            except Exception as e:  # noqa: BLE001
                print("warning: dropping keyspace %s: %s" % (self.ks, e))
        for c in (self.lz4_cluster, self.cluster):
            if c is not None:
                try:
                    c.shutdown()
                except Exception as e:  # noqa: BLE001
                    print("warning: cluster shutdown: %s" % e)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--host", required=True, help="proxy host")
    ap.add_argument("--port", type=int, required=True, help="proxy port")
    ap.add_argument("--forbidden", default="",
                    help="Cassandra node addresses (HOST or HOST:PORT, comma-separated) never to be connected to")
    ap.add_argument("--debug", action="store_true", help="driver debug logging to stderr")
    ap.add_argument("--keep", action="store_true", help="do not drop the test keyspace")
    args = ap.parse_args()

    logging.basicConfig(level=logging.DEBUG if args.debug else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    ck = Checker(args)
    print("cassandra-driver %s, lz4 %s, psutil %s; proxy %s:%d (%s), forbidden %s, keyspace %s" % (
        cassandra.__version__, "yes" if HAVE_LZ4 else "NO", "yes" if psutil else "no",
        args.host, args.port, ck.host_ip, ck.forbidden, ck.ks), flush=True)
    t0 = time.monotonic()
    try:
        ck.run("connect", ck.check_connect)
        ck.run("protocol_version is 5", ck.check_protocol_version)
        ck.run("single host = proxy", ck.check_single_host)
        ck.run("create keyspace and tables", ck.check_create_schema)
        ck.run("prepared insert/select", ck.check_prepared)
        ck.run("batch", ck.check_batch)
        ck.run("paging 3000 rows, fetch_size 100", ck.check_paging)
        ck.run("1 MiB blob roundtrip", ck.check_blob)
        ck.run("USE keyspace, unqualified query", ck.check_use_keyspace)
        ck.run("errors: SyntaxException, InvalidRequest", ck.check_errors)
        ck.run("schema metadata shows new table", ck.check_schema_metadata)
        ck.run("LWT IF NOT EXISTS", ck.check_lwt)
        ck.run("counters", ck.check_counters)
        ck.run("lz4: connect, v5, compressor", ck.check_lz4_connect)
        ck.run("lz4: blobs, paging, prepared, error", ck.check_lz4_queries)
        ck.run("schema event reaches other client", ck.check_schema_event_other_client)
        ck.run("no connection to forbidden nodes", ck.check_no_forbidden_connections)
    finally:
        if not args.keep:
            ck.cleanup()
        else:
            for c in (ck.lz4_cluster, ck.cluster):
                if c is not None:
                    c.shutdown()
    print("total %.1fs" % (time.monotonic() - t0))
    if ck.failed:
        print("failures:")
        for name, detail in ck.failed:
            print("  - %s: %s" % (name, detail.splitlines()[0]))
    print("%d passed, %d failed" % (len(ck.passed), len(ck.failed)), flush=True)
    return 1 if ck.failed else 0


if __name__ == "__main__":
    sys.exit(main())
