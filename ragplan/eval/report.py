"""Summaries of a run and comparison tables across runs (docs/evaluation.md, "Reports")."""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from collections import Counter
from typing import IO, Any, Callable, Sequence

from ragplan.eval.benchmark import ComparedRun
from ragplan.eval.metrics import count_of, mean_scores
from ragplan.eval.figures import format_table, ordered_categories, plot_retrieval_split, plot_run, score_cell
from ragplan.eval.registry import get_benchmark
from ragplan.eval.runfolder import RunFolder, RunSettings
from ragplan.family import MethodFamily
from ragplan.jsonl import atomic_write
from ragplan.registry import family_of

__all__ = ["summarise", "write_summary", "compare_runs", "every_question_failed", "comparison", "RunComparison",
           "retrieval_class", "retrieval_totals", "summary_markdown", "retrieval_split",
           "plot_comparison", "run_labels", "family_or_none"]


def retrieval_class(record: dict[str, Any]) -> str:
    """A run record's class: ``SR`` for one retrieval, ``MR`` for several, ``none`` for zero."""
    n = int(record.get("retrievals", 0) or 0)
    return "none" if n <= 0 else "SR" if n == 1 else "MR"


#: A family's figures of one run record (:meth:`ragplan.state.result.GraphResult.run_metrics`).
RunMetrics = Callable[[dict[str, Any]], dict[str, float]]


def _acc(records: list[dict[str, Any]], metrics: Sequence[str] = ()) -> dict[str, Any]:
    """Accuracy and the mean of each of ``metrics`` (None where no record has it as a number)."""
    n, c = len(records), sum(1 for r in records if r.get("correct"))
    means = mean_scores([{m: r.get(m) for m in metrics} for r in records])
    return {"n": n, "correct": c, "accuracy": round(c / n, 4) if n else 0.0, **{m: means.get(m) for m in metrics}}


def _with_figures(records: list[dict[str, Any]],
                  run_metrics: RunMetrics | None) -> tuple[list[dict[str, Any]], list[str]]:
    """Copies of the records with their family figures as fields (a record the hook cannot read has none), and the
    figures' names in first-seen order."""
    out, names = [], dict[str, None]()
    for r in records:
        try:
            figures = {k: float(v) for k, v in run_metrics(r).items()} if run_metrics is not None else {}
        except Exception:  # a record from another version: no figures rather than no summary
            figures = {}
        out.append({**r, **figures})
        names.update(dict.fromkeys(figures))
    return out, list(names)


def summarise(records: list[dict[str, Any]], group_by: list[str], settings: Any = None,
              metrics: list[str] | None = None, run_metrics: RunMetrics | None = None) -> dict[str, Any]:
    """Accuracy and metrics overall, per group key and per retrieval class, plus stop reasons and cost."""
    metrics = list(metrics or [])
    records, figures = _with_figures(records, run_metrics)
    names = [m for m in figures if m not in metrics]
    shown = [*metrics, *names]

    def by(keys: list[str]) -> dict[str, dict[str, Any]]:  # one value per record; in reading order (easy < hard)
        return {v: _acc([r for r, k in zip(records, keys) if k == v], shown)
                for v in ordered_categories(keys)}

    n = len(records) or 1
    total = {k: sum(r.get(k, 0) or 0 for r in records) for k in ("llm_calls", "input_tokens", "output_tokens")}
    return {
        "method": getattr(settings, "method", records[0].get("method") if records else ""),
        "benchmark": getattr(settings, "benchmark", ""),
        "model": getattr(settings, "model", ""),
        "metrics": metrics,
        "run_metrics": names,
        "overall": {**_acc(records, shown), "errors": sum(1 for r in records if r.get("error"))},
        "stop_reasons": dict(Counter(str(r.get("stop_reason") or "-") for r in records).most_common()),
        "groups": {key: by([str(r.get(key)) for r in records]) for key in group_by},
        "retrieval": by([retrieval_class(r) for r in records]),
        "retrieval_totals": retrieval_totals(records),
        "cost": {**total, "per_question_llm_calls": round(total["llm_calls"] / n, 2),
                 "per_question_tokens": round((total["input_tokens"] + total["output_tokens"]) / n, 1),
                 "mean_latency_s": round(sum(r.get("latency_s", 0) for r in records) / n, 3),
                 "total_latency_s": round(sum(r.get("latency_s", 0) for r in records), 3)},
    }


