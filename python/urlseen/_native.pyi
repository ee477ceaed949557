"""Type stubs of urlseen's native module (python/src/). Import from ``urlseen``."""

from collections.abc import Iterable
from os import PathLike
from types import TracebackType
from typing import Any, Literal, Optional, Union

__version__: str

Profile = Literal["crawler", "w3lib", "safebrowsing", "none"]
FsyncPolicy = Literal["always", "everysec", "no"]

class Error(Exception):
    """Base class of every error urlseen raises."""

class InvalidUrl(Error):
    """The URL cannot be canonicalized by the namespace's profile; nothing was recorded."""

class InvalidOption(Error):
    """An option is out of range: capacity, fpr, profile, fsync or the namespace name."""

class ForgetUnsupported(Error):
    """forget() on a namespace without counting filters: create it with counting=True."""

class Locked(Error):
    """The data directory is open in another process (a server, or another Db)."""

class StorageError(Error):
    """A file of the data directory could not be read or written, or is damaged."""

class ServerError(Error):
    """urlseen serve answered with an error (for example -MISCONF after a failed disk write)."""

class ConnectionFailed(Error):
    """urlseen serve could not be reached, or the connection broke."""

class Namespace:
    """One URL-seen set of a Db. Thread-safe; batch calls release the GIL."""

    @property
    def name(self) -> str: ...
    def seen(self, url: str) -> bool:
        """Check-and-insert: True if seen before (or a false positive, probability <= fpr),
        False if new and now recorded. Raises InvalidUrl."""
    def seen_many(self, urls: Iterable[str]) -> list[Optional[bool]]:
        """seen() for a batch, GIL released: True, False, or None for an invalid URL (neither
        looked up nor recorded)."""
    def contains(self, url: str) -> bool:
        """Read-only seen(): records nothing. Raises InvalidUrl."""
    def contains_many(self, urls: Iterable[str]) -> list[Optional[bool]]:
        """contains() for a batch: True, False, or None for an invalid URL."""
    def forget(self, url: str) -> bool:
        """Forget the URL (counting namespaces): True if it was recorded.
        Raises ForgetUnsupported, InvalidUrl."""
    def forget_many(self, urls: Iterable[str]) -> list[Optional[bool]]:
        """forget() for a batch: True, False, or None for an invalid URL."""
    def forget_host(self, host: str) -> int:
        """Forget every URL of the host (any namespace): how many were forgotten.
        Raises InvalidUrl, ForgetUnsupported."""
    def forget_prefix(self, prefix: str) -> int:
        """Forget every URL under the prefix (namespaces created with keep_urls=True): how
        many were forgotten. Raises InvalidUrl, ForgetUnsupported."""
    def expire(self, seconds: float) -> bool:
        """`Db.expire` of this namespace."""
    def persist(self) -> bool:
        """`Db.persist` of this namespace."""
    def ttl(self) -> int:
        """`Db.ttl` of this namespace."""
    def stats(self) -> dict[str, Any]:
        """The namespace's statistics, with the keys of the server's URL.INFO."""
    def __len__(self) -> int: ...

class RemoteNamespace:
    """A namespace on urlseen serve (from Client.namespace): the methods of Namespace."""

    @property
    def name(self) -> str: ...
    def seen(self, url: str) -> bool: ...
    def seen_many(self, urls: Iterable[str]) -> list[Optional[bool]]: ...
    def contains(self, url: str) -> bool: ...
    def contains_many(self, urls: Iterable[str]) -> list[Optional[bool]]: ...
    def forget(self, url: str) -> bool: ...
    def forget_many(self, urls: Iterable[str]) -> list[Optional[bool]]: ...
    def forget_host(self, host: str) -> int: ...
    def forget_prefix(self, prefix: str) -> int: ...
    def stats(self) -> dict[str, Any]: ...
    def __len__(self) -> int: ...

class Db:
    """An embedded urlseen database: in memory (path=None) or in a data directory."""

    def __init__(
        self, path: Union[str, PathLike[str], None] = None, fsync: FsyncPolicy = "everysec"
    ) -> None: ...
    def namespace(
        self,
        name: str,
        *,
        capacity: int = 100,
        fpr: float = 0.01,
        profile: Profile = "crawler",
        exact: bool = False,
        counting: bool = False,
        keep_urls: bool = False,
        ttl: Optional[float] = None,
        recrawl_after: Optional[int] = None,
    ) -> Namespace:
        """The namespace `name`, created with these options if it does not exist; `ttl`
        (seconds) gives a namespace this call creates a lifetime, `recrawl_after` (whole
        seconds) a recrawl window: a URL recorded longer ago is new again."""
    def names(self) -> list[str]: ...
    def drop(self, name: str) -> bool: ...
    def expire(self, name: str, seconds: float) -> bool:
        """Namespace `name` expires `seconds` from now (Redis's EXPIRE); whether it exists."""
    def persist(self, name: str) -> bool:
        """Removes the lifetime of `name` (Redis's PERSIST); whether it had one."""
    def ttl(self, name: str) -> int:
        """Seconds left, as Redis's TTL: -2 for no such namespace, -1 for no lifetime."""
    def sync(self) -> None: ...
    def close(self) -> None: ...
    @property
    def closed(self) -> bool: ...
    @property
    def path(self) -> Optional[str]: ...
    @property
    def fsync(self) -> FsyncPolicy: ...
    def __enter__(self) -> Db: ...
    def __exit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> bool: ...

class Client:
    """A client of urlseen serve with the API of Db: Client("redis://host:port")."""

    def __init__(self, url: str) -> None: ...
    def namespace(
        self,
        name: str,
        *,
        capacity: int = 100,
        fpr: float = 0.01,
        profile: Profile = "crawler",
        exact: bool = False,
        counting: bool = False,
        keep_urls: bool = False,
        ttl: Optional[int] = None,
        recrawl_after: Optional[int] = None,
    ) -> RemoteNamespace:
        """URL.RESERVE with these options unless `name` exists (it keeps its own)."""
    def names(self) -> list[str]: ...
    def drop(self, name: str) -> bool: ...
    def expire(self, name: str, seconds: float) -> bool:
        """PEXPIRE on the server: `name` expires `seconds` from now; whether it exists."""
    def persist(self, name: str) -> bool:
        """PERSIST on the server; whether `name` had a lifetime."""
    def ttl(self, name: str) -> int:
        """TTL on the server: seconds left, -2 for no such namespace, -1 for no lifetime."""
    def close(self) -> None: ...
    def __enter__(self) -> Client: ...
    def __exit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> bool: ...

def main(argv: list[str]) -> int:
    """Run the urlseen command with argv (program name first); returns its exit status."""
