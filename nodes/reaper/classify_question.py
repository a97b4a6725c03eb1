"""classify_question: the classification baseline's router (REAPER §3.1, §5.2): a trained route classifier (loaded
once per process from ``classifier_dir``) puts the question into one retrieval class; its time is planner latency."""

from __future__ import annotations

import functools
import time
from pathlib import Path
from typing import Any

from langgraph.runtime import Runtime

from ragplan.state.context import ReaperContext
from ragplan.state.reaper import ReaperState
from ragplan.state.failure import failed

__all__ = ["classify_question", "classifier_for"]

@functools.cache
def classifier_for(directory: str) -> Any:
    """The :class:`~ragplan.methods.reaper.classifier.RouteClassifier` saved in ``directory`` (a resolved path), loaded
    once per process."""
    from ragplan.methods.reaper.classifier import load_classifier

    return load_classifier(directory)


def classify_question(state: ReaperState, runtime: Runtime[ReaperContext]) -> dict[str, Any]:
    """Route the question: ``route = {class, probability, tools, latency_s, chain}`` (``chain``: the workflow's learnt
    argument references); a missing classifier stops the run."""
    from ragplan.methods.reaper.classifier import class_tools

    directory = getattr(runtime.context, "classifier_dir", "") or ""
    t0 = time.perf_counter()
    try:
        if not directory:
            raise ValueError("no classifier_dir is set (train one with `ragplan reaper train-classifier`)")
        clf = classifier_for(str(Path(directory).resolve()))
        cls, prob = clf.predict(state["question"], state.get("page_context") or {})
    except Exception as exc:  # no folder, not a classifier, the embedding model cannot be loaded
        return failed("setup", "classify_question", f"classify_question: {type(exc).__name__}: {exc}",
                      route={"class": "", "probability": 0.0, "tools": [], "error": str(exc)}, stop_reason="classifier_error",
                      answer="")
    took = round(time.perf_counter() - t0, 4)
    return {"route": {"class": cls, "probability": round(prob, 4), "tools": class_tools(cls), "latency_s": took,
                      "chain": clf.chains.get(cls)},
            "planner_latency_s": took}