def retrieval_totals(records: list[dict[str, Any]]) -> dict[str, int]:
    """Retrievals run and failed, questions that retrieved and those whose every retrieval failed."""
    counts = [(count_of(r.get("retrievals")) or 0, count_of(r.get("retrieval_errors")) or 0) for r in records]
    return {"retrievals": sum(n for n, _ in counts), "retrieval_errors": sum(e for _, e in counts),
            "questions_retrieving": sum(1 for n, _ in counts if n > 0),
            "questions_all_failed": sum(1 for n, e in counts if n > 0 and e >= n)}


def summary_markdown(s: dict[str, Any]) -> str:
    """The summary as Markdown tables."""
    o, c = s["overall"], s["cost"]
    ms = [*(s.get("metrics") or []), *(s.get("run_metrics") or [])]  # the benchmark's, then the method family's
    mfmt = lambda a: [score_cell(a.get(m)) for m in ms]  # noqa: E731
    parts = [f"# {s['method']} on {s['benchmark']} ({s['model'] or 'model from context'})", "",
             format_table(["questions", "correct", "accuracy", *ms, "errors", "LLM calls", "prompt tokens", "completion tokens",
                     "LLM calls/q", "tokens/q", "latency/q (s)", "wall time (s)"],
                    [[o["n"], o["correct"], f"{o['accuracy']:.1%}", *mfmt(o), o["errors"], c["llm_calls"], c["input_tokens"],
                      c["output_tokens"], c["per_question_llm_calls"], c["per_question_tokens"], c["mean_latency_s"],
                      c.get("wall_time_s", "-")]])]
    if s.get("stop_reasons"):
        parts += ["", "Stop reasons: " + ", ".join(f"{k} {v}" for k, v in s["stop_reasons"].items())]
    if t := s.get("retrieval_totals"):
        parts += ["", f"Retrievals: {t['retrievals']} run, {t['retrieval_errors']} failed (retrieval_errors); "
                      f"{t['questions_retrieving']} question(s) retrieved, every retrieval failed for "
                      f"{t['questions_all_failed']}."]
    tables = [(f"by {key}", key, vals) for key, vals in s["groups"].items()]
    tables.append(("by retrieval count (SR = one retrieval, MR = several)", "class", s["retrieval"]))
    for title, col, vals in tables:
        rows = [[v, a["n"], a["correct"], f"{a['accuracy']:.1%}", *mfmt(a)] for v, a in vals.items()]
        parts += ["", f"## accuracy {title}", "", format_table([col, "questions", "correct", "accuracy", *ms], rows)]
    if s.get("benchmark_report"):
        parts += ["", s["benchmark_report"]]
    return "\n".join(parts) + "\n"


def write_summary(run_dir: Path, s: dict[str, Any]) -> None:
    """Write ``summary.json``, ``summary.md`` and ``plot.png`` into the run folder (each whole or not at all)."""
    atomic_write(run_dir / "summary.json", json.dumps(s, indent=2))
    atomic_write(run_dir / "summary.md", summary_markdown(s))
    plot_run(s, run_dir / "plot.png")


@dataclass
class RunComparison:
    """The comparison of several runs: the table, the SR/MR note, each run's settings, records and summary, each
    run's name (:func:`run_labels`), and the benchmark's own tables or why they could not be made."""

    headers: list[str]
    rows: list[list[Any]]
    note: str
    runs: list[tuple[RunSettings, dict[str, dict[str, Any]], dict[str, Any]]] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)
    benchmark_tables: str = ""
    """The ``compare`` hook's Markdown (e.g. REAPER's Table 1 with a column per method); '' without one."""
    benchmark_error: str = ""
    """Why the hook's tables could not be made ('' when they could: the rest is shown either way)."""


def compare_runs(run_dirs: list[str | Path], c: RunComparison | None = None) -> tuple[str, str]:
    """One table comparing several runs (same benchmark expected), questions aligned by id, with the benchmark's own
    tables; and why those could not be made ('' when they could: the rest is shown either way, as in the HTML page)."""
    c = c or comparison(run_dirs)
    text = format_table(c.headers, c.rows) + f"\n({c.note})"
    return text + (f"\n\n{c.benchmark_tables}" if c.benchmark_tables else ""), c.benchmark_error


