"""How a command says no: :class:`BadInput` (raised; ``main`` prints it and exits 2) and :func:`fail` (printed here);
and what a command prints: :class:`TerminalSafe` (no credentials, and no control characters from a reply or a query)."""

from __future__ import annotations

import re
import sys
from typing import Any, TextIO

__all__ = ["BadInput", "fail", "for_terminal", "TerminalSafe"]


class BadInput(Exception):
    """A command line that cannot run as given: :func:`ragplan.cli.main` prints ``error: <message>`` and exits 2."""


def fail(message: str, code: int = 2, prefix: str = "error") -> int:
    """Print ``prefix: message`` on standard error and return the exit code ``code`` (2: bad input)."""
    print(f"{prefix}: {message}", file=sys.stderr)
    return code


# C0 controls but newline and tab, DEL, C1 controls (ESC, BEL, CR, CSI …)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def for_terminal(text: str) -> str:
    """``text`` with its control characters but newline and tab written as ``\\u001b``-style escapes (valid in
    JSON strings too), so an LLM answer or a query result cannot retitle, clear or drive the terminal."""
    return _CONTROL.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


class TerminalSafe:
    """A text stream that writes to the stream it wraps with credentials redacted and, with ``escape``, through
    :func:`for_terminal` (``main`` wraps standard output and error; error unescaped for progress bars)."""

    def __init__(self, stream: TextIO, escape: bool = True) -> None:
        self.stream, self.escape = stream, escape

    def write(self, text: str) -> int:
        """Write ``text`` with its credentials redacted and (``escape``) its control characters escaped."""
        from ragplan.redact import redact

        text = redact(text)
        return self.stream.write(for_terminal(text) if self.escape else text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)
