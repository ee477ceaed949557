"""Crawlee for Python with urlseen as its request queue's seen set: one argument to the crawler.

.. code-block:: python

    import urlseen.crawlee
    from crawlee.crawlers import ParselCrawler

    crawler = ParselCrawler(storage_client=urlseen.crawlee.StorageClient())

Crawlee's request queues deduplicate on each request's ``unique_key`` and keep every request they
were ever given, handled ones included, to answer "already present" (in memory, or one JSON file
per request and a state file with every handled key). ``StorageClient`` wraps Crawlee's own
storage client (``FileSystemStorageClient``, Crawlee's default, or ``MemoryStorageClient``):
datasets and key-value stores are the wrapped client's, unchanged; each request queue answers
"already present" and "already handled" from two urlseen namespaces and hands only new requests
to the wrapped client's queue, which then holds the requests still to do and in progress. A
request it has handled is dropped from the wrapped queue (its file removed), so memory and files
grow with the backlog, and the seen set with about 2 bytes of RAM per request (``fpr=0.001``,
with a data directory, which keeps 8 bytes per request on disk; 14 bytes of RAM without one).

Where the seen set lives:

``StorageClient()``
    Beside the queue: ``<storage_dir>/urlseen`` (Crawlee's ``CRAWLEE_STORAGE_DIR``, default
    ``./storage``) with the file-system client, in memory with ``MemoryStorageClient``.
``StorageClient(data="./seen")``
    A urlseen data directory of your choice. It is locked while the crawler runs: a second
    process on it raises ``urlseen.Locked``.
``StorageClient(url="redis://host:6380")``
    A ``urlseen serve`` shared by several crawler processes (each with its own queue): a
    request one of them added is "already present" for all, so no page is fetched twice.
    ``urlseen.ConnectionFailed`` if the server cannot be reached.

What a request is deduplicated on (``canon``):

``canon=None`` (default)
    Its ``unique_key``, byte for byte, as Crawlee does: a crawl fetches the pages Crawlee's own
    queue fetches, and custom unique keys (``Request.from_url(url, unique_key=...)``,
    ``use_extended_unique_key=True`` for POSTs) keep working.
``canon="w3lib"`` (or ``"crawler"``, ``"safebrowsing"``)
    The URL of a GET request whose ``unique_key`` is Crawlee's default one, in that urlseen
    profile's canonical form (docs/canonicalization.md); the request goes to the queue with its
    URL as its unique key. Crawlee's default key lowercases the whole URL and drops a trailing
    slash and ``utm_*`` arguments, so it merges pages that differ (``/Page`` and ``/page``);
    a profile keeps them apart and merges the respellings of one URL (``w3lib``: Scrapy's
    ``canonicalize_url``; ``crawler`` does not sort the query). Any other request (a POST, a
    custom key, a URL the profile refuses) is deduplicated on its ``unique_key``, in
    namespaces of their own. See docs/crawlee.md.

Options of the namespaces (``capacity``, ``fpr``, ``exact``, ``recrawl_after``, ``ttl``) apply
when they are created; ``forget_host()`` makes every request of a host new again.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Hashable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Optional, Union

from crawlee import Request
from crawlee._utils.requests import normalize_url
from crawlee.configuration import Configuration
from crawlee.storage_clients import FileSystemStorageClient, MemoryStorageClient
from crawlee.storage_clients import StorageClient as _CrawleeStorageClient
from crawlee.storage_clients._base import DatasetClient, KeyValueStoreClient
from crawlee.storage_clients._base import RequestQueueClient as _CrawleeRequestQueueClient
from crawlee.storage_clients.models import (
    AddRequestsResponse,
    ProcessedRequest,
    RequestQueueMetadata,
    UnprocessedRequest,
)

import urlseen

__all__ = ["RequestQueueClient", "StorageClient"]

DEFAULT_CAPACITY = 100_000
DEFAULT_FPR = 0.001
DEFAULT_NAMESPACE = "crawlee"
CANON_PROFILES = ("crawler", "w3lib", "safebrowsing")
HANDLED_SUFFIX = ":handled"
KEYS_SUFFIX = ":keys"

Source = Union[urlseen.Db, urlseen.Client]


class _Pair:
    """Two namespaces of one key space: keys ever added (``seen``), keys handled."""

    def __init__(self, source: Source, name: str, profile: str, options: dict[str, Any]) -> None:
        self.source = source
        self.name = name
        self.profile = profile
        self.options = options
        self.open()

    def open(self) -> None:
        self.seen = self.source.namespace(self.name, profile=self.profile, **self.options)
        self.handled = self.source.namespace(
            self.name + HANDLED_SUFFIX, profile=self.profile, **self.options
        )

    def drop(self) -> None:
        self.source.drop(self.name)
        self.source.drop(self.name + HANDLED_SUFFIX)
        self.open()


class _Keys:
    """What a request is deduplicated on: its unique key (``canon=None``), or its URL in a
    canonical profile with the unique key as the fallback."""

    def __init__(self, source: Source, name: str, canon: Optional[str], options: dict[str, Any]):
        self.canon = canon
        self.raw = _Pair(source, name + KEYS_SUFFIX if canon else name, "none", options)
        self.urls = _Pair(source, name, canon, options) if canon else None
        self._scratch: Optional[urlseen.Db] = None

    def pairs(self) -> list[_Pair]:
        return [p for p in (self.urls, self.raw) if p is not None]

    def route(self, requests: Sequence[Request]) -> list[tuple[_Pair, str]]:
        """Each request's namespaces and key. In canon mode a URL the profile refuses is
        routed to the unique keys' namespaces."""
        if self.urls is None:
            return [(self.raw, r.unique_key) for r in requests]
        routed: list[tuple[_Pair, str]] = []
        for r in requests:
            routed.append((self.urls, r.url) if _by_url(r) else (self.raw, r.unique_key))
        # Ask the profile once which URLs it takes (contains records nothing).
        urls = [(i, key) for i, (pair, key) in enumerate(routed) if pair is self.urls]
        if urls:
            answers = self.urls.seen.contains_many([key for _, key in urls])
            for (i, _), answer in zip(urls, answers):
                if answer is None:
                    routed[i] = (self.raw, requests[i].unique_key)
        return routed

    def respellings(self, routed: Sequence[tuple[_Pair, str]], new: Sequence[int]) -> list[int]:
        """Of the requests at `new` (looked up, new), those whose URL is another's of them in
        the profile's canonical form: a scratch namespace in memory tells."""
        if self.urls is None:
            return []
        at = [i for i in new if routed[i][0] is self.urls]
        if len(at) < 2:
            return []
        if self._scratch is None:
            self._scratch = urlseen.Db()
        self._scratch.drop("batch")
        ns = self._scratch.namespace("batch", profile=self.canon, capacity=len(at))
        return [i for i, again in zip(at, ns.seen_many([routed[i][1] for i in at])) if again]

    def queued_as(self, request: Request, pair: _Pair) -> Request:
        """The request as the wrapped queue gets it. In canon mode a request deduplicated by
        its URL gets that URL as its unique key, so that the queue, which deduplicates on the
        unique key, keeps apart what the profile keeps apart (Crawlee's default key lowercases
        the whole URL and drops a trailing slash)."""
        if pair is self.urls and request.unique_key != request.url:
            return request.model_copy(update={"unique_key": request.url})
        return request

    def drop(self) -> None:
        for pair in self.pairs():
            pair.drop()