def comparison(run_dirs: list[str | Path]) -> RunComparison:
    """The rows of :func:`compare_runs`, with each run's settings, records and summary."""
    runs = []
    metrics: list[str] = []
    for d in run_dirs:
        folder = RunFolder(d)
        if not folder.settings_file.exists():
            raise FileNotFoundError(f"{d} is not a run folder (no settings.json)")
        st = RunSettings.load(folder.settings_file)
        try:  # the ids of the run's questions; None (every valid record reported) when its data cannot be read
            ids: set[str] | None = {it.id for it in get_benchmark(st.benchmark, st.data, limit=st.limit, year=st.year,
                                                             **st.benchmark_options).items()}
        except Exception:  # noqa: BLE001
            ids = None
        runs.append((st, folder.load_records(ids=ids)))
        try:  # the benchmark's own metrics (EM, F1, retrieval ratio …), from the run's summary
            listed = json.loads((folder.path / "summary.json").read_text()).get("metrics", [])
        except (OSError, ValueError):
            listed = []
        metrics += [m for m in listed if m not in metrics]
    # each run's family figures (FuRePA's iterations …)
    hooks = [fam.result.run_metrics if (fam := family_or_none(st.method)) else None for st, _ in runs]
    refs = _reference_counts(runs)
    names = "/".join(dict.fromkeys(m for m, _ in refs.values()))
    unsplit = {st.benchmark for st, _ in runs} - set(refs)  # benchmarks without a reference run
    split_note = (f"SR/MR by {names}'s retrieval count" + (f" where a {names} run is given" if unsplit else "")
                  if refs else "SR/MR by each run's own retrieval count")
    group_keys = ["year"] if any("year" in r for _, recs in runs for r in recs.values()) else []
    summaries = [(st, recs, summarise(list(recs.values()), group_keys, st, metrics, run_metrics=hook))
                 for (st, recs), hook in zip(runs, hooks)]
    run_names = list(dict.fromkeys(k for *_, s in summaries for k in s["run_metrics"]))  # a family's figures
    years = ordered_categories(str(r.get("year")) for _, recs in runs for r in recs.values()) if group_keys else []
    headers = ["run", "model", "benchmark", "questions", "accuracy", *metrics, *run_names, *[f"y{y}" for y in years], "SR", "MR",
               "calls/q", "tokens/q", "latency/q (s)", "errors"]
    rows = []
    labels = run_labels([st for st, _ in runs], run_dirs)
    for (st, recs, s), label in zip(summaries, labels):
        sr, mr = _split(st, recs, refs).values()
        ys = [s["groups"].get("year", {}).get(y, {"accuracy": 0, "n": 0}) for y in years]
        rows.append([label, st.model or "-", st.benchmark, s["overall"]["n"], f"{s['overall']['accuracy']:.1%}",
                     *[score_cell(s["overall"].get(m)) for m in [*metrics, *run_names]],
                     *[f"{y['accuracy']:.1%} ({y['n']})" if y["n"] else "-" for y in ys],
                     f"{sr['accuracy']:.1%} ({sr['n']})", f"{mr['accuracy']:.1%} ({mr['n']})",
                     s["cost"]["per_question_llm_calls"], s["cost"]["per_question_tokens"], s["cost"]["mean_latency_s"],
                     s["overall"]["errors"]])
    c = RunComparison(headers, rows, split_note, summaries, labels)
    try:
        c.benchmark_tables = _benchmark_tables(c)
    except Exception as exc:  # noqa: BLE001  (a hook that fails is named, never a traceback)
        c.benchmark_error = (f"{c.runs[0][0].benchmark}'s own comparison of {', '.join(map(str, run_dirs))} could not "
                             f"be made: {type(exc).__name__}: {exc}")
    return c


def family_or_none(method: str) -> MethodFamily | None:
    """``method``'s family, or None for a method this ragplan does not know (a run of another version)."""
    try:
        return family_of(method)
    except KeyError:
        return None


def _reference_counts(runs: list[Any]) -> dict[str, tuple[str, dict[str, dict[str, Any]]]]:
    """Benchmark → (method, records) of its first run whose graph defines the SR/MR split (IterRAG)."""
    refs: dict[str, tuple[str, dict[str, dict[str, Any]]]] = {}
    for st, recs, *_ in runs:
        fam = family_or_none(st.method)
        if fam is not None and fam.graph(st.method).splits_retrievals:
            refs.setdefault(st.benchmark, (st.method, recs))
    return refs


