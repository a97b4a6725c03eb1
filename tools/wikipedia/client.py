"""Live Wikipedia through ``wikipedia-api``'s public API; its httpx transport adds the on-disk cache,
bounded retries (429 / 5xx / ``maxlag``; ``Retry-After`` capped at ``max_wait_s``) and ``api_url``.
"""

from __future__ import annotations

import email.utils
import importlib.metadata
import logging
import os
import threading
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx
import wikipediaapi

from ragplan.tools.wikipedia.cache import ResponseCache, default_cache_dir

__all__ = ["WikipediaClient", "WikiPage", "WikipediaError", "default_user_agent"]

log = logging.getLogger(__name__)

_RETRY_API_CODES = ("maxlag", "ratelimited", "readonly")


class WikipediaError(RuntimeError):
    """A Wikipedia request that failed after its retries, or an answer that cannot be used."""


@dataclass(frozen=True)
class WikiPage:
    """One fetched article (redirect-resolved title); ``text`` keeps headings as ``== Heading ==`` lines."""

    title: str
    text: str
    url: str
    pageid: int


def default_user_agent() -> str:
    """``$RAGPLAN_WIKI_USER_AGENT``, else ``ragplan/<version> (<project URL>; research use) Wikipedia-API/<v> httpx/<v>``.

    The project URL comes from the package metadata (``[project.urls]``); without one the string
    carries no contact and a warning asks for it (Wikimedia's policy wants a way to reach you).
    """
    env = os.environ.get("RAGPLAN_WIKI_USER_AGENT", "").strip()
    if env:
        return env
    from ragplan import __version__

    try:
        entries = importlib.metadata.metadata("ragplan").get_all("Project-URL") or []
    except importlib.metadata.PackageNotFoundError:
        entries = []
    url = next((u for e in entries if (u := e.partition(",")[2].strip()).startswith("http")), "")
    contact = f"{url}; research use" if url else "research use"
    libs = f"Wikipedia-API/{importlib.metadata.version('Wikipedia-API')} httpx/{httpx.__version__}"
    return f"ragplan/{__version__} ({contact}) {libs}"


_warned = False


def _warn_without_contact(ua: str) -> None:
    """Warn once per process when live Wikipedia would get a User-Agent without any URL or e-mail."""
    global _warned
    if not _warned and "http" not in ua and "@" not in ua:
        _warned = True
        log.warning("the Wikipedia User-Agent %r names no contact; set RAGPLAN_WIKI_USER_AGENT or [project.urls] "
                    "in pyproject (https://meta.wikimedia.org/wiki/User-Agent_policy)", ua)


@dataclass(eq=False)
class _Retryable(Exception):
    """One attempt failed in a way worth retrying; ``wait`` is the server's Retry-After, if any."""

    reason: str
    wait: float | None = None


def _retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header: delta-seconds (decimals tolerated) or an HTTP date."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, email.utils.parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
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
        self.language = lang
        self.api_url = (api_url or f"https://{lang}.wikipedia.org/w/api.php").strip()
        self.user_agent = ua
        self.timeout_s = float(timeout_s)
        self.retries = int(retries)
        self.backoff_s = float(backoff_s)
        self.max_wait_s = float(max_wait_s)
        if offline is None:
            offline = os.environ.get("RAGPLAN_WIKI_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")
        self.offline = bool(offline)
        self.cache = ResponseCache(cache_dir or default_cache_dir())
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

    # -- public API ------------------------------------------------------------------------------
    def search(self, query: str, limit: int = 3) -> list[str]:
        """Titles of the best ``limit`` (at most 50) main-namespace articles for ``query``, in search order."""
        q = " ".join((query or "").split())
        if not q or limit <= 0:
            return []
        try:
            results = self._wiki.search(q, limit=min(int(limit), 50))
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            raise WikipediaError(f"unexpected search answer from {self.api_url} for {q!r}: {err!r}") from err
        return list(results.pages.keys())[:limit]

    def page(self, title: str) -> WikiPage | None:
        """The article ``title`` (redirects followed), or ``None`` when it does not exist."""
        t = (title or "").strip()
        if not t:
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
        return WikiPage(title=final_title, text=_render(summary, sections), url=self.article_url(final_title),
                        pageid=int(pageid))

    def article_url(self, title: str) -> str:
        """The reader URL of an article (``…/wiki/Title`` for ``…/w/api.php`` endpoints), as MediaWiki encodes it."""
        path = quote(title.replace(" ", "_"), safe=";@$!*(),/:~")
        base = self.api_url.split("?", 1)[0]
        if base.endswith("/w/api.php"):
            return base[: -len("/w/api.php")] + "/wiki/" + path
        if base.endswith("api.php"):
            return base[: -len("api.php")] + "index.php?title=" + path
        return base.rstrip("/") + "/wiki/" + path

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self._http.close()

    def __repr__(self) -> str:
        return f"WikipediaClient(language={self.language!r}, api_url={self.api_url!r}, cache={str(self.cache.root)!r})"

    # -- the one request path --------------------------------------------------------------------
    def _request(self, params: dict[str, Any]) -> dict[str, Any]:
        """Answer one MediaWiki request: from the cache, else over HTTP with bounded retries."""
        cached = self.cache.get(self.api_url, self.language, params)
        if cached is not None:
            self._count("cache_hits")
            return cached
        what = _describe(params)
        if self.offline:
            raise WikipediaError(f"Wikipedia {what} is not in the cache {self.cache.root} and the client is offline")
        attempts = 1 + self.retries
        reason = ""
        for attempt in range(attempts):
            try:
                data = self._attempt(params, what)
            except _Retryable as err:
                reason = err.reason
                if attempt + 1 >= attempts:
                    break
                wait = err.wait if err.wait is not None else self.backoff_s * (2 ** attempt)
                wait = min(max(wait, 0.0), self.max_wait_s)
                log.info("Wikipedia %s: %s; retry %d/%d in %.2fs", what, reason, attempt + 1, self.retries, wait)
                self._count("retries")
                time.sleep(wait)
                continue
            try:
                self.cache.put(self.api_url, self.language, params, data)
            except OSError as err:
                log.warning("could not write the Wikipedia cache under %s: %s", self.cache.root, err)
            return data
        raise WikipediaError(f"Wikipedia {what} at {self.api_url} failed after {attempts} attempt(s): {reason}")

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
        error = data.get("error")
        if isinstance(error, dict):
            code, info = str(error.get("code", "")), str(error.get("info", ""))
            if code in _RETRY_API_CODES or code.startswith("internal_api_error"):
                raise _Retryable(f"API error {code}: {info}", _retry_after(r.headers.get("Retry-After")))
            raise WikipediaError(f"Wikipedia {what} at {self.api_url} failed: API error {code}: {info}")
        return data

    def _count(self, name: str) -> None:
        with self._lock:
            self.stats[name] += 1


def _render(summary: str, sections: list[Any]) -> str:
    """Page text: the lead, then every section as ``== Heading ==`` and its body (nested by level)."""
    parts = [summary.strip()] if summary.strip() else []

    def walk(secs: list[Any]) -> None:
        for s in secs:
            marks = "=" * (int(s.level) + 1)
            parts.append(f"{marks} {s.title} {marks}")
            body = (s.text or "").strip()
            if body:
                parts.append(body)
            walk(s.sections)

    walk(sections)
    return "\n\n".join(parts)
