"""Plan metrics of the REAPER paper: Table 1 (tool-class P/R/F1, tool and argument accuracy) and Table 2. Failed and
invalid predictions are wrong on everything (class ``no_valid_plan``); only :data:`SCORED_ARGS` are scored."""

from __future__ import annotations

import datetime as dt
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ragplan.eval.benchmark import ComparedRun
from ragplan.methods.reaper.plan import PlanArg, PlanStep, RetrievalPlan, as_steps, parse_plan
from ragplan.methods.reaper.validate import bind_args, check_plan, is_date_range_literal
from ragplan.tools.retail.dates import parse_range_arg
from ragplan.tools.retail.tools import RANGE_OPERATIONS, build_retail_registry, singular

__all__ = ["NO_RETRIEVAL", "NO_VALID_PLAN", "SCORED_ARGS", "STOP_WORDS", "STATUSES", "PlanScore", "PlanMetrics",
           "normalize_text", "keyword_set", "scored_calls", "score_plan", "class_prf", "aggregate",
           "render_table", "render_comparison", "instruction_following", "instruction_following_table",
           "table_one"]

NO_RETRIEVAL = "no_retrieval"
NO_VALID_PLAN = "no_valid_plan"
"""The tool class of a prediction without a valid plan (invalid after repair, or a failed run)."""
STATUSES = ("valid", "invalid", "failed")

SCORED_ARGS: dict[str, tuple[str, ...]] = {"prod_search": ("query",), "shipment_status": ("keywords", "date_range")}
"""Tool → its scored arguments (paper §5.2). Pass another mapping to :func:`score_plan` to score more."""

STOP_WORDS = frozenset(
    "a an the some any my me i im i'm you your we our this that these those it its for of to with and or in on at by "
    "from about please can could would will do does is are be get show find search searching look looking buy want "
    "need recommend suggest options option order ordered orders package packages item items delivery deliveries "
    "shipment shipments product products thing things".split())
"""Words left out of a keyword set: articles, pronouns, prepositions, request verbs, generic order words."""

_PUNCT = re.compile(r"[^\w\s#]", re.UNICODE)


def normalize_text(s: str) -> str:
    """Lower case, punctuation dropped, whitespace collapsed (``"What's  IT?"`` → ``"whats it"``)."""
    s = unicodedata.normalize("NFKC", s).lower().replace("'", "").replace("’", "")
    return " ".join(_PUNCT.sub(" ", s).split())


def keyword_set(value: Any) -> tuple[str, ...]:
    """The sorted keyword set of a search phrase or order keywords (stop words out, words singular)."""
    if isinstance(value, (list, tuple)):
        value = " ".join(str(v) for v in value)
    words = normalize_text(str(value or "")).replace("#", " ").split()
    return tuple(sorted({singular(w) for w in words if w not in STOP_WORDS}))


def _as_plan(plan: RetrievalPlan | list[Any] | str | None) -> tuple[RetrievalPlan, list[str]]:
    """(plan, syntax errors) from plan text, typed steps or their dumps."""
    if plan is None or isinstance(plan, str):
        res = parse_plan(plan)
        return res.plan, [str(e) for e in res.errors]
    return RetrievalPlan(steps=as_steps(plan)), []


def _today(today: dt.date | str | None) -> dt.date | None:
    if isinstance(today, dt.date):
        return today.date() if isinstance(today, dt.datetime) else today
    try:
        return dt.date.fromisoformat(today.strip()[:10]) if isinstance(today, str) else None
    except ValueError:
        return None


def _literal_dates(v: Any, today: dt.date | None) -> tuple:
    if v is None or v == "" or v == {} or v == []:
        return ()
    explicit = isinstance(v, (dict, list, tuple)) or is_date_range_literal(v)
    if not explicit and today is None:
        return ("expr", normalize_text(str(v)))
    try:
        start, end = parse_range_arg(v, today or dt.date(2000, 1, 1))
    except Exception:  # noqa: BLE001  (unreadable: compared as text)
        return ("unreadable", normalize_text(str(v)))
    return ("dates", start.isoformat(), end.isoformat())


