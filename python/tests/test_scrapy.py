"""urlseen.scrapy.DupeFilter under Scrapy's scheduler, and whole crawls of a generated site."""

from __future__ import annotations

import collections
import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest

import urlseen

from scrapy import FormRequest, Request, Spider
from scrapy.core.scheduler import Scheduler
from scrapy.utils.misc import build_from_crawler
from scrapy.utils.test import get_crawler
from w3lib.url import canonicalize_url

from urlseen.scrapy import DupeFilter

HERE = Path(__file__).resolve().parent

# Spellings that canonicalization must merge, or keep apart, exactly as Scrapy's does.
TRICKY = [
    "http://example.com/a?b=2&a=1",
    "http://example.com/a?a=1&b=2",
    "http://example.com/a?a=1&b=2#frag",
    "http://example.com/a?k=2&k=1",
    "http://example.com/a?k=1&k=2",
    "http://example.com/a?blank=",
    "http://example.com/a?blank",
    "http://example.com/s?q=a+b",
    "http://example.com/s?q=a%20b",
    "http://example.com/s?q=a b",
    "http://example.com/~user",
    "http://example.com/%7Euser",
    "http://example.com/%7euser",
    "http://example.com/Path/Case",
    "http://example.com/path/case",
    "http://EXAMPLE.com/x",
    "http://example.com/x",
    "http://example.com:80/x",
    "http://example.com/x/",
    "https://example.com/x",
    "http://example.com/caf%C3%A9",
    "http://example.com/café",
    "http://example.com/a;p=1?x=1",
    "http://example.com/a;p=2?x=1",
    "http://example.com/%2F",
    "http://example.com//double",
    "http://example.com/a/../b",
    "http://example.com/b",
    "http://example.com/?",
    "http://example.com/",
    "http://example.com",
    "http://münchen.example/",
    "http://xn--mnchen-3ya.example/",
    "http://example.com/q?a=%2B",
    "http://example.com/q?a=+",
    "http://example.com/q?%61=1",
    "http://example.com/q?a=1",
    "http://example.com/q?utm_source=x",
]


def make_scheduler(settings: dict, name: str = "unit"):
    settings = {
        "DUPEFILTER_CLASS": "urlseen.scrapy.DupeFilter",
        # The default (downloader-aware) queue needs a running engine.
        "SCHEDULER_PRIORITY_QUEUE": "scrapy.pqueues.ScrapyPriorityQueue",
        **settings,
    }
    crawler = get_crawler(Spider, settings)
    spider = Spider.from_crawler(crawler, name=name)
    crawler.spider = spider
    scheduler = build_from_crawler(Scheduler, crawler)
    scheduler.open(spider)
    return crawler, scheduler


def test_import_urlseen_needs_no_scrapy():
    code = "import sys; sys.modules['scrapy'] = None; import urlseen, urlseen.scrapy; print('ok')"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_under_scrapys_scheduler():
    crawler, scheduler = make_scheduler({})
    df = scheduler.df
    assert isinstance(df, DupeFilter)
    assert df.namespace_name == "unit"  # the spider's name
    assert df.urls.stats()["profile"] == "w3lib"
    assert scheduler.enqueue_request(Request("http://example.com/a?b=2&a=1")) is True
    assert scheduler.enqueue_request(Request("http://example.com/a?a=1&b=2#top")) is False
    assert scheduler.enqueue_request(Request("http://example.com/b")) is True
    # dont_filter: always scheduled, and not recorded.
    assert scheduler.enqueue_request(Request("http://example.com/b", dont_filter=True)) is True
    assert scheduler.enqueue_request(Request("http://example.com/c", dont_filter=True)) is True
    assert scheduler.enqueue_request(Request("http://example.com/c")) is True
    # POSTs to one URL are told apart by their bodies (Scrapy's request fingerprint).
    post = lambda body: FormRequest("http://example.com/form", formdata={"q": body})  # noqa: E731
    assert scheduler.enqueue_request(post("1")) is True
    assert scheduler.enqueue_request(post("2")) is True
    assert scheduler.enqueue_request(post("1")) is False
    # A GET to the form's URL is not the POST.
    assert scheduler.enqueue_request(Request("http://example.com/form")) is True
    assert crawler.stats.get_value("dupefilter/filtered") == 2
    assert len(scheduler) == 8
    scheduler.close("finished")


