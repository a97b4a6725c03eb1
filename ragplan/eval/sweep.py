"""A sweep: one run per value of one context setting, then a table and a figure (docs/evaluation.md, "Sweeps")."""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Sequence

from ragplan.redact import redact
from ragplan.eval.figures import format_table, plot_sweep, score_cell
from ragplan.eval.runfolder import COMPARED_SETTINGS, RunSettings, atomic_write, saved_settings
from ragplan.eval.runner import run_evaluation
from ragplan.registry import family_of

__all__ = ["SweepError", "SweepResult", "parse_sweep", "sweep_run_dir", "check_sweep_setting",
           "run_sweep", "sweep_markdown", "write_sweep", "sweep_metrics"]


class SweepError(ValueError):
    """A sweep that cannot run as asked (bad ``--sweep``, an unknown setting, a run folder of another sweep)."""


@dataclass
class SweepResult:
    """A finished (or resumed) sweep: the setting, its values and one row per value."""

    key: str
    """The swept context setting (e.g. ``beta_threshold``)."""
    values: list[Any]
    """The values, in the order given."""
    method: str
    benchmark: str
    rows: list[dict[str, Any]] = field(default_factory=list)
    """Per value: ``value``, ``run_dir``, ``metrics`` (the benchmark's), ``overall`` and ``cost`` of its summary."""
    settings: dict[str, Any] = field(default_factory=dict)
    """The settings every run shares (the swept setting left out)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (``sweep.json``)."""
        return {**asdict(self), "figure_metrics": sweep_metrics(self.rows)}


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def parse_sweep(spec: str) -> tuple[str, list[Any]]:
    """``"beta_threshold=0,0.25,0.5"`` → ``("beta_threshold", [0, 0.25, 0.5])`` (JSON values, else text)."""
    if "=" not in spec:
        raise SweepError(f"--sweep takes SETTING=V1,V2,…, got {spec!r}")
    key, raw = (p.strip() for p in spec.split("=", 1))
    parts = [p.strip() for p in raw.split(",")]
    if not key or not parts or any(not p for p in parts):
        raise SweepError(f"--sweep {spec!r}: give a setting and at least one non-empty value, e.g. beta_threshold=0,0.5,1")
    values = [_value(p) for p in parts]
    names = [_folder_value(v) for v in values]
    if dup := sorted({n for n in names if names.count(n) > 1}):
        raise SweepError(f"--sweep {spec!r}: value(s) {', '.join(dup)} given twice")
    return key, values


def _folder_value(v: Any) -> str:
    text = v if isinstance(v, str) else json.dumps(v)
    return re.sub(r"[^\w.+-]+", "_", text).strip("_") or "_"


def sweep_run_dir(out_dir: str | Path, key: str, value: Any) -> Path:
    """The run folder of one value: ``OUT/<key>=<value>``."""
    return Path(out_dir) / f"{key}={_folder_value(value)}"


def check_sweep_setting(method: str, key: str, values: Sequence[Any]) -> None:
    """SweepError unless ``key`` is a setting of ``method``'s context and every value fits its type."""
    family = family_of(method)  # (KeyError naming the known methods for an unknown one)
    known = key in family.settable()
    for v in values:
        try:
            family.check_settings(method, {key: v})
        except ValueError as exc:  # an unknown setting, or a value its type refuses
            why = f"{key}: {v!r} is not a valid value ({exc})" if known else str(exc)
            raise SweepError(f"--sweep {why}") from None


def sweep_metrics(rows: Sequence[dict[str, Any]]) -> list[str]:
    """What the figure draws: the benchmark's ``plot_metrics`` (else accuracy) and its retrieval ratio."""
    if not rows:
        return []
    first = rows[0]
    metrics = list(first.get("metrics") or [])
    out = [m for m in (first.get("plot_metrics") or ["accuracy"]) if m == "accuracy" or m in metrics] or ["accuracy"]
    return out + (["retrieval_ratio"] if "retrieval_ratio" in metrics and "retrieval_ratio" not in out else [])


