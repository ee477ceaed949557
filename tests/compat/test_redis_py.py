"""Compatibility suite: redis-py, used as an ordinary client, against `urlseen serve`.

It covers RedisBloom's BF.* commands through redis-py's own `r.bf()` API (with the semantics
RedisBloom documents), all of URL.*, the keyspace commands, the connection commands and
transactions (redis-py's default `pipeline()` is MULTI/EXEC; `watch()`), over RESP2 and RESP3.

    URLSEEN_PORT=6380 python3 tests/compat/test_redis_py.py

Environment: URLSEEN_HOST (default 127.0.0.1), URLSEEN_PORT (default 6380), URLSEEN_PASSWORD.
The server must be empty of the keys used here (every test deletes what it uses first); the
suite never runs FLUSHALL on a server it did not get an explicit URLSEEN_ALLOW_FLUSH=1 for.
Exit status 0 when every test passes.
"""

import os
import sys
import unittest

try:
    import redis
    from redis.exceptions import ResponseError
except ImportError:  # pragma: no cover - the runner says what to do
    sys.stderr.write("redis-py is not installed: pip install --quiet redis\n")
    sys.exit(2)

HOST = os.environ.get("URLSEEN_HOST", "127.0.0.1")
PORT = int(os.environ.get("URLSEEN_PORT", "6380"))
PASSWORD = os.environ.get("URLSEEN_PASSWORD") or None
PREFIX = "compat:"


def client(protocol=2, decode=True):
    return redis.Redis(
        host=HOST,
        port=PORT,
        password=PASSWORD,
        protocol=protocol,
        decode_responses=decode,
        socket_timeout=10,
    )


def key(name):
    return PREFIX + name


class Base(unittest.TestCase):
    protocol = 2

    def setUp(self):
        self.r = client(self.protocol)
        names = self.r.keys(PREFIX + "*")
        if names:
            self.r.delete(*names)

    def tearDown(self):
        self.r.close()


class Connection(Base):
    def test_ping_echo_and_names(self):
        self.assertTrue(self.r.ping())
        self.assertEqual(self.r.echo("hello"), "hello")
        self.assertTrue(self.r.client_setname("crawler-1"))
        self.assertEqual(self.r.client_getname(), "crawler-1")
        self.assertIsInstance(self.r.client_id(), int)

    def test_info(self):
        info = self.r.info()
        self.assertIn("redis_version", info)
        self.assertIn("connected_clients", info)
        self.r.bf().add(key("bf"), "x")
        keyspace = self.r.info("keyspace")
        self.assertGreaterEqual(keyspace["db0"]["keys"], 1)
        self.assertIn("used_memory", self.r.info("memory"))

    def test_observability(self):
        # redis-py's own parsers read SLOWLOG GET, CONFIG GET, CLIENT LIST and INFO sections.
        old = self.r.config_get("slowlog-log-slower-than")["slowlog-log-slower-than"]
        self.assertTrue(self.r.config_set("slowlog-log-slower-than", 0))
        try:
            self.r.client_setname("obs-1")
            self.r.echo("slow?")
            entries = self.r.slowlog_get(10)
            # Earlier slow entries may hold binary arguments (a BF.LOADCHUNK that waited for the
            # disk on a busy machine): they are not text.
            text = lambda v: v.decode(errors="replace") if isinstance(v, bytes) else v  # noqa: E731
            echo = [e for e in entries if text(e["command"]) == "ECHO slow?"]
            self.assertTrue(echo, entries)
            self.assertEqual(text(echo[0]["client_name"]), "obs-1")
            self.assertGreaterEqual(self.r.slowlog_len(), 1)
        finally:
            self.r.config_set("slowlog-log-slower-than", old)
        me = [c for c in self.r.client_list() if c["name"] == "obs-1"]
        self.assertEqual(len(me), 1)
        self.assertEqual(me[0]["multi"], "-1")
        stats = self.r.info("commandstats")
        self.assertGreaterEqual(stats["cmdstat_echo"]["calls"], 1)
        latency = self.r.info("latencystats")
        self.assertIn("p99.9", latency["latency_percentiles_usec_echo"])

    def test_unknown_command(self):
        with self.assertRaisesRegex(ResponseError, "unknown command"):
            self.r.execute_command("NOPE.NOTHING", "x")


