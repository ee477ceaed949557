"""Crawls a site with Scrapy in this process and prints a JSON report on stdout: Scrapy's stats,
the crawl's wall time and the process's peak RSS. Run once per crawl (Twisted's reactor cannot
be restarted), by the tests and by python/bench/crawl_bench.py.

    python crawl.py START_URL {rfp|urlseen} [SETTING=VALUE ...]
"""

from __future__ import annotations

import json
import resource
import sys
import time

import scrapy
from scrapy.crawler import CrawlerProcess

FILTERS = {
    "rfp": "scrapy.dupefilters.RFPDupeFilter",
    "urlseen": "urlseen.scrapy.DupeFilter",
}


class SiteSpider(scrapy.Spider):
    """Follows every http(s) link of every page, and submits every page's POST form."""

    name = "site"

    def __init__(self, start: str, **kwargs):
        super().__init__(**kwargs)
        self.start_urls = [start]

    def parse(self, response):
        for href in response.css("a::attr(href)").getall():
            if href.startswith(("mailto:", "javascript:")):
                continue
            yield response.follow(href, self.parse)
        for form in response.css("form[method=post]"):
            fields = dict(zip(form.css("input::attr(name)").getall(), form.css("input::attr(value)").getall()))
            action = response.urljoin(form.attrib.get("action", ""))
            yield scrapy.FormRequest(action, formdata=fields, callback=self.parse_post)

    def parse_post(self, response):
        return None


def main() -> None:
    start, which, *extra = sys.argv[1:]
    settings = {
        "DUPEFILTER_CLASS": FILTERS[which],
        "ROBOTSTXT_OBEY": False,
        "TELNETCONSOLE_ENABLED": False,
        "RETRY_ENABLED": False,
        "COOKIES_ENABLED": False,
        "CONCURRENT_REQUESTS": 16,
        "CONCURRENT_REQUESTS_PER_DOMAIN": 16,
        "LOG_LEVEL": "WARNING",
        "HTTPERROR_ALLOW_ALL": True,
    }
    for item in extra:
        key, _, value = item.partition("=")
        settings[key] = value
    process = CrawlerProcess(settings)
    crawler = process.create_crawler(SiteSpider)
    started = time.perf_counter()
    process.crawl(crawler, start=start)
    process.start()
    elapsed = time.perf_counter() - started
    stats = {k: v for k, v in crawler.stats.get_stats().items() if isinstance(v, (int, float, str))}
    report = {
        "filter": which,
        "seconds": elapsed,
        "max_rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        "stats": stats,
    }
    print(json.dumps(report, default=str))


if __name__ == "__main__":
    main()
