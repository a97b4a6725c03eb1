"""Live Wikipedia for the ``wiki`` retriever: a polite, cached, bounded client and the retriever on it."""

from ragplan.tools.wikipedia.client import (
    WikiPage, WikipediaClient, WikipediaError, WikipediaRetriever, default_user_agent,
)

__all__ = ["WikipediaClient", "WikipediaRetriever", "WikiPage", "WikipediaError", "default_user_agent"]