class Bloom(Base):
    """RedisBloom's documented semantics, through redis-py's bf() API."""

    def test_reserve(self):
        bf = self.r.bf()
        self.assertTrue(bf.create(key("bf"), 0.01, 1000))
        with self.assertRaisesRegex(ResponseError, "item exists"):
            bf.create(key("bf"), 0.01, 1000)
        with self.assertRaisesRegex(ResponseError, "error rate"):
            bf.create(key("bad"), 1.5, 1000)
        with self.assertRaisesRegex(ResponseError, r"capacity must be in the range \[1, "):
            bf.create(key("bad"), 0.01, 0)
        self.assertTrue(bf.create(key("exp"), 0.01, 1000, expansion=4))
        self.assertEqual(bf.info(key("exp")).expansionRate, 4)
        self.assertTrue(bf.create(key("fixed"), 0.01, 1000, noScale=True))
        self.assertIsNone(bf.info(key("fixed")).expansionRate)
        self.assertEqual(self.r.exists(key("bad")), 0)

    def test_add_exists(self):
        bf = self.r.bf()
        self.assertEqual(bf.add(key("bf"), "foo"), 1)
        self.assertEqual(bf.add(key("bf"), "foo"), 0)
        self.assertEqual(bf.exists(key("bf"), "foo"), 1)
        self.assertEqual(bf.exists(key("bf"), "bar"), 0)
        self.assertEqual(bf.exists(key("missing"), "foo"), 0)
        with self.assertRaises(ResponseError):
            self.r.execute_command("BF.ADD", key("bf"))

    def test_madd_mexists(self):
        bf = self.r.bf()
        self.assertEqual(bf.madd(key("bf"), "foo", "bar", "baz"), [1, 1, 1])
        self.assertEqual(bf.madd(key("bf"), "foo", "new1", "bar"), [0, 1, 0])
        self.assertEqual(bf.mexists(key("bf"), "nonexist", "foo"), [0, 1])
        self.assertEqual(bf.mexists(key("missing"), "a", "b", "c"), [0, 0, 0])

    def test_insert(self):
        bf = self.r.bf()
        with self.assertRaisesRegex(ResponseError, "not found"):
            bf.insert(key("bf"), ["foo"], noCreate=True)
        self.assertEqual(bf.insert(key("bf"), ["foo"], capacity=50000, error=0.001, expansion=2), [1])
        self.assertEqual(bf.insert(key("bf"), ["foo", "bar", "baz"], error=0.1), [0, 1, 1])
        self.assertEqual(bf.info(key("bf")).capacity, 50000)
        self.assertEqual(bf.insert(key("bf"), ["qux"], noCreate=True), [1])
        self.assertEqual(bf.card(key("bf")), 4)
        with self.assertRaisesRegex(ResponseError, "Bad capacity"):
            bf.insert(key("zero"), ["a"], capacity=0)

    def test_nonscaling_fills_up(self):
        bf = self.r.bf()
        self.assertEqual(bf.insert(key("ns"), ["a", "b", "c"], capacity=3, noScale=True), [1, 1, 1])
        # A command that brings a new item to a full filter is refused whole: nothing added.
        with self.assertRaisesRegex(ResponseError, "non scaling filter is full"):
            bf.insert(key("ns"), ["a", "b", "c", "d", "d"])
        self.assertEqual(bf.madd(key("ns"), "a", "b", "c"), [0, 0, 0])
        self.assertEqual(bf.mexists(key("ns"), "d"), [0])
        with self.assertRaisesRegex(ResponseError, "non scaling filter is full"):
            bf.add(key("ns"), "e")
        info = bf.info(key("ns"))
        self.assertEqual((info.capacity, info.filterNum, info.insertedNum), (3, 1, 3))
        self.assertIsNone(info.expansionRate)

    def test_info_and_card(self):
        bf = self.r.bf()
        bf.create(key("bf"), 0.001, 100)
        bf.madd(key("bf"), "a", "b")
        info = bf.info(key("bf"))
        self.assertEqual(info.capacity, 100)
        self.assertGreater(info.size, 0)
        self.assertEqual(info.filterNum, 1)
        self.assertEqual(info.insertedNum, 2)
        self.assertEqual(info.expansionRate, 2)
        # One field is a one-element array, as RedisBloom sends it (a plain client: bf() has
        # installed its own BF.INFO reply parser on self.r).
        plain = client()
        self.assertEqual(plain.execute_command("BF.INFO", key("bf"), "CAPACITY"), [100])
        self.assertEqual(plain.execute_command("BF.INFO", key("bf"), "ITEMS"), [2])
        with self.assertRaises(ResponseError):
            plain.execute_command("BF.INFO", key("bf"), "wrong_value")
        plain.close()
        with self.assertRaisesRegex(ResponseError, "not found"):
            bf.info(key("missing"))
        self.assertEqual(bf.card(key("bf")), 2)
        self.assertEqual(bf.card(key("missing")), 0)

    def test_error_rate_and_no_false_negatives(self):
        bf = self.r.bf()
        for rate in (0.1, 0.01, 0.001):
            name = key(f"rate{rate}")
            bf.create(name, rate, 1024)
            items = [str(x) for x in range(1024)]
            bf.madd(name, *items)
            self.assertEqual(bf.mexists(name, *items), [1] * 1024, "a false negative")
            others = [str(x) for x in range(1024, 1024 * 11)]
            fp = sum(bf.mexists(name, *others))
            self.assertLessEqual(fp / len(others), rate * 1.5, f"rate {rate}")

    def test_scaling_keeps_every_recorded_item(self):
        # Grown 500 times past its capacity, the filter still has every item it recorded. (An
        # item whose add answered 0, a false positive, is not recorded: after a split it may
        # answer 0 -- see docs/protocol.md, "Differences from RedisBloom".)
        bf = self.r.bf()
        bf.create(key("grow"), 0.01, 4, expansion=2)
        items = [f"i{x}" for x in range(2000)]
        added = bf.madd(key("grow"), *items)
        recorded = [item for item, new in zip(items, added) if new == 1]
        self.assertGreaterEqual(len(recorded), 2000 * 0.97)
        self.assertEqual(bf.mexists(key("grow"), *recorded), [1] * len(recorded))
        self.assertEqual(bf.card(key("grow")), len(recorded))
        info = bf.info(key("grow"))
        self.assertGreater(info.filterNum, 1)
        self.assertGreaterEqual(info.capacity, len(recorded) / 2)

    def test_scandump_and_loadchunk(self):
        # RedisBloom's documented loop, through redis-py's bf() API (a client that does not
        # decode: the chunks are binary).
        plain = client(self.protocol, decode=False)
        raw = plain.bf()
        bf = self.r.bf()
        bf.create(key("dump"), 0.01, 100, expansion=2)
        items = [f"d{x}" for x in range(3000)]
        bf.madd(key("dump"), *items)
        chunks = []
        it = 0
        while True:
            it, data = raw.scandump(key("dump"), it)
            if it == 0:
                break
            chunks.append((it, data))
        self.assertGreaterEqual(len(chunks), 2)
        for it, data in chunks:
            self.assertTrue(raw.loadchunk(key("dumpcopy"), it, data))
        self.assertEqual(bf.mexists(key("dumpcopy"), *items), [1] * len(items))
        self.assertEqual(bf.card(key("dumpcopy")), bf.card(key("dump")))
        with self.assertRaisesRegex(ResponseError, "not found"):
            raw.scandump(key("missing"), 0)
        with self.assertRaisesRegex(ResponseError, "received bad data"):
            raw.loadchunk(key("other"), 1, b"garbage")
        # A header to a key that exists: RedisBloom's reply (iterator 1 is below its length).
        with self.assertRaisesRegex(ResponseError, "^received bad data$"):
            raw.loadchunk(key("dumpcopy"), chunks[0][0], chunks[0][1])
        with self.assertRaisesRegex(ResponseError, "^invalid offset - no link found$"):
            raw.loadchunk(key("dumpcopy"), chunks[-1][0], chunks[-1][1])
        plain.close()

    def test_wrongtype_on_url_namespaces(self):
        self.r.execute_command("URL.SEEN", key("jobs"), "https://a.example/")
        with self.assertRaisesRegex(ResponseError, "WRONGTYPE|wrong kind"):
            self.r.bf().add(key("jobs"), "x")


