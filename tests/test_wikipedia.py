"""WikipediaClient / WikipediaRetriever against a local MediaWiki-compatible server (no network).

The real ``wikipedia-api`` package builds and parses every request; only the endpoint differs.
A live-Wikipedia smoke test runs when ``RAGPLAN_LIVE_WIKIPEDIA=1``.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from ragplan.tools.retrieval import Passage, Retriever, split_sentences
from ragplan.tools.retrievers import make_retriever
from ragplan.tools.wikipedia import WikipediaClient, WikipediaError, WikipediaRetriever
from ragplan.tools.wikipedia.client import _retry_after, request_key
from tests.mediawiki_server import Fault, MediaWikiStub

PAGES = {
    "Python (programming language)": (
        "Python is a high-level programming language. Its design emphasises code readability.\n\n"
        "== History ==\nPython was conceived in the late 1980s by Guido van Rossum.\n\n"
        "=== Python 3 ===\nPython 3.0 was released in 2008.\n\n"
        "== See also ==\n"
    ),
    "Guido van Rossum": "Guido van Rossum is a Dutch programmer. He created the Python programming language.",
    "Monty Python": "Monty Python were a British comedy troupe. The programming language is named after them.",
    "Cobra": "Cobra is the common name of various venomous snakes.",
}
REDIRECTS = {"Py": "Python (programming language)", "Python language": "Python (programming language)"}
UA = "ragplan-tests/0.1 (https://example.org/ragplan-tests; tests@example.org)"


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("RAGPLAN_WIKI_OFFLINE", "RAGPLAN_WIKI_USER_AGENT", "RAGPLAN_CACHE_DIR"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def wiki():
    """The local MediaWiki with the pages above."""
    with MediaWikiStub(PAGES, redirects=REDIRECTS) as stub:
        yield stub


def make_client(stub: MediaWikiStub, cache: Path, **kw) -> WikipediaClient:
    """A client on the stub with fast failure settings (tests override what they exercise)."""
    kw = {"timeout_s": 2.0, "retries": 2, "backoff_s": 0.01, "user_agent": UA, **kw}
    return WikipediaClient(api_url=stub.api_url, cache_dir=str(cache), **kw)


# -- search and pages -------------------------------------------------------------------------------
def test_search_returns_titles_in_search_order(wiki: MediaWikiStub, tmp_path: Path) -> None:
    client = make_client(wiki, tmp_path)
    titles = client.search("Python programming language", limit=3)
    assert titles == ["Python (programming language)", "Monty Python", "Guido van Rossum"]
    assert client.search("Python programming language", limit=1) == ["Python (programming language)"]
    assert client.search("   ", limit=3) == [] and client.search("python", limit=0) == []
    req = wiki.requests_of("search")[0]
    assert req.path == "/w/api.php"
    assert (req.params["action"], req.params["srsearch"], req.params["srlimit"], req.params["format"]) == (
        "query", "Python programming language", "3", "json")
    assert len(wiki.requests) == 2  # the empty query and limit 0 sent nothing


def test_page_text_url_and_pageid(wiki: MediaWikiStub, tmp_path: Path) -> None:
    client = make_client(wiki, tmp_path)
    page = client.page("Python (programming language)")
    assert isinstance(page, Passage) and page.source == "wiki"
    assert page.title == "Python (programming language)"
    assert page.id == str(wiki.pageids["Python (programming language)"])
    assert page.meta["url"] == wiki.api_url.replace("/w/api.php", "/wiki/Python_(programming_language)")
    assert page.text.startswith("Python is a high-level programming language.")
    assert "== History ==" in page.text and "=== Python 3 ===" in page.text
    sentences = split_sentences(page.text)
    assert "Python 3.0 was released in 2008." in sentences
    assert not any("History" == s or s.startswith("==") for s in sentences)  # headings are not evidence
    # one prop=extracts request with the library's parameters; no extra prop=info round trip
    (req,) = wiki.requests
    assert (req.params["prop"], req.params["explaintext"], req.params["exsectionformat"], req.params["redirects"]) == (
        "extracts", "1", "wiki", "1")


def test_redirect_and_normalised_title_followed(wiki: MediaWikiStub, tmp_path: Path) -> None:
    client = make_client(wiki, tmp_path)
    for asked in ("Py", "python_language", "python_(programming_language)"):
        page = client.page(asked)
        assert page is not None, asked
        assert page.title == "Python (programming language)"
        assert page.id == str(wiki.pageids["Python (programming language)"])
    assert wiki.requests[0].answered == "pages"


def test_missing_page_is_none(wiki: MediaWikiStub, tmp_path: Path) -> None:
    client = make_client(wiki, tmp_path)
    assert client.page("No such article anywhere") is None
    assert client.page("  ") is None  # sends nothing
    assert len(wiki.requests) == 1


def test_the_library_is_used_as_published(wiki: MediaWikiStub, tmp_path: Path) -> None:
    """wikipedia-api's own class, reached through its public transport option (no override of its request path)."""
    import wikipediaapi

    client = make_client(wiki, tmp_path)
    assert type(client._wiki) is wikipediaapi.Wikipedia
    assert client.search("snakes", limit=1) == ["Cobra"]
    assert [r.path for r in wiki.requests] == ["/w/api.php"]  # the library's request, sent to api_url


