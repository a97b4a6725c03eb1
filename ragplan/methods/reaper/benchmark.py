"""The ``reaper-retail`` benchmark: REAPER plans graded against the retail gold set (paper Tables 1–2). ``data`` is a
shop directory (its ``goldset.jsonl``, generated when missing) or a gold-set JSONL file; the final plan and the
first planner call (``*_first_call``) are scored."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ragplan.eval.benchmark import ComparedRun, Item
from ragplan.methods.reaper.goldset import GoldExample, generate_goldset, load_goldset, write_goldset
from ragplan.methods.reaper.metrics import (aggregate, instruction_following, instruction_following_table,
                                            render_comparison, render_table, score_plan, table_one)
from ragplan.methods.reaper.plan import PlanCall, RetrievalPlan, as_steps, format_plan, parse_plan
from ragplan.state.reaper import FINISHED
from ragplan.tools.retail.tools import build_retail_registry as default_registry
from ragplan.state.trace_sections import excerpt

__all__ = ["ReaperBenchmark", "GOLDSET_FILE", "PredictedPlan", "predicted_plans"]

GOLDSET_FILE = "goldset.jsonl"
_SPLITS = ("test", "train", "all")


def _steps(value: Any) -> RetrievalPlan:
    """Typed steps (PlanStep objects or dumps), or plain ``{tool, args, kwargs}`` dicts with raw values (hand-written
    outputs); ValueError when neither."""
    if not isinstance(value, list):
        raise ValueError(f"a plan must be a list of steps, not {type(value).__name__}")
    try:
        return RetrievalPlan(steps=as_steps([{"index": k, "evidence_var": f"E{k}", **s} if isinstance(s, dict) else s
                                             for k, s in enumerate(value, 1)]))
    except ValidationError as exc:
        raise ValueError(f"unreadable plan steps: {exc.error_count()} problems: {exc.errors()[0]['msg']}") from None


def _plan_from_evidence(evidence: list[Any]) -> RetrievalPlan:
    """The tool calls of an output's evidence, in call order, with their arguments by name, as plan steps
    (for outputs that carry no ``plan``, e.g. agent_planner runs recorded before it kept one)."""
    calls = [e if isinstance(e, dict) else e.model_dump() for e in evidence]  # in call order (agent_planner appends)
    return _steps([{"tool": str(e["tool"]), "kwargs": {str(n): {"kind": "literal", "value": v}
                                                       for n, v in (e.get("args") or {}).items()}}
                   for e in calls if e.get("status") != "skipped"])


@dataclass
class PredictedPlan:
    """What a graph's output says about one plan: its status, its steps and why it is not valid."""

    status: str
    """valid (as far as the output says: the scorer still checks it), invalid or failed."""
    plan: RetrievalPlan = field(default_factory=RetrievalPlan)
    errors: list[str] = field(default_factory=list)
    latency_s: float | None = None


def _failure(output: Any) -> str | None:
    """Why an output is a failed run (None when the run finished)."""
    if not isinstance(output, dict) or not output:
        return "empty output: the run produced nothing to grade"
    if output.get("error"):
        return f"the run failed: {output['error']}"
    stop = output.get("stop_reason")
    if stop not in FINISHED:
        return f"the run did not finish (stop_reason {stop!r})"
    return None


def _from_call(call: Any) -> PredictedPlan:
    c = PlanCall.model_validate(call)
    return PredictedPlan("valid" if c.valid else "invalid", c.plan, [str(e) for e in c.errors], c.latency_s)