def test_same_decisions_as_rfpdupefilter():
    requests = [Request(u) for u in TRICKY] + [Request(u) for u in TRICKY]
    requests += [FormRequest("http://example.com/f", formdata={"q": str(i % 3)}) for i in range(6)]
    requests += [Request("http://example.com/g", method="PUT", body=b"x"), Request("http://example.com/g", method="PUT", body=b"x")]
    answers = {}
    for cls in ("scrapy.dupefilters.RFPDupeFilter", "urlseen.scrapy.DupeFilter"):
        crawler, scheduler = make_scheduler({"DUPEFILTER_CLASS": cls})
        answers[cls] = [scheduler.enqueue_request(r.copy()) for r in requests]
        scheduler.close("finished")
    ours, theirs = answers["urlseen.scrapy.DupeFilter"], answers["scrapy.dupefilters.RFPDupeFilter"]
    diff = [(r.method, r.url, o, t) for r, o, t in zip(requests, ours, theirs) if o != t]
    assert diff == []
    assert ours.count(False) >= len(TRICKY)  # the second copy of each is filtered, and more


def test_debug_logs_every_duplicate_like_rfpdupefilter(caplog):
    crawler, scheduler = make_scheduler({"DUPEFILTER_DEBUG": True})
    caplog.set_level(logging.DEBUG, logger="urlseen.scrapy")
    for _ in range(3):
        scheduler.enqueue_request(Request("http://example.com/a", headers={"Referer": "http://r.example/"}))
    msgs = [r.getMessage() for r in caplog.records if r.name == "urlseen.scrapy"]
    assert msgs == ["Filtered duplicate request: <GET http://example.com/a> (referer: http://r.example/)"] * 2
    assert crawler.stats.get_value("dupefilter/filtered") == 2


def test_without_debug_logs_the_first_duplicate_only(caplog):
    crawler, scheduler = make_scheduler({})
    caplog.set_level(logging.DEBUG, logger="urlseen.scrapy")
    for _ in range(3):
        scheduler.enqueue_request(Request("http://example.com/a"))
    msgs = [r.getMessage() for r in caplog.records if r.name == "urlseen.scrapy"]
    assert len(msgs) == 1 and "no more duplicates will be shown" in msgs[0]
    assert crawler.stats.get_value("dupefilter/filtered") == 2


def test_data_directory_is_kept_across_crawls(tmp_path):
    data = tmp_path / "seen"
    settings = {"URLSEEN_DATA": str(data), "URLSEEN_NAMESPACE": "shop"}
    crawler, scheduler = make_scheduler(settings)
    assert scheduler.enqueue_request(Request("http://example.com/kept")) is True
    assert scheduler.enqueue_request(FormRequest("http://example.com/f", formdata={"q": "1"})) is True
    scheduler.close("finished")  # close() keeps the data

    crawler, scheduler = make_scheduler(settings, name="other-spider")
    assert scheduler.df.namespace_name == "shop"
    assert scheduler.enqueue_request(Request("http://example.com/kept")) is False
    assert scheduler.enqueue_request(FormRequest("http://example.com/f", formdata={"q": "1"})) is False
    assert scheduler.enqueue_request(Request("http://example.com/new")) is True
    scheduler.close("finished")
    assert sorted(urlseen.Db(data).names()) == ["shop", "shop:requests"]


def test_jobdir_holds_the_data_when_urlseen_data_is_unset(tmp_path):
    crawler, scheduler = make_scheduler({"JOBDIR": str(tmp_path / "job")})
    scheduler.enqueue_request(Request("http://example.com/x"))
    scheduler.close("finished")
    assert (tmp_path / "job" / "urlseen").is_dir()
    assert urlseen.Db(tmp_path / "job" / "urlseen").namespace("unit").contains("http://example.com/x")


def test_from_spider_and_from_settings_and_clear(tmp_path):
    crawler = get_crawler(Spider, {"URLSEEN_DATA": str(tmp_path / "d")})
    spider = Spider.from_crawler(crawler, name="redis-style")
    df = DupeFilter.from_spider(spider)  # what scrapy-redis's scheduler calls
    assert df.namespace_name == "redis-style"
    assert df.request_seen(Request("http://example.com/1")) is False
    assert df.request_seen(Request("http://example.com/1")) is True
    df.clear()  # scrapy-redis's flush
    assert df.request_seen(Request("http://example.com/1")) is False
    df.close("finished")

    df = DupeFilter.from_settings(crawler.settings)
    assert df.namespace_name == "default"
    df.close("finished")


