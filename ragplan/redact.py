"""Credentials kept out of what ragplan prints or writes: URL passwords, secret query values, configured API keys
(standard library only: every command's output passes through :func:`redact`)."""

from __future__ import annotations

import base64
import contextvars
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import unquote, urlsplit

__all__ = ["REDACTED", "redact", "configured_keys", "remember_credentials", "keys_read_once"]

REDACTED = "***"
"""What :func:`redact` writes in place of a credential."""
_URL_PASSWORD = re.compile(r"(://[^/\s:@\"'\\]*:)([^/\s@\"'\\]+)(?=@)")
_QUERY_SECRET = re.compile(r"((?:[?&]|&amp;)[\w.-]*(?:key|token|password|secret)=)([\w.~%+-]+)", re.I | re.A)
_remembered: set[str] = set()
_fixed: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("ragplan_redact_keys", default=None)


def _url_secrets(url: str) -> list[str]:
    """A URL's secret query values, its password and its ``user:password`` as HTTP Basic auth sends it (base64)."""
    found = [m.group(2) for m in _QUERY_SECRET.finditer(url)]
    if (parts := urlsplit(url)).password:
        basic = f"{unquote(parts.username or '')}:{unquote(parts.password)}".encode()
        found += [parts.password, base64.b64encode(basic).decode()]
    return found


def remember_credentials(url: str) -> None:
    """Count the credentials in ``url`` (a ``--base-url``) among the :func:`configured_keys`."""
    _remembered.update(_url_secrets(url))


def configured_keys() -> list[str]:
    """The API keys configured for this process: every ``*_API_KEY`` variable's value and the credentials of the base
    URLs in ``RAGPLAN_BASE_URL`` / ``OPENAI_BASE_URL`` or remembered (values under 8 characters left out)."""
    if (fixed := _fixed.get()) is not None:
        return fixed
    keys = [v for k, v in os.environ.items() if k.upper().endswith("_API_KEY")] + list(_remembered)
    keys += [s for var in ("RAGPLAN_BASE_URL", "OPENAI_BASE_URL") for s in _url_secrets(os.environ.get(var, ""))]
    return sorted({k.strip() for k in keys if len(k.strip()) >= 8}, key=len, reverse=True)


@contextmanager
def keys_read_once() -> Iterator[list[str]]:
    """Within it (and the tasks and threads started with its context), :func:`configured_keys` is the list read on
    entry: a batch run redacts every record without scanning the environment each time."""
    token = _fixed.set(configured_keys())
    try:
        yield _fixed.get() or []
    finally:
        _fixed.reset(token)


def redact(text: str) -> str:
    """``text`` with its credentials replaced by ``***``: a URL's password, a secret query value (``api_key=``,
    ``token=`` …) and every :func:`configured_keys` key. Applied to what is printed or written, never to a URL in use."""
    for key in configured_keys():
        text = text.replace(key, REDACTED)
    text = _URL_PASSWORD.sub(lambda m: m.group(1) + REDACTED, text)
    return _QUERY_SECRET.sub(lambda m: m.group(1) + REDACTED, text)
