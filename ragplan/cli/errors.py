"""How a command says no: :class:`BadInput` (raised; ``main`` prints it and exits 2) and :func:`fail` (printed here)."""

from __future__ import annotations

import sys

__all__ = ["BadInput", "fail"]


class BadInput(Exception):
    """A command line that cannot run as given: :func:`ragplan.cli.main` prints ``error: <message>`` and exits 2."""


def fail(message: str, code: int = 2, prefix: str = "error") -> int:
    """Print ``prefix: message`` on standard error and return the exit code ``code`` (2: bad input)."""
    print(f"{prefix}: {message}", file=sys.stderr)
    return code
