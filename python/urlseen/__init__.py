"""urlseen: the URL-seen test every web crawler needs.

Check-and-insert of URLs in bounded memory, with a false-positive bound you choose and no false
negatives, canonicalizing each URL first (``crawler``, ``w3lib``, ``safebrowsing`` or ``none``):

>>> import urlseen
>>> ns = urlseen.Db().namespace("jobs", profile="w3lib")
>>> ns.seen("https://example.com/a?b=2&a=1")     # new, now recorded
False
>>> ns.seen("https://example.com/a?a=1&b=2#top")  # the same page, spelled differently
True
>>> ns.seen_many(["https://example.com/x", "mailto:someone@example.com", "https://example.com/x"])
[False, None, True]

``Db`` embeds the engine (in memory, or in a data directory kept across runs); ``Client`` has
the same API over ``urlseen serve``, for a fleet of crawlers; ``urlseen.scrapy.DupeFilter`` is
a ``DUPEFILTER_CLASS`` for Scrapy, ``urlseen.crawlee.StorageClient`` a storage client for Crawlee
for Python. See docs/python.md and docs/crawlee.md.
"""

from ._native import (
    Client,
    ConnectionFailed,
    Db,
    Error,
    ForgetUnsupported,
    InvalidOption,
    InvalidUrl,
    Locked,
    Namespace,
    RemoteNamespace,
    ServerError,
    StorageError,
    __version__,
)

__all__ = [
    "Client",
    "ConnectionFailed",
    "Db",
    "Error",
    "ForgetUnsupported",
    "InvalidOption",
    "InvalidUrl",
    "Locked",
    "Namespace",
    "RemoteNamespace",
    "ServerError",
    "StorageError",
    "__version__",
]
