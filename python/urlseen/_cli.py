"""The ``urlseen`` command of the wheel: the Rust command (crates/cli) run in this process."""

import sys


def main() -> None:
    from ._native import main as run

    sys.exit(run(sys.argv))
