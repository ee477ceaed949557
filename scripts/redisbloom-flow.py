#!/usr/bin/env python3
"""Runs RedisBloom's own Bloom flow tests against a running urlseen.

RedisBloom's tests (`tests/flow/test_overall.py`, `test_resp3.py`, `test_docs_help.py` of its
repository) are written for RLTest, which starts its own redis-server with the module loaded.
This script stands in for RLTest's `Env` (and for the suite's `common.py`): each test runs, as
written, against one server that is already up, its assertions are recorded as RLTest records
them, and a test fails if any did. Only the Bloom tests run (`BF.*`; the Cuckoo, Count-Min, Top-K
and t-digest ones are not urlseen's), and those that need what urlseen does not have (RDB:
`DEBUG RELOAD`, `RESTORE` payloads) are listed, not run.

    git clone https://github.com/RedisBloom/RedisBloom /tmp/RedisBloom
    urlseen serve --resp 127.0.0.1:6390 --http off &
    python3 scripts/redisbloom-flow.py /tmp/RedisBloom/tests/flow --port 6390 [test_name …]

Needs redis-py. Each test starts with `FLUSHALL`: use a server of its own. Why each remaining
failure is a difference urlseen keeps: docs/protocol.md, "RedisBloom's flow tests".
"""

import argparse
import contextlib
import importlib
import inspect
import os
import random  # noqa: F401  (the tests use it through `from common import *`)
import sys
import traceback

import redis
from redis import ResponseError  # noqa: F401  (exported to the tests)

PORT = 6380
FAILURES = []  # (where, message) of the test that is running

# Tests that need RDB (DEBUG RELOAD, DUMP/RESTORE payloads): not run.
NEEDS_RDB = {
    "test_rdb_reload",
    "test_mem_usage",
    "test_load_error_handling",
    "test_load_bloom_with_large_number_of_filters",
    "test_rdb_load_guards",
}
FILES = ["test_overall", "test_resp3", "test_docs_help"]
# Names RedisBloom's common.py gives the tests.
VALGRIND = False
SANITIZER = ""
ONLY_STABLE = False
CODE_COVERAGE = False


class Skip(Exception):
    pass


class version:
    """packaging.version's `parse`, for the x.y.z strings these tests compare."""

    @staticmethod
    def parse(v):
        return tuple(int(p) if p.isdigit() else 0 for p in str(v).split("."))


def _where():
    for frame in reversed(traceback.extract_stack()[:-2]):
        name = os.path.basename(frame.filename)
        if name.startswith("test_") or name == "docs_utils.py":
            return f"{name}:{frame.lineno}"
    return "?"


def _fail(msg):
    FAILURES.append((_where(), msg[:300]))


class _Query:
    """RLTest's `env.expect(...)`."""

    def __init__(self, env, args):
        self.env, self.args, self.err, self.res = env, args, None, None
        try:
            self.res = env.cmd(*args)
        except ResponseError as e:
            self.err = e

    def error(self):
        if self.err is None:
            _fail(f"{self.args[:3]}: expected an error, got {self.res!r}")
        return self

    def contains(self, s):
        got = str(self.err) if self.err is not None else self.res
        if got is None or s not in got:
            _fail(f"{self.args[:3]}: {got!r} does not contain {s!r}")
        return self

    def equal(self, v):
        if self.err is not None or self.res != v:
            _fail(f"{self.args[:3]}: {self.err or self.res!r} != {v!r}")
        return self

    def noError(self):
        if self.err is not None:
            _fail(f"{self.args[:3]}: unexpected error {self.err}")
        return self

    def ok(self):
        return self.equal("OK" if self.env.decode else b"OK")


