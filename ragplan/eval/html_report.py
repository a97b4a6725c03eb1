"""``ragplan eval report RUN… --html OUT.html``: one self-contained page from ``templates/report.html.j2``
(autoescaped); each trace is drawn by its family's result class (docs/evaluation.md, "Reports")."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import math
from datetime import datetime
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader

from ragplan.redact import redact
from ragplan.eval.figures import plot_costs
from ragplan.eval.report import RunComparison, comparison, family_or_none, plot_comparison
from ragplan.eval.runfolder import RECORD_NUMBERS, RECORD_TEXTS, atomic_write
from ragplan.state.result import GraphResult
from ragplan.state.trace_sections import TraceSection, excerpt

__all__ = ["render_html_report", "write_html_report", "outcome_of", "OPEN_UP_TO", "MAX_TEXT"]

OPEN_UP_TO = 40
"""Results are shown unfolded when the page has at most this many, else folded."""

MAX_TEXT = 20_000
"""Characters of one string shown in a report; the rest is cut with a note (results.jsonl keeps it all)."""

#: Keys every run record has (written by the runner, :mod:`ragplan.eval.runner`), shown in each result's header
#: part; the other non-family keys are the item's metadata and the benchmark's grade.
_RUNNER_KEYS = {*RECORD_NUMBERS, *RECORD_TEXTS, "id", "gold", "executed_queries", "position"}


#: The template's environment: autoescape on, and the few helpers the template calls.
_ENV = Environment(loader=PackageLoader("ragplan.eval", "templates"), autoescape=True)
_ENV.filters["json"] = lambda v: json.dumps(v, ensure_ascii=False, default=str)
_ENV.filters["csp_hash"] = lambda s: base64.b64encode(hashlib.sha256(str(s).encode()).digest()).decode()
_ENV.globals.update(columns=lambda rows: list(dict.fromkeys(k for r in rows for k in r)),  # a table's columns
                    max_text=MAX_TEXT, max_depth=5, max_rows=200,
                    non_empty=lambda d: {k: v for k, v in d.items() if v not in (None, "", [], {})})


def outcome_of(record: dict[str, Any]) -> str:
    """``failed`` (the run or its grading recorded an error), ``correct`` or ``wrong``."""
    if record.get("error") or record.get("grade_error"):
        return "failed"
    return "correct" if record.get("correct") else "wrong"


def _png(data: bytes, alt: str, caption: str = "") -> dict[str, str]:
    """A plot for the template from PNG bytes."""
    return {"data": base64.b64encode(data).decode(), "alt": alt, "caption": caption}


def _retrieval_plot(run_dirs: list[str | Path], c: RunComparison) -> tuple[list[dict[str, str]], list[str]]:
    """PlanRAG's Figure 5, or a note saying why it cannot be drawn."""
    try:
        buf = io.BytesIO()
        if plot_comparison(run_dirs, buf, c) is None:
            return [], ["no SR/MR plot: none of the runs retrieved"]
        return [_png(buf.getvalue(), "accuracy on single- and multi-retrieval questions per run (PlanRAG's Figure 5)")], []
    except Exception as exc:  # the report is still written without it
        return [], [f"the SR/MR plot could not be drawn: {type(exc).__name__}: {exc}"]


def _runs_rows(labels: list[str], c: RunComparison, run_dirs: list[Path]) -> list[dict[str, Any]]:
    rows = []
    for lab, (st, recs, _), d in zip(labels, c.runs, run_dirs):
        outs = [outcome_of(r) for r in recs.values()]
        fam = family_or_none(st.method)
        rows.append({"run": lab, "family": fam.title if fam else "(unknown method)", "model": st.model or "-",
                     "benchmark": st.benchmark, "data": st.data,
                     "questions": len(outs), "correct": outs.count("correct"), "wrong": outs.count("wrong"),
                     "failed": outs.count("failed"), "folder": str(d), "created": st.created})
    return rows


