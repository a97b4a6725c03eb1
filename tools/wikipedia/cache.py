"""On-disk cache of MediaWiki API responses: one JSON file per request (SHA-256 of endpoint, language and
parameters), written atomically, holding the request beside the response; failures are never cached.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = ["ResponseCache", "default_cache_dir", "request_key"]

log = logging.getLogger(__name__)

_FORMAT = 1
"""Bumped when the key derivation or the entry layout changes (old entries are then ignored)."""


def default_cache_dir() -> Path:
    """``$RAGPLAN_CACHE_DIR/wikipedia``, else ``$XDG_CACHE_HOME/ragplan/wikipedia``, else ``~/.cache/ragplan/wikipedia``."""
    root = os.environ.get("RAGPLAN_CACHE_DIR", "").strip()
    if root:
        return Path(root).expanduser() / "wikipedia"
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "ragplan" / "wikipedia"


def _request(endpoint: str, language: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"format": _FORMAT, "endpoint": endpoint, "language": language,
            "params": {str(k): str(v) for k, v in sorted(params.items())}}


def request_key(endpoint: str, language: str, params: dict[str, Any]) -> str:
    """The hex SHA-256 naming one request's cache entry (endpoint, language and every parameter)."""
    blob = json.dumps(_request(endpoint, language, params), sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class ResponseCache:
    """JSON files under ``root``; ``get`` returns ``None`` on a miss or an unreadable entry."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        """Use (and create on first write) the directory ``root``."""
        self.root = Path(root).expanduser()

    def path_for(self, endpoint: str, language: str, params: dict[str, Any]) -> Path:
        """Where the entry for this request is (or would be) stored."""
        key = request_key(endpoint, language, params)
        lang = "".join(c for c in language if c.isalnum() or c in "-_") or "_"
        return self.root / lang / key[:2] / f"{key}.json"

    def get(self, endpoint: str, language: str, params: dict[str, Any]) -> dict[str, Any] | None:
        """The stored response for this request, or ``None``."""
        path = self.path_for(endpoint, language, params)
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as err:
            log.warning("ignoring unreadable Wikipedia cache entry %s: %s", path, err)
            return None
        if not isinstance(entry, dict) or entry.get("request") != _request(endpoint, language, params):
            return None
        response = entry.get("response")
        return response if isinstance(response, dict) else None

    def put(self, endpoint: str, language: str, params: dict[str, Any], response: dict[str, Any]) -> Path:
        """Store a response atomically (temporary file in the same directory, then ``os.replace``)."""
        path = self.path_for(endpoint, language, params)
        path.parent.mkdir(parents=True, exist_ok=True)
        entry = {"request": _request(endpoint, language, params),
                 "fetched_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "response": response}
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(entry, fh, ensure_ascii=False, indent=1)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        return path