class Env:
    """RLTest's `Env`, on the server at PORT."""

    def __init__(self, decodeResponses=False, protocol=2, **_):
        self.decode = decodeResponses
        self.con = redis.Redis(port=PORT, decode_responses=decodeResponses, protocol=protocol)

    def cmd(self, *args):
        return self.con.execute_command(*args)

    execute_command = cmd

    def getConnection(self):
        return self.con

    @contextlib.contextmanager
    def getClusterConnectionIfNeeded(self):
        yield self.con

    def expect(self, *args):
        return _Query(self, args)

    def assertEqual(self, a, b, *_):
        if a != b:
            _fail(f"{a!r} != {b!r}")

    def assertNotEqual(self, a, b, *_):
        if a == b:
            _fail(f"{a!r} == {b!r}")

    def assertTrue(self, v, *_):
        if not v:
            _fail(f"not true: {v!r}")

    def assertFalse(self, v, *_):
        if v:
            _fail(f"not false: {v!r}")

    def assertOk(self, v, *_):
        if v not in ("OK", b"OK", True):
            _fail(f"not OK: {v!r}")

    def assertGreater(self, a, b, *_):
        if not a > b:
            _fail(f"{a!r} <= {b!r}")

    def assertGreaterEqual(self, a, b, *_):
        if not a >= b:
            _fail(f"{a!r} < {b!r}")

    def assertLess(self, a, b, *_):
        if not a < b:
            _fail(f"{a!r} >= {b!r}")

    def assertLessEqual(self, a, b, *_):
        if not a <= b:
            _fail(f"{a!r} > {b!r}")

    def assertContains(self, a, b, *_):
        if a not in b:
            _fail(f"{a!r} not in {b!r}")

    def assertRaises(self, exc, fn, *args, **kwargs):
        try:
            r = fn(*args, **kwargs)
        except exc:
            return
        _fail(f"no {exc.__name__} from {args[:3]!r}: got {r!r}")

    @contextlib.contextmanager
    def assertResponseError(self, contained=None, *_):
        try:
            yield
        except ResponseError as e:
            if contained is not None and contained not in str(e):
                _fail(f"error {e} does not contain {contained!r}")
            return
        _fail("no ResponseError")

    def debugPrint(self, *_a, **_k):
        pass

    def skip(self):
        raise Skip("skipped by the test")

    def skipOnCluster(self):
        pass

    def skipOnVersionSmaller(self, _v):
        pass

    def isCluster(self):
        return False

    def dumpAndReload(self, *_a, **_k):
        raise Skip("needs RDB (DEBUG RELOAD)")

    def retry_with_rdb_reload(self):
        raise Skip("needs RDB")


def server_version_at_least(env, ver):
    return version.parse(env.cmd("INFO")["redis_version"]) >= version.parse(ver)


def server_version_less_than(env, ver):
    return not server_version_at_least(env, ver)


def bloom_test(module, name):
    if module == "test_docs_help":
        return name.startswith("test_command_docs_bf_")
    if module == "test_resp3":
        return name.startswith("test_bf")
    return True


def run(method, obj):
    """Runs one test (a generator test runs to its end); returns False if it was skipped."""
    try:
        r = method(obj)
        if inspect.isgenerator(r):
            for _ in r:
                pass
    except Skip:
        return False
    except Exception as e:  # an uncaught error fails the test, as in RLTest
        tb = traceback.extract_tb(e.__traceback__)
        at = next(
            (
                f"{os.path.basename(f.filename)}:{f.lineno}"
                for f in reversed(tb)
                if os.path.basename(f.filename).startswith("test_")
            ),
            "?",
        )
        FAILURES.append((at, f"{type(e).__name__}: {e}"[:300]))
    return True


def main():
    global PORT
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("flow", help="RedisBloom's tests/flow directory")
    ap.add_argument("--port", type=int, default=PORT)
    ap.add_argument("tests", nargs="*", help="run only these test names")
    args = ap.parse_args()
    PORT = args.port
    # The tests `from common import *`: this module stands in for RedisBloom's common.py.
    sys.modules["common"] = sys.modules[__name__]
    sys.path.insert(0, os.path.abspath(args.flow))
    passed, failed, not_run = [], [], []
    for module_name in FILES:
        module = importlib.import_module(module_name)
        for cname, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ != module_name or not cname.lower().startswith("test"):
                continue
            obj = None
            for name, method in cls.__dict__.items():
                if not name.startswith("test") or not bloom_test(module_name, name):
                    continue
                if args.tests and name not in args.tests:
                    continue
                full = f"{module_name}::{cname}::{name}"
                if name in NEEDS_RDB:
                    not_run.append((full, "needs RDB"))
                    continue
                obj = obj or cls()
                FAILURES.clear()
                if not run(method, obj):
                    not_run.append((full, "skipped by the test itself"))
                elif FAILURES:
                    failed.append(full)
                    print(f"FAIL {full}", flush=True)
                    for where, msg in FAILURES[:3]:
                        print(f"     {where}: {msg}", flush=True)
                else:
                    passed.append(full)
                    print(f"PASS {full}", flush=True)
    print(f"\n{len(passed)} passed of {len(passed) + len(failed)} run; {len(not_run)} not run:")
    for full, why in not_run:
        print(f"  {full}: {why}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