# -- cache ------------------------------------------------------------------------------------------
def test_cache_answers_with_the_server_stopped(wiki: MediaWikiStub, tmp_path: Path) -> None:
    first = make_client(wiki, tmp_path)
    titles = first.search("Dutch programmer", limit=2)
    pages = [first.page(t) for t in titles]
    missing = first.page("Nowhere")
    sent = len(wiki.requests)
    assert first.stats["requests"] == sent and first.stats["cache_hits"] == 0
    wiki.stop()
    with pytest.raises(WikipediaError, match="connection failed"):  # the server is really gone
        first.search("Cobra", limit=1)

    second = make_client(wiki, tmp_path, retries=0)  # same endpoint, same cache dir, new process-like client
    assert second.search("Dutch programmer", limit=2) == titles
    assert [second.page(t) for t in titles] == pages
    assert second.page("Nowhere") is None and missing is None  # a missing page is cached too
    assert second.stats == {"requests": 0, "cache_hits": sent, "retries": 0}

    files = sorted(tmp_path.rglob("*.json"))
    assert len(files) == sent and all(f.relative_to(tmp_path).parts[0] == "en" for f in files)
    entry = json.loads(files[0].read_text())
    assert set(entry) == {"request", "fetched_at", "response"}
    assert entry["request"]["endpoint"] == wiki.api_url and entry["request"]["language"] == "en"
    assert not list(tmp_path.rglob(".tmp-*"))  # atomic writes leave no temporary files


def test_cache_key_includes_language_query_and_endpoint(wiki: MediaWikiStub, tmp_path: Path) -> None:
    params = {"action": "query", "list": "search", "srsearch": "Python", "srlimit": 3}
    key = request_key(wiki.api_url, "en", params)
    assert key == request_key(wiki.api_url, "en", {**params, "srlimit": "3"})  # values compared as text
    assert key != request_key(wiki.api_url, "de", params)
    assert key != request_key(wiki.api_url, "en", {**params, "srsearch": "Cobra"})
    assert key != request_key("https://en.wikipedia.org/w/api.php", "en", params)

    make_client(wiki, tmp_path).search("Python", limit=3)
    wiki.stop()
    with pytest.raises(WikipediaError, match="connection failed"):
        make_client(wiki, tmp_path, language="de", retries=0).search("Python", limit=3)
    with pytest.raises(WikipediaError):
        make_client(wiki, tmp_path, retries=0).search("Cobra", limit=3)
    assert make_client(wiki, tmp_path, retries=0).search("Python", limit=3)


