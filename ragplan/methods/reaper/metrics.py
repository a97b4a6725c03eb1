"""Plan metrics of the REAPER paper (Table 1): tool selection P/R/F1 per tool class, tool and argument accuracy.

For one (predicted, gold) pair, :func:`score_plan` gives a :class:`PlanScore`. A prediction is first
judged as a whole (``status``):

* ``failed`` — the run did not finish (LLM error, crash, timeout, empty output): there is no plan to
  grade;
* ``invalid`` — the plan does not parse, :func:`~ragplan.methods.reaper.validate.check_plan` rejects it (an
  invented tool, a wrong argument name …), or the graph itself reported it invalid after its repair
  round;
* ``valid`` — otherwise.

A failed or invalid prediction is wrong on everything: tool accuracy, argument accuracy and
``correct``; its tool class is ``no_valid_plan`` — never ``no_retrieval``, which only a valid
zero-step plan earns. For a valid prediction:

* **tool classes** — the set of tools a plan uses, or ``{"no_retrieval"}`` for an empty plan;
  per class, a pair counts a true positive when both plans use the class, a false positive when
  only the prediction does and a false negative when only the gold plan does;
* **tool accuracy** — the predicted tool sequence equals the gold one, in order;
* **argument accuracy** — by the argument rule below;
* ``correct`` — valid, tools right, and arguments right where they are scored.

The argument rule (one rule for the gold set, the in-context examples and this scorer)
---------------------------------------------------------------------------------------
The paper (§5.2): "only two tools ``prod_search`` and ``shipment_status`` require the arguments
different from the customer query. We thus restrict our evaluation to plans involving these tools."

* **Scored arguments** (:data:`SCORED_ARGS`): ``prod_search(query)``, ``shipment_status(keywords,
  date_range)``. No other argument is scored: free text that restates the customer's words (the
  ``prod_qna`` and ``customer_support`` question …) may be rephrased freely — the paper's own plans
  and our in-context examples rewrite it while the gold set copies it — and ids copied from the page
  context or a reference (``product_id``), the novel tool's arguments and ``date_math``'s expression
  (scored through the date range it produces) are not part of the paper's metric.
* **Which questions**: argument accuracy is computed on the questions whose *gold* plan uses
  ``prod_search`` or ``shipment_status``; for the others it is not applicable (``None``) and left out
  of the mean (``PlanMetrics.argument_n`` says how many were scored).
* **Normalisation**:

  - ``query`` and ``keywords`` compare as **keyword sets**: NFKC, lower case, punctuation dropped,
    split into words, stop words and generic request/order words dropped (:data:`STOP_WORDS`:
    *a, the, some, my, for, me, show, find, order, package, item …*), plurals folded to the singular.
    So ``"Waterproof backpacks for hiking"`` matches ``"waterproof hiking backpack"``; ``"blue sheet
    pan"`` does not match ``"sheet pan"``. An absent, ``null``, empty or all-stop-word value is absent.
  - ``date_range`` compares as the **resolved dates** (start, end). A reference ``#Ej`` to a
    ``date_math(expr)`` step is resolved as the tool resolves it, against the question's date (the
    page context's ``date``, the shop's today); literal ranges (``{"start", "end"}``, ``[start, end]``,
    ``"A..B"``, an ISO date) and expressions are resolved the same way. So ``date_math("in 2 days")``
    matches ``date_math("day after tomorrow")`` and the agent's literal ``{"start": …, "end": …}``.
    Without a question date, expressions compare as normalised text. Absent means no date filter.
  - a scored argument given as a reference to another kind of step compares as the referenced tool.
* **Match**: the prediction's scored calls (each tool with its normalised scored arguments) equal the
  gold plan's one to one, as a multiset (order and step numbers do not matter).

:func:`aggregate` averages many pairs (also from graded benchmark records, which carry
``pred_tools``/``gold_tools``), and :func:`render_table` / :func:`render_comparison` print the result
as markdown tables.
"""

from __future__ import annotations

import datetime as dt
import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from ragplan.methods.reaper.plan import PlanArg, PlanStep, RetrievalPlan, as_steps, parse_plan
from ragplan.methods.reaper.validate import bind_args, check_plan, is_date_range_literal
from ragplan.tools.retail.compat import singular
from ragplan.tools.retail.dates import parse_range_arg

