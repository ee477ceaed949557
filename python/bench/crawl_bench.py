"""Crawl benchmark: Scrapy with urlseen's DupeFilter against Scrapy's RFPDupeFilter, same run.

    python python/bench/crawl_bench.py [--pages 1500] [--runs 3] [--memory-urls 1000000]

1. Generates a site of --pages pages (plus a quarter as many again under /q/ and /u/, reached
   through query strings and escapes; python/tests/site_gen.py), serves it with http.server on
   a free loopback port, and crawls it --runs times with each filter, alternating
   (rfp, urlseen, urlseen+data, rfp, ...), each crawl in a fresh process (python/tests/crawl.py).
   Reports the median crawl time, the ratio to RFPDupeFilter, the pages fetched, and the
   crawl process's peak RSS (getrusage ru_maxrss: what /usr/bin/time -v reports).
2. Memory per URL: in a fresh process per filter, --memory-urls distinct GET requests go
   through request_seen; the growth of the process's RSS (VmRSS in /proc/self/status), divided
   by the URLs, is the filter's memory per URL. (tracemalloc would not see urlseen's memory,
   which Rust allocates.)

Run it from a virtualenv with the wheel, pytest's dependencies and Scrapy installed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from site_gen import SiteServer  # noqa: E402

FILTERS = {
    "rfp": [],
    "urlseen": [],
    "urlseen+data": ["URLSEEN_DATA={data}"],
}

MEMORY_PROBE = r"""
import json, sys
from scrapy import Request, Spider
from scrapy.utils.test import get_crawler
from scrapy.utils.misc import load_object

def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024

cls, n = sys.argv[1], int(sys.argv[2])
crawler = get_crawler(Spider, {"DUPEFILTER_CLASS": cls})
crawler.spider = Spider.from_crawler(crawler, name="memory")
df = load_object(cls).from_crawler(crawler)
df.open()
df.request_seen(Request("http://warm.example/"))
before = rss()
for i in range(n):
    df.request_seen(Request(f"http://site{i % 1000}.example/section/{i // 1000}/page-{i}.html?id={i}"))
after = rss()
print(json.dumps({"filter": cls, "urls": n, "rss_growth_bytes": after - before,
                  "bytes_per_url": (after - before) / n}))
"""


def crawl(site: SiteServer, which: str, data: Path) -> dict:
    extra = [s.format(data=data) for s in FILTERS[which]]
    kind = "rfp" if which == "rfp" else "urlseen"
    out = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "crawl.py"), site.url, kind, *extra],
        capture_output=True, text=True, check=True,
    )
    report = json.loads(out.stdout.strip().splitlines()[-1])
    report["fetched"] = len(site.take_requests())
    return report


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pages", type=int, default=1500)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--memory-urls", type=int, default=1_000_000)
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        site = SiteServer(Path(tmp) / "site", pages=args.pages, seed=1)
        results: dict[str, list[dict]] = {k: [] for k in FILTERS}
        for run in range(args.runs):
            for which in FILTERS:
                data = Path(tmp) / f"data-{run}"
                r = crawl(site, which, data)
                results[which].append(r)
                print(f"run {run + 1} {which:13} {r['seconds']:7.2f} s  fetched {r['fetched']}  "
                      f"filtered {r['stats'].get('dupefilter/filtered')}  "
                      f"peak RSS {r['max_rss_kib'] / 1024:.1f} MiB", flush=True)
        site.close()

    base = statistics.median(r["seconds"] for r in results["rfp"])
    print(f"\nsite: {args.pages} pages under /p/ (+{2 * max(1, args.pages // 4)} under /q/, /u/), "
          f"medians of {args.runs} alternating runs")
    print(f"{'filter':14} {'median s':>9} {'ratio':>6} {'fetched':>8} {'filtered':>9} {'peak RSS MiB':>13}")
    for which, rs in results.items():
        med = statistics.median(r["seconds"] for r in rs)
        rss = statistics.median(r["max_rss_kib"] for r in rs) / 1024
        print(f"{which:14} {med:9.2f} {med / base:6.3f} {rs[0]['fetched']:8} "
              f"{rs[0]['stats'].get('dupefilter/filtered'):9} {rss:13.1f}")

    if args.memory_urls:
        print(f"\nmemory per URL: RSS growth over {args.memory_urls:,} distinct request_seen calls")
        for cls in ("scrapy.dupefilters.RFPDupeFilter", "urlseen.scrapy.DupeFilter"):
            out = subprocess.run([sys.executable, "-c", MEMORY_PROBE, cls, str(args.memory_urls)],
                                 capture_output=True, text=True, check=True)
            m = json.loads(out.stdout.strip().splitlines()[-1])
            print(f"{cls:36} {m['rss_growth_bytes'] / 2**20:8.1f} MiB  {m['bytes_per_url']:6.1f} bytes/URL")


if __name__ == "__main__":
    main()
