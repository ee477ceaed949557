"""Crawlee for Python's request queue fed directly: Crawlee's own queues against
urlseen.crawlee.StorageClient, each in a fresh process.

    python python/bench/crawlee_bench.py [--urls 1000000] [--links 4] [--configs a,b,...]

A crawl without the network: --urls distinct URLs go through one Crawlee ``RequestQueue`` as a
crawler drives it. 1,000 start URLs are added; then each request fetched is marked handled after
its page "discovers" --links links (``add_requests`` of ``Request.from_url``): one URL not seen
before, while there are any, and --links - 1 URLs found earlier (drawn at random, handled or
not), so the queue's backlog stays about 1,000 requests and every URL is found --links times.
The run ends when the queue is finished. Reported per configuration: wall time, requests
handled, links added, and the process's peak RSS (getrusage ru_maxrss, what /usr/bin/time -v
reports).

Configurations: ``crawlee-memory`` (Crawlee's MemoryStorageClient), ``crawlee-files``
(FileSystemStorageClient, a file per request), ``urlseen-memory`` (StorageClient over
MemoryStorageClient, the seen set in memory), ``urlseen-data`` (the same with a urlseen data
directory), ``urlseen-files`` (over FileSystemStorageClient, the seen set in
storage/urlseen), ``urlseen-serve`` (over MemoryStorageClient, the seen set in a ``urlseen
serve`` started for the run). Run it from a virtualenv with the wheel and crawlee installed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CONFIGS = ["crawlee-memory", "urlseen-memory", "urlseen-data", "urlseen-serve", "crawlee-files", "urlseen-files"]
START = 1000


async def feed(config: str, urls: int, links: int, workdir: Path, server: str) -> dict:
    from crawlee import Request
    from crawlee.configuration import Configuration
    from crawlee.storage_clients import FileSystemStorageClient, MemoryStorageClient
    from crawlee.storages import RequestQueue

    import urlseen.crawlee

    inner = FileSystemStorageClient() if config.endswith("files") else MemoryStorageClient()
    if config.startswith("crawlee"):
        storage = inner
    elif config == "urlseen-data":
        storage = urlseen.crawlee.StorageClient(inner, data=workdir / "seen")
    elif config == "urlseen-serve":
        storage = urlseen.crawlee.StorageClient(inner, url=server)
    else:
        storage = urlseen.crawlee.StorageClient(inner)
    configuration = Configuration(storage_dir=str(workdir / "storage"), purge_on_start=True)
    rq = await RequestQueue.open(storage_client=storage, configuration=configuration)

    url = lambda i: f"https://site{i % 997}.example/page/{i}?ref={i % 13}"  # noqa: E731
    rng = random.Random(42)
    found = START
    added = 0
    started = time.perf_counter()
    await rq.add_requests([Request.from_url(url(i)) for i in range(START)])
    handled = 0
    while True:
        # A crawler yields to the event loop between requests; so does this loop, which lets
        # the tasks add_requests starts run (left pending, each keeps its batch alive).
        await asyncio.sleep(0)
        request = await rq.fetch_next_request()
        if request is None:
            if await rq.is_finished():
                break
            continue
        batch = []
        if found < urls:
            batch.append(Request.from_url(url(found)))
            found += 1
        batch += [Request.from_url(url(rng.randrange(found))) for _ in range(links - len(batch))]
        await rq.add_requests(batch)
        added += len(batch)
        await rq.mark_request_as_handled(request)
        handled += 1
    elapsed = time.perf_counter() - started
    if isinstance(storage, urlseen.crawlee.StorageClient):
        storage.close()
    return {
        "config": config,
        "urls": urls,
        "handled": handled,
        "links_added": added,
        "seconds": round(elapsed, 1),
        "max_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--urls", type=int, default=1_000_000)
    parser.add_argument("--links", type=int, default=4)
    parser.add_argument("--configs", default=",".join(CONFIGS))
    parser.add_argument("--one", help=argparse.SUPPRESS)  # a child: one configuration
    parser.add_argument("--workdir", help=argparse.SUPPRESS)
    parser.add_argument("--server", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        report = asyncio.run(feed(args.one, args.urls, args.links, Path(args.workdir), args.server))
        print(json.dumps(report))
        return

    print(f"# {args.urls:,} URLs, each found {args.links} times; python {sys.version.split()[0]}")
    print(f"{'config':<16} {'handled':>9} {'links':>10} {'seconds':>8} {'peak RSS MiB':>13}")
    for config in args.configs.split(","):
        workdir = Path(tempfile.mkdtemp(prefix="crawlee-bench-"))
        server = None
        url = ""
        if config == "urlseen-serve":
            port = free_port()
            cmd = Path(sys.executable).parent / "urlseen"
            server = subprocess.Popen(
                [str(cmd), "serve", "--resp", f"127.0.0.1:{port}", "--http", "off", "--spill-dir", str(workdir)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )
            for _ in range(300):
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    time.sleep(0.05)
            url = f"redis://127.0.0.1:{port}"
        try:
            out = subprocess.run(
                [sys.executable, __file__, "--one", config, "--urls", str(args.urls), "--links",
                 str(args.links), "--workdir", str(workdir), "--server", url],
                capture_output=True, text=True, env={**os.environ, "CRAWLEE_LOG_LEVEL": "WARNING"},
            )
            if out.returncode != 0:
                print(f"{config}: failed\n{out.stderr[-2000:]}", file=sys.stderr)
                continue
            r = json.loads(out.stdout.strip().splitlines()[-1])
            print(f"{config:<16} {r['handled']:>9,} {r['links_added']:>10,} {r['seconds']:>8} {r['max_rss_mib']:>13}",
                  flush=True)
        finally:
            if server is not None:
                server.terminate()
                server.wait()
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
