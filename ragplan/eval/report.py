"""Summaries of a run and comparison tables across runs.

The retrieval split follows PlanRAG's Figure 5: a question is *SR* (single retrieval) when IterRAG
answered it after one retrieval and *MR* when after several. In one run's summary the split uses that
run's own retrieval count; ``ragplan eval report`` uses the ``iter_rag`` run's counts for every
method when one of the compared runs is ``iter_rag`` (as the paper does), and each run's own
otherwise.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragplan.eval.runfolder import RunFolder, RunSettings

__all__ = ["summarise", "write_summary", "compare_runs", "comparison", "RunComparison", "retrieval_class",
           "retrieval_totals", "summary_markdown"]


def retrieval_class(n: int) -> str:
    """``SR`` for one retrieval, ``MR`` for several, ``none`` for zero."""
    return "none" if n <= 0 else "SR" if n == 1 else "MR"


def _acc(records: list[dict[str, Any]], metrics: list[str] | tuple[str, ...] = ()) -> dict[str, Any]:
    n = len(records)
    c = sum(1 for r in records if r.get("correct"))
    out: dict[str, Any] = {"n": n, "correct": c, "accuracy": round(c / n, 4) if n else 0.0}
    for m in metrics:
        vals = [float(r[m]) for r in records if isinstance(r.get(m), (int, float))]
        out[m] = round(sum(vals) / len(vals), 4) if vals else None
    return out


def summarise(records: list[dict[str, Any]], group_by: list[str], settings: Any = None,
              metrics: list[str] | None = None) -> dict[str, Any]:
    """Accuracy (and the benchmark's own metrics) overall, per group key and per retrieval class, plus cost."""
    metrics = list(metrics or [])
    groups: dict[str, dict[str, Any]] = {}
    for key in group_by:
        values: dict[str, list[dict[str, Any]]] = {}
        for r in records:
            values.setdefault(str(r.get(key)), []).append(r)
        groups[key] = {v: _acc(rs, metrics) for v, rs in sorted(values.items())}
    by_class: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        by_class.setdefault(retrieval_class(int(r.get("retrievals", 0))), []).append(r)
    n = len(records) or 1
    total = {k: sum(r.get(k, 0) or 0 for r in records) for k in ("llm_calls", "input_tokens", "output_tokens")}
    return {
        "method": getattr(settings, "method", records[0].get("method") if records else ""),
        "benchmark": getattr(settings, "benchmark", ""),
        "model": getattr(settings, "model", ""),
        "metrics": metrics,
        "overall": {**_acc(records, metrics), "errors": sum(1 for r in records if r.get("error"))},
        "groups": groups,
        "retrieval": {k: _acc(v, metrics) for k, v in sorted(by_class.items())},
        "retrieval_totals": retrieval_totals(records),
        "cost": {**total, "per_question_llm_calls": round(total["llm_calls"] / n, 2),
                 "per_question_tokens": round((total["input_tokens"] + total["output_tokens"]) / n, 1),
                 "mean_latency_s": round(sum(r.get("latency_s", 0) for r in records) / n, 3),
                 "total_latency_s": round(sum(r.get("latency_s", 0) for r in records), 3)},
    }


def retrieval_totals(records: list[dict[str, Any]]) -> dict[str, int]:
    """Retrievals run and failed over a run's records (the runner's ``retrievals`` / ``retrieval_errors``),
    and how many questions retrieved at all and how many had every retrieval fail."""
    def num(r: dict[str, Any], k: str) -> int:
        v = r.get(k)
        return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0

    return {"retrievals": sum(num(r, "retrievals") for r in records),
            "retrieval_errors": sum(num(r, "retrieval_errors") for r in records),
            "questions_retrieving": sum(1 for r in records if num(r, "retrievals") > 0),
            "questions_all_failed": sum(1 for r in records if num(r, "retrievals") > 0
                                        and num(r, "retrieval_errors") >= num(r, "retrievals"))}


def _table(headers: list[str], rows: list[list[Any]]) -> str:
    cells = [[str(c) for c in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    fmt = lambda r: "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |"  # noqa: E731
    return "\n".join([fmt(headers), "|" + "|".join("-" * (w + 2) for w in widths) + "|"] + [fmt(r) for r in cells])


def summary_markdown(s: dict[str, Any]) -> str:
    """The summary as Markdown tables."""
    o, c = s["overall"], s["cost"]
    ms = s.get("metrics") or []
    mfmt = lambda a: [("-" if a.get(m) is None else f"{a[m]:.3f}") for m in ms]  # noqa: E731
    parts = [f"# {s['method']} on {s['benchmark']} ({s['model'] or 'model from context'})", "",
             _table(["questions", "correct", "accuracy", *ms, "errors", "LLM calls", "prompt tokens", "completion tokens",
                     "LLM calls/q", "tokens/q", "latency/q (s)", "wall time (s)"],
                    [[o["n"], o["correct"], f"{o['accuracy']:.1%}", *mfmt(o), o["errors"], c["llm_calls"], c["input_tokens"],
                      c["output_tokens"], c["per_question_llm_calls"], c["per_question_tokens"], c["mean_latency_s"],
                      c.get("wall_time_s", "-")]])]
    t = s.get("retrieval_totals")
    if t:
        parts += ["", f"Retrievals: {t['retrievals']} run, {t['retrieval_errors']} failed (retrieval_errors); "
                      f"{t['questions_retrieving']} question(s) retrieved, every retrieval failed for "
                      f"{t['questions_all_failed']}."]
    for key, vals in s["groups"].items():
        parts += ["", f"## accuracy by {key}", "",
                  _table([key, "questions", "correct", "accuracy", *ms],
                         [[v, a["n"], a["correct"], f"{a['accuracy']:.1%}", *mfmt(a)] for v, a in vals.items()])]
    parts += ["", "## accuracy by retrieval count (SR = one retrieval, MR = several)", "",
              _table(["class", "questions", "correct", "accuracy", *ms],
                     [[k, a["n"], a["correct"], f"{a['accuracy']:.1%}", *mfmt(a)] for k, a in s["retrieval"].items()])]
    if s.get("benchmark_report"):
        parts += ["", s["benchmark_report"]]
    return "\n".join(parts) + "\n"


def write_summary(run_dir: Path, s: dict[str, Any]) -> None:
    """Write ``summary.json``, ``summary.md`` and ``plot.png`` into the run folder."""
    (run_dir / "summary.json").write_text(json.dumps(s, indent=2))
    (run_dir / "summary.md").write_text(summary_markdown(s))
    plot(s, run_dir / "plot.png")


def plot(s: dict[str, Any], path: Path) -> None:
    """Bar charts of accuracy per group and per retrieval class."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [(k, v) for k, v in s["groups"].items()] + [("retrieval", s["retrieval"])]
    fig, axes = plt.subplots(1, len(panels), figsize=(4 * len(panels), 3.4), squeeze=False)
    for ax, (title, vals) in zip(axes[0], panels):
        labels = list(vals)
        accs = [vals[k]["accuracy"] * 100 for k in labels]
        bars = ax.bar(labels, accs, color="#6a5acd")
        for b, k in zip(bars, labels):
            ax.text(b.get_x() + b.get_width() / 2, b.get_height() + 1, f"n={vals[k]['n']}", ha="center", fontsize=8)
        ax.set_ylim(0, 110)
        ax.set_title(f"accuracy by {title}")
        ax.set_ylabel("%")
    fig.suptitle(f"{s['method']} on {s['benchmark']}: {s['overall']['accuracy']:.1%} of {s['overall']['n']}")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


@dataclass
class RunComparison:
    """The comparison of several runs: the table's headers and rows (cells as printed), the SR/MR note, and each
    run's settings, records and summary (for reports that draw more than the table)."""

    headers: list[str]
    rows: list[list[Any]]
    note: str
    runs: list[tuple[RunSettings, dict[str, dict[str, Any]], dict[str, Any]]] = field(default_factory=list)


def compare_runs(run_dirs: list[str | Path]) -> str:
    """One table comparing several runs (same benchmark expected), questions aligned by id."""
    c = comparison(run_dirs)
    return _table(c.headers, c.rows) + f"\n({c.note})"


def comparison(run_dirs: list[str | Path]) -> RunComparison:
    """The rows of :func:`compare_runs`, with each run's settings, records and summary."""
    runs = []
    for d in run_dirs:
        folder = RunFolder(d)
        if not folder.settings_file.exists():
            raise FileNotFoundError(f"{d} is not a run folder (no settings.json)")
        runs.append((RunSettings.load(folder.settings_file), folder.load_records()))
    metrics: list[str] = []
    for d in run_dirs:  # the benchmarks' own metrics (EM, F1, retrieval ratio …), from each run's summary
        try:
            metrics += [m for m in json.loads((Path(d) / "summary.json").read_text()).get("metrics", []) if m not in metrics]
        except (OSError, ValueError):
            pass
    ref = next((recs for st, recs in runs if st.method == "iter_rag"), None)
    split_note = "SR/MR by iter_rag's retrieval count" if ref else "SR/MR by each run's own retrieval count"
    group_keys = ["year"] if any("year" in r for _, recs in runs for r in recs.values()) else []
    years = sorted({str(r.get("year")) for _, recs in runs for r in recs.values()}) if group_keys else []
    headers = ["method", "model", "benchmark", "questions", "accuracy", *metrics, *[f"y{y}" for y in years], "SR", "MR",
               "calls/q", "tokens/q", "latency/q (s)", "errors"]
    rows = []
    summaries = []
    for st, recs in runs:
        rs = list(recs.values())
        s = summarise(rs, group_keys, st, metrics)
        summaries.append((st, recs, s))
        counts: dict[str, dict[str, Any]] = ref or recs

        def cls(r: dict[str, Any]) -> str:
            return retrieval_class(int(counts.get(r["id"], r).get("retrievals", 0)))

        sr = _acc([r for r in rs if cls(r) == "SR"])
        mr = _acc([r for r in rs if cls(r) == "MR"])
        ys = [s["groups"].get("year", {}).get(y, {"accuracy": 0, "n": 0}) for y in years]
        rows.append([st.method, st.model or "-", st.benchmark, s["overall"]["n"], f"{s['overall']['accuracy']:.1%}",
                     *["-" if s["overall"].get(m) is None else f"{s['overall'][m]:.3f}" for m in metrics],
                     *[f"{y['accuracy']:.1%} ({y['n']})" if y["n"] else "-" for y in ys],
                     f"{sr['accuracy']:.1%} ({sr['n']})", f"{mr['accuracy']:.1%} ({mr['n']})",
                     s["cost"]["per_question_llm_calls"], s["cost"]["per_question_tokens"], s["cost"]["mean_latency_s"],
                     s["overall"]["errors"]])
    return RunComparison(headers, rows, split_note, summaries)
