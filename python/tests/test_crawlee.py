"""urlseen.crawlee.StorageClient: the request queue's contract against Crawlee's own, and whole
crawls of a generated site with Crawlee for Python (ParselCrawler; no browser): with Crawlee's
own deduplication, with urlseen embedded and through `urlseen serve`, after a kill, and with two
crawler processes sharing one server."""

from __future__ import annotations

import asyncio
import collections
import json
import signal
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

import urlseen
import urlseen.crawlee
from conftest import free_port

from crawlee import Request
from crawlee._utils.requests import normalize_url
from crawlee.configuration import Configuration
from crawlee.storage_clients import FileSystemStorageClient, MemoryStorageClient

HERE = Path(__file__).resolve().parent
PAGES = 800  # plus PAGES/4 under /q/ and /u/ each: 1,200 files, about 27,000 links


def run(coro):
    return asyncio.run(coro)


def config(tmp_path: Path, purge: bool = False) -> Configuration:
    return Configuration(storage_dir=str(tmp_path / "storage"), purge_on_start=purge)


async def open_queue(storage, tmp_path, purge=False):
    return await storage.create_rq_client(configuration=config(tmp_path, purge))


def answers(response) -> list[tuple[str, bool, bool]]:
    """The first answer for each unique key, sorted: Crawlee's memory queue answers every
    request in order, its file-system queue each key once, the known ones first."""
    first: dict[str, tuple[str, bool, bool]] = {}
    for p in response.processed_requests:
        first.setdefault(p.unique_key, (p.unique_key, p.was_already_present, p.was_already_handled))
    return sorted(first.values())


async def script(rq) -> list:
    """A sequence of queue calls as a crawler makes them, and every answer."""
    req = lambda u, **k: Request.from_url(u, **k)  # noqa: E731
    out: list = []
    out.append(answers(await rq.add_batch_of_requests([req("http://a.example/1"), req("http://a.example/2")])))
    # Duplicates: within a batch, of a pending request, a respelling Crawlee's key merges.
    out.append(answers(await rq.add_batch_of_requests(
        [req("http://a.example/3"), req("http://a.example/3#frag"), req("http://A.example/1")]
    )))
    # A forefront add, and a forefront re-add of a pending request: both move to the front.
    out.append(answers(await rq.add_batch_of_requests([req("http://a.example/4")], forefront=True)))
    out.append(answers(await rq.add_batch_of_requests([req("http://a.example/2")], forefront=True)))
    first = await rq.fetch_next_request()
    second = await rq.fetch_next_request()
    out.append([first.url, second.url])
    # In progress: present, not handled.
    out.append(answers(await rq.add_batch_of_requests([req(first.url)])))
    p = await rq.mark_request_as_handled(first)
    out.append((p.unique_key, p.was_already_present, p.was_already_handled))
    # Handled: present and handled, and not queued again.
    out.append(answers(await rq.add_batch_of_requests([req(first.url), req(first.url + "/")])))
    # Reclaimed: back in the queue, fetched again; reclaim/mark of a request not in progress: None.
    p = await rq.reclaim_request(second, forefront=True)
    out.append((p.unique_key, p.was_already_present, p.was_already_handled))
    out.append(await rq.reclaim_request(second))
    again = await rq.fetch_next_request()
    out.append(again.url)
    out.append(await rq.is_empty())
    rest = []
    while (r := await rq.fetch_next_request()) is not None:
        rest.append(r.url)
        out.append(await rq.is_finished())  # in progress: not finished
        await rq.mark_request_as_handled(r)
    out.append(rest)
    out.append((await rq.is_empty(), await rq.is_finished()))  # `again` still in progress
    await rq.mark_request_as_handled(again)
    out.append((await rq.is_empty(), await rq.is_finished()))
    # POSTs with the extended key: bodies tell them apart, as in Crawlee.
    post = lambda b: req("http://a.example/f", method="POST", payload=b, use_extended_unique_key=True)  # noqa: E731
    out.append(len(answers(await rq.add_batch_of_requests([post(b"1"), post(b"2"), post(b"1")]))))
    # A custom unique key.
    out.append(answers(await rq.add_batch_of_requests(
        [req("http://a.example/1", unique_key="mine"), req("http://a.example/9", unique_key="mine")]
    )))
    meta = await rq.get_metadata()
    out.append((meta.total_request_count, meta.handled_request_count))
    return out