class Url(Base):
    def test_seen(self):
        seen = lambda *urls: self.r.execute_command("URL.SEEN", key("jobs"), *urls)  # noqa: E731
        self.assertEqual(seen("https://a.example/x"), [0])
        self.assertEqual(seen("HTTPS://A.EXAMPLE:443/x#top", "https://b.example/"), [1, 0])
        # An invalid URL answers -1 (neither seen nor recorded); the others go on.
        self.assertEqual(seen("https://c.example/", "/relative", "https://c.example/"), [0, -1, 1])
        self.assertEqual(self.r.type(key("jobs")), "urlseen")

    def test_check(self):
        self.r.execute_command("URL.SEEN", key("jobs"), "https://a.example/")
        self.assertEqual(
            self.r.execute_command("URL.CHECK", key("jobs"), "https://A.example", "https://b.example/"),
            [1, 0],
        )
        self.assertEqual(self.r.execute_command("URL.CHECK", key("jobs"), "https://b.example/"), [0])
        self.assertEqual(self.r.execute_command("URL.CHECK", key("none"), "https://a.example/"), [0])
        self.assertEqual(self.r.exists(key("none")), 0)

    def test_reserve(self):
        self.assertTrue(
            self.r.execute_command(
                "URL.RESERVE", key("w"), "CAPACITY", 10000, "ERROR", 0.001, "PROFILE", "w3lib"
            )
        )
        with self.assertRaisesRegex(ResponseError, "item exists"):
            self.r.execute_command("URL.RESERVE", key("w"))
        with self.assertRaisesRegex(ResponseError, "unknown profile"):
            self.r.execute_command("URL.RESERVE", key("x"), "PROFILE", "nope")
        seen = lambda *urls: self.r.execute_command("URL.SEEN", key("w"), *urls)  # noqa: E731
        self.assertEqual(seen("http://x.example/do?b=2&a=1", "http://x.example/do?a=1&b=2"), [0, 1])

    def test_forget(self):
        self.r.execute_command("URL.SEEN", key("jobs"), "https://a.example/")
        with self.assertRaisesRegex(ResponseError, "cannot forget"):
            self.r.execute_command("URL.FORGET", key("jobs"), "https://a.example/")
        self.assertEqual(self.r.execute_command("URL.FORGET", key("none"), "https://a.example/"), [0])
        self.assertTrue(self.r.execute_command("URL.RESERVE", key("c"), "EXACT", "COUNTING"))
        self.assertEqual(self.r.execute_command("URL.SEEN", key("c"), "https://a.example/", "https://b.example/"), [0, 0])
        self.assertEqual(self.r.execute_command("URL.FORGET", key("c"), "https://a.example/"), [1])
        self.assertEqual(self.r.execute_command("URL.CHECK", key("c"), "https://a.example/", "https://b.example/"), [0, 1])

    def test_info(self):
        self.r.execute_command("URL.SEEN", key("jobs"), "https://a.example/", "https://b.example/")
        flat = self.r.execute_command("URL.INFO", key("jobs"))
        info = dict(zip(flat[::2], flat[1::2])) if isinstance(flat, list) else flat
        self.assertEqual(info["name"], key("jobs"))
        self.assertEqual(info["count"], 2)
        self.assertEqual(info["profile"], "crawler")
        self.assertLessEqual(float(info["estimated_fpr"]), float(info["fpr_bound"]))
        for field in ("memory_bytes", "worst_leaf_fpr", "fill_ratio", "leaves", "height", "splits_done"):
            self.assertIn(field, info)
        with self.assertRaisesRegex(ResponseError, "not found"):
            self.r.execute_command("URL.INFO", key("none"))

    def test_pipeline(self):
        # Made for its URLs: a namespace made small (the server's default) may answer a new URL
        # "seen" within its false-positive bound, and this test wants every first one new.
        self.r.execute_command("URL.RESERVE", key("pipe"), "CAPACITY", 100000)
        pipe = self.r.pipeline(transaction=False)
        for i in range(500):
            pipe.execute_command("URL.SEEN", key("pipe"), f"https://p.example/{i % 250}")
        replies = pipe.execute()
        self.assertEqual(replies, [[0]] * 250 + [[1]] * 250)


