#!/usr/bin/env python3
"""Prepared statements across schema changes, directly and through cqlgate.

    python3 schema_change_check.py --proxy 127.0.0.1:9042 --direct 127.0.12.1:9042

Cassandra derives a prepared id from the keyspace and the text only, so after
ALTER TABLE the id of SELECT * stays the same while its columns do not. A
node that dropped the statement answers UNPREPARED and the driver prepares it
again and learns the new columns; a proxy that hid the UNPREPARED (preparing
again itself and re-sending the driver's EXECUTE, whose skip_metadata flag
holds) made the driver decode rows of the new shape with the old columns.

For protocol v5 and v4, the same scenario (the one of
test/integration/zz_cluster3_prepared_test.go) runs once against the node
(--direct) and once through the proxy (--proxy), each in its own keyspace,
with one prepared statement object kept across the changes; what the driver
read after each step must be the same, and so must the columns the prepared
statement object holds: with the UNPREPARED hidden, this driver kept the old
ones (Cassandra 5.0.4 sent the rows' metadata anyway, so the values still
read right, but a node honouring skip_metadata would have them misread). The last line is "N passed, M failed"
and the exit status is non-zero when a check failed.
"""

import argparse
import re
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

try:
    from cassandra import ConsistencyLevel, ProtocolVersion
    from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
    from cassandra.query import BatchStatement, BatchType, dict_factory
except ImportError as e:  # pragma: no cover - reported to the Go test
    print("cassandra-driver is not installed (%s)" % e)
    print("0 passed, 1 failed")
    sys.exit(2)

_ADDR = re.compile(r"\d+\.\d+\.\d+\.\d+(:\d+)?")


def describe_error(e):
    """Error text without addresses, which differ between the two runs."""
    return "error: %s: %s" % (type(e).__name__, _ADDR.sub("ADDR", str(e)))


def split_addr(hp):
    host, _, port = hp.rpartition(":")
    return host, int(port)


def connect(addr, version):
    host, port = split_addr(addr)
    profile = ExecutionProfile(consistency_level=ConsistencyLevel.ALL, row_factory=dict_factory,
                               request_timeout=30)
    c = Cluster([host], port=port, protocol_version=version, connect_timeout=15,
                execution_profiles={EXEC_PROFILE_DEFAULT: profile})
    return c, c.connect()