@pytest.mark.parametrize("inner", ["memory", "files"])
def test_queue_answers_as_crawlees_own(tmp_path, inner):
    make = MemoryStorageClient if inner == "memory" else FileSystemStorageClient
    theirs = run(script(run(open_queue(make(), tmp_path / "theirs"))))
    storage = urlseen.crawlee.StorageClient(make(), data=tmp_path / "seen")
    ours = run(script(run(open_queue(storage, tmp_path / "ours"))))
    storage.close()
    assert ours == theirs
    assert theirs[4] == ["http://a.example/2", "http://a.example/4"]  # the script tests what it says
    assert theirs[7] == [("http://a.example/2", True, True)]


def test_handled_requests_leave_the_wrapped_queue(tmp_path):
    storage = urlseen.crawlee.StorageClient(FileSystemStorageClient(), data=tmp_path / "seen")

    async def go():
        rq = await open_queue(storage, tmp_path)
        await rq.add_batch_of_requests([Request.from_url(f"http://a.example/{i}") for i in range(50)])
        while (r := await rq.fetch_next_request()) is not None:
            await rq.mark_request_as_handled(r)
        files = [p for p in rq.inner.path_to_rq.glob("*.json") if p.name != "__metadata__.json"]
        answers_after = answers(await rq.add_batch_of_requests([Request.from_url("http://a.example/7")]))
        return files, answers_after, rq.inner._state.current_value.handled_requests, await rq.get_metadata()

    files, after, handled_keys, meta = run(go())
    storage.close()
    assert files == []  # Crawlee's queue keeps a file per handled request; this one none
    assert handled_keys == set()
    assert after == [("http://a.example/7", True, True)]  # urlseen answers for them
    assert (meta.total_request_count, meta.handled_request_count, meta.pending_request_count) == (50, 50, 0)


def test_canon_keeps_apart_what_crawlees_key_merges(tmp_path):
    """Crawlee's unique key lowercases the whole URL and drops a trailing slash: pages that
    differ by the case of their path, or by the slash, are one request to it. A canonical
    profile keeps them apart and still merges the respellings of one URL."""
    urls = [
        "http://a.example/Page", "http://a.example/page", "http://a.example/page/",
        "http://a.example/q?b=2&a=1", "http://a.example/q?a=1&b=2#top", "HTTP://A.example/q?a=1&b=2",
    ]

    async def adds(storage):
        rq = await open_queue(storage, tmp_path)
        response = await rq.add_batch_of_requests([Request.from_url(u) for u in urls])
        return [p.was_already_present for p in response.processed_requests]

    default = urlseen.crawlee.StorageClient(MemoryStorageClient())
    canon = urlseen.crawlee.StorageClient(MemoryStorageClient(), canon="w3lib", namespace="c")
    assert run(adds(default)) == [False, True, True, False, True, True]
    assert run(adds(canon)) == [False, False, False, False, True, True]


def test_purge_forgets_the_requests(tmp_path):
    storage = urlseen.crawlee.StorageClient(data=tmp_path / "seen")

    async def go():
        rq = await open_queue(storage, tmp_path)
        await rq.add_batch_of_requests([Request.from_url("http://a.example/1")])
        await rq.purge()
        return answers(await rq.add_batch_of_requests([Request.from_url("http://a.example/1")]))

    assert run(go()) == [("http://a.example/1", False, False)]
    storage.close()


def test_purge_keeps_a_shared_servers_set(tmp_path, server):
    # The other processes are using it; drop() drops it.
    storage = urlseen.crawlee.StorageClient(MemoryStorageClient(), url=server.url)

    async def go():
        rq = await open_queue(storage, tmp_path)
        await rq.add_batch_of_requests([Request.from_url("http://a.example/1")])
        await rq.purge()
        kept = answers(await rq.add_batch_of_requests([Request.from_url("http://a.example/1")]))
        await rq.drop()
        rq = await open_queue(storage, tmp_path)
        dropped = answers(await rq.add_batch_of_requests([Request.from_url("http://a.example/1")]))
        return kept, dropped

    kept, dropped = run(go())
    assert kept == [("http://a.example/1", True, False)]
    assert dropped == [("http://a.example/1", False, False)]
    storage.close()