def predicted_plans(output: Any) -> tuple[PredictedPlan, PredictedPlan]:
    """(first planner call, final plan) of a REAPER-family graph's output (or a run record)."""
    why = _failure(output)
    if why is not None:
        return PredictedPlan("failed", errors=[why]), PredictedPlan("failed", errors=[why])
    calls = output.get("plan_calls") or []
    try:
        first, last = (_from_call(calls[0]), _from_call(calls[-1])) if calls else (None, None)
    except ValidationError as exc:
        bad = PredictedPlan("invalid", errors=[f"unreadable plan_calls: {exc.error_count()} problems"])
        return bad, bad
    errors = [str(e) for e in output.get("plan_errors") or []]
    invalid = bool(errors) or output.get("stop_reason") == "invalid_plan" or (last is not None and last.status != "valid")
    if invalid:
        final = PredictedPlan("invalid", last.plan if last is not None else RetrievalPlan(),
                              errors or (last.errors if last is not None else []) or ["the plan is invalid"])
    elif output.get("plan") is not None:
        try:
            final = PredictedPlan("valid", _steps(output["plan"]))
        except ValueError as exc:
            final = PredictedPlan("invalid", errors=[str(exc)])
    elif last is not None:
        final = PredictedPlan("valid", last.plan)
    elif isinstance(output.get("plan_text"), str):
        parsed = parse_plan(output["plan_text"])
        final = PredictedPlan("invalid" if parsed.errors else "valid", parsed.plan, [str(e) for e in parsed.errors])
    elif output.get("evidence"):
        try:
            final = PredictedPlan("valid", _plan_from_evidence(output["evidence"]))
        except (KeyError, TypeError, ValueError, AttributeError, ValidationError) as exc:
            final = PredictedPlan("invalid", errors=[f"unreadable evidence: {type(exc).__name__}: {exc}"])
    else:  # a finished run says what it planned, if only an empty plan: nothing at all is not "no retrieval"
        why = "the output holds no plan (no plan, plan_calls, plan_text or evidence)"
        return PredictedPlan("failed", errors=[why]), PredictedPlan("failed", errors=[why])
    final.latency_s = output.get("planner_latency_s") if isinstance(output.get("planner_latency_s"), (int, float)) else None
    return (first if first is not None else final), final


