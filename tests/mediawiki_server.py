"""A small MediaWiki-compatible API server for tests (stdlib only, 127.0.0.1, no network).

It serves ``GET /w/api.php`` for the requests :class:`ragplan.tools.wikipedia.WikipediaClient` (and
the ``wikipedia-api`` package under it) send, answering like MediaWiki's ``format=json`` (format
version 1):

* ``action=query&list=search&srsearch=…&srlimit=…`` — pages ranked by query-word overlap (a title
  word counts 3, a text occurrence 1; ties keep insertion order), with ``searchinfo.totalhits`` and
  a ``continue`` block when more matches exist;
* ``action=query&prop=extracts|info&titles=A|B`` — titles normalised (``_`` → space, first letter
  upper-cased, reported under ``normalized``), redirects followed when ``redirects`` is set
  (``redirects`` block), missing pages as ``"-1": {"missing": ""}``; ``extract`` is the page text as
  given (write it the way TextExtracts ``explaintext=1&exsectionformat=wiki`` does:
  ``"Lead.\\n\\n== History ==\\nBody."``); ``info`` adds ``fullurl`` and friends;
* anything else — a MediaWiki ``{"error": {"code": "badvalue", …}}``.

Faults are queued and consumed one per request, before the normal answer::

    with MediaWikiStub({"Python": "Python is a language."}, redirects={"Py": "Python"}) as wiki:
        wiki.add_faults(Fault(503), Fault(429, retry_after="1"), Fault(delay_s=2))
        WikipediaClient(api_url=wiki.api_url, cache_dir=tmp)...
        wiki.requests[0].params["srsearch"], wiki.requests[0].headers["user-agent"]

Every request is recorded (path, query parameters, headers, what was answered) on arrival, so a
request that the client gave up on (timeout) is counted too.
"""

from __future__ import annotations

import json
import re
import socket
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, quote, urlsplit

__all__ = ["Fault", "RecordedRequest", "MediaWikiStub", "normalise_title"]

API_PATH = "/w/api.php"
_WORD = re.compile(r"\w+", re.UNICODE)


@dataclass
class Fault:
    """One failed answer: wait ``delay_s``, then send ``status`` (with ``Retry-After`` when given).

    ``status=200`` with ``api_error`` sends a MediaWiki error object (e.g. ``"maxlag"``) instead;
    ``status=200`` with ``body`` sends that raw body (e.g. invalid JSON).
    """

    status: int = 503
    retry_after: str | None = None
    delay_s: float = 0.0
    api_error: str | None = None
    body: str | None = None


@dataclass
class RecordedRequest:
    """One request the stub received."""

    path: str
    params: dict[str, str]
    headers: dict[str, str]
    """Header names lower-cased."""
    answered: str = ""
    """``search``, ``pages``, ``fault 503``, ``error badvalue``, …"""

    @property
    def kind(self) -> str:
        """``search``, ``extracts``, ``info`` (the ``prop`` value) or the action."""
        if self.params.get("list") == "search":
            return "search"
        return self.params.get("prop") or self.params.get("action", "")


def normalise_title(title: str) -> str:
    """MediaWiki title normalisation for the main namespace: underscores to spaces, first letter upper."""
    t = " ".join(title.replace("_", " ").split())
    return t[:1].upper() + t[1:]


