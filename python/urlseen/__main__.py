"""``python -m urlseen ...``: the ``urlseen`` command."""

from ._cli import main

main()