def test_under_scrapy_redis_scheduler(redis_url, tmp_path):
    """scrapy-redis's own Scheduler (its queue in Redis) with urlseen as its dupefilter: the
    scheduler builds it with `from_spider`, asks `request_seen`, logs, and clears it on close."""
    import redis
    from scrapy_redis.scheduler import Scheduler as RedisScheduler

    settings = {
        "SCHEDULER": "scrapy_redis.scheduler.Scheduler",
        "DUPEFILTER_CLASS": "urlseen.scrapy.DupeFilter",
        "REDIS_URL": redis_url,
        "URLSEEN_DATA": str(tmp_path / "seen"),
    }
    crawler = get_crawler(Spider, settings)
    spider = Spider.from_crawler(crawler, name="rs")
    crawler.spider = spider
    scheduler = RedisScheduler.from_crawler(crawler)
    scheduler.open(spider)
    assert isinstance(scheduler.df, DupeFilter)
    assert scheduler.df.namespace_name == "rs"
    assert scheduler.enqueue_request(Request("http://example.com/a?b=2&a=1")) is True
    assert scheduler.enqueue_request(Request("http://example.com/a?a=1&b=2#top")) is False
    assert scheduler.enqueue_request(Request("http://example.com/b", dont_filter=True)) is True
    assert scheduler.enqueue_request(Request("http://example.com/b")) is True
    assert len(scheduler) == 3  # the queue is scrapy-redis's, in Redis
    assert scheduler.next_request().url in {"http://example.com/a?b=2&a=1", "http://example.com/b"}
    assert crawler.stats.get_value("dupefilter/filtered") == 1
    # The seen set is urlseen's: scrapy-redis's own dupefilter key is never written.
    assert not redis.Redis.from_url(redis_url).exists("rs:dupefilter")
    assert scheduler.df.urls.stats()["count"] == 2
    scheduler.close("finished")  # SCHEDULER_PERSIST off: scrapy-redis clears the dupefilter
    # scrapy-redis never closes its dupefilter; the engine's spider_closed signal does.
    from scrapy import signals

    crawler.signals.send_catch_log(signals.spider_closed, spider=spider, reason="finished")
    db = urlseen.Db(str(tmp_path / "seen"))
    assert db.namespace("rs").stats()["count"] == 0


def test_a_fleet_shares_the_seen_set_through_urlseen_url(server):
    settings = {"URLSEEN_URL": server.url}
    _, first = make_scheduler(settings, name="fleet")
    _, second = make_scheduler(settings, name="fleet")
    assert first.enqueue_request(Request("http://example.com/a?y=1&x=2")) is True
    assert second.enqueue_request(Request("http://example.com/a?x=2&y=1")) is False
    assert second.enqueue_request(FormRequest("http://example.com/f", formdata={"q": "1"})) is True
    assert first.enqueue_request(FormRequest("http://example.com/f", formdata={"q": "1"})) is False
    first.close("finished")
    second.close("finished")
    stats = urlseen.Client(server.url).namespace("fleet").stats()
    assert stats["profile"] == "w3lib" and stats["count"] == 1


def crawl(site, which: str, *settings: str) -> dict:
    out = subprocess.run(
        [sys.executable, str(HERE / "crawl.py"), site.url, which, *settings],
        capture_output=True, text=True, timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def fetched(site) -> list[tuple[str, str, bytes]]:
    base = f"http://127.0.0.1:{site.port}"
    return [(m, canonicalize_url(base + path), body) for m, path, body in site.take_requests()]


def test_crawl_fetches_exactly_what_rfpdupefilter_fetches(site, tmp_path, clean_env):
    rfp = crawl(site, "rfp")
    by_rfp = fetched(site)
    ours = crawl(site, "urlseen", f"URLSEEN_DATA={tmp_path / 'seen'}")
    by_ours = fetched(site)

    for name, got in (("RFPDupeFilter", by_rfp), ("urlseen", by_ours)):
        twice = [k for k, n in collections.Counter(got).items() if n > 1]
        assert twice == [], f"{name} fetched a page twice"
    assert sorted(by_ours) == sorted(by_rfp)
    pages = {path for _, path, _ in by_ours}
    assert len([p for p in pages if "/p/" in p]) == 120  # every page of the site
    assert sum(1 for m, _, _ in by_ours if m == "POST") == 5  # one per distinct form body
    filtered = ours["stats"]["dupefilter/filtered"]
    assert filtered == rfp["stats"]["dupefilter/filtered"] and filtered > 1000
    assert ours["stats"]["downloader/request_count"] == rfp["stats"]["downloader/request_count"]

    # The data directory outlives the crawl: run again and only the start URL (dont_filter,
    # as Scrapy makes start URLs) is fetched; all its links were seen.
    again = crawl(site, "urlseen", f"URLSEEN_DATA={tmp_path / 'seen'}")
    assert [(m, p) for m, p, _ in site.take_requests()] == [("GET", "/index.html")]
    assert again["stats"]["dupefilter/filtered"] == 1