def _split(st: RunSettings, recs: dict[str, dict[str, Any]], refs: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Accuracy on the SR and on the MR questions, each classed by the reference run's retrieval count, else its own."""
    counts = refs[st.benchmark][1] if st.benchmark in refs else recs
    cls = {i: retrieval_class(counts[i]) if i in counts else "unsplit" for i in recs}
    return {k: _acc([r for i, r in recs.items() if cls[i] == k]) for k in ("SR", "MR")}


def run_labels(settings: list[RunSettings], run_dirs: list[str | Path]) -> list[str]:
    """A name per run: its method, with the model where runs of one method differ by model, else the folder's name."""
    def label(s: RunSettings, d: str | Path) -> str:
        same = [t.model for t in settings if t.method == s.method]
        return s.method if len(same) == 1 else f"{s.method} ({s.model or '-'})" if len(set(same)) == len(same) \
            else f"{s.method} ({Path(d).name})"

    return [label(s, d) for s, d in zip(settings, run_dirs)]


def _benchmark_tables(c: RunComparison) -> str:
    """The ``compare`` hook's tables when every run is of one benchmark that has one; '' otherwise."""
    if not c.runs or len({st.benchmark for st, _, _ in c.runs}) != 1:
        return ""
    first = c.runs[0][0]
    try:
        hook = getattr(get_benchmark(first.benchmark, first.data, **first.benchmark_options), "compare", None)
    except Exception:  # noqa: BLE001  (an unknown benchmark or options a report cannot honour: no hook)
        return ""
    runs = [ComparedRun(lab, st, list(recs.values())) for lab, (st, recs, _) in zip(c.labels, c.runs)]
    return str(hook(runs)) if callable(hook) else ""


def retrieval_split(c: RunComparison) -> dict[str, dict[str, Any]]:
    """PlanRAG's Figure 5 data: per benchmark, each run's accuracy and question count on SR and MR questions (the
    reference run's SR/MR counts in ``n``); without a reference run, a run that never retrieved is ``left_out``."""
    refs = _reference_counts(c.runs)
    out: dict[str, dict[str, Any]] = {}
    for label, (st, recs, _) in zip(c.labels, c.runs):
        ref = refs.get(st.benchmark)
        own = [retrieval_class(r) for r in (ref[1] if ref else recs).values()]
        b = out.setdefault(st.benchmark, {"total": len(own), "n": {k: own.count(k) for k in ("SR", "MR")} if ref else {},
                                          "methods": {}, "counts": {}, "left_out": [],
                                          "split_by": ref[0] if ref else "own retrieval counts"})
        if ref is None and own.count("none") == len(own):  # its SR/MR split would be empty: say so, draw nothing
            b["left_out"].append(label)
            continue
        accs = _split(st, recs, refs)
        b["methods"][label] = {k: (a["accuracy"] if a["n"] else None) for k, a in accs.items()}
        b["counts"][label] = {k: a["n"] for k, a in accs.items()}
    return out


def plot_comparison(run_dirs: list[str | Path], path: str | Path | IO[bytes],
                    c: RunComparison | None = None) -> str | Path | IO[bytes] | None:
    """``ragplan eval report RUN… --plot OUT.png``: PlanRAG's Figure 5 (``c``: the comparison, when made); None
    (nothing written) when no run has an SR/MR split (none retrieved)."""
    c = c or comparison(run_dirs)
    split = retrieval_split(c)
    drawn = {bench: b for bench, b in split.items() if b["methods"]}
    if not drawn:
        return None
    left = [lab for b in split.values() for lab in b["left_out"]]
    plot_retrieval_split(drawn, path, note=c.note + (f"; left out (no retrievals): {', '.join(left)}" if left else ""))
    return path


def every_question_failed(summary: dict[str, Any], run_dir: str | Path) -> str | None:
    """Why a run failed as a whole (every question ended in an error), or None."""
    overall = summary.get("overall") or {}
    n = int(overall.get("n") or 0)
    if not n or int(overall.get("errors") or 0) < n:
        return None
    first = ""  # the reason is a courtesy: the counts say enough
    with contextlib.suppress(OSError, ValueError), open(Path(run_dir) / "results.jsonl", encoding="utf-8") as fh:
        first = next((e for line in fh if line.strip() and (e := json.loads(line).get("error"))), "")
    return (f"every question failed ({n} of {n})" + (f"; the first: {first[:300]}" if first else "")
            + " (failed questions are recorded: once the cause is fixed, run them again into a new --out)")
