"""A ReAct-style docstore over any retriever: ``Search[entity]`` and ``Lookup[keyword]`` (InstructRAG Table 9);
a retriever failure becomes the observation."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ragplan.tools.retrieval import Passage, split_sentences

__all__ = ["ReActDocstore", "DocstoreResult"]


def _norm_title(t: str) -> str:
    return " ".join(re.sub(r"[\"'“”‘’]", "", t or "").casefold().split())


@dataclass
class DocstoreResult:
    """What one action returned."""

    observation: str
    title: str = ""
    """The page the action read (Search: the page found; Lookup: the current page)."""
    error: str = ""
    """Why the action failed (the retriever raised), '' otherwise."""


_FIRST_SENTENCES = 5
"""Sentences of the page shown for a Search (ReAct shows five)."""
_MAX_CHARS = 1500


@dataclass
class ReActDocstore:
    """Search / Lookup over a retriever, with ReAct's current-page and lookup state (one per run)."""

    retriever: Any
    k: int = 5
    """Passages fetched per Search."""
    page_title: str = ""
    """The current page (a run's state may restore it)."""
    page_sentences: list[str] = field(default_factory=list)
    """The current page's sentences."""
    lookup_keyword: str = ""
    """The keyword of the Lookup walk in progress."""
    lookup_next: int = 0
    """How many of that keyword's sentences were shown."""

    def search(self, entity: str) -> DocstoreResult:
        """``Search[entity]``: the entity's page (or the closest), its first sentences as the observation."""
        if not (entity := " ".join((entity or "").split())):
            return DocstoreResult("Search needs an entity: Search[entity].")
        try:
            passages: list[Passage] = list(self.retriever.search(entity, k=self.k))
        except Exception as exc:  # network, index: the observation says so
            return DocstoreResult(f"Search failed: {type(exc).__name__}: {str(exc)[:200]}", error=str(exc)[:300])
        if not passages:
            return DocstoreResult(f"Could not find {entity}.")
        titles = list(dict.fromkeys(p.title for p in passages))
        want = _norm_title(entity)
        exact = next((t for t in titles if want in (_norm_title(t), _norm_title(re.sub(r"\s*\(.*\)$", "", t)))), None)
        title = exact or titles[0]
        text = "\n".join(p.text for p in passages if p.title == title)
        self.page_title, self.page_sentences = title, split_sentences(text)
        self.lookup_keyword, self.lookup_next = "", 0
        head = " ".join(self.page_sentences[:_FIRST_SENTENCES])[:_MAX_CHARS]
        if exact is None:  # (the page is titles[0]: the others follow it)
            similar = f" Similar: {titles[1:6]}." if len(titles) > 1 else ""
            head = f"(No page named {entity}; closest: {title}.{similar}) {head}"
        return DocstoreResult(head, title=title)

    def lookup(self, keyword: str) -> DocstoreResult:
        """``Lookup[keyword]``: the next sentence of the current page that contains ``keyword``."""
        keyword = " ".join((keyword or "").split())
        if not self.page_title:
            return DocstoreResult("There is no page to look up in yet: use Search[entity] first.")
        if not keyword:
            return DocstoreResult("Lookup needs a keyword: Lookup[keyword].", title=self.page_title)
        if keyword.casefold() != self.lookup_keyword.casefold():
            self.lookup_keyword, self.lookup_next = keyword, 0
        hits = [s for s in self.page_sentences if keyword.casefold() in s.casefold()]
        if self.lookup_next >= len(hits):
            return DocstoreResult("No more results.", title=self.page_title)
        self.lookup_next += 1
        shown = hits[self.lookup_next - 1][:_MAX_CHARS]
        return DocstoreResult(f"(Result {self.lookup_next} / {len(hits)}) {shown}", title=self.page_title)

    def execute(self, action: str, argument: str) -> DocstoreResult:
        """Run ``Search`` or ``Lookup`` (``Finish`` and other actions are not the docstore's)."""
        if action in ("Search", "Lookup"):
            return self.search(argument) if action == "Search" else self.lookup(argument)
        return DocstoreResult(f"Invalid action: {action}[{argument}] "
                              "(use Search[entity], Lookup[keyword] or Finish[answer]).")
