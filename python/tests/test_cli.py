"""The wheel's `urlseen` command: the Rust CLI run through the extension module."""

from __future__ import annotations

import subprocess
import sys

from conftest import urlseen_command

import urlseen


def test_version_from_the_venv():
    out = subprocess.run([urlseen_command(), "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == f"urlseen {urlseen.__version__}"


def test_python_dash_m_and_exit_codes():
    out = subprocess.run([sys.executable, "-m", "urlseen", "--version"], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.startswith("urlseen ")
    bad = subprocess.run([urlseen_command(), "no-such-command"], capture_output=True, text=True)
    assert bad.returncode == 2
    assert "no-such-command" in bad.stderr


def test_filter_reads_stdin():
    urls = "https://a.example/x\nHTTPS://A.EXAMPLE/x#f\nhttps://b.example/\n"
    out = subprocess.run([urlseen_command(), "filter"], input=urls, capture_output=True, text=True, check=True)
    assert out.stdout.splitlines() == ["https://a.example/x", "https://b.example/"]