__all__ = ["NO_RETRIEVAL", "NO_VALID_PLAN", "SCORED_ARGS", "STOP_WORDS", "STATUSES", "PlanScore", "PlanMetrics",
           "tool_classes", "normalize_text", "keyword_set", "scored_calls", "score_plan", "class_prf", "aggregate",
           "render_table", "render_comparison", "default_registry"]

NO_RETRIEVAL = "no_retrieval"
NO_VALID_PLAN = "no_valid_plan"
"""The tool class of a prediction without a valid plan (invalid after repair, or a failed run)."""
STATUSES = ("valid", "invalid", "failed")

SCORED_ARGS: dict[str, tuple[str, ...]] = {"prod_search": ("query",), "shipment_status": ("keywords", "date_range")}
"""Tool → its scored arguments (paper §5.2). Pass another mapping to :func:`score_plan` to score more."""

_DATE_ARGS = frozenset({"date_range"})

STOP_WORDS = frozenset(
    "a an the some any my me i im i'm you your we our this that these those it its for of to with and or in on at by "
    "from about please can could would will do does is are be get show find search searching look looking buy want "
    "need recommend suggest options option order ordered orders package packages item items delivery deliveries "
    "shipment shipments product products thing things".split())
"""Words left out of a keyword set: articles, pronouns, prepositions, request verbs, generic order words."""

_PUNCT = re.compile(r"[^\w\s#]", re.UNICODE)
_RANGE_OPS = ("", "date_range", "range", "resolve")


def default_registry() -> Any:
    """The retail tool registry (specs only; nothing is opened)."""
    from ragplan.tools.retail import build_retail_registry

    return build_retail_registry()


def normalize_text(s: str) -> str:
    """Lower case, punctuation dropped, whitespace collapsed (``"What's  IT?"`` → ``"whats it"``)."""
    s = unicodedata.normalize("NFKC", s).lower().replace("'", "").replace("’", "")
    return " ".join(_PUNCT.sub(" ", s).split())


def keyword_set(value: Any) -> tuple[str, ...]:
    """The sorted keyword set of a search phrase or order keywords (see the module docstring)."""
    if isinstance(value, (list, tuple)):
        value = " ".join(str(v) for v in value)
    words = normalize_text(str(value or "")).replace("#", " ").split()
    return tuple(sorted({singular(w) for w in words if w not in STOP_WORDS}))


def _as_plan(plan: RetrievalPlan | list[Any] | str | None) -> tuple[RetrievalPlan, list[str]]:
    """(plan, syntax errors) from plan text, typed steps or their dumps."""
    if isinstance(plan, RetrievalPlan):
        return plan, []
    if isinstance(plan, list):
        return RetrievalPlan(steps=as_steps(plan)), []
    res = parse_plan(plan or "")
    return res.plan, [str(e) for e in res.errors]


def tool_classes(plan: RetrievalPlan | str | None) -> set[str]:
    """The tools a plan uses, or ``{"no_retrieval"}`` for a plan without steps."""
    p, _ = _as_plan(plan)
    return set(p.tools()) or {NO_RETRIEVAL}


# ---------------------------------------------------------------------------------------------- arguments

def _today(today: dt.date | str | None) -> dt.date | None:
    if isinstance(today, dt.datetime):
        return today.date()
    if isinstance(today, dt.date):
        return today
    if isinstance(today, str) and today.strip():
        try:
            return dt.date.fromisoformat(today.strip()[:10])
        except ValueError:
            return None
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


def _date_value(arg: PlanArg, steps: Mapping[int, PlanStep], registry: Any, today: dt.date | None) -> tuple:
    if arg.kind == "literal":
        return _literal_dates(arg.value, today)
    if arg.kind == "template":
        return ("text", normalize_text(str(arg.value)))
    src = steps.get(arg.refs[0]) if arg.refs else None
    if src is None:
        return ("ref", None)
    if src.tool == "date_math":
        spec = registry.get("date_math") if registry is not None else None
        bound, _, _ = bind_args(src, [a.name for a in spec.args] if spec is not None else ["expr", "operation", "fmt"])
        expr, op = bound.get("expr"), bound.get("operation")
        op_text = str(op.value).strip().lower().replace(" ", "_") if op is not None and op.kind == "literal" and op.value else ""
        if expr is not None and expr.kind == "literal" and op_text in _RANGE_OPS:
            return _literal_dates(expr.value, today)
    return ("ref", src.tool)


