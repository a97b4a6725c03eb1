"""The ``wiki`` retriever: Wikipedia title search, then the text of the top pages (Think-then-Act §4.2)."""

from __future__ import annotations

from ragplan.tools.retrieval import Passage
from ragplan.tools.wikipedia.client import WikipediaClient

__all__ = ["WikipediaRetriever"]


class WikipediaRetriever:
    """Live Wikipedia as a retriever: the pages of ``min(pages, k)`` search titles, scored ``1 / rank``."""

    name = "wiki"

    def __init__(self, client: WikipediaClient, pages: int = 3) -> None:
        """Fetch at most ``pages`` pages per query (Think-then-Act retrieves a few pages per query)."""
        if int(pages) < 1:
            raise ValueError(f"pages must be >= 1, got {pages!r}")
        self.client = client
        self.pages = int(pages)

    def search(self, query: str, k: int = 5) -> list[Passage]:
        """Up to ``min(pages, k)`` Wikipedia pages for ``query``, best first (missing or duplicate pages skipped)."""
        n = min(self.pages, int(k))
        if n <= 0 or not (query or "").strip():
            return []
        out: list[Passage] = []
        seen: set[int] = set()
        for rank, title in enumerate(self.client.search(query, limit=n), start=1):
            page = self.client.page(title)
            if page is None or page.pageid in seen:  # deleted since the search, or two redirects to one page
                continue
            seen.add(page.pageid)
            out.append(Passage(id=str(page.pageid) if page.pageid > 0 else page.title, title=page.title,
                               text=page.text, score=1.0 / rank, source="wiki",
                               meta={"url": page.url, "rank": rank, "search_title": title}))
        return out

    def __repr__(self) -> str:
        return f"WikipediaRetriever({self.client!r}, pages={self.pages})"
