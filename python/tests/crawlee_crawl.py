"""Crawls a site with Crawlee for Python (ParselCrawler: HTTP and lxml, no browser) in this
process and prints a JSON report on stdout: the crawl's wall time, the process's peak RSS, the
requests handled and the state left in the wrapped queue. Run once per crawl, by the tests
(test_crawlee.py) and by python/bench/crawlee_bench.py.

    python crawlee_crawl.py {crawlee|urlseen} START_URL [START_URL ...] [--option=value ...]

``crawlee`` is Crawlee's own queue (its own deduplication); ``urlseen`` wraps it in
``urlseen.crawlee.StorageClient``. Options: ``--storage=memory|files`` (Crawlee's client:
``MemoryStorageClient`` or ``FileSystemStorageClient`` in ``CRAWLEE_STORAGE_DIR``), ``--data``,
``--url``, ``--namespace``, ``--canon`` (passed to ``StorageClient``), ``--concurrency=N``
(max concurrency), ``--kill-at=N`` (SIGKILL this process when the Nth request reaches the
handler, before it is handled: a crash in the middle of a crawl).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import resource
import signal
import sys
import time

from crawlee import ConcurrencySettings
from crawlee.crawlers import ParselCrawler, ParselCrawlingContext
from crawlee.storage_clients import FileSystemStorageClient, MemoryStorageClient

import urlseen.crawlee


def parse(argv: list[str]) -> tuple[str, list[str], dict[str, str]]:
    which, rest = argv[0], argv[1:]
    starts = [a for a in rest if not a.startswith("--")]
    options = dict(a[2:].partition("=")[::2] for a in rest if a.startswith("--"))
    return which, starts, options


async def crawl(which: str, starts: list[str], options: dict[str, str]) -> dict:
    inner = MemoryStorageClient() if options.get("storage", "memory") == "memory" else FileSystemStorageClient()
    if which == "crawlee":
        storage = inner
    else:
        storage = urlseen.crawlee.StorageClient(
            inner,
            data=options.get("data"),
            url=options.get("url"),
            namespace=options.get("namespace", "crawlee"),
            canon=options.get("canon"),
        )
    concurrency = int(options.get("concurrency", "8"))
    crawler = ParselCrawler(
        storage_client=storage,
        concurrency_settings=ConcurrencySettings(
            min_concurrency=concurrency, desired_concurrency=concurrency, max_concurrency=concurrency
        ),
        max_request_retries=0,
        configure_logging=False,
    )
    handled: list[str] = []
    kill_at = int(options.get("kill-at", "0"))

    @crawler.router.default_handler
    async def handler(context: ParselCrawlingContext) -> None:
        if kill_at and len(handled) + 1 == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        handled.append(context.request.url)
        await context.enqueue_links(strategy="same-origin")

    started = time.perf_counter()
    await crawler.run(starts)
    elapsed = time.perf_counter() - started
    queue = await crawler.get_request_manager()
    client = getattr(queue, "_client", None)
    inner_client = getattr(client, "inner", client)
    kept = getattr(inner_client, "_handled_requests", None)
    report = {
        "which": which,
        "seconds": elapsed,
        "max_rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        "handled": handled,
        "handled_kept_in_queue": len(kept) if kept is not None else None,
        "stats": {
            "requests_finished": crawler.statistics.state.requests_finished,
            "requests_failed": crawler.statistics.state.requests_failed,
        },
    }
    if isinstance(storage, urlseen.crawlee.StorageClient):
        report["urlseen"] = {
            name: {"count": s["count"], "profile": s["profile"]} for name, s in client.stats().items()
        }
        storage.close()
    return report


def main() -> None:
    logging.basicConfig(level=logging.WARNING)
    which, starts, options = parse(sys.argv[1:])
    report = asyncio.run(crawl(which, starts, options))
    print(json.dumps(report))


if __name__ == "__main__":
    main()