def scenario(s, ks):
    """Changes table ks.t under one prepared SELECT * and returns what the
    driver read after each change."""
    got = []

    def note(step, v):
        got.append("%s: %s" % (step, v))

    def row(stmt, *args):
        try:
            r = s.execute(stmt, args).one()
        except Exception as e:  # noqa: BLE001 - an error is a result here
            return describe_error(e)
        got = "no row" if r is None else "{%s}" % ", ".join("%s: %r" % kv for kv in sorted(r.items()))
        # The columns the prepared statement object holds: a driver that
        # was not told UNPREPARED keeps the old ones, and decodes rows with
        # them whenever a node honours skip_metadata.
        return "%s, prepared [%s]" % (got, ", ".join(c[2] for c in stmt.result_metadata or []))

    def batch(step, stmt, *rows):
        b = BatchStatement(batch_type=BatchType.LOGGED)
        try:
            for r in rows:
                b.add(stmt, r)
            s.execute(b)
        except Exception as e:  # noqa: BLE001
            note(step, describe_error(e))

    t = ks + ".t"
    s.execute("CREATE TABLE %s (k int PRIMARY KEY, name text, zbal bigint)" % t)
    s.execute("INSERT INTO %s (k, name, zbal) VALUES (%%s, %%s, %%s)" % t, (1, "alice", 100))
    sel = s.prepare("SELECT * FROM %s WHERE k = ?" % t)
    note("created", row(sel, 1))
    # "age" sorts between "k" and "name": read with the old columns, its
    # bytes become name's.
    s.execute("ALTER TABLE %s ADD age int" % t)
    s.execute("UPDATE %s SET age = %%s WHERE k = %%s" % t, (30, 1))
    note("column added", row(sel, 1))
    note("column added, again", row(sel, 1))
    s.execute("ALTER TABLE %s DROP zbal" % t)
    note("column dropped", row(sel, 1))
    # Same name, other types.
    s.execute("DROP TABLE %s" % t)
    s.execute("CREATE TABLE %s (k int PRIMARY KEY, name int, age text)" % t)
    s.execute("INSERT INTO %s (k, name, age) VALUES (%%s, %%s, %%s)" % t, (1, 7, "thirty"))
    note("table recreated", row(sel, 1))

    # A BATCH of a prepared INSERT whose bind variable changes type.
    b = ks + ".b"
    s.execute("CREATE TABLE %s (k int PRIMARY KEY, v int)" % b)
    ins = s.prepare("INSERT INTO %s (k, v) VALUES (?, ?)" % b)
    batch("batch", ins, (1, 1), (2, 2))
    s.execute("DROP TABLE %s" % b)
    s.execute("CREATE TABLE %s (k int PRIMARY KEY, v bigint)" % b)
    batch("batch after recreate", ins, (1, 5), (2, 6))
    note("batch row", row(s.prepare("SELECT * FROM %s WHERE k = ?" % b), 1))
    return got


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--proxy", required=True, help="proxy HOST:PORT")
    ap.add_argument("--direct", required=True, help="Cassandra node HOST:PORT")
    args = ap.parse_args()

    suffix = uuid.uuid4().hex[:8]

    def run(version, how, addr):
        """What the driver read, in keyspace drv_py_v<version>_<how>_<suffix>."""
        ks = "drv_py_v%d_%s_%s" % (version, how, suffix)
        c, s = connect(addr, version)
        try:
            rf = min(3, len(c.metadata.all_hosts()))
            s.execute("CREATE KEYSPACE %s WITH replication = "
                      "{'class': 'SimpleStrategy', 'replication_factor': %d}" % (ks, rf))
            try:
                return scenario(s, ks)
            finally:
                s.execute("DROP KEYSPACE IF EXISTS %s" % ks)
        finally:
            c.shutdown()

    # The four runs are independent (own cluster object, own keyspace) and
    # mostly wait for schema agreement after DDL: run them at once.
    versions = (ProtocolVersion.V5, ProtocolVersion.V4)
    t0 = time.monotonic()
    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = {(v, how): pool.submit(run, v, how, addr)
                   for v in versions for how, addr in (("direct", args.direct), ("proxied", args.proxy))}
    passed, failed = 0, 0
    for version in versions:
        runs = {}
        for how in ("direct", "proxied"):
            try:
                runs[how] = futures[(version, how)].result()
            except Exception as e:  # noqa: BLE001 - the setup failed
                runs[how] = ["setup: " + describe_error(e)]
        direct, proxied = runs["direct"], runs["proxied"]
        problems = []
        if len(direct) != len(proxied):
            problems.append("direct read:")
            problems.extend("  " + x for x in direct)
            problems.append("through the proxy:")
            problems.extend("  " + x for x in proxied)
        else:
            for d, p in zip(direct, proxied):
                if d != p:
                    problems.append("directly %r; through the proxy %r" % (d, p))
        want = "column added: {age: 30, k: 1, name: 'alice', zbal: 100}, prepared [k, age, name, zbal]"
        if len(direct) < 2 or direct[1] != want:
            problems.append("directly %r, want %r (the scenario no longer tests what it should)" % (
                direct[1:2], want))
        name = "schema changes under prepared statements, v%d" % version
        if problems:
            failed += 1
            print("FAIL  %s\n      %s" % (name, "\n      ".join(problems)), flush=True)
        else:
            passed += 1
            print("ok    %s\n      %s" % (name, "\n      ".join(proxied)), flush=True)
    print("total %.1fs" % (time.monotonic() - t0))
    print("%d passed, %d failed" % (passed, failed), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
