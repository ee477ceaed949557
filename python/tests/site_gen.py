"""A small generated web site for crawl tests and the crawl benchmark, served by http.server.

Pages link to each other in the spellings real sites mix, which canonicalization must merge
(fragments, reordered or repeated query arguments, blank values, percent-escapes, `+` for a
space, an upper-case scheme, relative and absolute forms), and each page has a POST form whose
body takes one of five values, so that POSTs are deduplicated by Scrapy's request fingerprint.
Every request the server answers is recorded: method, path and body.
"""

from __future__ import annotations

import random
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

POST_BODIES = 5


def _links(rng: random.Random, i: int, n: int, port: int) -> list[str]:
    host = f"127.0.0.1:{port}"
    out = [f"/p/{(i + 1) % n}.html"]  # every page is reachable from the first
    for _ in range(6):
        j = rng.randrange(n)
        q = rng.randrange(max(1, n // 4))
        out += rng.sample(
            [
                f"/p/{j}.html",
                f"{j}.html",
                f"../p/{j}.html",
                f"http://{host}/p/{j}.html",
                f"HTTP://{host}/p/{j}.html#top",
                f"/p/{j}.html#section-{rng.randrange(3)}",
                f"/q/{q}.html?b=2&a=1",
                f"/q/{q}.html?a=1&b=2",
                f"/q/{q}.html?a=1&b=2#x",
                f"/q/{q}.html?k=2&k=1",
                f"/q/{q}.html?k=1&k=2",
                f"/q/{q}.html?s=a+b",
                f"/q/{q}.html?s=a%20b",
                f"/q/{q}.html?blank=",
                f"/q/{q}.html?blank",
                f"/u/~{q}.html",
                f"/u/%7E{q}.html",
                f"/u/%7e{q}.html",
            ],
            3,
        )
    return out


def generate(root: Path, pages: int, seed: int, port: int) -> None:
    """Writes the site under `root`: `/index.html`, `/p/<i>.html` (pages), `/q/<i>.html` and
    `/u/~<i>.html` (pages reached with query strings and escapes)."""
    rng = random.Random(seed)
    for sub in ("p", "q", "u"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    (root / "index.html").write_text(
        '<html><body><a href="/p/0.html">start</a> <a href="mailto:x@example.com">mail</a>'
        "</body></html>"
    )
    for i in range(pages):
        links = "".join(f'<a href="{h}">{k}</a>\n' for k, h in enumerate(_links(rng, i, pages, port)))
        form = (
            '<form method="post" action="/submit">'
            f'<input type="hidden" name="q" value="{i % POST_BODIES}"></form>'
        )
        (root / "p" / f"{i}.html").write_text(f"<html><body><h1>{i}</h1>\n{links}{form}</body></html>")
    for i in range(max(1, pages // 4)):
        body = f'<html><body><a href="/p/{rng.randrange(pages)}.html">back</a></body></html>'
        (root / "q" / f"{i}.html").write_text(body)
        (root / "u" / f"~{i}.html").write_text(body)


class _Handler(SimpleHTTPRequestHandler):
    # Keep-alive, as real servers: Scrapy reuses its connections.
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):  # noqa: A002 (http.server's name)
        pass

    def _record(self, body: bytes) -> None:
        with self.server.lock:
            self.server.requests.append((self.command, self.path, body))

    def do_GET(self):
        self._record(b"")
        super().do_GET()

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        self._record(body)
        payload = b"<html><body>thanks</body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


class SiteServer:
    """Serves `root` on a free loopback port in a thread; `requests` lists what was asked."""

    def __init__(self, root: Path, pages: int = 120, seed: int = 7):
        root.mkdir(parents=True, exist_ok=True)
        handler = lambda *a, **k: _Handler(*a, directory=str(root), **k)  # noqa: E731
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.httpd.lock = threading.Lock()
        self.httpd.requests = []
        self.port = self.httpd.server_address[1]
        generate(root, pages, seed, self.port)
        self.url = f"http://127.0.0.1:{self.port}/index.html"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def take_requests(self) -> list[tuple[str, str, bytes]]:
        """The requests answered since the last call."""
        with self.httpd.lock:
            out, self.httpd.requests = self.httpd.requests, []
        return out

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
