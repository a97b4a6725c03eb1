"""Plan metrics of the REAPER paper (Table 1): tool selection P/R/F1 per tool class, tool and argument accuracy.

For one (predicted, gold) pair, :func:`score_plan` gives a :class:`PlanScore`:

* **tool classes** — the set of tools a plan uses, or ``{"no_retrieval"}`` for an empty plan;
  per class, a pair counts a true positive when both plans use the class, a false positive when
  only the prediction does and a false negative when only the gold plan does;
* **tool accuracy** — the predicted tool sequence equals the gold one, in order;
* **argument accuracy** — every gold step's call is matched by a predicted step of the same tool
  with the same arguments, and no predicted step is left over (so a plan with independent steps in
  another order still has the right arguments). Arguments are bound to parameter names with the
  registry (positional by position, keywords by name); strings compare case-, whitespace- and
  punctuation-insensitively; a reference ``#Ej`` compares as the *tool* of step j (step numbers
  may differ between plans); empty/``null`` arguments count as absent;
* **plan validity** — the text parses and :func:`~ragplan.reaper.validate.check_plan` finds no error.

:func:`aggregate` averages many pairs (also from graded benchmark records, which carry
``pred_tools``/``gold_tools``), and :func:`render_table` prints the result as a markdown table.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from ragplan.reaper.plan import RetrievalPlan, PlanArg, PlanStep, parse_plan
from ragplan.reaper.validate import bind_args, check_plan

__all__ = ["NO_RETRIEVAL", "PlanScore", "PlanMetrics", "tool_classes", "normalize_text", "step_signature",
           "score_plan", "class_prf", "aggregate", "render_table", "default_registry"]

NO_RETRIEVAL = "no_retrieval"
_PUNCT = re.compile(r"[^\w\s#]", re.UNICODE)


def default_registry() -> Any:
    """The retail tool registry (specs only; nothing is opened)."""
    from ragplan.tools.retail import build_retail_registry

    return build_retail_registry()


def normalize_text(s: str) -> str:
    """Lower case, punctuation dropped, whitespace collapsed (``"What's  IT?"`` → ``"whats it"``)."""
    s = unicodedata.normalize("NFKC", s).lower().replace("'", "").replace("’", "")
    return " ".join(_PUNCT.sub(" ", s).split())


def _as_plan(plan: RetrievalPlan | str | None) -> tuple[RetrievalPlan, bool]:
    """(plan, parsed without syntax errors)."""
    if isinstance(plan, RetrievalPlan):
        return plan, True
    res = parse_plan(plan or "")
    return res.plan, res.ok


def tool_classes(plan: RetrievalPlan | str | None) -> set[str]:
    """The tools a plan uses, or ``{"no_retrieval"}`` for a plan without steps."""
    p, _ = _as_plan(plan)
    return set(p.tools()) or {NO_RETRIEVAL}


def _norm_value(v: Any, ref_tools: Mapping[int, str | None]) -> Any:
    if isinstance(v, str):
        return normalize_text(v)
    if isinstance(v, bool) or v is None:
        return v
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, (list, tuple)):
        return tuple(_norm_value(x, ref_tools) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((normalize_text(str(k)), json.dumps(_norm_value(x, ref_tools), default=str))
                            for k, x in v.items()))
    return normalize_text(str(v))


def _norm_arg(arg: PlanArg, ref_tools: Mapping[int, str | None]) -> Any:
    if arg.kind == "ref":
        return ("ref", ref_tools.get(arg.refs[0]) if arg.refs else None)
    if arg.kind == "template":
        text = re.sub(r"#E(\d+)(?!\d)", lambda m: f" ref {ref_tools.get(int(m.group(1)))} ", str(arg.value))
        return ("template", normalize_text(text))
    return _norm_value(arg.value, ref_tools)


def step_signature(step: PlanStep, registry: Any, ref_tools: Mapping[int, str | None]) -> tuple:
    """``(tool, ((param, normalised value), …))`` with arguments bound to the tool's parameter names.

    A tool the registry does not know keeps its keyword names and names positional arguments
    ``arg0``, ``arg1`` …; absent, ``null`` and empty-string arguments are left out.
    """
    spec = registry.get(step.tool) if registry is not None else None
    names = [a.name for a in spec.args] if spec is not None else []
    bound, surplus, _ = bind_args(step, names)
    for i, a in enumerate(surplus, len(names)):
        bound[f"arg{i}"] = a
    items = []
    for k, a in bound.items():
        if a.kind == "literal" and (a.value is None or a.value == ""):
            continue
        items.append((k, _norm_arg(a, ref_tools)))
    return step.tool, tuple(sorted(items, key=lambda kv: kv[0]))


def _signatures(plan: RetrievalPlan, registry: Any) -> list[tuple]:
    ref_tools = {s.var_number: s.tool for s in plan.steps}
    return [step_signature(s, registry, ref_tools) for s in plan.steps]


@dataclass
class PlanScore:
    """The scores of one predicted plan against its gold plan."""

    tools_correct: bool
    args_correct: bool
    valid: bool
    pred_tools: list[str] = field(default_factory=list)
    gold_tools: list[str] = field(default_factory=list)
    args_matched: int = 0
    """Gold steps whose call a predicted step matches exactly (tool and arguments)."""
    gold_steps: int = 0
    errors: list[str] = field(default_factory=list)
    """Parse and validation errors of the prediction."""

    @property
    def correct(self) -> bool:
        """Tool sequence and arguments both right (the plan is what the gold plan is)."""
        return self.tools_correct and self.args_correct

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields (with ``correct``)."""
        return {**asdict(self), "correct": self.correct}