def test_offline_client_never_sends(wiki: MediaWikiStub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGPLAN_WIKI_OFFLINE", "1")
    client = make_client(wiki, tmp_path)
    assert client.offline
    with pytest.raises(WikipediaError, match="offline"):
        client.search("Python")
    assert wiki.requests == []


def test_default_cache_dir_from_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGPLAN_CACHE_DIR", str(tmp_path))
    assert WikipediaClient(user_agent=UA).cache_dir == tmp_path / "wikipedia"


# -- retries, rate limits, timeouts ----------------------------------------------------------------
def test_503_is_retried_then_succeeds(wiki: MediaWikiStub, tmp_path: Path) -> None:
    wiki.add_faults(Fault(503), Fault(502))
    client = make_client(wiki, tmp_path)
    assert client.search("Cobra", limit=1) == ["Cobra"]
    assert [r.answered for r in wiki.requests] == ["fault 503", "fault 502", "search"]
    assert client.stats["retries"] == 2


def test_503_exhausted_raises_and_is_not_cached(wiki: MediaWikiStub, tmp_path: Path) -> None:
    wiki.add_faults(*[Fault(503)] * 3)
    client = make_client(wiki, tmp_path, retries=2)
    with pytest.raises(WikipediaError, match=r"search 'Cobra'.*3 attempt\(s\): HTTP 503"):
        client.search("Cobra", limit=1)
    assert len(wiki.requests) == 3 and not list(tmp_path.rglob("*.json"))
    assert client.search("Cobra", limit=1) == ["Cobra"]  # the failure was not cached


def test_429_retry_after_is_honoured(wiki: MediaWikiStub, tmp_path: Path) -> None:
    wiki.add_faults(Fault(429, retry_after="1"))
    client = make_client(wiki, tmp_path, backoff_s=0.01)
    start = time.monotonic()
    assert client.page("Cobra") is not None
    elapsed = time.monotonic() - start
    assert 0.9 <= elapsed < 5, elapsed  # waited the server's second, not the 0.01 s backoff
    assert [r.answered for r in wiki.requests] == ["fault 429", "pages"]


def test_retry_after_is_capped(wiki: MediaWikiStub, tmp_path: Path) -> None:
    wiki.add_faults(Fault(429, retry_after="3600"))
    client = make_client(wiki, tmp_path, max_wait_s=0.05)
    start = time.monotonic()
    assert client.search("Cobra", limit=1) == ["Cobra"]
    assert time.monotonic() - start < 2


def test_timeout_raises_after_bounded_retries_fast(wiki: MediaWikiStub, tmp_path: Path) -> None:
    wiki.add_faults(*[Fault(200, delay_s=3.0)] * 3)
    client = make_client(wiki, tmp_path, timeout_s=0.2, retries=2, backoff_s=0.01)
    start = time.monotonic()
    with pytest.raises(WikipediaError, match=r"3 attempt\(s\): timed out"):
        client.search("Cobra", limit=1)
    assert time.monotonic() - start < 2.5
    assert len(wiki.requests) == 3 and client.stats["retries"] == 2


def test_maxlag_api_error_is_retried(wiki: MediaWikiStub, tmp_path: Path) -> None:
    wiki.add_faults(Fault(200, api_error="maxlag"))
    assert make_client(wiki, tmp_path).search("Cobra", limit=1) == ["Cobra"]
    assert [r.answered for r in wiki.requests] == ["error maxlag", "search"]


def test_client_errors_fail_at_once(wiki: MediaWikiStub, tmp_path: Path) -> None:
    wiki.add_faults(Fault(403), Fault(200, body="<html>not json"), Fault(200, api_error="badvalue"))
    client = make_client(wiki, tmp_path, retries=3)
    with pytest.raises(WikipediaError, match="HTTP 403"):
        client.search("Cobra")
    with pytest.raises(WikipediaError, match="non-JSON"):
        client.search("Cobra")
    with pytest.raises(WikipediaError, match="API error badvalue"):
        client.search("Cobra")
    assert len(wiki.requests) == 3 and client.stats["retries"] == 0


def test_retry_after_header_forms() -> None:
    assert _retry_after("2") == 2.0 and _retry_after(" 0 ") == 0.0 and _retry_after(None) is None
    assert _retry_after("soon") is None
    assert _retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # a date in the past: no wait
    future = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(time.time() + 30))
    assert 25 <= _retry_after(future) <= 31