def _by_url(request: Request) -> bool:
    """Whether canon mode deduplicates `request` by its URL: a GET without a body whose unique
    key is Crawlee's default for its URL (not a key its user chose)."""
    if request.method != "GET" or request.payload:
        return False
    if request.unique_key == request.url:  # already given its URL as the key, by queued_as
        return True
    try:
        return request.unique_key == normalize_url(request.url)
    except Exception:  # noqa: BLE001 (yarl raises several kinds on a bad URL)
        return False


def _by_pair(
    routed: Sequence[tuple[_Pair, str]], indexes: Sequence[int], op: str
) -> dict[int, Optional[bool]]:
    """Runs `op` (``contains_many`` or ``seen_many``, of the ``seen`` or ``handled`` namespace:
    ``"seen.contains_many"``) on the keys at `indexes`, one batch per namespace."""
    which, method = op.split(".")
    groups: dict[int, tuple[_Pair, list[int]]] = {}
    for i in indexes:
        pair = routed[i][0]
        groups.setdefault(id(pair), (pair, []))[1].append(i)
    out: dict[int, Optional[bool]] = {}
    for pair, idx in groups.values():
        answers = getattr(getattr(pair, which), method)([routed[i][1] for i in idx])
        out.update(zip(idx, answers))
    return out


