"""The ``reaper-retail`` benchmark: REAPER retrieval plans graded against the retail gold set (paper Table 1).

``data`` is a shop directory (its gold set ``goldset.jsonl`` is read, or generated there with
:func:`ragplan.eval.benchmarks.reaper_goldset.generate_goldset` when missing) or a gold-set JSONL file (the shop is
the file's folder when that holds a shop). Each item's text is the paper's input block::

    Context: {"product_id": "…", "product_title": "…", "history": [], "date": "2026-11-22"}
    Question: "does it come in red?"

and its ``context`` settings carry ``shop_dir`` (for executing plans), ``meta`` the category, split,
gold tool sequence and the page context. :meth:`ReaperBenchmark.grade` reads the graph's
``plan_text`` (or its ``plan`` step dicts) and scores it with :func:`ragplan.eval.plan_metrics.score_plan`;
the per-class P/R/F1 over a run's records come from :func:`ragplan.eval.plan_metrics.aggregate`.

Options: ``limit``, ``split`` (``test`` default, ``train`` or ``all``), ``year`` (ignored).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragplan.eval.benchmark import Item
from ragplan.eval.benchmarks.reaper_goldset import GoldExample, generate_goldset, load_goldset, write_goldset
from ragplan.eval.plan_metrics import default_registry, score_plan
from ragplan.reaper.plan import RetrievalPlan, PlanArg, PlanStep, format_plan

__all__ = ["ReaperBenchmark", "GOLDSET_FILE", "input_text", "plan_from_output"]

GOLDSET_FILE = "goldset.jsonl"
_OPTIONS = ("limit", "year", "split")
_SPLITS = ("test", "train", "all")


def input_text(question: str, context: dict[str, Any]) -> str:
    """The planner input of the paper: ``Context: {json}`` then ``Question: "…"``."""
    return f"Context: {json.dumps(context, ensure_ascii=False)}\nQuestion: {json.dumps(question, ensure_ascii=False)}"


def _arg(v: Any) -> PlanArg:
    if isinstance(v, dict) and v.get("kind") in ("literal", "ref", "template"):
        return PlanArg.model_validate(v)
    return PlanArg.from_string(v) if isinstance(v, str) else PlanArg(kind="literal", value=v)


def plan_from_output(output: dict[str, Any]) -> str:
    """The predicted plan text: ``plan_text``, else a plan rebuilt from ``plan`` (a list of step dicts).

    Step dicts may be :class:`PlanStep` dumps or plain ``{tool, args, kwargs}`` with raw values;
    anything unreadable gives the empty plan.
    """
    text = output.get("plan_text")
    if isinstance(text, str):
        return text
    steps_in = output.get("plan")
    if not isinstance(steps_in, list):
        return ""
    steps = []
    try:
        for k, s in enumerate(steps_in, 1):
            if isinstance(s, PlanStep):
                steps.append(s)
                continue
            s = dict(s if isinstance(s, dict) else s.model_dump())
            steps.append(PlanStep(index=int(s.get("index") or k), purpose=str(s.get("purpose") or ""),
                                  evidence_var=str(s.get("evidence_var") or f"E{k}").lstrip("#"), tool=str(s["tool"]),
                                  args=[_arg(a) for a in s.get("args") or []],
                                  kwargs={n: _arg(a) for n, a in (s.get("kwargs") or {}).items()}))
    except (KeyError, TypeError, ValueError, AttributeError):
        return ""
    return format_plan(RetrievalPlan(steps=steps))


@dataclass
class ReaperBenchmark:
    """The retail gold set as a runner benchmark (see the module docstring)."""

    data: str
    limit: int | None = None
    year: int | None = None
    """Ignored (the runner passes it to every benchmark)."""
    split: str = "test"
    name: str = "reaper-retail"
    metrics: tuple[str, ...] = ("tool_accuracy", "argument_accuracy", "plan_valid")
    group_by: tuple[str, ...] = ("category",)
    _cache: list[GoldExample] | None = field(default=None, init=False, repr=False, compare=False)
    _registry: Any = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.split not in _SPLITS:
            raise ValueError(f"reaper-retail split must be one of {', '.join(_SPLITS)}, got {self.split!r}")

    @property
    def goldset_path(self) -> Path:
        """The gold-set file this benchmark reads."""
        p = Path(self.data)
        return p / GOLDSET_FILE if p.is_dir() else p

    @property
    def shop_dir(self) -> str:
        """The shop the questions are about ("" when the gold-set file is not inside a shop)."""
        p = Path(self.data)
        root = p if p.is_dir() else p.parent
        return str(root.resolve()) if (root / "meta.json").is_file() else ""

    def examples(self) -> list[GoldExample]:
        """The gold examples of the split, after ``limit`` (generating the shop's gold set when missing)."""
        if self._cache is None:
            path = self.goldset_path
            if not path.is_file():
                if not Path(self.data).is_dir():
                    raise FileNotFoundError(f"no gold set at {path} (give a shop directory or a gold-set JSONL file)")
                write_goldset(path, generate_goldset(self.data))
            exs = [e for e in load_goldset(path) if self.split == "all" or e.split == self.split]
            self._cache = exs[: self.limit] if self.limit else exs
        return self._cache

    def items(self) -> list[Item]:
        """One item per gold question: the question, its page context as a graph input, the gold plan as gold."""
        shop = self.shop_dir
        out = []
        for e in self.examples():
            meta = {"category": e.category, "split": e.split, "gold_sequence": " > ".join(e.tool_sequence) or "none",
                    "page_context": e.context, "raw_question": e.question, "_gold_plan": e.gold_plan}
            # the graph gets the question and its page context as separate inputs (the planner prompt
            # writes them in the paper's `Context: … Question: …` form itself)
            out.append(Item(e.id, e.question, e.gold_plan, {"shop_dir": shop} if shop else {}, meta,
                            inputs={"page_context": e.context}))
        return out

    def report(self, records: list[dict[str, Any]]) -> str:
        """The paper's Table 1 view: tool-selection P/R/F1 per tool class, tool and argument accuracy, planner latency."""
        from ragplan.eval.plan_metrics import aggregate, render_table

        return render_table(aggregate(records, latency_key="planner_latency_s"), title="REAPER plan metrics")

    def grade(self, item: Item, output: dict[str, Any]) -> dict[str, Any]:
        """Tool/argument correctness, validity and the fields :func:`~ragplan.eval.plan_metrics.aggregate` reads.

        ``correct`` is tool sequence and arguments both right; ``chosen`` the predicted tool sequence.
        """
        if self._registry is None:
            self._registry = default_registry()
        pred = plan_from_output(output or {})
        s = score_plan(pred, item.meta.get("_gold_plan", item.gold), self._registry)
        return {"correct": s.correct, "chosen": " > ".join(s.pred_tools) or "none",
                "tool_accuracy": float(s.tools_correct), "argument_accuracy": float(s.args_correct),
                "plan_valid": float(s.valid), "pred_tools": s.pred_tools, "gold_tools": s.gold_tools,
                "args_matched": s.args_matched, "gold_steps": s.gold_steps, "plan_errors": s.errors[:10],
                "pred_plan": pred}


def _factory(data: str, **options: Any) -> ReaperBenchmark:
    unknown = sorted(set(options) - set(_OPTIONS))
    if unknown:
        raise ValueError(f"benchmark 'reaper-retail' has no option {', '.join(unknown)}; options: {', '.join(_OPTIONS)}")
    return ReaperBenchmark(str(data), **options)


#: Benchmark name -> factory, for :mod:`ragplan.eval.registry`.
BENCHMARKS = {"reaper-retail": _factory}
