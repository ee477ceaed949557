"""urlseen.Client against a `urlseen serve` started from the wheel's own command."""

from __future__ import annotations

import pytest
from conftest import Server, free_port

import urlseen


def test_same_answers_as_the_embedded_engine(server):
    client = urlseen.Client(server.url)
    remote = client.namespace("jobs", profile="w3lib", capacity=10_000)
    local = urlseen.Db().namespace("jobs", profile="w3lib", capacity=10_000)
    urls = [f"https://example.com/p/{i % 700}?b={i % 3}&a=1#f{i}" for i in range(3_000)]
    expected = local.seen_many(urls)
    assert remote.seen_many(urls) == expected
    assert len(remote) == len(local) == expected.count(False)
    assert remote.seen("https://example.com/p/1?a=1&b=1") is True
    assert remote.seen("https://example.com/new") is False
    assert remote.contains("https://example.com/new") is True
    assert remote.contains("https://example.com/never") is False
    assert remote.contains_many(["https://example.com/new", "https://example.com/never"]) == [True, False]


def test_invalid_urls(server):
    ns = urlseen.Client(server.url).namespace("crawl")  # crawler profile: relative is invalid
    assert ns.seen_many(["https://a.example/", "/relative", "https://a.example/"]) == [False, None, True]
    with pytest.raises(urlseen.InvalidUrl):
        ns.seen("/relative")
    with pytest.raises(urlseen.InvalidUrl):
        ns.contains("/relative")


def test_big_batches_go_in_pipelined_calls(server):
    ns = urlseen.Client(server.url).namespace("big")
    urls = [f"https://example.com/{i}" for i in range(5_000)]  # ten URL.SEEN calls of 512
    assert ns.seen_many(urls) == [False] * 5_000
    assert ns.seen_many(urls + ["https://example.com/new"]) == [True] * 5_000 + [False]
    assert ns.stats()["count"] == 5_001


def test_stats_match_the_embedded_keys_and_types(server):
    remote = urlseen.Client(server.url).namespace("s", capacity=10_000, fpr=0.001, exact=True)
    local = urlseen.Db().namespace("s", capacity=10_000, fpr=0.001, exact=True)
    for ns in (remote, local):
        ns.seen_many([f"https://example.com/{i}" for i in range(10)])
    r, l = remote.stats(), local.stats()
    assert r.keys() == l.keys()
    for key in r:
        assert type(r[key]) is type(l[key]), key
    for key in ("name", "count", "capacity", "fpr_bound", "profile", "exact", "counting", "leaf_bits"):
        assert r[key] == l[key], key


def test_forget(server):
    client = urlseen.Client(server.url)
    plain = client.namespace("plain")
    plain.seen("https://example.com/a")
    with pytest.raises(urlseen.ForgetUnsupported):
        plain.forget("https://example.com/a")
    counted = client.namespace("counted", counting=True)
    counted.seen_many(["https://example.com/a", "https://example.com/b"])
    assert counted.forget_many(["https://example.com/a", "/bad", "https://never.example/"]) == [True, None, False]
    assert counted.forget("https://example.com/b") is True
    assert counted.seen("https://example.com/a") is False


def test_forget_host_and_prefix(server):
    client = urlseen.Client(server.url)
    urls = [f"https://h{i % 10}.example/{'blog' if i % 3 else 'shop'}/{i}" for i in range(3000)]
    ns = client.namespace("kept", exact=True, keep_urls=True)
    assert ns.seen_many(urls) == [False] * len(urls)
    host3 = [u for u in urls if "//h3.example/" in u]
    assert ns.forget_host("h3.EXAMPLE") == len(host3)
    blog = [u for u in urls if u.startswith("https://h4.example/blog/")]
    assert ns.forget_prefix("https://h4.example/blog/") == len(blog)
    gone = set(host3) | set(blog)
    assert ns.contains_many(urls) == [u not in gone for u in urls]
    with pytest.raises(urlseen.InvalidUrl):
        ns.forget_prefix("https://h4.example/blog/?q")
    with pytest.raises(urlseen.InvalidUrl):
        ns.forget_host("https://h4.example/")
    plain = client.namespace("plain-forget")
    plain.seen("https://h1.example/a")
    with pytest.raises(urlseen.ForgetUnsupported):
        plain.forget_prefix("https://h1.example/")
    assert plain.forget_host("h1.example") == 1


def test_options_names_and_drop(server):
    client = urlseen.Client(server.url)
    with pytest.raises(urlseen.InvalidOption):
        client.namespace("x", profile="nope")  # refused before any round trip
    client.namespace("k", profile="w3lib").seen("https://example.com/")
    assert client.namespace("k", profile="crawler").stats()["profile"] == "w3lib"  # kept
    assert "k" in client.names()
    assert client.drop("k") is True
    assert client.drop("k") is False


def test_unreachable_server_raises_connection_failed():
    with pytest.raises(urlseen.ConnectionFailed):
        urlseen.Client(f"redis://127.0.0.1:{free_port()}")
    with pytest.raises(urlseen.InvalidOption):
        urlseen.Client("not a url")


def test_reconnects_after_a_restart(tmp_path):
    data = tmp_path / "data"
    first = Server(tmp_path, data=data)
    client = urlseen.Client(first.url)
    ns = client.namespace("jobs")
    assert ns.seen("https://example.com/kept") is False
    assert first.stop() == 0
    with pytest.raises(urlseen.ConnectionFailed):
        ns.seen("https://example.com/while-down")
    # Same port again, same data: the client connects again on the next call.
    second = Server(tmp_path, data=data, port=first.port)
    try:
        assert ns.seen("https://example.com/kept") is True
        assert ns.seen("https://example.com/while-down") is False
    finally:
        assert second.stop() == 0


def test_lifetimes_go_to_the_server(server):
    import time

    client = urlseen.Client(server.url)
    ns = client.namespace("job")
    assert ns.seen("https://a.example/") is False
    assert client.ttl("job") == -1
    assert client.ttl("nope") == -2
    assert client.expire("nope", 10) is False
    assert client.expire("job", 86400) is True
    assert client.ttl("job") == 86400
    assert client.persist("job") is True and client.ttl("job") == -1
    assert client.expire("job", 0.2) is True
    time.sleep(0.3)
    assert "job" not in client.names()
    assert ns.seen("https://a.example/") is False, "a new, empty namespace"


def test_recrawl_window_and_ttl_options_go_to_url_reserve(server, tmp_path):
    client = urlseen.Client(server.url)
    news = client.namespace("news", recrawl_after=2592000, ttl=86400)
    assert news.seen("https://a.example/") is False and news.seen("https://a.example/") is True
    assert news.stats()["recrawl_after"] == 2592000
    assert client.ttl("news") == 86400
    # The same options embedded.
    db = urlseen.Db(tmp_path / "d")
    local = db.namespace("news", recrawl_after=2592000)
    assert local.stats()["recrawl_after"] == 2592000
    with pytest.raises(urlseen.InvalidOption):
        db.namespace("bad", recrawl_after=60, counting=True)
    db.close()
