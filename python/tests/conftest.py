"""Fixtures: the wheel's own `urlseen` command, a `urlseen serve` on a free port, and a small
generated site served with http.server on a free port."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


_skipped: list[str] = []


def pytest_runtest_logreport(report):
    if report.skipped:
        _skipped.append(report.nodeid)


def pytest_sessionfinish(session, exitstatus):
    """A skipped test is a failed one here: every test must run and assert (scripts/check.sh
    also treats "no tests collected", exit status 5, as a failure)."""
    if _skipped and session.exitstatus == 0:
        session.exitstatus = 1


def pytest_terminal_summary(terminalreporter):
    if _skipped:
        terminalreporter.write_line(f"FAILED: {len(_skipped)} skipped tests: {_skipped}", red=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def urlseen_command() -> str:
    """The `urlseen` console script of the environment running the tests (the wheel's)."""
    path = Path(sys.executable).parent / "urlseen"
    assert path.exists(), f"the wheel's urlseen command is not installed next to {sys.executable}"
    return str(path)


class Server:
    """`urlseen serve` started from the wheel's command, on free ports; stopped by SIGTERM."""

    def __init__(self, tmp: Path, data: Path | None = None, port: int | None = None):
        self.port = port or free_port()
        args = [urlseen_command(), "serve", "--resp", f"127.0.0.1:{self.port}", "--http", "off"]
        if data is not None:
            args += ["--data", str(data)]
        else:
            args += ["--spill-dir", str(tmp)]
        self.log = open(tmp / f"serve-{self.port}.log", "wb")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                assert self.proc.poll() is None, "urlseen serve exited at start"
                assert time.monotonic() < deadline, "urlseen serve did not start in 30 s"
                time.sleep(0.05)
        self.url = f"redis://127.0.0.1:{self.port}"

    def stop(self) -> int:
        """SIGTERM, as an operator would: the server finishes and exits 0."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode


@pytest.fixture
def server(tmp_path):
    srv = Server(tmp_path)
    yield srv
    code = srv.stop()
    assert code == 0, f"urlseen serve exited with {code} on SIGTERM"


@pytest.fixture
def redis_url(tmp_path):
    """A Redis of its own on a free port (scripts/check.sh installs redis-server)."""
    port = free_port()
    proc = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no", "--dir", str(tmp_path)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            assert proc.poll() is None, "redis-server exited at start"
            assert time.monotonic() < deadline, "redis-server did not start in 30 s"
            time.sleep(0.05)
    yield f"redis://127.0.0.1:{port}"
    proc.terminate()
    proc.wait(timeout=30)


@pytest.fixture
def site(tmp_path):
    from site_gen import SiteServer

    srv = SiteServer(tmp_path / "site", pages=120, seed=7)
    yield srv
    srv.close()


@pytest.fixture
def clean_env(monkeypatch):
    """No proxy settings for the crawls (they fetch from loopback)."""
    for var in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)
    return os.environ.copy()


__all__ = ["Server", "free_port", "urlseen_command", "shutil"]