class Transactions(Base):
    """redis-py's default pipeline is a MULTI/EXEC transaction; `watch()` is optimistic locking."""

    def test_default_pipeline_is_a_transaction(self):
        pipe = self.r.pipeline()  # transaction=True
        pipe.bf().add(key("tx"), "a")
        pipe.bf().add(key("tx"), "a")
        pipe.bf().exists(key("tx"), "b")
        pipe.execute_command("URL.SEEN", key("txu"), "https://a.example/", "HTTPS://A.EXAMPLE:443/")
        pipe.ping()
        self.assertEqual(pipe.execute(), [1, 0, 0, [0, 1], True])
        self.assertEqual(self.r.bf().exists(key("tx"), "a"), 1)

    def test_pipeline_context_manager_and_many_commands(self):
        self.r.execute_command("URL.RESERVE", key("txm"), "CAPACITY", 100000)
        with self.r.pipeline() as pipe:
            for i in range(1000):
                pipe.execute_command("URL.SEEN", key("txm"), f"https://m.example/{i % 500}")
            replies = pipe.execute()
        self.assertEqual(replies, [[0]] * 500 + [[1]] * 500)

    def test_runtime_error_inside_the_transaction(self):
        self.r.execute_command("URL.RESERVE", key("txurls"))
        pipe = self.r.pipeline()
        pipe.bf().add(key("txurls"), "x")
        pipe.bf().add(key("txbf"), "x")
        replies = pipe.execute(raise_on_error=False)
        self.assertIsInstance(replies[0], ResponseError)
        self.assertIn("WRONGTYPE", str(replies[0]))
        self.assertEqual(replies[1], 1)
        with self.assertRaisesRegex(ResponseError, "WRONGTYPE"):
            pipe = self.r.pipeline()
            pipe.bf().add(key("txurls"), "x")
            pipe.execute()

    def test_queueing_error_aborts(self):
        pipe = self.r.pipeline()
        pipe.bf().add(key("txab"), "x")
        pipe.execute_command("NO.SUCH.COMMAND", "x")
        with self.assertRaises(ResponseError):
            pipe.execute()
        self.assertEqual(self.r.exists(key("txab")), 0)

    def test_watch_succeeds_when_untouched_and_fails_when_written(self):
        other = client()
        try:
            with self.r.pipeline() as pipe:
                pipe.watch(key("w"))
                self.assertEqual(pipe.bf().exists(key("w"), "a"), 0)  # immediate mode
                pipe.multi()
                pipe.bf().add(key("w"), "a")
                self.assertEqual(pipe.execute(), [1])
            with self.r.pipeline() as pipe:
                pipe.watch(key("w"))
                other.bf().add(key("w"), "b")
                pipe.multi()
                pipe.bf().add(key("w"), "c")
                with self.assertRaises(redis.exceptions.WatchError):
                    pipe.execute()
            self.assertEqual(self.r.bf().exists(key("w"), "c"), 0)
        finally:
            other.close()

    def test_transaction_helper_retries_on_watch_error(self):
        other = client()
        attempts = []
        try:
            def add_once(pipe):
                attempts.append(1)
                if len(attempts) == 1:
                    other.bf().add(key("th"), "interloper")
                pipe.multi()
                pipe.bf().add(key("th"), "mine")

            replies = self.r.transaction(add_once, key("th"))
            self.assertEqual(replies, [1])
            self.assertEqual(len(attempts), 2)
        finally:
            other.close()