class Killed(Exception):
    """Stands for a process killed at that point."""


@pytest.mark.parametrize("home", ["data", "server"])
def test_a_kill_between_queueing_and_recording_loses_no_request(tmp_path, server, monkeypatch, home):
    # An add queues its new requests, then records them: killed in between, the requests are in
    # the queue (files), not recorded, and the resumed crawl fetches them.
    where = {"data": tmp_path / "seen"} if home == "data" else {"url": server.url}
    reqs = [Request.from_url(f"http://a.example/{i}") for i in range(50)]
    real = urlseen.crawlee._by_pair

    def dies_at_the_record(routed, indexes, op):
        if op == "seen.seen_many":
            raise Killed
        return real(routed, indexes, op)

    async def killed():
        storage = urlseen.crawlee.StorageClient(**where)
        rq = await open_queue(storage, tmp_path)
        monkeypatch.setattr(urlseen.crawlee, "_by_pair", dies_at_the_record)
        with pytest.raises(Killed):
            await rq.add_batch_of_requests(reqs)
        monkeypatch.setattr(urlseen.crawlee, "_by_pair", real)
        storage.close()

    async def resumed():
        storage = urlseen.crawlee.StorageClient(**where)
        rq = await open_queue(storage, tmp_path)
        fetched = []
        while (r := await rq.fetch_next_request()) is not None:
            fetched.append(r.url)
            await rq.mark_request_as_handled(r)
        again = answers(await rq.add_batch_of_requests(reqs))
        storage.close()
        return fetched, again

    run(killed())
    fetched, again = run(resumed())
    assert sorted(fetched) == sorted(r.url for r in reqs)
    assert all(present and handled for _, present, handled in again)


def test_a_request_another_process_recorded_first_is_not_fetched_here(tmp_path, server, monkeypatch):
    # Two processes look up the same new request at once; both queue it; the one whose record
    # comes second answers "already present" and finishes its copy unfetched.
    mine = urlseen.crawlee.StorageClient(MemoryStorageClient(), url=server.url)
    other = urlseen.crawlee.StorageClient(MemoryStorageClient(), url=server.url, namespace="crawlee")
    real = urlseen.crawlee._by_pair

    async def go():
        rq = await open_queue(mine, tmp_path)
        rq_other = await open_queue(other, tmp_path / "other")
        req = Request.from_url("http://a.example/race")

        def other_records_first(routed, indexes, op):
            if op == "seen.seen_many":
                monkeypatch.setattr(urlseen.crawlee, "_by_pair", real)
                other_answers.extend(real(*other_routed(), "seen.seen_many").values())
            return real(routed, indexes, op)

        other_answers: list = []
        other_routed = lambda: (rq_other._keys.route([req]), [0])  # noqa: E731
        monkeypatch.setattr(urlseen.crawlee, "_by_pair", other_records_first)
        response = answers(await rq.add_batch_of_requests([req]))
        fetched = await rq.fetch_next_request()
        return other_answers, response, fetched, await rq.is_empty()

    other_answers, response, fetched, empty = run(go())
    assert other_answers == [False]  # the other process recorded it: it fetches it
    assert response == [("http://a.example/race", True, False)]
    assert fetched is None and empty
    mine.close()
    other.close()


def test_recrawl_window_and_forget_host(tmp_path, server):
    for storage in (
        urlseen.crawlee.StorageClient(MemoryStorageClient(), recrawl_after=86400),
        urlseen.crawlee.StorageClient(MemoryStorageClient(), url=server.url, recrawl_after=86400),
    ):
        async def go():
            rq = await open_queue(storage, tmp_path)
            reqs = [Request.from_url(u) for u in ("http://a.example/1", "http://b.example/1")]
            await rq.add_batch_of_requests(reqs)
            while (r := await rq.fetch_next_request()) is not None:
                await rq.mark_request_as_handled(r)
            before = answers(await rq.add_batch_of_requests(reqs))
            forgotten = rq.forget_host("a.example")
            after = answers(await rq.add_batch_of_requests(reqs))
            return before, forgotten, after, rq.stats()

        before, forgotten, after, stats = run(go())
        assert before == [("http://a.example/1", True, True), ("http://b.example/1", True, True)]
        assert forgotten == 1
        assert after == [("http://a.example/1", False, False), ("http://b.example/1", True, True)]
        assert stats["crawlee"]["recrawl_after"] == 86400
        storage.close()