def _range_expr(src: PlanStep, registry: Any) -> PlanArg | None:
    """The literal ``expr`` argument a ``date_math`` step resolves to a date range (None when it does something else)."""
    bound, _, _ = bind_args(src, registry, ["expr", "operation", "fmt"])
    expr, op = bound.get("expr"), bound.get("operation")
    op_text = str(op.value).strip().lower().replace(" ", "_") if op is not None and op.kind == "literal" and op.value else ""
    return expr if expr is not None and expr.kind == "literal" and op_text in RANGE_OPERATIONS else None


def _scored_value(name: str, arg: PlanArg | None, steps: Mapping[int, PlanStep], registry: Any,
                  today: dt.date | None) -> tuple | None:
    """A scored argument's normalised value: a date range (literal, or a ``date_math`` step's), the referenced
    step's tool, or the keyword set; None when there is nothing to compare."""
    if arg is None:
        return None
    dates = name == "date_range"
    src = steps.get(arg.refs[0]) if arg.kind == "ref" and arg.refs else None
    if dates and arg.kind == "literal":
        v = _literal_dates(arg.value, today)
    elif dates and arg.kind == "template":
        v = ("text", normalize_text(str(arg.value)))
    elif dates and src is not None and src.tool == "date_math" and (expr := _range_expr(src, registry)) is not None:
        v = _literal_dates(expr.value, today)
    elif arg.kind == "ref":
        v = ("ref", src.tool if src is not None else None)
    else:
        v = ("words", *keyword_set(arg.value))
    return v if len(v) > 1 else None


def scored_calls(plan: RetrievalPlan, registry: Any = None, today: dt.date | str | None = None,
                 scored_args: Mapping[str, tuple[str, ...]] = SCORED_ARGS) -> list[tuple]:
    """``(tool, ((argument, normalised value), …))`` for each step of a scored tool, in plan order."""
    day = _today(today)
    steps = {s.var_number: s for s in plan.steps}
    out = []
    for s in plan.steps:
        if (params := scored_args.get(s.tool)) is not None:
            bound = bind_args(s, registry, params)[0]
            out.append((s.tool, tuple((p, v) for p in params
                                      if (v := _scored_value(p, bound.get(p), steps, registry, day)) is not None)))
    return out