def score_plan(pred: RetrievalPlan | str | None, gold: RetrievalPlan | str | None, registry: Any = None) -> PlanScore:
    """Score one predicted plan (text or :class:`RetrievalPlan`) against the gold plan (registry: the retail one)."""
    registry = default_registry() if registry is None else registry
    p, p_ok = _as_plan(pred)
    g, _ = _as_plan(gold)
    errors: list[str] = []
    if not p_ok:
        errors += [str(e) for e in parse_plan(pred if isinstance(pred, str) else "").errors]
    errors += [str(e) for e in check_plan(p, registry)]
    ps, gs = _signatures(p, registry), _signatures(g, registry)
    left = list(ps)
    matched = 0
    for sig in gs:
        if sig in left:
            left.remove(sig)
            matched += 1
    return PlanScore(tools_correct=p.tools() == g.tools(), args_correct=matched == len(gs) and not left,
                     valid=not errors, pred_tools=p.tools(), gold_tools=g.tools(), args_matched=matched,
                     gold_steps=len(gs), errors=errors)


def class_prf(pairs: Iterable[tuple[Iterable[str], Iterable[str]]]) -> dict[str, dict[str, float]]:
    """Per tool class ``{precision, recall, f1, support, tp, fp, fn}`` from (pred tools, gold tools) pairs.

    Empty tool lists stand for the class ``no_retrieval``; ``support`` counts gold plans using the
    class. A class never predicted has precision 0 (and never in gold: recall 0).
    """
    counts: dict[str, list[int]] = {}
    for pred, gold in pairs:
        ps, gs = set(pred) or {NO_RETRIEVAL}, set(gold) or {NO_RETRIEVAL}
        for c in ps | gs:
            tp_fp_fn = counts.setdefault(c, [0, 0, 0])
            if c in ps and c in gs:
                tp_fp_fn[0] += 1
            elif c in ps:
                tp_fp_fn[1] += 1
            else:
                tp_fp_fn[2] += 1
    out = {}
    for c in sorted(counts, key=lambda c: (c != NO_RETRIEVAL, c)):
        tp, fp, fn = counts[c]
        prec = tp / (tp + fp) if tp + fp else 0.0
        rec = tp / (tp + fn) if tp + fn else 0.0
        f1 = 2 * prec * rec / (prec + rec) if prec + rec else 0.0
        out[c] = {"precision": prec, "recall": rec, "f1": f1, "support": tp + fn, "tp": tp, "fp": fp, "fn": fn}
    return out