def _scored_value(name: str, arg: PlanArg | None, steps: Mapping[int, PlanStep], registry: Any,
                  today: dt.date | None) -> tuple | None:
    if arg is None:
        return None
    if name in _DATE_ARGS:
        v = _date_value(arg, steps, registry, today)
    elif arg.kind == "ref":
        src = steps.get(arg.refs[0]) if arg.refs else None
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
        params = scored_args.get(s.tool)
        if params is None:
            continue
        spec = registry.get(s.tool) if registry is not None else None
        bound, _, _ = bind_args(s, [a.name for a in spec.args] if spec is not None else list(params))
        items = [(p, v) for p in params if (v := _scored_value(p, bound.get(p), steps, registry, day)) is not None]
        out.append((s.tool, tuple(items)))
    return out


# ---------------------------------------------------------------------------------------------- one pair

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
    """Score one prediction (plan text, typed steps or a :class:`RetrievalPlan`) against the gold plan.

    ``status`` is what the caller knows of the run: ``"failed"`` (no plan: LLM error, crash, empty
    output) and ``"invalid"`` (the graph reported the plan invalid) force a wrong score; ``None`` or
    ``"valid"`` let the plan's own parse and :func:`check_plan` decide. ``errors`` are kept with the
    score; ``today`` (the question's date) resolves date expressions; ``registry`` defaults to the
    retail one.
    """
    registry = default_registry() if registry is None else registry
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
    left = scored_calls(p, registry, today, scored_args)
    matched = 0
    for sig in gold_scored:
        if sig in left:
            left.remove(sig)
            matched += 1
    args_correct = (matched == len(gold_scored) and not left) if gold_scored else None
    return PlanScore(tools_correct=p.tools() == g.tools(), args_correct=args_correct, valid=True, status="valid",
                     pred_tools=p.tools(), gold_tools=g.tools(), pred_classes=sorted(set(p.tools())) or [NO_RETRIEVAL],
                     args_matched=matched, args_scored=len(gold_scored), errors=errs)


# ---------------------------------------------------------------------------------------------- many pairs