@dataclass
class PlanScore:
    """The scores of one predicted plan against its gold plan."""

    tools_correct: bool
    args_correct: bool | None
    """None: not scored (the gold plan uses none of the tools whose arguments are scored)."""
    valid: bool
    status: str = "valid"
    """valid, invalid (unparseable, rejected by the validator or reported invalid) or failed (no plan: the run failed)."""
    pred_tools: list[str] = field(default_factory=list)
    gold_tools: list[str] = field(default_factory=list)
    pred_classes: list[str] = field(default_factory=list)
    """The prediction's tool classes for P/R/F1: its tools, ``no_retrieval`` or ``no_valid_plan``."""
    args_matched: int = 0
    """Gold scored calls that a predicted call matches."""
    args_scored: int = 0
    """Gold scored calls (steps of ``prod_search`` / ``shipment_status``)."""
    errors: list[str] = field(default_factory=list)
    """Why the prediction is invalid or failed."""

    @property
    def correct(self) -> bool:
        """Valid, the tool sequence right, and the arguments right where they are scored."""
        return self.valid and self.tools_correct and self.args_correct is not False

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields (with ``correct``)."""
        return {**asdict(self), "correct": self.correct}


def score_plan(pred: RetrievalPlan | list[Any] | str | None, gold: RetrievalPlan | list[Any] | str | None,
               registry: Any = None, *, status: str | None = None, errors: Iterable[str] = (),
               today: dt.date | str | None = None,
               scored_args: Mapping[str, tuple[str, ...]] = SCORED_ARGS) -> PlanScore:
    """Score one prediction (plan text, typed steps or a plan) against the gold plan."""
    registry = build_retail_registry() if registry is None else registry
    if status not in (None, *STATUSES):
        raise ValueError(f"status must be one of {', '.join(STATUSES)}, got {status!r}")
    g, _ = _as_plan(gold)
    errs = [str(e) for e in errors]
    if status == "failed":
        p = RetrievalPlan()
    else:
        p, syntax = _as_plan(pred)
        errs += syntax + [str(e) for e in check_plan(p, registry)]
        status = "invalid" if status == "invalid" or syntax or errs else "valid"
    gold_scored = scored_calls(g, registry, today, scored_args)
    if status != "valid":
        return PlanScore(tools_correct=False, args_correct=False if gold_scored else None, valid=False, status=status,
                         pred_tools=p.tools(), gold_tools=g.tools(), pred_classes=[NO_VALID_PLAN],
                         args_scored=len(gold_scored), errors=errs)
    gold_calls, pred_calls = Counter(gold_scored), Counter(scored_calls(p, registry, today, scored_args))
    matched = sum((gold_calls & pred_calls).values())  # each predicted call matches one gold call at most
    args_correct = gold_calls == pred_calls if gold_scored else None
    return PlanScore(tools_correct=p.tools() == g.tools(), args_correct=args_correct, valid=True, status="valid",
                     pred_tools=p.tools(), gold_tools=g.tools(), pred_classes=sorted(set(p.tools())) or [NO_RETRIEVAL],
                     args_matched=matched, args_scored=len(gold_scored), errors=errs)


def _class_key(c: str) -> tuple[bool, bool, str]:
    return c == NO_VALID_PLAN, c != NO_RETRIEVAL, c


def class_prf(pairs: Iterable[tuple[Iterable[str], Iterable[str]]]) -> dict[str, dict[str, float]]:
    """Per tool class ``{precision, recall, f1, support, tp, fp, fn}`` from (pred classes, gold classes) pairs
    (an empty list is ``no_retrieval``; support counts gold plans with the class)."""
    counts: dict[str, list[int]] = {}
    for pred, gold in pairs:
        ps, gs = set(pred) or {NO_RETRIEVAL}, set(gold) or {NO_RETRIEVAL}
        for c in ps | gs:  # counts: tp, fp, fn
            counts.setdefault(c, [0, 0, 0])[0 if c in ps and c in gs else 1 if c in ps else 2] += 1
    out = {}
    for c in sorted(counts, key=_class_key):
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
    argument_accuracy: float | None
    """Over the ``argument_n`` questions whose gold plan uses a tool with scored arguments (None: none did)."""
    plan_accuracy: float
    """Share of plans that are ``correct`` (valid, tools right, arguments right where scored)."""
    plan_valid: float
    step_argument_accuracy: float | None
    """Share of gold scored calls matched (partial credit; None: none)."""
    per_class: dict[str, dict[str, float]]
    macro_f1: float
    """Mean F1 over the gold tool classes and those predicted (``no_valid_plan`` not included)."""
    argument_n: int = 0
    failed: int = 0
    """Predictions without a plan because the run failed."""
    latency_mean: float | None = None
    """Mean planner latency in seconds, when the records carry one."""


def _truth(v: Any) -> float:
    return float(v) if isinstance(v, (int, float)) else 1.0 if v else 0.0


def _pred_classes(r: Mapping[str, Any]) -> list[str]:
    if isinstance(r.get("pred_classes"), list):
        return r["pred_classes"]
    return list(r.get("pred_tools") or []) if _truth(r.get("valid", True)) else [NO_VALID_PLAN]


def aggregate(items: Iterable[PlanScore | Mapping[str, Any]], latency_key: str = "latency") -> PlanMetrics:
    """Aggregate :class:`PlanScore` objects or graded records (:meth:`PlanScore.to_dict`)."""
    recs = [x.to_dict() if isinstance(x, PlanScore) else x for x in items]
    n = len(recs)

    def mean(key: str) -> float:
        return sum(_truth(r.get(key)) for r in recs) / n if n else 0.0

    scored = [_truth(r["args_correct"]) for r in recs if r.get("args_correct") is not None]
    per_class = class_prf((_pred_classes(r), r.get("gold_tools") or []) for r in recs)
    gold_calls = sum(int(r.get("args_scored", 0) or 0) for r in recs)
    matched = sum(int(r.get("args_matched", 0) or 0) for r in recs)
    lat = [float(r[latency_key]) for r in recs if isinstance(r.get(latency_key), (int, float))]
    f1s = [c["f1"] for k, c in per_class.items() if k != NO_VALID_PLAN]
    return PlanMetrics(
        n=n, tool_accuracy=mean("tools_correct"),
        argument_accuracy=sum(scored) / len(scored) if scored else None, argument_n=len(scored),
        plan_accuracy=mean("correct"), plan_valid=mean("valid"),
        step_argument_accuracy=matched / gold_calls if gold_calls else None, per_class=per_class,
        macro_f1=sum(f1s) / len(f1s) if f1s else 0.0,
        failed=sum(1 for r in recs if r.get("status") == "failed"),
        latency_mean=sum(lat) / len(lat) if lat else None)


def _f(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"


def _md(head: Sequence[str], rows: Iterable[Sequence[Any]], title: str = "") -> list[str]:
    """A Markdown table (every column but the first right-aligned), under a ``### title`` when given."""
    return ([f"### {title}", ""] if title else []) + ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1),
                                                      *("| " + " | ".join(map(str, r)) + " |" for r in rows)]


