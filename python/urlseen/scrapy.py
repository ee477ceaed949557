"""A Scrapy dupefilter backed by urlseen: one setting in ``settings.py``.

.. code-block:: python

    DUPEFILTER_CLASS = "urlseen.scrapy.DupeFilter"

Settings (all optional):

``URLSEEN_DATA``
    A data directory, kept across crawls as ``JOBDIR`` is (created if missing). Unset: the
    directory ``urlseen`` inside ``JOBDIR`` when ``JOBDIR`` is set, else memory only.
``URLSEEN_URL``
    A ``urlseen serve`` to share the seen set with other crawlers (``redis://host:port``);
    takes precedence over ``URLSEEN_DATA``.
``URLSEEN_NAMESPACE``
    The namespace; default: the spider's name.
``URLSEEN_PROFILE``
    Canonicalization; default ``w3lib``, the semantics of Scrapy's own ``canonicalize_url``, so
    the pages fetched are those Scrapy's ``RFPDupeFilter`` fetches.
``URLSEEN_CAPACITY``, ``URLSEEN_FPR``, ``URLSEEN_EXACT``, ``URLSEEN_FSYNC``
    Sizing (default 100,000 URLs: small to start; the tree grows past it), false-positive
    bound (default 0.001), exact mode (default off) and fsync policy of a data directory
    (default ``everysec``): see ``urlseen.Db.namespace``.

A GET request without a body is looked up by its URL. Any other request (a POST, or a request
with a body), and a URL the profile refuses (``data:``, ``file:`` ...), is looked up by Scrapy's
request fingerprint (``REQUEST_FINGERPRINTER_CLASS``) in a second namespace,
``<namespace>:requests`` (profile ``none``), so two POSTs with different bodies to one URL are
not merged.

Scrapy is imported only when the filter is used: ``import urlseen`` works without it.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any, Optional, Union

import urlseen

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.settings import BaseSettings

__all__ = ["DupeFilter"]

DEFAULT_PROFILE = "w3lib"
DEFAULT_CAPACITY = 100_000
DEFAULT_FPR = 0.001
DEFAULT_NAMESPACE = "default"
REQUESTS_SUFFIX = ":requests"


class DupeFilter:
    """``DUPEFILTER_CLASS`` for Scrapy's scheduler and for scrapy-redis's.

    ``request_seen`` is urlseen's check-and-insert. ``close()`` keeps the data (a data
    directory or a server keeps it for the next crawl); ``clear()`` drops it (scrapy-redis calls
    it when ``SCHEDULER_PERSIST`` is off).
    """

    def __init__(
        self,
        namespace: Optional[str] = None,
        *,
        data: Union[str, os.PathLike[str], None] = None,
        url: Optional[str] = None,
        profile: str = DEFAULT_PROFILE,
        capacity: int = DEFAULT_CAPACITY,
        fpr: float = DEFAULT_FPR,
        exact: bool = False,
        fsync: str = "everysec",
        debug: bool = False,
        fingerprinter: Any = None,
        crawler: Optional[Crawler] = None,
    ) -> None:
        self.namespace_name = namespace
        self.debug = debug
        self.logdupes = True
        self.logger = logging.getLogger(__name__)
        self.fingerprinter = fingerprinter
        self.crawler = crawler
        self._options = {"capacity": capacity, "fpr": fpr, "exact": exact}
        self._profile = profile
        self._source: Union[urlseen.Db, urlseen.Client]
        if url:
            self._source = urlseen.Client(url)
        elif data:
            os.makedirs(data, exist_ok=True)
            self._source = urlseen.Db(data, fsync=fsync)
        else:
            self._source = urlseen.Db()
        self._urls: Any = None
        self._requests: Any = None
        if namespace is not None:
            self._open_namespaces(namespace)

    # -- construction, as Scrapy and scrapy-redis do it -------------------------------------

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> DupeFilter:
        """What Scrapy's scheduler calls (``build_from_crawler``)."""
        spider = getattr(crawler, "spider", None)
        return cls._from_settings(
            crawler.settings,
            spider_name=getattr(spider, "name", None),
            fingerprinter=getattr(crawler, "request_fingerprinter", None),
            crawler=crawler,
        )

    @classmethod
    def from_spider(cls, spider: Spider) -> DupeFilter:
        """What scrapy-redis's scheduler calls when it opens the spider. That scheduler never
        closes its dupefilter, so this one closes itself on ``spider_closed`` (after the
        scheduler's own close, which may ``clear()`` it): the data directory is synced and
        released when the crawl ends, as under Scrapy's scheduler."""
        crawler = getattr(spider, "crawler", None)
        if crawler is not None:
            df = cls._from_settings(
                crawler.settings,
                spider_name=spider.name,
                fingerprinter=getattr(crawler, "request_fingerprinter", None),
                crawler=crawler,
            )
            if getattr(crawler, "signals", None) is not None:
                from scrapy import signals

                crawler.signals.connect(df._spider_closed, signal=signals.spider_closed)
            return df
        return cls._from_settings(spider.settings, spider_name=spider.name)

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> DupeFilter:
        """For schedulers that only have the settings: the namespace is ``URLSEEN_NAMESPACE``,
        else ``default``."""
        return cls._from_settings(settings, spider_name=None)

    @classmethod
    def _from_settings(
        cls,
        settings: BaseSettings,
        *,
        spider_name: Optional[str],
        fingerprinter: Any = None,
        crawler: Optional[Crawler] = None,
    ) -> DupeFilter:
        data = settings.get("URLSEEN_DATA")
        jobdir = settings.get("JOBDIR")
        if not data and jobdir:
            data = os.path.join(jobdir, "urlseen")
        namespace = settings.get("URLSEEN_NAMESPACE") or spider_name
        if namespace is None and crawler is None:
            namespace = DEFAULT_NAMESPACE
        return cls(
            namespace,
            data=data,
            url=settings.get("URLSEEN_URL"),
            profile=settings.get("URLSEEN_PROFILE") or DEFAULT_PROFILE,
            capacity=settings.getint("URLSEEN_CAPACITY", DEFAULT_CAPACITY),
            fpr=settings.getfloat("URLSEEN_FPR", DEFAULT_FPR),
            exact=settings.getbool("URLSEEN_EXACT", False),
            fsync=settings.get("URLSEEN_FSYNC") or "everysec",
            debug=settings.getbool("DUPEFILTER_DEBUG"),
            fingerprinter=fingerprinter,
            crawler=crawler,
        )

    # -- the dupefilter interface ----------------------------------------------------------

    def open(self) -> None:
        """Called by Scrapy's scheduler when the spider opens."""
        self._ensure_open()

    def request_seen(self, request: Request) -> bool:
        """Check-and-insert: ``True`` if an equivalent request was seen (drop it), ``False`` if
        it is new (it is now recorded). A ``dont_filter`` request is never seen and not
        recorded, as Scrapy's scheduler never asks about it."""
        if request.dont_filter:
            return False
        self._ensure_open()
        if request.method == "GET" and not request.body:
            try:
                return self._urls.seen(request.url)
            except urlseen.InvalidUrl:
                pass  # not a URL the profile takes: the request fingerprint decides
        return self._request_namespace().seen(self._fingerprint(request))

    def log(self, request: Request, spider: Spider) -> None:
        """Log a filtered request as Scrapy's ``RFPDupeFilter`` does, and count it in the
        ``dupefilter/filtered`` stat."""
        if self.debug:
            from scrapy.utils.request import referer_str

            msg = "Filtered duplicate request: %(request)s (referer: %(referer)s)"
            args = {"request": request, "referer": referer_str(request)}
            self.logger.debug(msg, args, extra={"spider": spider})
        elif self.logdupes:
            msg = (
                "Filtered duplicate request: %(request)s"
                " - no more duplicates will be shown"
                " (see DUPEFILTER_DEBUG to show all duplicates)"
            )
            self.logger.debug(msg, {"request": request}, extra={"spider": spider})
            self.logdupes = False
        crawler = getattr(spider, "crawler", None) or self.crawler
        if crawler is not None and crawler.stats is not None:
            crawler.stats.inc_value("dupefilter/filtered")

    def close(self, reason: str = "") -> None:
        """Called when the spider closes: makes everything durable and releases the data
        directory (or the connection). The data is kept."""
        self._source.close()

    def _spider_closed(self, spider: Spider, reason: str = "") -> None:
        self.close(reason)

    def clear(self) -> None:
        """Forget everything this filter recorded (scrapy-redis calls it to flush)."""
        name = self._ensure_open()
        self._source.drop(name)
        self._source.drop(name + REQUESTS_SUFFIX)
        self._requests = None
        self._open_namespaces(name)

    # -- helpers ---------------------------------------------------------------------------

    @property
    def urls(self) -> Any:
        """The namespace of URLs (``urlseen.Namespace`` or ``urlseen.RemoteNamespace``)."""
        self._ensure_open()
        return self._urls

    def _ensure_open(self) -> str:
        if self._urls is None:
            spider = getattr(self.crawler, "spider", None)
            name = getattr(spider, "name", None) or DEFAULT_NAMESPACE
            self._open_namespaces(name)
        assert self.namespace_name is not None
        return self.namespace_name

    def _open_namespaces(self, name: str) -> None:
        self.namespace_name = name
        self._urls = self._source.namespace(name, profile=self._profile, **self._options)

    def _request_namespace(self) -> Any:
        if self._requests is None:
            assert self.namespace_name is not None
            self._requests = self._source.namespace(
                self.namespace_name + REQUESTS_SUFFIX, profile="none", **self._options
            )
        return self._requests

    def _fingerprint(self, request: Request) -> str:
        if self.fingerprinter is None:
            from scrapy.utils.request import RequestFingerprinter

            self.fingerprinter = RequestFingerprinter(self.crawler)
        return bytes(self.fingerprinter.fingerprint(request)).hex()
