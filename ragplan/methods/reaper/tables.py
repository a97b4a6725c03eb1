"""The REAPER paper's tables over reaper-retail runs: Table 1 across methods, Table 2's instruction following.

* :func:`table_one` — several runs (reaper, agent_planner, classifier_planner …) side by side in the shape
  of the paper's Table 1: per tool class precision / recall / F1 for each method, then tool accuracy,
  argument accuracy (first planner call and final plan), plan validity, planner latency and LLM calls
  per question, and instruction following when a run removed a tool.
* :func:`instruction_following` — one plan's Table 2 score: 0 when it uses a removed tool, 1 otherwise,
  None for a failed run (no plan); :func:`instruction_following_table` — a run's Table 2 row.

The numbers come from the records the benchmark wrote (:meth:`ReaperBenchmark.grade
<ragplan.methods.reaper.benchmark.ReaperBenchmark.grade>`) and are aggregated with
:func:`ragplan.methods.reaper.metrics.aggregate`, the same as each run's own summary.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from ragplan.eval.benchmark import ComparedRun
from ragplan.methods.reaper.metrics import NO_RETRIEVAL, NO_VALID_PLAN, PlanMetrics, aggregate

__all__ = ["instruction_following", "instruction_following_table", "table_one"]


def instruction_following(score: Mapping[str, Any], removed: Sequence[str]) -> float | None:
    """1.0 when a plan uses none of the ``removed`` tools, 0.0 when it uses one (valid or not: the planner was
    told the tool is gone), None when the run failed and there is no plan."""
    if score.get("status") == "failed":
        return None
    return 0.0 if any(t in removed for t in score.get("pred_tools") or []) else 1.0


def _f(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"


def _share(records: Sequence[Mapping[str, Any]], key: str) -> tuple[int, int, float | None]:
    """(plans scored, plans that used a removed tool, the score) of one instruction-following column."""
    vals = [float(r[key]) for r in records if isinstance(r.get(key), (int, float))]
    return len(vals), sum(1 for v in vals if v == 0.0), (sum(vals) / len(vals) if vals else None)


def instruction_following_table(records: Sequence[Mapping[str, Any]], removed: Sequence[str]) -> str:
    """The run's Table 2 row: tool accuracy and instruction following (1 − share of plans using a removed tool),
    for the first planner call and the final plan."""
    first = aggregate([r.get("first_call") or r for r in records])
    final = aggregate(list(records))
    n1, used1, s1 = _share(records, "instruction_following_first_call")
    n2, used2, s2 = _share(records, "instruction_following")
    return "\n".join([
        f"### Instruction following (paper Table 2): {', '.join(removed)} removed from the planner's tools", "",
        "| | first planner call | after the repair round |", "|---|---:|---:|",
        f"| plans (failed runs left out) | {n1} | {n2} |",
        f"| plans that still use {' or '.join(removed)} | {used1} | {used2} |",
        f"| instruction following (1 − their share) | {_f(s1)} | {_f(s2)} |",
        f"| tool accuracy | {_f(first.tool_accuracy)} | {_f(final.tool_accuracy)} |"])


def _class_order(classes: set[str]) -> list[str]:
    return sorted(classes, key=lambda c: (c == NO_VALID_PLAN, c != NO_RETRIEVAL, c))


def _mean(records: Sequence[Mapping[str, Any]], key: str) -> float | None:
    vals = [float(r[key]) for r in records if isinstance(r.get(key), (int, float)) and not isinstance(r.get(key), bool)]
    return sum(vals) / len(vals) if vals else None


def table_one(runs: Sequence[ComparedRun]) -> str:
    """The runs side by side in the shape of the paper's Table 1 (Markdown; see the module docstring).

    The per-class table is the final plan's (what each method executed); support counts the gold plans with
    the class in the first run. Tool and argument accuracy are given for the first planner call (the paper's
    one-call setting) and for the final plan (after REAPER's repair round; the baselines have none).
    """
    finals: dict[str, PlanMetrics] = {}
    firsts: dict[str, PlanMetrics] = {}
    for run in runs:
        finals[run.label] = aggregate(run.records, latency_key="planner_latency_s")
        firsts[run.label] = aggregate([r.get("first_call") or r for r in run.records], latency_key="planner_latency_s")
    labels = list(finals)
    classes = _class_order({c for m in finals.values() for c in m.per_class})
    ref = finals[labels[0]].per_class if labels else {}
    head = ["tool class", "support"] + [f"{lab} {x}" for lab in labels for x in ("P", "R", "F1")]
    lines = ["### REAPER plan metrics by method (paper Table 1)", "",
             "Per tool class, final plan (P / R / F1; support = gold plans with the class):", "",
             "| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for c in classes:
        cells = [c, str(int(ref.get(c, {}).get("support", 0)))]
        for lab in labels:
            m = finals[lab].per_class.get(c)
            cells += [_f(m["precision"]), _f(m["recall"]), _f(m["f1"])] if m else ["-", "-", "-"]
        lines.append("| " + " | ".join(cells) + " |")
    rows: list[tuple[str, list[str]]] = [
        ("plans", [str(finals[lab].n) for lab in labels]),
        ("tool accuracy", [_f(finals[lab].tool_accuracy) for lab in labels]),
        ("argument accuracy", [_f(finals[lab].argument_accuracy) for lab in labels]),
        ("tool accuracy, first planner call", [_f(firsts[lab].tool_accuracy) for lab in labels]),
        ("argument accuracy, first planner call", [_f(firsts[lab].argument_accuracy) for lab in labels]),
        ("plan validity", [_f(finals[lab].plan_valid) for lab in labels]),
        ("macro F1", [_f(finals[lab].macro_f1) for lab in labels]),
        ("planner latency (s, mean per question)", [_f(finals[lab].latency_mean) for lab in labels]),
        ("LLM calls per question", [_f(_mean(run.records, "llm_calls")) for run in runs]),
    ]
    removed = {run.label: list(dict.fromkeys(t for r in run.records for t in (r.get("removed_tools") or [])))
               for run in runs}
    if any(removed.values()):
        rows += [("removed tools (Table 2)", [", ".join(removed[lab]) or "-" for lab in labels]),
                 ("instruction following, first planner call",
                  [_f(_share(run.records, "instruction_following_first_call")[2]) for run in runs]),
                 ("instruction following, final plan", [_f(_share(run.records, "instruction_following")[2]) for run in runs])]
    lines += ["", "| metric | " + " | ".join(labels) + " |", "|---|" + "---:|" * len(labels)]
    lines += ["| " + " | ".join([name, *cells]) + " |" for name, cells in rows]
    ids = [{str(r.get("id")) for r in run.records} for run in runs]
    if any(i != ids[0] for i in ids[1:]):
        lines += ["", "Note: the runs cover different questions (compare their `plans` row)."]
    return "\n".join(lines)