@dataclass
class ReaperBenchmark:
    """The retail gold set as a runner benchmark (see the module docstring)."""

    data: str
    limit: int | None = None
    year: int | None = None
    """Ignored (the runner passes it to every benchmark)."""
    split: str = "test"
    remove_tool: str = ""
    """Tools taken out of the planner's registry (comma-separated; the instruction-following experiment)."""
    removed: list[str] = field(default_factory=list, init=False)
    """The removed tools, in the order given."""
    name: str = field(default="reaper-retail", init=False)
    group_by: tuple[str, ...] = field(default=("category",), init=False)
    plot_metrics: tuple[str, ...] = field(default=("accuracy", "tool_accuracy", "argument_accuracy"), init=False)
    _cache: list[GoldExample] | None = field(default=None, init=False, repr=False, compare=False)
    _registry: Any = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.split not in _SPLITS:
            raise ValueError(f"reaper-retail split must be one of {', '.join(_SPLITS)}, got {self.split!r}")
        self._registry = default_registry()
        self.removed = [t.strip() for t in str(self.remove_tool or "").split(",") if t.strip()]
        known = self._registry.names()
        unknown = [t for t in self.removed if t not in known]
        if unknown:
            raise ValueError(f"reaper-retail remove_tool: {', '.join(unknown)} is not a retail tool; tools: {', '.join(known)}")

    @property
    def metrics(self) -> tuple[str, ...]:
        """The record fields every summary table averages (instruction following only with ``remove_tool``)."""
        base = ("tool_accuracy", "argument_accuracy", "plan_valid", "tool_accuracy_first_call",
                "argument_accuracy_first_call", "plan_valid_first_call")
        return base + (("instruction_following", "instruction_following_first_call") if self.removed else ())

    def examples(self) -> list[GoldExample]:
        """The gold examples of the split, after ``limit`` (generating the shop's gold set when missing)."""
        if self._cache is None:
            data = Path(self.data)
            path = data / GOLDSET_FILE if data.is_dir() else data
            if not path.is_file():
                if not data.is_dir():
                    raise FileNotFoundError(f"no gold set at {path} (give a shop directory or a gold-set JSONL file)")
                write_goldset(path, generate_goldset(self.data))
            exs = [e for e in load_goldset(path) if self.split == "all" or e.split == self.split]
            self._cache = exs[: self.limit] if self.limit else exs
        return self._cache

    def items(self) -> list[Item]:
        """One item per gold question: the question, its page context as a graph input (the planner prompt writes the
        paper's `Context: … Question: …` form itself), the gold plan as gold."""
        root = Path(self.data) if Path(self.data).is_dir() else Path(self.data).parent  # the shop of the questions
        shop, removed = str(root.resolve()) if (root / "meta.json").is_file() else "", ",".join(self.removed)
        ctx = {**({"shop_dir": shop} if shop else {}), **({"removed_tools": removed} if removed else {})}
        return [Item(e.id, e.question, e.gold_plan, dict(ctx),
                     {"category": e.category, "split": e.split, "gold_sequence": " > ".join(e.tool_sequence) or "none",
                      "page_context": e.context, "raw_question": e.question, "_gold_plan": e.gold_plan},
                     inputs={"page_context": e.context}) for e in self.examples()]

    def report(self, records: list[dict[str, Any]]) -> str:
        """The paper's Table 1 twice: for the first planner call (the paper's one-call setting) and for the
        final plan after the repair round — side by side, then the per-class P/R/F1 tables."""
        first = aggregate([r.get("first_call") or r for r in records], latency_key="planner_latency_s")
        final = aggregate(records, latency_key="planner_latency_s")
        parts = [render_comparison({"first planner call": first, "after the repair round": final},
                                   title="REAPER plan metrics (paper Table 1)"),
                 render_table(first, title="REAPER plan metrics — first planner call (the paper's one-call setting)"),
                 render_table(final, title="REAPER plan metrics — final plan, after the repair round")]
        if self.removed:
            parts.append(instruction_following_table(records, self.removed))
        return "\n\n".join(parts)

    def compare(self, runs: list[ComparedRun]) -> str:
        """``ragplan eval report``: the runs side by side in the shape of the paper's Table 1 (:func:`table_one`)."""
        return table_one(runs)

    def _score(self, item: Item, pred: PredictedPlan) -> dict[str, Any]:
        today = (item.meta.get("page_context") or {}).get("date") or None
        s = score_plan(pred.plan, item.meta.get("_gold_plan", item.gold), self._registry, status=pred.status,
                       errors=pred.errors, today=today)
        return {**s.to_dict(), "tool_accuracy": float(s.tools_correct),
                "argument_accuracy": None if s.args_correct is None else float(s.args_correct),
                "plan_valid": float(s.valid), "errors": s.errors[:10],
                "pred_plan": excerpt(format_plan(pred.plan), 1_000),  # (a display copy: the record keeps the plan)
                "planner_latency_s": pred.latency_s}

    def grade(self, item: Item, output: dict[str, Any]) -> dict[str, Any]:
        """Tool/argument correctness and validity of the final plan, and (``*_first_call``, ``first_call``) of
        the first planner call; ``chosen`` is the predicted tool sequence, or ``invalid`` / ``failed``."""
        first, final = predicted_plans(output)
        f, g = self._score(item, first), self._score(item, final)
        chosen = (" > ".join(g["pred_tools"]) or "none") if g["valid"] else g["status"]
        follow = {"removed_tools": self.removed, "instruction_following": instruction_following(g, self.removed),
                  "instruction_following_first_call": instruction_following(f, self.removed)} if self.removed else {}
        final_rec = {k: v for k, v in g.items() if k not in ("status", "errors", "planner_latency_s")}
        first_rec = {f"{k}_first_call": f[k] for k in ("tool_accuracy", "argument_accuracy", "plan_valid", "correct")}
        return {**follow, **final_rec, **first_rec, "chosen": chosen, "plan_status": g["status"], "pred_errors": g["errors"],
                "first_call": f}


#: Benchmark name -> factory, for :mod:`ragplan.eval.registry` (which checks the options against the signature).
BENCHMARKS = {"reaper-retail": ReaperBenchmark}