def test_typed_errors(tmp_path):
    with pytest.raises(urlseen.InvalidOption, match="canon"):
        urlseen.crawlee.StorageClient(canon="nope")
    dead = urlseen.crawlee.StorageClient(url=f"redis://127.0.0.1:{free_port()}")
    with pytest.raises(urlseen.ConnectionFailed):
        run(open_queue(dead, tmp_path))
    with urlseen.Db(tmp_path / "seen"):
        locked = urlseen.crawlee.StorageClient(data=tmp_path / "seen")
        with pytest.raises(urlseen.Locked):
            run(open_queue(locked, tmp_path))


# -- whole crawls ------------------------------------------------------------------------------


@pytest.fixture
def big_site(tmp_path):
    from site_gen import SiteServer

    srv = SiteServer(tmp_path / "site", pages=PAGES, seed=11)
    yield srv
    srv.close()


def crawl(which: str, *args: str, env: dict | None = None, expect_kill: bool = False) -> dict:
    out = subprocess.run(
        [sys.executable, str(HERE / "crawlee_crawl.py"), which, *args],
        capture_output=True, text=True, timeout=300, env=env,
    )
    if expect_kill:
        assert out.returncode == -signal.SIGKILL, out.stderr[-3000:]
        return {}
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def gets(site) -> list[str]:
    """The paths the site answered since the last call."""
    return [path for method, path, _ in site.take_requests() if method == "GET"]


def page(path: str) -> str:
    """The file a path serves (what a fetch costs), whatever its spelling."""
    return unquote(urlsplit(path).path)