def run_sweep(base: RunSettings, key: str, values: Sequence[Any], out_dir: str | Path, *,
              progress: bool = True, on_start: Callable[[Any, Path, int], None] | None = None) -> SweepResult:
    """Run (or finish) one run per value, every folder checked first, and write the files; ``on_start(value, run
    folder, questions already finished)`` is called as each run starts."""
    check_sweep_setting(base.method, key, values)
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise SweepError(f"--out {out} is a file, not a sweep folder")
    plan: list[tuple[Any, Path, RunSettings, int]] = []
    for v in values:
        run_dir = sweep_run_dir(out, key, v)
        new = replace(base, context={**base.context, key: v}, created="")
        done = 0
        try:
            old = saved_settings(run_dir, new)
        except ValueError as exc:
            raise SweepError(str(exc)) from None
        if old is not None:
            new = replace(old, concurrency=base.concurrency, base_url=base.base_url,  # resume: keep its creation time
                          llm_cache_dir=base.llm_cache_dir, llm_replay=base.llm_replay)
            results = run_dir / "results.jsonl"
            done = sum(1 for line in results.read_bytes().splitlines() if line.strip()) if results.exists() else 0
        plan.append((v, run_dir, new, done))
    out.mkdir(parents=True, exist_ok=True)
    shared = {k: getattr(base, k) for k in (*COMPARED_SETTINGS, "base_url")}
    shared["context"] = {k: v for k, v in base.context.items() if k != key}
    result = SweepResult(key=key, values=list(values), method=base.method, benchmark=base.benchmark, settings=shared)
    for v, run_dir, settings, done in plan:
        if on_start is not None:
            on_start(v, run_dir, done)
        summary = run_evaluation(settings, run_dir, progress=progress)
        result.rows.append({"value": v, "run_dir": str(run_dir), "metrics": summary.get("metrics", []),
                            "plot_metrics": summary.get("plot_metrics") or [], "overall": summary["overall"],
                            "cost": summary["cost"]})
        write_sweep(out, result)  # after every value, so a killed sweep leaves its finished rows readable
    return result


def sweep_markdown(result: SweepResult) -> str:
    """The sweep as a Markdown table: one row per value (questions, accuracy, the benchmark's metrics, cost)."""
    metrics = list(dict.fromkeys(m for r in result.rows for m in r.get("metrics", [])))
    headers = [result.key, "questions", "accuracy", *metrics, "LLM calls/q", "tokens/q", "errors", "run folder"]
    rows = [[json.dumps(r["value"]) if not isinstance(r["value"], str) else r["value"], o["n"], f"{o['accuracy']:.1%}",
             *[score_cell(o.get(m)) for m in metrics], c.get("per_question_llm_calls", "-"), c.get("per_question_tokens", "-"),
             o.get("errors", 0), Path(r["run_dir"]).name] for r in result.rows for o, c in [(r["overall"], r["cost"])]]
    return f"# {result.method} on {result.benchmark}: sweep of {result.key}\n\n{format_table(headers, rows, style='md')}\n"


def write_sweep(out_dir: str | Path, result: SweepResult) -> dict[str, Path]:
    """Write ``sweep.json``, ``sweep.md`` and ``sweep.png`` (atomically, the figure through a temporary file)."""
    out = Path(out_dir)
    paths = {"json": out / "sweep.json", "md": out / "sweep.md", "png": out / "sweep.png"}
    atomic_write(paths["json"], redact(json.dumps(result.to_dict(), indent=2, default=str)))
    atomic_write(paths["md"], redact(sweep_markdown(result)))
    tmp = out / "sweep.tmp.png"
    plot_sweep(result.rows, result.key, sweep_metrics(result.rows), tmp,
               title=f"{result.method} on {result.benchmark}: scores against {result.key}")
    tmp.replace(paths["png"])
    return paths
