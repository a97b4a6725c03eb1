"""Live Wikipedia for the ``wiki`` retriever: a polite, cached, bounded client and the retriever on it."""

from ragplan.tools.wikipedia.client import WikipediaClient, WikipediaError, WikipediaRetriever, default_user_agent

__all__ = ["WikipediaClient", "WikipediaRetriever", "WikipediaError", "default_user_agent"]