class RequestQueueClient(_CrawleeRequestQueueClient):
    """A Crawlee request queue client that answers "already present" and "already handled"
    from urlseen and keeps in `inner` (Crawlee's memory or file-system queue) only the
    requests still to do.

    An add looks its requests up, gives the new ones to `inner`, and records them once they
    are queued, so that a kill at any point loses no request: one killed between the two is
    queued and not recorded, and fetched when the crawl resumes (with its queue in files).
    ``shared`` (a ``urlseen serve``): a request another process recorded between the look and
    the record is queued by both; the record's answer says which came second, and that one
    finishes its copy unfetched when its queue hands it out, so no page is fetched twice.
    """

    def __init__(self, inner: _CrawleeRequestQueueClient, keys: _Keys, *, shared: bool) -> None:
        self._inner = inner
        self._keys = keys
        self._shared = shared
        self._add_lock = asyncio.Lock()
        # Unique keys this process queued that another one recorded first (a shared set):
        # finished unfetched when `inner` hands them out.
        self._theirs: set[str] = set()

    @property
    def inner(self) -> _CrawleeRequestQueueClient:
        """The wrapped queue: the requests still to do and in progress."""
        return self._inner

    async def get_metadata(self) -> RequestQueueMetadata:
        return await self._inner.get_metadata()

    async def drop(self) -> None:
        await self._inner.drop()
        self._keys.drop()
        self._theirs.clear()

    async def purge(self) -> None:
        """Empties the queue and, with an embedded ``Db``, forgets every request it was given,
        as Crawlee's own purge does (``purge_on_start``). A shared server's namespaces are
        kept: the other processes are using them (``drop()`` drops them)."""
        await self._inner.purge()
        if not self._shared:
            self._keys.drop()
        self._theirs.clear()

    async def add_batch_of_requests(
        self, requests: Sequence[Request], *, forefront: bool = False
    ) -> AddRequestsResponse:
        async with self._add_lock:
            return await self._add(requests, forefront)

    async def _add(self, requests: Sequence[Request], forefront: bool) -> AddRequestsResponse:
        routed = self._keys.route(requests)
        requests = [self._keys.queued_as(r, pair) for r, (pair, _) in zip(requests, routed)]
        # A key twice in one batch: the first request is looked up; a copy with the same
        # unique key goes where it goes (the wrapped queue answers for both), a copy that only
        # canonicalizes to it is present.
        first: dict[tuple[int, str], int] = {}
        copy_of: dict[int, int] = {}
        for i, (pair, key) in enumerate(routed):
            j = first.setdefault((id(pair), key), i)
            if j != i:
                copy_of[i] = j
        unique = [i for i in range(len(requests)) if i not in copy_of]

        present = _by_pair(routed, unique, "seen.contains_many")
        # Looked up, not recorded yet: two spellings of one URL in this batch are both new;
        # the first one decides.
        for i in self._keys.respellings(routed, [i for i in unique if not present[i]]):
            present[i] = True
        handled = _by_pair(routed, [i for i in unique if present[i]], "handled.contains_many")
        forward = {i for i in unique if not present[i]}
        if forefront:
            # A forefront re-add moves a request still waiting in this queue to the front.
            for i in unique:
                if present[i] and not handled[i]:
                    if await self._inner.get_request(requests[i].unique_key) is not None:
                        forward.add(i)
        for i, j in copy_of.items():
            if j in forward and requests[i].unique_key == requests[j].unique_key:
                forward.add(i)

        out: list[ProcessedRequest] = []
        unprocessed: list[UnprocessedRequest] = []
        if forward:
            order = sorted(forward)
            response = await self._inner.add_batch_of_requests(
                [requests[i] for i in order], forefront=forefront
            )
            unprocessed.extend(response.unprocessed_requests)
            taken = {p.unique_key for p in response.processed_requests}
            queued = [i for i in order if i not in copy_of and requests[i].unique_key in taken]
            # Recorded once queued: a kill before this line leaves them queued and unrecorded,
            # and the queue deduplicates them until they are handled (which records them). A
            # request `inner` refused is not recorded: a later add offers it again.
            recorded = _by_pair(routed, queued, "seen.seen_many")
            theirs = {requests[i].unique_key for i in queued if recorded[i]}
            if self._shared:
                # Recorded by another process since the look: it queued the request too.
                self._theirs |= theirs
            else:
                theirs = set()
            for p in response.processed_requests:
                if p.unique_key in theirs and not p.was_already_present:
                    p = p.model_copy(update={"was_already_present": True})
                out.append(p)
        for i, request in enumerate(requests):
            if i in forward:
                continue
            j = copy_of.get(i, i)
            out.append(
                ProcessedRequest(
                    unique_key=request.unique_key,
                    was_already_present=bool(present[j]) or j in forward,
                    was_already_handled=bool(handled.get(j)),
                )
            )
        return AddRequestsResponse(processed_requests=out, unprocessed_requests=unprocessed)

    async def get_request(self, unique_key: str) -> Optional[Request]:
        """A request still to do or in progress; ``None`` for a handled one (not kept)."""
        return await self._inner.get_request(unique_key)

    async def fetch_next_request(self) -> Optional[Request]:
        while True:
            request = await self._inner.fetch_next_request()
            if request is None:
                return None
            pair, key = self._keys.route([request])[0]
            theirs = request.unique_key in self._theirs
            if not theirs and not pair.handled.contains(key):
                return request
            # Handled before a kill that left it in the queue, or queued by another process
            # first (it fetches it): finish it here, unfetched.
            self._theirs.discard(request.unique_key)
            request.handled_at = request.handled_at or datetime.now(timezone.utc)
            await self._inner.mark_request_as_handled(request)
            self._evict(request.unique_key)

    async def mark_request_as_handled(self, request: Request) -> Optional[ProcessedRequest]:
        pair, key = self._keys.route([request])[0]
        # Recorded first: a kill after this and before the queue's own mark leaves it in the
        # queue, and fetch_next_request then skips it.
        pair.handled.seen(key)
        pair.seen.seen(key)
        response = await self._inner.mark_request_as_handled(request)
        if response is not None:
            self._evict(request.unique_key)
        return response

    async def reclaim_request(
        self, request: Request, *, forefront: bool = False
    ) -> Optional[ProcessedRequest]:
        return await self._inner.reclaim_request(request, forefront=forefront)

    async def is_empty(self) -> bool:
        return await self._inner.is_empty()

    async def is_finished(self) -> bool:
        return await self._inner.is_finished()

    # -- urlseen's own operations ----------------------------------------------------------

    def forget_host(self, host: str) -> int:
        """Makes every request of `host` new again (added and handled alike): how many keys
        were forgotten in the ``seen`` namespaces."""
        count = 0
        for pair in self._keys.pairs():
            count += pair.seen.forget_host(host)
            pair.handled.forget_host(host)
        return count

    def stats(self) -> dict[str, dict[str, Any]]:
        """urlseen's statistics of each namespace, by name."""
        out = {}
        for pair in self._keys.pairs():
            out[pair.seen.name] = pair.seen.stats()
            out[pair.handled.name] = pair.handled.stats()
        return out

    def _reconcile(self) -> None:
        """After a kill, the file-system queue's saved state can be older than its files: it
        may still list as waiting a request that was handled, and whose file `_evict` removed,
        and then it would never be empty. Such keys are dropped (their requests were handled:
        urlseen says so)."""
        state = getattr(self._inner, "_state", None)
        path_of = getattr(self._inner, "_get_request_path", None)
        if state is None or path_of is None:
            return
        current = state.current_value
        for waiting in (current.regular_requests, current.forefront_requests):
            for key in [k for k in waiting if not Path(path_of(k)).exists()]:
                del waiting[key]

    def _evict(self, unique_key: str) -> None:
        """Removes a handled request from the wrapped queue: urlseen answers for it now.
        Crawlee's queues have no call for this; it reaches into the two built-in ones and
        leaves any other queue as it is."""
        inner: Any = self._inner
        handled = getattr(inner, "_handled_requests", None)
        if isinstance(handled, dict):  # MemoryRequestQueueClient
            handled.pop(unique_key, None)
            return
        state = getattr(inner, "_state", None)
        path_of = getattr(inner, "_get_request_path", None)
        if state is not None and path_of is not None:  # FileSystemRequestQueueClient
            state.current_value.handled_requests.discard(unique_key)
            Path(path_of(unique_key)).unlink(missing_ok=True)


