"""Live Wikipedia through ``wikipedia-api``'s public API, its httpx transport adding an on-disk cache (failures never
cached), bounded retries (429 / 5xx / ``maxlag``, ``Retry-After`` capped) and ``api_url``; the ``wiki`` retriever."""

from __future__ import annotations

import contextlib
import email.utils
import functools
import hashlib
import importlib.metadata
import json
import logging
import os
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import quote

import httpx
import wikipediaapi

from ragplan import __version__
from ragplan.jsonl import atomic_write
from ragplan.tools.retrieval import Passage

__all__ = ["WikipediaClient", "WikipediaRetriever", "WikipediaError", "default_user_agent",
           "default_cache_dir", "request_key"]

log = logging.getLogger(__name__)

_FORMAT = 1
"""Bumped when the key derivation or the entry layout changes (old entries are then ignored)."""


def default_cache_dir() -> Path:
    """``$RAGPLAN_CACHE_DIR/wikipedia``, else ``$XDG_CACHE_HOME`` or ``~/.cache``, then ``ragplan/wikipedia``."""
    if root := os.environ.get("RAGPLAN_CACHE_DIR", "").strip():
        return Path(root).expanduser() / "wikipedia"
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "ragplan" / "wikipedia"


def _request_record(endpoint: str, language: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"format": _FORMAT, "endpoint": endpoint, "language": language,
            "params": {str(k): str(v) for k, v in sorted(params.items())}}