def every_file() -> set[str]:
    """Every file of the site (site_gen.generate), each reachable from the index."""
    files = {"/index.html"} | {f"/p/{i}.html" for i in range(PAGES)}
    files |= {f"/q/{i}.html" for i in range(PAGES // 4)} | {f"/u/~{i}.html" for i in range(PAGES // 4)}
    return files


def keys(site, paths: list[str]) -> list[str]:
    """Crawlee's unique keys of the fetched paths, sorted."""
    base = site.url.rsplit("/", 1)[0]
    return sorted(normalize_url(base + p) for p in paths)


def no_twice(paths: list[str]) -> list[str]:
    return [p for p, n in collections.Counter(paths).items() if n > 1]


def test_crawl_fetches_what_crawlee_fetches(big_site, tmp_path, clean_env, server):
    theirs = crawl("crawlee", big_site.url, env=clean_env)
    by_theirs = gets(big_site)
    embedded = crawl("urlseen", big_site.url, f"--data={tmp_path / 'seen'}", env=clean_env)
    by_embedded = gets(big_site)
    shared = crawl("urlseen", big_site.url, f"--url={server.url}", env=clean_env)
    by_shared = gets(big_site)

    for name, got in (("crawlee", by_theirs), ("embedded", by_embedded), ("shared", by_shared)):
        assert no_twice(got) == [], f"{name} fetched a URL twice"
    # The same requests (by unique key: of two spellings with one key, the first found is
    # fetched, and concurrency changes which is first).
    assert keys(big_site, by_embedded) == keys(big_site, by_theirs)
    assert keys(big_site, by_shared) == keys(big_site, by_theirs)
    assert {page(p) for p in by_theirs} == every_file()  # the whole site
    assert len(by_theirs) > len(every_file())  # respellings Crawlee's key keeps apart
    assert len(theirs["handled"]) == len(by_theirs)
    # Crawlee's memory queue keeps every handled request; the wrapped one keeps none.
    assert theirs["handled_kept_in_queue"] == len(by_theirs)
    assert embedded["handled_kept_in_queue"] == 0 and shared["handled_kept_in_queue"] == 0
    assert embedded["urlseen"]["crawlee:handled"]["count"] == len(by_theirs)
    assert embedded["urlseen"]["crawlee"]["profile"] == "none"

    # Crawled again on the same seen set (without Crawlee's purge on start, which empties the
    # queue and its seen set): the start URL was handled, nothing is fetched.
    env = {**clean_env, "CRAWLEE_PURGE_ON_START": "0"}
    again = crawl("urlseen", big_site.url, f"--data={tmp_path / 'seen'}", env=env)
    assert gets(big_site) == [] and again["handled"] == []


def test_canon_w3lib_fetches_each_canonical_url_once(big_site, tmp_path, clean_env):
    """canon="w3lib": each URL in Scrapy's canonical form fetched once, and the same URLs as
    Crawlee's own queue (the site's respellings are ones both merge)."""
    from w3lib.url import canonicalize_url

    base = big_site.url.rsplit("/", 1)[0]
    crawl("crawlee", big_site.url, env=clean_env)
    theirs = {canonicalize_url(base + p) for p in gets(big_site)}
    report = crawl("urlseen", big_site.url, f"--data={tmp_path / 'seen'}", "--canon=w3lib", env=clean_env)
    ours = [canonicalize_url(base + p) for p in gets(big_site)]
    assert no_twice(ours) == []
    assert set(ours) == theirs
    assert report["urlseen"]["crawlee"]["profile"] == "w3lib"


def test_resumed_after_a_kill_fetches_nothing_again(big_site, tmp_path, clean_env):
    """SIGKILL in the middle of a crawl (in the handler of the 300th request, one request at a
    time), then the same crawl again on the same storage: the second run fetches only the
    request the kill interrupted (never marked handled) and what the first never reached. A
    queue in memory dies with the process, so both runs keep the queue in files (Crawlee's
    file-system client, as Crawlee's own resumption does) and the seen set in urlseen's data
    directory."""
    env = {**clean_env, "CRAWLEE_PURGE_ON_START": "0", "CRAWLEE_STORAGE_DIR": str(tmp_path / "storage")}
    args = [big_site.url, "--storage=files", f"--data={tmp_path / 'seen'}"]
    crawl("urlseen", *args, "--concurrency=1", "--kill-at=300", env=env, expect_kill=True)
    first = gets(big_site)
    second = crawl("urlseen", *args, env=env)
    then = gets(big_site)
    assert len(first) == 300
    # Fetched twice: the request the kill interrupted, and nothing else (by unique key).
    assert no_twice(keys(big_site, first + then)) == keys(big_site, first[-1:])
    assert len(second["handled"]) == len(then)
    assert {page(p) for p in first + then} == every_file()
    # Nothing handled is left in the queue's files: urlseen answers for it.
    left = list((tmp_path / "storage" / "request_queues" / "default").glob("*.json"))
    assert [p.name for p in left] == ["__metadata__.json"]


def test_two_processes_on_one_server_never_fetch_a_page_twice(big_site, tmp_path, clean_env, server):
    """Two crawlers, each with its own queue in memory, started together from different pages
    of the same site and sharing one `urlseen serve`. Without Crawlee's purge on start, as
    docs/crawlee.md says to run several processes: a purge clears the shared set, and one
    process starting late (a loaded machine) would clear what the other had already added."""
    env = {**clean_env, "CRAWLEE_PURGE_ON_START": "0"}
    base = big_site.url.rsplit("/", 1)[0]
    seeds = [[f"{base}/p/{i}.html" for i in range(k, PAGES, PAGES // 4)][:4] for k in (0, PAGES // 8)]
    procs = [
        subprocess.Popen(
            [sys.executable, str(HERE / "crawlee_crawl.py"), "urlseen", *s, f"--url={server.url}",
             "--namespace=fleet"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )
        for s in seeds
    ]
    reports = []
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-3000:]
        reports.append(json.loads(out.strip().splitlines()[-1]))
    got = gets(big_site)
    assert no_twice(got) == []
    handled = [u for r in reports for u in r["handled"]]
    assert len(handled) == len(got) and len(set(handled)) == len(handled)
    assert all(len(r["handled"]) > 50 for r in reports)  # both crawled
    assert {f"/p/{i}.html" for i in range(PAGES)} <= {page(p) for p in got}
    assert urlseen.Client(server.url).namespace("fleet:handled", profile="none").stats()["count"] == len(got)