class StorageClient(_CrawleeStorageClient):
    """A Crawlee storage client whose request queues deduplicate with urlseen; datasets and
    key-value stores are `inner`'s (default: ``FileSystemStorageClient()``, Crawlee's own
    default).

    ``data`` (a urlseen data directory) or ``url`` (a ``urlseen serve``, for several crawler
    processes) say where the seen set lives; neither: ``<storage_dir>/urlseen`` with a
    file-system `inner`, memory with ``MemoryStorageClient``. ``namespace`` names it (default
    ``crawlee``; a queue other than the default adds ``:<its name>``); ``canon`` picks what
    is deduplicated (module docs). ``capacity``, ``fpr``, ``exact``, ``recrawl_after``
    (seconds: a request added longer ago is new again) and ``ttl`` (seconds: the namespaces
    end by themselves) are the namespaces' options when this creates them; ``fsync`` is a
    data directory's.

    Raises ``urlseen.InvalidOption`` for a bad option, and when the queue opens
    ``urlseen.Locked`` (the data directory is open in another process) or
    ``urlseen.ConnectionFailed`` (no server at ``url``).
    """

    def __init__(
        self,
        inner: Optional[_CrawleeStorageClient] = None,
        *,
        data: Union[str, os.PathLike[str], None] = None,
        url: Optional[str] = None,
        namespace: str = DEFAULT_NAMESPACE,
        canon: Optional[str] = None,
        capacity: int = DEFAULT_CAPACITY,
        fpr: float = DEFAULT_FPR,
        exact: bool = False,
        recrawl_after: Optional[int] = None,
        ttl: Optional[int] = None,
        fsync: str = "everysec",
    ) -> None:
        if canon is not None and canon not in CANON_PROFILES:
            raise urlseen.InvalidOption(
                f"canon must be None (the unique key) or one of {', '.join(CANON_PROFILES)}, "
                f"got {canon!r}"
            )
        if data is not None and url is not None:
            raise urlseen.InvalidOption("give data (embedded) or url (a urlseen serve), not both")
        self.inner = inner if inner is not None else FileSystemStorageClient()
        self.data = os.fspath(data) if data is not None else None
        self.url = url
        self.namespace = namespace
        self.canon = canon
        self.fsync = fsync
        self._options: dict[str, Any] = {"capacity": capacity, "fpr": fpr, "exact": exact}
        if recrawl_after is not None:
            self._options["recrawl_after"] = int(recrawl_after)
        if ttl is not None:
            self._options["ttl"] = int(ttl)
        self._sources: dict[str, Source] = {}

    def get_storage_client_cache_key(self, configuration: Configuration) -> Hashable:
        return (
            super().get_storage_client_cache_key(configuration),
            self.inner.get_storage_client_cache_key(configuration),
            self.url,
            self.data,
            self.namespace,
            self.canon,
        )

    async def create_dataset_client(
        self,
        *,
        id: Optional[str] = None,  # noqa: A002 (Crawlee's name)
        name: Optional[str] = None,
        alias: Optional[str] = None,
        configuration: Optional[Configuration] = None,
    ) -> DatasetClient:
        return await self.inner.create_dataset_client(
            id=id, name=name, alias=alias, configuration=configuration
        )

    async def create_kvs_client(
        self,
        *,
        id: Optional[str] = None,  # noqa: A002
        name: Optional[str] = None,
        alias: Optional[str] = None,
        configuration: Optional[Configuration] = None,
    ) -> KeyValueStoreClient:
        return await self.inner.create_kvs_client(
            id=id, name=name, alias=alias, configuration=configuration
        )

    async def create_rq_client(
        self,
        *,
        id: Optional[str] = None,  # noqa: A002
        name: Optional[str] = None,
        alias: Optional[str] = None,
        configuration: Optional[Configuration] = None,
    ) -> RequestQueueClient:
        configuration = configuration or Configuration.get_global_configuration()
        source = self._source(configuration)
        label = name or alias
        ns = self.namespace if label in (None, "default") else f"{self.namespace}:{label}"
        keys = _Keys(source, ns, self.canon, self._options)
        # Opened without the purge: ours purges the seen set with the queue.
        config = configuration.model_copy(update={"purge_on_start": False})
        inner = await self.inner.create_rq_client(id=id, name=name, alias=alias, configuration=config)
        client = RequestQueueClient(inner, keys, shared=self.url is not None)
        client._reconcile()
        await self._purge_if_needed(client, configuration)
        return client

    def _source(self, configuration: Configuration) -> Source:
        if self.url is not None:
            where = self.url
        elif self.data is not None:
            where = self.data
        elif isinstance(self.inner, MemoryStorageClient):
            where = ""
        else:
            where = str(Path(configuration.storage_dir) / "urlseen")
        source = self._sources.get(where)
        if source is None:
            if self.url is not None:
                source = urlseen.Client(self.url)
            elif where:
                os.makedirs(where, exist_ok=True)
                source = urlseen.Db(where, fsync=self.fsync)
            else:
                source = urlseen.Db()
            self._sources[where] = source
        return source

    def close(self) -> None:
        """Syncs and releases the data directories (or connections) this client opened."""
        for source in self._sources.values():
            source.close()
        self._sources.clear()