class Transactions3(Transactions):
    protocol = 3


class Keyspace(Base):
    def test_keys_scan_type_del(self):
        for i in range(30):
            self.r.bf().add(key(f"bf:{i}"), "x")
            self.r.execute_command("URL.SEEN", key(f"url:{i}"), "https://a.example/")
        self.assertEqual(len(self.r.keys(PREFIX + "*")), 60)
        self.assertEqual(sorted(self.r.scan_iter(PREFIX + "*", count=7)), sorted(self.r.keys(PREFIX + "*")))
        self.assertEqual(len(list(self.r.scan_iter(PREFIX + "bf:*", _type="MBbloom--"))), 30)
        self.assertEqual(self.r.type(key("bf:0")), "MBbloom--")
        self.assertEqual(self.r.type(key("nothing")), "none")
        self.assertGreaterEqual(self.r.dbsize(), 60)
        self.assertEqual(self.r.exists(key("bf:0"), key("url:0"), key("nothing")), 2)
        self.assertEqual(self.r.delete(key("bf:0"), key("url:0"), key("nothing")), 2)
        self.assertEqual(self.r.exists(key("bf:0")), 0)


class Resp3(Base):
    protocol = 3

    def test_bloom_booleans_and_info_map(self):
        bf = self.r.bf()
        self.assertEqual(bf.add(key("t"), "item"), True)
        self.assertEqual(bf.add(key("t"), "item"), False)
        self.assertEqual(bf.exists(key("t"), "item"), True)
        self.assertEqual(bf.madd(key("t"), "a", "item"), [True, False])
        self.assertEqual(bf.insert(key("t"), ["b", "a"]), [True, False])
        self.assertEqual(bf.mexists(key("t"), "a", "zz"), [True, False])
        # redis-py hands RESP3's map over as a dict (RESP2's flat array becomes a BFInfo).
        info = bf.info(key("t"))
        self.assertEqual(
            {k: info[k] for k in ("Capacity", "Number of items inserted", "Expansion rate")},
            {"Capacity": 100, "Number of items inserted": 3, "Expansion rate": 2},
        )
        self.assertEqual(info["Number of filters"], 1)
        self.assertEqual(bf.card(key("t")), 3)

    def test_url_commands(self):
        self.assertEqual(self.r.execute_command("URL.SEEN", key("jobs"), "https://a.example/"), [0])
        self.assertEqual(self.r.execute_command("URL.CHECK", key("jobs"), "https://a.example/"), [1])
        info = self.r.execute_command("URL.INFO", key("jobs"))
        self.assertIsInstance(info, dict)
        self.assertEqual(info["count"], 1)
        self.assertEqual(info["fpr_bound"], 0.01)
        self.assertIs(info["exact"], False)


if __name__ == "__main__":
    if os.environ.get("URLSEEN_ALLOW_FLUSH") == "1":
        client().flushall()
    result = unittest.main(verbosity=2, exit=False).result
    sys.exit(0 if result.wasSuccessful() else 1)