def _result(label: str, cls: type[GraphResult] | None, rec: dict[str, Any], open_: bool) -> dict[str, Any]:
    """One run's result of a question, for the template: its header and its trace sections."""
    outcome = outcome_of(rec)
    answer = str(rec.get("answer") or "")
    common = {"answer": answer, "gold": rec.get("gold"), "stop reason": rec.get("stop_reason"), "error": rec.get("error"),
              "retrievals": f"{rec.get('retrievals', 0)} ({rec.get('retrieval_errors', 0)} failed)",
              "LLM calls": rec.get("llm_calls"),
              "tokens": f"{rec.get('input_tokens', 0)} prompt + {rec.get('output_tokens', 0)} completion",
              "LLM time (s)": rec.get("llm_seconds"), "latency (s)": rec.get("latency_s"), "attempts": rec.get("attempts")}
    # the family's sections, and the record keys they cover (its fields and what its record() adds)
    sections, family_keys = (cls.report_sections(rec), set(cls().record())) if cls is not None else ([], set())
    grade = {k: v for k, v in rec.items() if k not in _RUNNER_KEYS and k not in family_keys}
    return {"label": label, "outcome": outcome, "open": open_,
            "short": excerpt(answer, 100),
            "llm_calls": rec.get("llm_calls", 0), "latency_s": rec.get("latency_s", 0),
            "tokens": (rec.get("input_tokens") or 0) + (rec.get("output_tokens") or 0),
            "sections": [TraceSection(title="Result", fields=common, status="bad" if outcome == "failed" else "")]
                        + ([TraceSection(title="Grade and item", fields=grade)] if grade else []) + sections}


def _questions(labels: list[str], c: RunComparison) -> tuple[list[dict[str, Any]], int]:
    """Every question in the benchmark's order (``position``; a run without it: as its results were written) with
    each run's result of it; and how many results there are."""
    # a run of a graph this version does not have is shown field by field
    classes = [fam.result if (fam := family_or_none(st.method)) else None for st, _, _ in c.runs]
    ids: dict[str, dict[str, Any]] = {}  # the first run's record wins
    for _, recs, _ in c.runs:
        for i, r in sorted(recs.items(), key=lambda kv: p if isinstance(p := kv[1].get("position"), int) else math.inf):
            ids.setdefault(i, r)
    total = sum(len(recs) for _, recs, _ in c.runs)
    open_ = total <= OPEN_UP_TO
    out = []
    for qid in ids:
        text = str(ids[qid].get("question") or "")
        head = text if len(text) <= 200 and "\n" not in text else text.split("\n")[0][:200] + " …"
        out.append({"id": qid, "head": head, "full": text if head != text else "", "gold": ids[qid].get("gold", ""),
                    "results": [_result(lab, cls, recs[qid], open_)
                                for lab, cls, (_, recs, _) in zip(labels, classes, c.runs) if qid in recs],
                    "missing": [lab for lab, (_, recs, _) in zip(labels, c.runs) if qid not in recs]})
    return out, total


def render_html_report(run_dirs: list[str | Path], title: str = "", c: RunComparison | None = None) -> str:
    """The whole page for the run folders (see the module docstring); ``c``: their comparison, when made."""
    dirs = [Path(d) for d in run_dirs]
    c = c or comparison(list(run_dirs))
    labels = c.labels
    benchmarks = sorted({st.benchmark for st, _, _ in c.runs})
    plots, notes = _retrieval_plot(list(run_dirs), c) if c.runs else ([], [])
    notes += [c.benchmark_error] if c.benchmark_error else []
    if c.runs:
        plot_costs(labels, [s for _, _, s in c.runs], buf := io.BytesIO())
        plots.insert(0, _png(buf.getvalue(), "comparison of the runs: accuracy, LLM calls and latency per question"))
    for lab, d in zip(labels, dirs):
        png = d / "plot.png"
        if png.exists() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n":
            plots.append(_png(png.read_bytes(), f"{lab}: accuracy plot", caption=lab))
    questions, total = _questions(labels, c)
    outs = [outcome_of(r) for _, recs, _ in c.runs for r in recs.values()]
    return _ENV.get_template("report.html.j2").render(
        title=title or f"ragplan report: {', '.join(labels)} on {', '.join(benchmarks)}",
        written=datetime.now().isoformat(timespec="seconds"), runs=_runs_rows(labels, c, dirs), total=total,
        comparison=[dict(zip(c.headers, row)) for row in c.rows], comparison_note=c.note,
        benchmark_tables=c.benchmark_tables, notes=notes, plots=plots, labels=labels, questions=questions,
        outcome_counts=[(o, len(outs) if o == "all" else outs.count(o)) for o in ("all", "correct", "wrong", "failed")])


def write_html_report(run_dirs: list[str | Path], out: str | Path, title: str = "",
                      c: RunComparison | None = None) -> Path:
    """Render the page and write it atomically to ``out`` (folders created); returns the path."""
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, redact(render_html_report(run_dirs, title, c)))
    return path