class MediaWikiStub:
    """The server; use as a context manager or call ``start()`` / ``stop()``."""

    def __init__(self, pages: dict[str, str], redirects: dict[str, str] | None = None, *, port: int = 0,
                 first_pageid: int = 1000, faults: list[Fault] | None = None) -> None:
        """``pages`` maps title → plain text; ``redirects`` maps a redirect title → its target title."""
        self.pages: dict[str, str] = {normalise_title(t): text for t, text in pages.items()}
        self.redirects: dict[str, str] = {normalise_title(a): normalise_title(b) for a, b in (redirects or {}).items()}
        self.pageids: dict[str, int] = {t: first_pageid + i for i, t in enumerate(self.pages)}
        self.requests: list[RecordedRequest] = []
        self.faults: list[Fault] = list(faults or [])
        self._port = port
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._connections: set[Any] = set()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> "MediaWikiStub":
        """Listen on 127.0.0.1 (``port=0``: a free port) in a background thread."""
        stub = self

        class Handler(_Handler):
            owner = stub

        self._stop.clear()
        self._server = ThreadingHTTPServer(("127.0.0.1", self._port), Handler)
        self._server.daemon_threads = True
        self._server.block_on_close = False  # a delayed (held) request must not block stop()
        self._port = self._server.server_address[1]  # a restart listens on the same port
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="mediawiki-stub", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop listening and drop open keep-alive connections (held requests are released unanswered)."""
        self._stop.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        with self._lock:
            conns, self._connections = list(self._connections), set()
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def __enter__(self) -> "MediaWikiStub":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The port listened on (kept after ``stop()``, so the URL stays the same)."""
        return self._port

    @property
    def api_url(self) -> str:
        """``http://127.0.0.1:PORT/w/api.php``."""
        return f"http://127.0.0.1:{self._port}{API_PATH}"

    def add_faults(self, *faults: Fault) -> None:
        """Queue faults; each is used by one request, in order."""
        with self._lock:
            self.faults.extend(faults)

    def requests_of(self, kind: str) -> list[RecordedRequest]:
        """The recorded requests of one :attr:`RecordedRequest.kind`."""
        return [r for r in self.requests if r.kind == kind]

    # -- answering -------------------------------------------------------------------------------
    def _record(self, rec: RecordedRequest) -> Fault | None:
        with self._lock:
            self.requests.append(rec)
            return self.faults.pop(0) if self.faults else None

    def answer(self, params: dict[str, str]) -> tuple[str, dict[str, Any]]:
        """What MediaWiki would answer to these query parameters: ``(label, JSON body)``."""
        if params.get("action") != "query":
            return "error badvalue", _error("badvalue", f"Unrecognized value for parameter \"action\": {params.get('action')}.")
        if params.get("list") == "search":
            if not params.get("srsearch"):
                return "error missingparam", _error("missingparam", "The \"srsearch\" parameter must be set.")
            return "search", self._search(params["srsearch"], int(params.get("srlimit", "10") or 10),
                                          int(params.get("sroffset", "0") or 0))
        if "titles" in params:
            props = set(filter(None, params.get("prop", "").split("|")))
            return "pages", self._pages(params["titles"].split("|"), props, "redirects" in params,
                                        set(params.get("inprop", "").split("|")))
        return "error badvalue", _error("badvalue", "unsupported query for this test server")

    def _search(self, query: str, limit: int, offset: int) -> dict[str, Any]:
        terms = [w.lower() for w in _WORD.findall(query)]
        scored = []
        for i, (title, text) in enumerate(self.pages.items()):
            title_words = {w.lower() for w in _WORD.findall(title)}
            text_words = [w.lower() for w in _WORD.findall(text)]
            score = sum(3 * (t in title_words) + text_words.count(t) for t in terms)
            if score > 0:
                scored.append((-score, i, title))
        scored.sort()
        hits = [t for _, _, t in scored]
        window = hits[offset: offset + max(1, min(limit, 500))]
        body: dict[str, Any] = {"batchcomplete": "", "query": {
            "searchinfo": {"totalhits": len(hits)},
            "search": [{"ns": 0, "title": t, "pageid": self.pageids[t], "size": len(self.pages[t].encode()),
                        "wordcount": len(self.pages[t].split()), "snippet": _snippet(self.pages[t], terms),
                        "timestamp": "2024-01-01T00:00:00Z"} for t in window]}}
        if offset + len(window) < len(hits):
            body["continue"] = {"sroffset": offset + len(window), "continue": "-||"}
        return body

    def _pages(self, titles: list[str], props: set[str], follow: bool, inprop: set[str]) -> dict[str, Any]:
        query: dict[str, Any] = {}
        normalized = [{"from": t, "to": normalise_title(t)} for t in titles if normalise_title(t) != t]
        if normalized:
            query["normalized"] = normalized
        redirects, pages, missing = [], {}, -1
        for raw in titles:
            title = normalise_title(raw)
            if follow and title in self.redirects:
                redirects.append({"from": title, "to": self.redirects[title]})
                title = self.redirects[title]
            if title not in self.pages:
                pages[str(missing)] = {"ns": 0, "title": title, "missing": ""}
                missing -= 1
                continue
            entry: dict[str, Any] = {"pageid": self.pageids[title], "ns": 0, "title": title}
            if "extracts" in props:
                entry["extract"] = self.pages[title]
            if "info" in props:
                entry.update({"contentmodel": "wikitext", "pagelanguage": "en", "pagelanguagehtmlcode": "en",
                              "pagelanguagedir": "ltr", "touched": "2024-01-01T00:00:00Z", "lastrevid": 1,
                              "length": len(self.pages[title].encode())})
                if "url" in inprop:
                    url = self.api_url.replace(API_PATH, "/wiki/") + quote(title.replace(" ", "_"), safe=";@$!*(),/:~")
                    entry.update({"fullurl": url, "editurl": url + "?action=edit", "canonicalurl": url})
            pages[str(self.pageids[title])] = entry
        if redirects:
            query["redirects"] = redirects
        query["pages"] = pages
        return {"batchcomplete": "", "query": query}