def class_prf(pairs: Iterable[tuple[Iterable[str], Iterable[str]]]) -> dict[str, dict[str, float]]:
    """Per tool class ``{precision, recall, f1, support, tp, fp, fn}`` from (pred classes, gold classes) pairs.

    Empty class lists stand for the class ``no_retrieval``; ``support`` counts gold plans using the
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
    for c in sorted(counts, key=lambda c: (c == NO_VALID_PLAN, c != NO_RETRIEVAL, c)):
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

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return asdict(self)


def _rec(x: PlanScore | Mapping[str, Any]) -> Mapping[str, Any]:
    return x.to_dict() if isinstance(x, PlanScore) else x


def _truth(v: Any) -> float:
    return float(v) if isinstance(v, (int, float)) else 1.0 if v else 0.0


def _first(r: Mapping[str, Any], *keys: str, default: Any = None) -> Any:
    return next((r[k] for k in keys if k in r), default)


def _pred_classes(r: Mapping[str, Any]) -> list[str]:
    if isinstance(r.get("pred_classes"), list):
        return r["pred_classes"]
    if not _truth(_first(r, "valid", "plan_valid", default=True)):
        return [NO_VALID_PLAN]
    return list(r.get("pred_tools") or [])


def aggregate(items: Iterable[PlanScore | Mapping[str, Any] | tuple[Any, Any]], registry: Any = None,
              latency_key: str = "latency") -> PlanMetrics:
    """Aggregate :class:`PlanScore` objects, graded records (dicts) or (pred, gold) pairs.

    A record needs ``pred_tools``, ``gold_tools`` and ``tools_correct``/``tool_accuracy``,
    ``args_correct``/``argument_accuracy`` (None: not scored) and ``valid``/``plan_valid``;
    ``pred_classes``, ``correct``, ``status``, ``args_matched``/``args_scored`` and ``latency_key``
    (seconds) are optional.
    """
    recs: list[Mapping[str, Any]] = []
    for x in items:
        if isinstance(x, tuple):
            registry = default_registry() if registry is None else registry
            x = score_plan(x[0], x[1], registry)
        recs.append(_rec(x))
    n = len(recs)

    def mean(*keys: str) -> float:
        vals = [_truth(_first(r, *keys, default=False)) for r in recs]
        return sum(vals) / n if n else 0.0

    scored = [_first(r, "args_correct", "argument_accuracy") for r in recs]
    scored = [_truth(v) for v in scored if v is not None]
    valid = [_truth(_first(r, "valid", "plan_valid", default=False)) for r in recs]
    correct = [_truth(r["correct"]) if "correct" in r else
               v * _truth(_first(r, "tools_correct", "tool_accuracy", default=False))
               * (1.0 if _first(r, "args_correct", "argument_accuracy") is None
                  else _truth(_first(r, "args_correct", "argument_accuracy")))
               for r, v in zip(recs, valid)]
    per_class = class_prf((_pred_classes(r), r.get("gold_tools") or []) for r in recs)
    gold_calls = sum(int(r.get("args_scored", 0) or 0) for r in recs)
    matched = sum(int(r.get("args_matched", 0) or 0) for r in recs)
    lat = [float(r[latency_key]) for r in recs if isinstance(r.get(latency_key), (int, float))]
    f1s = [c["f1"] for k, c in per_class.items() if k != NO_VALID_PLAN]
    return PlanMetrics(
        n=n, tool_accuracy=mean("tools_correct", "tool_accuracy"),
        argument_accuracy=sum(scored) / len(scored) if scored else None, argument_n=len(scored),
        plan_accuracy=sum(correct) / n if n else 0.0, plan_valid=sum(valid) / n if n else 0.0,
        step_argument_accuracy=matched / gold_calls if gold_calls else None, per_class=per_class,
        macro_f1=sum(f1s) / len(f1s) if f1s else 0.0,
        failed=sum(1 for r in recs if r.get("status") == "failed"),
        latency_mean=sum(lat) / len(lat) if lat else None)


def _f(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"


def render_table(metrics: PlanMetrics, title: str = "") -> str:
    """Markdown: the per-class P/R/F1 table (support: gold plans with the class; predicted: predictions with it),
    then the overall accuracies."""
    lines = [f"### {title}", ""] if title else []
    lines += ["| tool class | precision | recall | F1 | support | predicted |", "|---|---:|---:|---:|---:|---:|"]
    for c, m in metrics.per_class.items():
        lines.append(f"| {c} | {m['precision']:.3f} | {m['recall']:.3f} | {m['f1']:.3f} | {int(m['support'])} | "
                     f"{int(m['tp'] + m['fp'])} |")
    lines += ["", "| metric | value |", "|---|---:|", f"| plans | {metrics.n} |",
              f"| tool accuracy | {metrics.tool_accuracy:.3f} |",
              f"| argument accuracy (prod_search, shipment_status; {metrics.argument_n} plans) | "
              f"{_f(metrics.argument_accuracy)} |",
              f"| plan accuracy (valid, tools and scored arguments) | {metrics.plan_accuracy:.3f} |",
              f"| scored-call argument accuracy | {_f(metrics.step_argument_accuracy)} |",
              f"| plan validity | {metrics.plan_valid:.3f} |", f"| macro F1 | {metrics.macro_f1:.3f} |"]
    if metrics.failed:
        lines.append(f"| failed runs (no plan) | {metrics.failed} |")
    if metrics.latency_mean is not None:
        lines.append(f"| planner latency (s, mean) | {metrics.latency_mean:.3f} |")
    return "\n".join(lines)


def render_comparison(columns: Mapping[str, PlanMetrics], title: str = "") -> str:
    """Markdown: the overall metrics side by side, one column per named set (e.g. first call / after repair)."""
    names = list(columns)
    lines = [f"### {title}", ""] if title else []
    lines += ["| metric | " + " | ".join(names) + " |", "|---|" + "---:|" * len(names)]
    rows = [("plans", lambda m: str(m.n)), ("tool accuracy", lambda m: _f(m.tool_accuracy)),
            ("argument accuracy", lambda m: _f(m.argument_accuracy)),
            ("plan accuracy", lambda m: _f(m.plan_accuracy)), ("plan validity", lambda m: _f(m.plan_valid)),
            ("macro F1", lambda m: _f(m.macro_f1)),
            ("planner latency (s, mean)", lambda m: _f(m.latency_mean))]
    for label, get in rows:
        lines.append(f"| {label} | " + " | ".join(get(columns[k]) for k in names) + " |")
    return "\n".join(lines)