def request_key(endpoint: str, language: str, params: dict[str, Any]) -> str:
    """The hex SHA-256 naming one request's cache entry (endpoint, language and every parameter)."""
    blob = json.dumps(_request_record(endpoint, language, params), sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


_RETRY_API_CODES = ("maxlag", "ratelimited", "readonly")


class WikipediaError(RuntimeError):
    """A Wikipedia request that failed after its retries, or an answer that cannot be used."""


def default_user_agent() -> str:
    """``$RAGPLAN_WIKI_USER_AGENT``, else ``ragplan/<v> (research use) Wikipedia-API/<v> httpx/<v>`` (which names no
    contact: a warning asks for one, as Wikimedia's policy does)."""
    libs = f"Wikipedia-API/{importlib.metadata.version('Wikipedia-API')} httpx/{httpx.__version__}"
    return os.environ.get("RAGPLAN_WIKI_USER_AGENT", "").strip() or f"ragplan/{__version__} (research use) {libs}"


@functools.cache
def _warn_without_contact(ua: str) -> None:
    """Warn (once per User-Agent) when live Wikipedia would get a User-Agent without any URL or e-mail."""
    if "http" not in ua and "@" not in ua:
        log.warning("the Wikipedia User-Agent %r names no contact; set RAGPLAN_WIKI_USER_AGENT "
                    "(https://meta.wikimedia.org/wiki/User-Agent_policy)", ua)


@dataclass(eq=False)
class _Retryable(Exception):
    """One attempt failed in a way worth retrying; ``wait`` is the server's Retry-After, if any."""

    reason: str
    wait: float | None = None


def _retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header: delta-seconds (decimals tolerated) or an HTTP date."""
    with contextlib.suppress(TypeError, ValueError):
        return max(0.0, float(value or ""))
    with contextlib.suppress(TypeError, ValueError):
        return max(0.0, email.utils.parsedate_to_datetime(value or "").timestamp() - time.time())
    return None


def _describe(params: dict[str, Any]) -> str:
    """A short human-readable name for a request, for error messages and logs."""
    if params.get("list") == "search":
        return f"search {params.get('srsearch', '')!r}"
    if "titles" in params:
        return f"{params.get('prop', 'query')} of {params['titles']!r}"
    return "&".join(f"{k}={v}" for k, v in params.items() if k != "format")


class WikipediaClient:
    """Page text and title search on one Wikipedia (or a MediaWiki mirror); thread-safe."""

    def __init__(self, language: str = "en", user_agent: str | None = None, cache_dir: str | os.PathLike[str] | None = None,
                 api_url: str | None = None, timeout_s: float = 10.0, retries: int = 3, backoff_s: float = 1.0,
                 *, max_wait_s: float = 30.0, offline: bool | None = None) -> None:
        """No request is sent until :meth:`search` or :meth:`page`; at most ``1 + retries`` attempts per request,
        ``backoff_s * 2**i`` or ``Retry-After`` apart, never more than ``max_wait_s``; ``offline``: the cache only.
        """
        lang = (language or "").strip().lower()
        if not lang or not all(c.isalnum() or c == "-" for c in lang):
            raise ValueError(f"invalid Wikipedia language code {language!r} (e.g. 'en', 'de', 'zh-min-nan')")
        if timeout_s <= 0 or retries < 0 or backoff_s < 0 or max_wait_s < 0:
            raise ValueError("timeout_s must be > 0 and retries, backoff_s, max_wait_s >= 0")
        ua = (user_agent or default_user_agent()).strip()
        if len(ua) < 5:
            raise ValueError(f"user_agent {user_agent!r} is too short: describe the tool and a contact")
        self.language, self.user_agent = lang, ua
        self.api_url = (api_url or f"https://{lang}.wikipedia.org/w/api.php").strip()
        self.timeout_s, self.retries = float(timeout_s), int(retries)
        self.backoff_s, self.max_wait_s = float(backoff_s), float(max_wait_s)
        env_offline = os.environ.get("RAGPLAN_WIKI_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")
        self.offline = env_offline if offline is None else bool(offline)
        self.cache_dir = Path(cache_dir or default_cache_dir()).expanduser()
        """Where responses are kept: ``<language>/<key[:2]>/<key>.json`` (:func:`request_key`), failures never."""
        self.stats = {"requests": 0, "cache_hits": 0, "retries": 0}
        """Counters: HTTP attempts sent, requests answered from the cache, retries slept for."""
        self._lock = threading.Lock()
        if user_agent is None and api_url is None:
            _warn_without_contact(ua)
        self._http = httpx.Client(headers={"User-Agent": ua}, timeout=self.timeout_s)
        # wikipedia-api builds and parses each request; the transport answers it through _request
        answer = httpx.MockTransport(lambda req: httpx.Response(200, json=self._request(dict(req.url.params))))
        self._wiki = wikipediaapi.Wikipedia(user_agent=ua, language=lang, extract_format=wikipediaapi.ExtractFormat.WIKI,
                                            max_retries=0, transport=answer)

    def search(self, query: str, limit: int = 3) -> list[str]:
        """Titles of the best ``limit`` (at most 50) main-namespace articles for ``query``, in search order."""
        if not (q := " ".join((query or "").split())) or limit <= 0:
            return []
        try:
            results = self._wiki.search(q, limit=min(int(limit), 50))
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            raise WikipediaError(f"unexpected search answer from {self.api_url} for {q!r}: {err!r}") from err
        return list(results.pages.keys())[:limit]

    def page(self, title: str) -> Passage | None:
        """The article ``title`` (redirects followed; ``id`` its page id, ``meta["url"]`` its address), or ``None``
        when it does not exist; ``text`` keeps headings as ``== Heading ==`` lines."""
        if not (t := (title or "").strip()):
            return None
        p = self._wiki.page(t)
        try:
            summary, sections = p.summary, p.sections  # one prop=extracts request (redirects=1)
            pageid = p.pageid  # set by that same answer (negative for a missing page): no prop=info request
            final_title = p.title
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            raise WikipediaError(f"unexpected page answer from {self.api_url} for {t!r}: {err!r}") from err
        if pageid is None or int(pageid) <= 0:
            return None
        text = "\n\n".join(part for part in [summary.strip(), *_section_parts(sections)] if part)
        return Passage(id=str(int(pageid)), title=final_title, text=text, source="wiki",
                       meta={"url": self.article_url(final_title)})

    def article_url(self, title: str) -> str:
        """The reader URL of an article (``…/wiki/Title`` for ``…/w/api.php`` endpoints), as MediaWiki encodes it."""
        path = quote(title.replace(" ", "_"), safe=";@$!*(),/:~")
        base = self.api_url.split("?", 1)[0]
        for api, reader in (("/w/api.php", "/wiki/"), ("api.php", "index.php?title=")):
            if base.endswith(api):
                return base.removesuffix(api) + reader + path
        return base.rstrip("/") + "/wiki/" + path

    def _request(self, params: dict[str, Any]) -> dict[str, Any]:
        """Answer one MediaWiki request: from the cache (an entry of this very request), else over HTTP with bounded
        retries, the answer then written to the cache atomically."""
        record = _request_record(self.api_url, self.language, params)
        key = request_key(self.api_url, self.language, params)
        path = self.cache_dir / self.language / key[:2] / f"{key}.json"  # (the language code is checked: a-z, 0-9, -)
        try:
            entry = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
            if entry.get("request") == record and isinstance(entry.get("response"), dict):
                self._count("cache_hits")
                return entry["response"]
        except (OSError, ValueError, AttributeError) as err:
            log.warning("ignoring unreadable Wikipedia cache entry %s: %s", path, err)
        what = _describe(params)
        if self.offline:
            raise WikipediaError(f"Wikipedia {what} is not in the cache {self.cache_dir} and the client is offline")
        for attempt in range(1 + self.retries):
            try:
                data = self._attempt(params, what)
                break
            except _Retryable as err:
                if attempt == self.retries:
                    raise WikipediaError(f"Wikipedia {what} at {self.api_url} failed after {attempt + 1} attempt(s): "
                                         f"{err.reason}") from None
                wait = min(self.backoff_s * 2 ** attempt if err.wait is None else err.wait, self.max_wait_s)
                log.info("Wikipedia %s: %s; retry %d/%d in %.2fs", what, err.reason, attempt + 1, self.retries, wait)
                self._count("retries")
                time.sleep(wait)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fetched = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            atomic_write(path, json.dumps({"request": record, "fetched_at": fetched, "response": data}, indent=1,
                                          ensure_ascii=False))
        except OSError as err:
            log.warning("could not write the Wikipedia cache under %s: %s", self.cache_dir, err)
        return data

    def _attempt(self, params: dict[str, Any], what: str) -> dict[str, Any]:
        """One HTTP GET; raises :class:`_Retryable` for transient failures, :class:`WikipediaError` otherwise."""
        self._count("requests")
        try:
            r = self._http.get(self.api_url, params=params)
        except httpx.TimeoutException:
            raise _Retryable(f"timed out (timeout {self.timeout_s:g}s)") from None
        except httpx.TransportError as err:
            raise _Retryable(f"connection failed ({type(err).__name__}: {err})") from None
        if r.status_code == 429 or r.status_code >= 500:
            raise _Retryable(f"HTTP {r.status_code}", _retry_after(r.headers.get("Retry-After")))
        if r.status_code != 200:
            raise WikipediaError(f"Wikipedia {what} at {self.api_url} answered HTTP {r.status_code}: {r.text[:200]!r}")
        try:
            data = r.json()
        except ValueError:
            raise WikipediaError(f"Wikipedia {what} at {self.api_url} answered non-JSON: {r.text[:200]!r}") from None
        if not isinstance(data, dict):
            raise WikipediaError(f"Wikipedia {what} at {self.api_url} answered unexpected JSON: {str(data)[:200]}")
        if isinstance(error := data.get("error"), dict):
            code, info = str(error.get("code", "")), str(error.get("info", ""))
            if code in _RETRY_API_CODES or code.startswith("internal_api_error"):
                raise _Retryable(f"API error {code}: {info}", _retry_after(r.headers.get("Retry-After")))
            raise WikipediaError(f"Wikipedia {what} at {self.api_url} failed: API error {code}: {info}")
        return data

    def _count(self, name: str) -> None:
        with self._lock:
            self.stats[name] += 1


def _section_parts(sections: list[Any]) -> Iterator[str]:
    """Every section as ``== Heading ==`` and its body (nested by level), for a page's text after its lead."""
    for s in sections:
        marks = "=" * (int(s.level) + 1)
        yield f"{marks} {s.title} {marks}"
        yield (s.text or "").strip()
        yield from _section_parts(s.sections)


class WikipediaRetriever:
    """Live Wikipedia as a retriever: the pages of ``min(pages, k)`` search titles, scored ``1 / rank``."""

    name = "wiki"

    def __init__(self, client: WikipediaClient, pages: int = 3) -> None:
        """Fetch at most ``pages`` pages per query (Think-then-Act retrieves a few pages per query)."""
        if int(pages) < 1:
            raise ValueError(f"pages must be >= 1, got {pages!r}")
        self.client, self.pages = client, int(pages)

    def search(self, query: str, k: int = 5) -> list[Passage]:
        """Up to ``min(pages, k)`` Wikipedia pages for ``query``, best first (missing or duplicate pages skipped)."""
        out: list[Passage] = []  # (an empty query or k <= 0 finds no title)
        for rank, title in enumerate(self.client.search(query, limit=min(self.pages, int(k))), start=1):
            page = self.client.page(title)
            if page is None or any(page.id == p.id for p in out):  # deleted since the search, or two redirects to one
                continue
            out.append(replace(page, score=1.0 / rank, meta={**page.meta, "rank": rank, "search_title": title}))
        return out
