"""Rewards Δ(path, question) of a candidate path (InstructRAG Eq. 3), all deterministic: :class:`LLMF1Reward` (the
paper's answer F1), :class:`ProxyReward` (the path run on a local corpus, no LLM), :class:`PathMatchReward` (the
question's own path, instructions matched by meaning)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ragplan.eval.metrics import f1_score, normalize_answer
from ragplan.tools.react_docstore import ReActDocstore
from ragplan.methods.instructrag.paths import Instruction

__all__ = ["QueryExample", "PathReward", "PathMatchReward", "ProxyReward", "LLMF1Reward", "soft_f1"]


@dataclass
class QueryExample:
    """A question with what rewards are measured against."""

    question: str
    task: str
    answer: str
    own_path: list[Instruction]
    """The question's own successful path."""
    qvec: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.float32))
    """Its unit Sentence-BERT vector."""
    supporting_titles: list[str] = field(default_factory=list)


PathReward = Callable[[QueryExample, list[Instruction]], float]
"""Δ(path, question) in [0, 1]; the rewards below also carry a ``name``."""


def soft_f1(sims: np.ndarray) -> float:
    """F1 of a candidate × reference similarity matrix: each instruction counts by its best match on the other side."""
    if sims.size == 0:
        return 0.0
    p, r = float(sims.max(axis=1).mean()), float(sims.max(axis=0).mean())
    return 2 * p * r / (p + r) if p + r > 0 else 0.0


class PathMatchReward:
    """Instructions matched by meaning against the question's own successful path: :func:`soft_f1` of the cosines of
    their Sentence-BERT vectors (``Action[argument]``), 0 between different actions (no LLM, no corpus)."""

    name = "path-match"

    def __init__(self, embedder: Any = None, known: dict[str, np.ndarray] | None = None) -> None:
        """``embedder`` has ``encode(texts)`` (default: the packaged all-MiniLM-L6-v2); ``known`` as below."""
        self.embedder = embedder
        self.known: dict[str, np.ndarray] = dict(known or {})
        """Unit vectors by instruction text (a graph's can be added: same model)."""

    def vectors(self, path: list[Instruction]) -> np.ndarray:
        """Unit vectors of the instructions of ``path`` (cached by text)."""
        if self.embedder is None:
            from ragplan.tools.embeddings import get_embedder

            self.embedder = get_embedder("")
        if todo := list(dict.fromkeys(i.text for i in path if i.text not in self.known)):
            for t, v in zip(todo, np.asarray(self.embedder.encode(todo), dtype=np.float32)):
                self.known[t] = v / max(float(np.linalg.norm(v)), 1e-12)
        return np.stack([self.known[i.text] for i in path]) if path else np.zeros((0, 1), dtype=np.float32)

    def __call__(self, ex: QueryExample, path: list[Instruction]) -> float:
        """See the class docstring."""
        if not path or not ex.own_path:
            return 0.0
        same = np.array([[a.action == b.action for b in ex.own_path] for a in path])
        return soft_f1(np.clip(self.vectors(path) @ self.vectors(ex.own_path).T, 0, 1) * same)


class ProxyReward:
    """The mean of gold-title recall (else of the own path's pages) and, for span answers, answer presence of the path
    run on the ReAct docstore over a local corpus."""

    name = "proxy"

    def __init__(self, retriever: Any, *, k: int = 5) -> None:
        """``retriever`` is any :class:`~ragplan.tools.retrieval.Retriever` (a local index for training)."""
        self.retriever, self.k = retriever, k
        self._cache: dict[tuple[str, str], float] = {}
        self._gold: dict[str, list[str]] = {}

    def execute(self, path: list[Instruction]) -> tuple[set[str], str]:
        """Run the path's actions: the page titles reached and everything observed (Finish arguments included)."""
        store = ReActDocstore(self.retriever, k=self.k)
        titles: set[str] = set()
        seen: list[str] = []
        for ins in path[:12]:
            if ins.action == "Finish":
                seen.append(ins.argument)
                continue
            r = store.execute(ins.action, ins.argument)
            if r.title and ins.action == "Search":
                titles.add(r.title)
            seen.append(r.observation)
        return titles, "\n".join(seen)

    def __call__(self, ex: QueryExample, path: list[Instruction]) -> float:
        """Mean of title recall and (span answers) answer presence."""
        key = (ex.question, " → ".join(i.text for i in path))
        if key not in self._cache:
            titles, seen = self.execute(path)
            if not ex.supporting_titles and ex.question not in self._gold:  # the pages the question's own path reaches
                self._gold[ex.question] = sorted(self.execute(ex.own_path)[0])
            gold = {t.casefold() for t in ex.supporting_titles or self._gold[ex.question]}
            terms = []
            if gold:
                terms.append(len(gold & {t.casefold() for t in titles}) / len(gold))
            ans = normalize_answer(ex.answer)
            if ans and ans not in ("yes", "no"):
                terms.append(1.0 if ans in normalize_answer(seen) else 0.0)
            self._cache[key] = float(np.mean(terms)) if terms else 0.0
        return self._cache[key]


class LLMF1Reward:
    """The paper's reward: answer F1 of the planning loop run with the path (needs an LLM in ``ctx``)."""

    name = "llm-f1"

    def __init__(self, ctx: Any) -> None:
        """``ctx`` is an :class:`~ragplan.state.instructrag.InstructRAGContext` with a model and a retriever."""
        self.ctx = ctx
        self._cache: dict[tuple[str, str], float] = {}
        self._graph: Any = None
        self.calls = 0
        self.failures = 0
        """Runs that raised (scored 0, not cached, so a later call tries again)."""
        self.last_error = ""

    def __call__(self, ex: QueryExample, path: list[Instruction]) -> float:
        """F1 of the answer planned with ``path`` (0 when the run fails: an exception is counted in ``failures``)."""
        key = (ex.question, " → ".join(i.text for i in path))
        if key not in self._cache:
            if self._graph is None:
                from ragplan.graphs.instructrag import react

                self._graph = react
            self.calls += 1
            try:
                out = self._graph.invoke({"question": ex.question, "given_path": [i.text for i in path]}, context=self.ctx,
                                         config={"recursion_limit": 4 * int(getattr(self.ctx, "max_steps", 7)) + 20})
            except Exception as exc:  # an endpoint or graph failure costs this path its reward, not the training run
                self.failures += 1
                self.last_error = f"{type(exc).__name__}: {exc}"[:300]
                return 0.0
            self._cache[key] = f1_score(str(out.get("answer") or ""), [ex.answer])
        return self._cache[key]
