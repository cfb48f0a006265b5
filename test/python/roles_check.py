#!/usr/bin/env python3
"""What each role gets from Cassandra, step by step, with the Python driver.

Run by test/security (TestRolesPythonDriver), which compares the lines of a
direct target with those of the proxy:

    python3 roles_check.py --target direct=127.0.22.1:9042 \
        --target proxy=127.0.0.1:19042 --role reader:pw-reader

For every role and target it connects with PlainTextAuthProvider and runs
QUERY, PREPARE/EXECUTE, BATCH (unlogged text, and a BatchStatement of
prepared statements), DDL, GRANT and USE against tables roles_ks1.t and
roles_ks2.t (test/security's rolesSetup creates them). Each step prints one
line, "STEP ROLE TARGET STEP: OUTCOME", the rows read or the error's class and
message. The steps read only row 1, which none of them writes, so the
targets can run one after the other without a reset. The last line is
"done".
"""

import argparse
import sys

try:
    from cassandra.auth import PlainTextAuthProvider
    from cassandra.cluster import Cluster
    from cassandra.policies import WhiteListRoundRobinPolicy
    from cassandra.query import BatchStatement, BatchType
except ImportError as e:  # pragma: no cover - reported to the Go test
    print("cassandra-driver is not installed (%s)" % e)
    sys.exit(2)


def outcome(fn):
    try:
        res = fn()
    except Exception as e:  # the error is the outcome
        return "%s: %s" % (type(e).__name__, e)
    if res is None:
        return "ok"
    if isinstance(res, str):
        return res
    try:
        return "rows %r" % [tuple(r) for r in res]
    except TypeError:
        return "ok %r" % (res,)


def steps(session):
    ex = session.execute
    yield "select ks1", lambda: ex("SELECT v FROM roles_ks1.t WHERE k = 1")
    yield "select ks2", lambda: ex("SELECT v FROM roles_ks2.t WHERE k = 1")
    yield "insert ks1", lambda: ex("INSERT INTO roles_ks1.t (k, v) VALUES (10, 'ten')")
    yield "update ks2", lambda: ex("UPDATE roles_ks2.t SET v = 'diez' WHERE k = 10")
    yield "batch text ks1", lambda: ex(
        "BEGIN UNLOGGED BATCH INSERT INTO roles_ks1.t (k, v) VALUES (11, 'eleven'); "
        "INSERT INTO roles_ks1.t (k, v) VALUES (12, 'twelve') APPLY BATCH")

    prepared = {}

    def prepare(name, q):
        def run():
            prepared[name] = session.prepare(q)
            return "prepared"
        return run

    def execute(name, *args):
        def run():
            if name not in prepared:
                return "not prepared"
            return ex(prepared[name], args)
        return run

    yield "prepare select ks1", prepare("s1", "SELECT v FROM roles_ks1.t WHERE k = ?")
    yield "execute select ks1", execute("s1", 1)
    yield "prepare select ks2", prepare("s2", "SELECT v FROM roles_ks2.t WHERE k = ?")
    yield "execute select ks2", execute("s2", 1)
    yield "prepare insert ks1", prepare("i1", "INSERT INTO roles_ks1.t (k, v) VALUES (?, ?)")
    yield "execute insert ks1", execute("i1", 13, "thirteen")
    yield "prepare insert ks2", prepare("i2", "INSERT INTO roles_ks2.t (k, v) VALUES (?, ?)")
    yield "execute insert ks2", execute("i2", 13, "trece")

    def batch(name):
        def run():
            if name not in prepared:
                return "not prepared"
            b = BatchStatement(batch_type=BatchType.LOGGED)
            b.add(prepared[name], (14, "fourteen"))
            b.add(prepared[name], (15, "fifteen"))
            return ex(b)
        return run

    yield "batch prepared ks1", batch("i1")
    yield "batch prepared ks2", batch("i2")
    yield "create table", lambda: ex("CREATE TABLE roles_ks1.ddl_py (k int PRIMARY KEY)")
    yield "alter table", lambda: ex("ALTER TABLE roles_ks1.t ADD extra_py text")
    yield "truncate ks2", lambda: ex("TRUNCATE roles_ks2.t")
    yield "grant", lambda: ex("GRANT SELECT ON KEYSPACE roles_ks2 TO %s" % session.cluster.auth_provider.username)
    yield "use ks2", lambda: session.set_keyspace("roles_ks2")
    yield "select used ks2", lambda: ex("SELECT v FROM t WHERE k = 1")
    yield "use ks1", lambda: session.set_keyspace("roles_ks1")
    yield "select used ks1", lambda: ex("SELECT v FROM t WHERE k = 1")
    yield "insert used ks1", lambda: ex("INSERT INTO t (k, v) VALUES (16, 'sixteen')")
    yield "prepare used", prepare("u", "SELECT v FROM t WHERE k = ?")
    yield "execute used", execute("u", 1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", action="append", required=True, help="NAME=HOST:PORT")
    ap.add_argument("--role", action="append", required=True, help="USER:PASSWORD")
    args = ap.parse_args()
    for role in args.role:
        user, password = role.split(":", 1)
        for target in args.target:
            name, addr = target.split("=", 1)
            host, port = addr.rsplit(":", 1)
            label = "%s %s" % (user, name)
            cluster = Cluster([host], port=int(port),
                              auth_provider=PlainTextAuthProvider(username=user, password=password),
                              load_balancing_policy=WhiteListRoundRobinPolicy([host]),
                              connect_timeout=10)
            try:
                session = cluster.connect()
            except Exception as e:
                print("STEP %s connect: %s: %s" % (label, type(e).__name__, e), flush=True)
                continue
            print("STEP %s protocol: v%d" % (label, cluster.protocol_version), flush=True)
            for step, fn in steps(session):
                print("STEP %s %s: %s" % (label, step, outcome(fn)), flush=True)
            cluster.shutdown()
    print("done", flush=True)


if __name__ == "__main__":
    main()