def _error(code: str, info: str) -> dict[str, Any]:
    return {"error": {"code": code, "info": info, "*": "See /w/api.php for API usage."}, "servedby": "mediawiki-stub"}


def _snippet(text: str, terms: list[str]) -> str:
    words = text.split()[:20]
    return " ".join(f'<span class="searchmatch">{w}</span>' if w.lower().strip(".,") in terms else w for w in words)


class _Handler(BaseHTTPRequestHandler):
    owner: MediaWikiStub
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body are separate writes: avoid 40 ms delayed-ACK stalls

    def log_message(self, *args: Any) -> None:  # keep test output clean
        pass

    def setup(self) -> None:
        super().setup()
        with self.owner._lock:
            self.owner._connections.add(self.connection)

    def finish(self) -> None:
        with self.owner._lock:
            self.owner._connections.discard(self.connection)
        try:
            super().finish()
        except OSError:
            pass

    def do_GET(self) -> None:  # noqa: N802 (http.server naming)
        url = urlsplit(self.path)
        params = dict(parse_qsl(url.query, keep_blank_values=True))
        rec = RecordedRequest(url.path, params, {k.lower(): v for k, v in self.headers.items()})
        fault = self.owner._record(rec)
        if url.path != API_PATH:
            rec.answered = "404"
            return self._send(404, b"Not Found", "text/plain")
        if fault is not None:
            if fault.delay_s and self.owner._stop.wait(fault.delay_s):
                rec.answered = "dropped (stopped)"
                return
            if fault.status != 200:
                rec.answered = f"fault {fault.status}"
                extra = {"Retry-After": fault.retry_after} if fault.retry_after is not None else {}
                return self._send(fault.status, b"<html>Wikimedia Error</html>", "text/html", extra)
            if fault.api_error:
                rec.answered = f"error {fault.api_error}"
                return self._json(_error(fault.api_error, "scripted API error"))
            if fault.body is not None:
                rec.answered = "raw body"
                return self._send(200, fault.body.encode(), "application/json")
        rec.answered, body = self.owner.answer(params)
        self._json(body)

    def _json(self, body: dict[str, Any]) -> None:
        headers = {"MediaWiki-API-Error": body["error"]["code"]} if "error" in body else {}
        self._send(200, json.dumps(body).encode(), "application/json; charset=utf-8", headers)

    def _send(self, status: int, payload: bytes, ctype: str, headers: dict[str, str] | None = None) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(payload)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):  # the client timed out and went away
            pass