def render_table(metrics: PlanMetrics, title: str = "") -> str:
    """Markdown: the per-class P/R/F1 table (support: gold plans with the class), then the overall accuracies."""
    m = metrics
    rows = [("plans", m.n), ("tool accuracy", f"{m.tool_accuracy:.3f}"),
            (f"argument accuracy (prod_search, shipment_status; {m.argument_n} plans)", _f(m.argument_accuracy)),
            ("plan accuracy (valid, tools and scored arguments)", f"{m.plan_accuracy:.3f}"),
            ("scored-call argument accuracy", _f(m.step_argument_accuracy)), ("plan validity", f"{m.plan_valid:.3f}"),
            ("macro F1", f"{m.macro_f1:.3f}")]
    rows += [("failed runs (no plan)", m.failed)] if m.failed else []
    rows += [("planner latency (s, mean)", f"{m.latency_mean:.3f}")] if m.latency_mean is not None else []
    per_class = [(c, *(f"{x[k]:.3f}" for k in ("precision", "recall", "f1")), int(x["support"]), int(x["tp"] + x["fp"]))
                 for c, x in m.per_class.items()]
    return "\n".join(_md(["tool class", "precision", "recall", "F1", "support", "predicted"], per_class, title)
                     + [""] + _md(["metric", "value"], rows))


def render_comparison(columns: Mapping[str, PlanMetrics], title: str = "") -> str:
    """Markdown: the overall metrics side by side, one column per named set (e.g. first call / after repair)."""
    ms = list(columns.values())
    rows = [("plans", *(m.n for m in ms))] + [(label, *(_f(getattr(m, key)) for m in ms)) for label, key in [
        ("tool accuracy", "tool_accuracy"), ("argument accuracy", "argument_accuracy"),
        ("plan accuracy", "plan_accuracy"), ("plan validity", "plan_valid"), ("macro F1", "macro_f1"),
        ("planner latency (s, mean)", "latency_mean")]]
    return "\n".join(_md(["metric", *columns], rows, title))


def instruction_following(score: Mapping[str, Any], removed: Sequence[str]) -> float | None:
    """Table 2 for one plan: 0.0 when it uses a ``removed`` tool (valid or not), 1.0 otherwise, None for a failed run."""
    if score.get("status") == "failed":
        return None
    return 0.0 if any(t in removed for t in score.get("pred_tools") or []) else 1.0