# -- user agent -------------------------------------------------------------------------------------
def test_configured_user_agent_is_sent(wiki: MediaWikiStub, tmp_path: Path) -> None:
    client = make_client(wiki, tmp_path)
    client.search("Cobra", limit=1)
    client.page("Cobra")
    assert {r.headers["user-agent"] for r in wiki.requests} == {UA}


def test_default_user_agent_is_descriptive(wiki: MediaWikiStub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    client = make_client(wiki, tmp_path, user_agent=None)
    assert client.user_agent.startswith("ragplan/0.") and "Wikipedia-API/0.16" in client.user_agent
    client.search("Cobra", limit=1)
    assert wiki.requests[-1].headers["user-agent"] == client.user_agent
    monkeypatch.setenv("RAGPLAN_WIKI_USER_AGENT", "my-bench/2.0 (me@example.org)")
    assert make_client(wiki, tmp_path, user_agent=None).user_agent == "my-bench/2.0 (me@example.org)"
    with pytest.raises(ValueError, match="too short"):
        make_client(wiki, tmp_path, user_agent="x")


# -- retriever ----------------------------------------------------------------------------------------
def test_retriever_returns_wiki_passages_in_search_order(wiki: MediaWikiStub, tmp_path: Path) -> None:
    retriever = WikipediaRetriever(make_client(wiki, tmp_path), pages=3)
    assert isinstance(retriever, Retriever) and retriever.name == "wiki"
    passages = retriever.search("Python programming language", k=5)
    assert [p.title for p in passages] == ["Python (programming language)", "Monty Python", "Guido van Rossum"]
    assert {p.source for p in passages} == {"wiki"}
    assert [p.id for p in passages] == [str(wiki.pageids[p.title]) for p in passages]
    assert [p.score for p in passages] == sorted((p.score for p in passages), reverse=True)
    assert passages[2].text == PAGES["Guido van Rossum"]
    assert passages[0].meta["url"].endswith("/wiki/Python_(programming_language)")
    assert [p.title for p in retriever.search("Python programming language", k=1)] == ["Python (programming language)"]
    assert retriever.search("zzzz nothing matches", k=3) == []


def test_one_client_serves_parallel_branches(wiki: MediaWikiStub, tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    retriever = WikipediaRetriever(make_client(wiki, tmp_path), pages=2)
    queries = ["Python programming language", "snakes", "Dutch programmer", "comedy troupe"] * 3
    with ThreadPoolExecutor(max_workers=6) as pool:
        results = list(pool.map(lambda q: [p.title for p in retriever.search(q, k=2)], queries))
    assert results[:4] == results[4:8] == results[8:]
    assert results[1] == ["Cobra"] and results[3] == ["Monty Python"]


def test_make_retriever_builds_the_wiki_retriever(wiki: MediaWikiStub, tmp_path: Path) -> None:
    ctx = SimpleNamespace(retriever="wiki", wiki_language="en", wiki_cache_dir=str(tmp_path),
                          wiki_api_url=wiki.api_url, wiki_pages=2, retriever_object=None)
    retriever = make_retriever(ctx)
    assert isinstance(retriever, WikipediaRetriever) and retriever.pages == 2
    assert retriever.client.api_url == wiki.api_url and retriever.client.cache_dir == tmp_path
    assert make_retriever(ctx) is retriever
    assert [p.title for p in retriever.search("snakes", k=5)] == ["Cobra"]


@pytest.mark.skipif(os.environ.get("RAGPLAN_LIVE_WIKIPEDIA") != "1", reason="set RAGPLAN_LIVE_WIKIPEDIA=1 to query live Wikipedia")
def test_live_wikipedia(tmp_path: Path) -> None:
    client = WikipediaClient(cache_dir=str(tmp_path), user_agent=os.environ.get("RAGPLAN_WIKI_USER_AGENT") or None)
    titles = client.search("Guido van Rossum Python creator", limit=3)
    assert titles
    page = client.page(titles[0])
    assert page is not None and int(page.id) > 0 and page.text
    assert client.page("Python programming language").title == "Python (programming language)"