@dataclass
class PlanMetrics:
    """Aggregate plan metrics over many pairs."""

    n: int
    tool_accuracy: float
    argument_accuracy: float
    plan_accuracy: float
    """Share of plans with tool sequence and arguments both right."""
    plan_valid: float
    step_argument_accuracy: float
    """Share of gold steps matched exactly (partial credit)."""
    per_class: dict[str, dict[str, float]]
    macro_f1: float
    latency_mean: float | None = None
    """Mean planner latency in seconds, when the records carry one."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return asdict(self)


def _rec(x: PlanScore | Mapping[str, Any]) -> Mapping[str, Any]:
    return x.to_dict() if isinstance(x, PlanScore) else x


def _truth(v: Any) -> float:
    return float(v) if isinstance(v, (int, float)) else 1.0 if v else 0.0


def aggregate(items: Iterable[PlanScore | Mapping[str, Any] | tuple[Any, Any]], registry: Any = None,
              latency_key: str = "latency") -> PlanMetrics:
    """Aggregate :class:`PlanScore` objects, graded records (dicts) or (pred, gold) pairs.

    A record needs ``pred_tools``, ``gold_tools`` and ``tools_correct``/``tool_accuracy``,
    ``args_correct``/``argument_accuracy`` and ``valid``/``plan_valid``; ``args_matched`` and
    ``gold_steps`` (step-level credit) and ``latency_key`` (seconds) are optional.
    """
    recs: list[Mapping[str, Any]] = []
    for x in items:
        if isinstance(x, tuple):
            registry = default_registry() if registry is None else registry
            x = score_plan(x[0], x[1], registry)
        recs.append(_rec(x))
    n = len(recs)

    def mean(*keys: str) -> float:
        vals = [_truth(next((r[k] for k in keys if k in r), False)) for r in recs]
        return sum(vals) / n if n else 0.0

    per_class = class_prf((r.get("pred_tools") or [], r.get("gold_tools") or []) for r in recs)
    gold_steps = sum(int(r.get("gold_steps", len(r.get("gold_tools") or []))) for r in recs)
    matched = sum(int(r.get("args_matched", 0)) for r in recs)
    lat = [float(r[latency_key]) for r in recs if isinstance(r.get(latency_key), (int, float))]
    both = [_truth(r.get("tools_correct", r.get("tool_accuracy"))) * _truth(r.get("args_correct",
            r.get("argument_accuracy"))) for r in recs]
    return PlanMetrics(
        n=n, tool_accuracy=mean("tools_correct", "tool_accuracy"),
        argument_accuracy=mean("args_correct", "argument_accuracy"),
        plan_accuracy=sum(both) / n if n else 0.0, plan_valid=mean("valid", "plan_valid"),
        step_argument_accuracy=matched / gold_steps if gold_steps else 1.0, per_class=per_class,
        macro_f1=sum(c["f1"] for c in per_class.values()) / len(per_class) if per_class else 0.0,
        latency_mean=sum(lat) / len(lat) if lat else None)


def render_table(metrics: PlanMetrics, title: str = "") -> str:
    """Markdown: the per-class P/R/F1 table, then the overall accuracies."""
    lines = [f"### {title}", ""] if title else []
    lines += ["| tool class | precision | recall | F1 | support |", "|---|---:|---:|---:|---:|"]
    for c, m in metrics.per_class.items():
        lines.append(f"| {c} | {m['precision']:.3f} | {m['recall']:.3f} | {m['f1']:.3f} | {int(m['support'])} |")
    lines += ["", "| metric | value |", "|---|---:|", f"| plans | {metrics.n} |",
              f"| tool accuracy | {metrics.tool_accuracy:.3f} |",
              f"| argument accuracy | {metrics.argument_accuracy:.3f} |",
              f"| plan accuracy (tools and arguments) | {metrics.plan_accuracy:.3f} |",
              f"| step argument accuracy | {metrics.step_argument_accuracy:.3f} |",
              f"| plan validity | {metrics.plan_valid:.3f} |", f"| macro F1 | {metrics.macro_f1:.3f} |"]
    if metrics.latency_mean is not None:
        lines.append(f"| planner latency (s, mean) | {metrics.latency_mean:.3f} |")
    return "\n".join(lines)
