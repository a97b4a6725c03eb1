"""The retriever and sentence ranker a run's context selects (``wiki``, ``local`` or ``retriever_object``), built once."""

from __future__ import annotations

import threading
from typing import Any

from ragplan.tools.retrieval import Retriever, SentenceRanker

__all__ = ["make_retriever", "ranker_for", "retriever_problem", "search_k"]


_lock = threading.Lock()
_retrievers: dict[tuple, Retriever] = {}


def make_retriever(ctx: Any) -> Retriever:
    """The retriever the context names (``retriever``: wiki | local) or its ``retriever_object``, built once."""
    if (obj := getattr(ctx, "retriever_object", None)) is not None:
        return obj
    kind = (getattr(ctx, "retriever", "") or "").strip().lower()
    if kind not in ("local", "wiki"):
        raise ValueError(f"unknown retriever {kind!r}: use 'wiki' (live Wikipedia) or 'local' (a FAISS index)")
    if kind == "local" and not getattr(ctx, "index_dir", ""):
        raise ValueError("--retriever local needs --index DIR (index_dir; build one with `ragplan index build`)")
    settings = ("index_dir", "embedding_model") if kind == "local" else ("wiki_language", "wiki_cache_dir",
                                                                         "wiki_api_url", "wiki_pages")
    key = (kind, *(getattr(ctx, name) for name in settings))
    with _lock:
        if key not in _retrievers:
            if kind == "local":
                from ragplan.tools.textindex import TextIndex

                _retrievers[key] = TextIndex.open(ctx.index_dir, model_path=ctx.embedding_model)
            else:
                from ragplan.tools.wikipedia import WikipediaClient, WikipediaRetriever

                client = WikipediaClient(language=ctx.wiki_language, cache_dir=ctx.wiki_cache_dir or None,
                                         api_url=ctx.wiki_api_url or None)
                _retrievers[key] = WikipediaRetriever(client, pages=ctx.wiki_pages)
        return _retrievers[key]


def search_k(ctx: Any, retriever: Retriever) -> int:
    """Passages one search asks for: ``wiki_pages`` from Wikipedia, ``retrieval_k`` from any other retriever."""
    return ctx.wiki_pages if getattr(retriever, "name", "") == "wiki" else ctx.retrieval_k


def ranker_for(ctx: Any) -> SentenceRanker:
    """The sentence ranker over the context's embedding model (the model is loaded once per process)."""
    from ragplan.tools.embeddings import get_embedder

    return SentenceRanker(get_embedder(getattr(ctx, "embedding_model", "") or ""))


def retriever_problem(ctx: Any) -> str | None:
    """Why the context's retriever cannot be used (a local index is opened now, so a bad folder is reported early)."""
    if getattr(ctx, "retriever_object", None) is not None or ctx.retriever != "local":
        return None
    try:
        make_retriever(ctx)
    except Exception as exc:  # (no index_dir: make_retriever's message names the flags)
        return f"the local index cannot be opened: {exc}" if ctx.index_dir else str(exc)
    return None