def _share(records: Sequence[Mapping[str, Any]], key: str) -> tuple[int, int, float | None]:
    """(plans scored, plans that used a removed tool, the score) of one instruction-following column."""
    vals = [float(r[key]) for r in records if isinstance(r.get(key), (int, float))]
    return len(vals), sum(1 for v in vals if v == 0.0), (sum(vals) / len(vals) if vals else None)


def _firsts(records: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [r.get("first_call") or r for r in records]


def instruction_following_table(records: Sequence[Mapping[str, Any]], removed: Sequence[str]) -> str:
    """A run's Table 2 row: tool accuracy and instruction following, first planner call and final plan."""
    first, final = aggregate(_firsts(records)), aggregate(list(records))
    n1, used1, s1 = _share(records, "instruction_following_first_call")
    n2, used2, s2 = _share(records, "instruction_following")
    used = " or ".join(removed)
    return "\n".join(_md(["", "first planner call", "after the repair round"], [
        ("plans (failed runs left out)", n1, n2), (f"plans that still use {used}", used1, used2),
        ("instruction following (1 − their share)", _f(s1), _f(s2)),
        ("tool accuracy", _f(first.tool_accuracy), _f(final.tool_accuracy))],
        f"Instruction following (paper Table 2): {', '.join(removed)} removed from the planner's tools"))


def table_one(runs: Sequence[ComparedRun]) -> str:
    """Runs side by side in the shape of the paper's Table 1 (Markdown): per-class P/R/F1 of the final plan, then
    the overall figures (first call and final), LLM calls and, when a run removed tools, instruction following."""
    finals = {run.label: aggregate(run.records, latency_key="planner_latency_s") for run in runs}
    firsts = {run.label: aggregate(_firsts(run.records), latency_key="planner_latency_s") for run in runs}
    labels = list(finals)
    ref = finals[labels[0]].per_class if labels else {}
    per_class = []
    for c in sorted({c for m in finals.values() for c in m.per_class}, key=_class_key):
        cells = [c, int(ref.get(c, {}).get("support", 0))]
        for lab in labels:
            m = finals[lab].per_class.get(c)
            cells += [_f(m["precision"]), _f(m["recall"]), _f(m["f1"])] if m else ["-", "-", "-"]
        per_class.append(cells)
    rows: list[tuple[Any, ...]] = [(name, *(_f(getattr(src[lab], key)) for lab in labels)) for name, src, key in [
        ("tool accuracy", finals, "tool_accuracy"), ("argument accuracy", finals, "argument_accuracy"),
        ("tool accuracy, first planner call", firsts, "tool_accuracy"),
        ("argument accuracy, first planner call", firsts, "argument_accuracy"), ("plan validity", finals, "plan_valid"),
        ("macro F1", finals, "macro_f1"), ("planner latency (s, mean per question)", finals, "latency_mean")]]
    rows = [("plans", *(finals[lab].n for lab in labels)), *rows,
            ("LLM calls per question", *(_f(_share(run.records, "llm_calls")[2]) for run in runs))]
    removed = {run.label: list(dict.fromkeys(t for r in run.records for t in (r.get("removed_tools") or [])))
               for run in runs}
    if any(removed.values()):
        rows += [("removed tools (Table 2)", *(", ".join(removed[lab]) or "-" for lab in labels)),
                 *[(f"instruction following, {name}", *(_f(_share(run.records, key)[2]) for run in runs))
                   for name, key in [("first planner call", "instruction_following_first_call"),
                                     ("final plan", "instruction_following")]]]
    lines = _md(["tool class", "support", *(f"{lab} {x}" for lab in labels for x in ("P", "R", "F1"))], per_class,
                "REAPER plan metrics by method (paper Table 1)")
    lines[2:2] = ["Per tool class, final plan (P / R / F1; support = gold plans with the class):", ""]
    lines += ["", *_md(["metric", *labels], rows)]
    ids = [{str(r.get("id")) for r in run.records} for run in runs]
    if any(i != ids[0] for i in ids[1:]):
        lines += ["", "Note: the runs cover different questions (compare their `plans` row)."]
    return "\n".join(lines)
