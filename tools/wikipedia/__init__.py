"""Live Wikipedia for the ``wiki`` retriever: a polite, cached, bounded client and the retriever on it.

* :class:`WikipediaClient` — title search and page text through the ``wikipedia-api`` package, with
  an on-disk response cache (repeatable, offline after the first run), bounded retries and a
  descriptive User-Agent; ``api_url`` points it at a mirror or a test server.
* :class:`WikipediaRetriever` — the :class:`~ragplan.tools.retrieval.Retriever` named ``wiki``.
* :class:`WikiPage` — one fetched article; :class:`WikipediaError` — a request that failed for good.
"""

from ragplan.tools.wikipedia.client import WikiPage, WikipediaClient, WikipediaError, default_user_agent
from ragplan.tools.wikipedia.retriever import WikipediaRetriever

__all__ = ["WikipediaClient", "WikipediaRetriever", "WikiPage", "WikipediaError", "default_user_agent"]
