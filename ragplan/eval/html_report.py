"""``ragplan eval report RUN… --html OUT.html``: one self-contained HTML page a person can open.

The page holds, for the run folders given:

* the runs (method, family, model, benchmark, data, questions correct / wrong / failed);
* the comparison table of :func:`ragplan.eval.report.comparison` (the same rows ``eval report`` prints);
* the benchmark's own comparison tables where it has them (e.g. REAPER's Table 1, a column per method);
* a comparison plot (accuracy, LLM calls and latency per question, per run), PlanRAG's Figure 5 (accuracy on
  single- and multi-retrieval questions per method) and each run's own ``plot.png``;
* per question, every run's result: the answer, the gold answer, the grade (and the simulator's verdict
  where the benchmark has one), cost (LLM calls, tokens, LLM time) and latency, the stop reason and any
  error, then the family's trace — plan and its versions, queries and observations, evidence, decisions —
  as the family's result class draws it (:meth:`~ragplan.state.result.GraphResult.report_sections`);
* filters by outcome (correct / wrong / failed) and by method.

Self-contained: CSS and JavaScript are inline, plots are base64 PNGs, nothing is fetched (a Content
Security Policy in the page forbids any network request, and allows only its own script, by hash).
Without JavaScript everything is shown (the filters only hide). All record text is escaped
(:mod:`ragplan.eval.html_values`).
"""

from __future__ import annotations

import base64
import hashlib
import io
import re
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any

from ragplan.eval.html_values import esc, sections_html, value_html
from ragplan.eval.report import RunComparison, benchmark_comparison, comparison, plot_comparison
from ragplan.eval.runfolder import RunSettings, atomic_write
from ragplan.registry import family_of
from ragplan.state.result import GraphResult
from ragplan.state.trace_sections import TraceSection, field_sections

__all__ = ["render_html_report", "write_html_report", "outcome_of", "OPEN_UP_TO"]

OPEN_UP_TO = 40
"""Results are shown unfolded when the page has at most this many; past it they start folded (one click, or
"expand all", opens them) so a large run stays readable."""

#: Keys every run record has (written by the runner, :mod:`ragplan.eval.runner`), shown in each result's header
#: part; the other non-family keys are the item's metadata and the benchmark's grade.
_RUNNER_KEYS = {"id", "method", "model", "question", "answer", "gold", "retrievals", "retrieval_errors",
                "executed_queries", "llm_calls", "input_tokens", "output_tokens", "llm_seconds", "latency_s",
                "stop_reason", "error", "attempts", "invocation", "finished_at"}

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;margin:0 auto;max-width:1240px;padding:16px 24px;
color:#1d1d1f;background:#fff}
h1{font-size:22px;margin:8px 0 4px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #ddd}
h3{font-size:15px;margin:0 0 4px}.muted,.note{color:#666}.note{font-size:13px;margin:2px 0 4px}
table.data{border-collapse:collapse;font-size:13px}table.data th,table.data td{border:1px solid #d6d6d6;padding:3px 7px;
vertical-align:top;text-align:left}table.data th{background:#f2f2f7}.scroll{overflow-x:auto;max-width:100%}
pre{white-space:pre-wrap;word-break:break-word;background:#f7f7f9;border:1px solid #e4e4ea;padding:6px 8px;margin:2px 0;
max-height:28em;overflow:auto;font-size:12.5px}
dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;margin:4px 0}dt{color:#555;font-weight:600}dd{margin:0;min-width:0}
.question{border:1px solid #ddd;border-radius:6px;padding:10px 12px;margin:12px 0}.qid{color:#666;font-weight:400;margin-right:6px}
details.result{border-left:4px solid #aaa;margin:8px 0;padding:2px 0 2px 10px}details.result>summary{cursor:pointer;padding:3px 0}
details.result.correct{border-color:#2e9d4a}details.result.wrong{border-color:#d08a00}details.result.failed{border-color:#c62828}
.badge{display:inline-block;border-radius:10px;padding:0 8px;font-size:12px;color:#fff;margin:0 6px}
.badge.correct{background:#2e9d4a}.badge.wrong{background:#d08a00}.badge.failed{background:#c62828}
.ans{font-style:italic}.cost{color:#666;font-size:12px;margin-left:8px}
.sec{border:1px solid #e6e6ea;border-radius:4px;padding:6px 9px;margin:6px 0}.sec.bad{border-color:#e57373;background:#fff6f6}
.sec.ok{border-color:#9ccc9c}.sec-title{font-weight:600}ol.items{padding-left:22px;margin:4px 0}
.none,.cut{color:#999}#filters{position:sticky;top:0;background:#fff;border-bottom:1px solid #ddd;padding:6px 0;z-index:1}
#filters fieldset{display:inline-block;border:1px solid #ddd;margin-right:10px}[hidden]{display:none!important}
img.plot{max-width:100%;border:1px solid #eee;margin:6px 0}
"""

_JS = """(function(){
var f=document.getElementById('filters');if(!f)return;f.hidden=false;
function apply(){var o=f.querySelector('input[name=outcome]:checked').value,ms={},n=0,t=0;
f.querySelectorAll('input[name=method]').forEach(function(c){ms[c.value]=c.checked;});
document.querySelectorAll('.question').forEach(function(q){var any=false;
q.querySelectorAll('.result').forEach(function(r){t++;var ok=(o==='all'||r.dataset.outcome===o)&&ms[r.dataset.method]===true;
r.hidden=!ok;if(ok){any=true;n++;}});q.hidden=!any;});
document.getElementById('shown').textContent=n+' of '+t+' results shown';}
f.addEventListener('change',function(){apply();try{var o=f.querySelector('input[name=outcome]:checked').value,off=[];
f.querySelectorAll('input[name=method]').forEach(function(c){if(!c.checked)off.push(encodeURIComponent(c.value));});
history.replaceState(null,'','#outcome='+o+(off.length?'&hide='+off.join(','):''));}catch(e){}});
var h=new URLSearchParams(location.hash.slice(1)),ho=h.get('outcome'),hide=(h.get('hide')||'').split(',');
f.querySelectorAll('input[name=outcome]').forEach(function(r){if(r.value===ho)r.checked=true;});
f.querySelectorAll('input[name=method]').forEach(function(c){if(hide.indexOf(c.value)>=0)c.checked=false;});
function fold(open){document.querySelectorAll('details.result').forEach(function(d){d.open=open;});}
document.getElementById('expand').addEventListener('click',function(){fold(true);});
document.getElementById('collapse').addEventListener('click',function(){fold(false);});
apply();})();"""


def outcome_of(record: dict[str, Any]) -> str:
    """``failed`` (the run or its grading recorded an error), ``correct`` or ``wrong``."""
    if record.get("error") or record.get("grade_error"):
        return "failed"
    return "correct" if record.get("correct") else "wrong"


def _labels(settings: list[RunSettings], run_dirs: list[Path]) -> list[str]:
    """A name per run: its method, with the model (then the folder) added where methods repeat."""
    labels = [s.method for s in settings]
    if len(set(labels)) < len(labels):
        labels = [f"{s.method} ({s.model or '-'})" if labels.count(s.method) > 1 else s.method for s in settings]
    if len(set(labels)) < len(labels):
        labels = [f"{lab} [{d.name}]" if labels.count(lab) > 1 else lab for lab, d in zip(labels, run_dirs)]
    return labels


def _result_class(method: str) -> type[GraphResult] | None:
    try:
        return family_of(method).result
    except KeyError:  # a run of a graph this version does not have: shown field by field
        return None


def _family_part(cls: type[GraphResult] | None, rec: dict[str, Any]) -> tuple[list[TraceSection], set[str]]:
    """The family's sections for one record, and the record keys they cover."""
    if cls is None:
        return [], set()
    try:
        keys = set(cls.from_state(rec).record())
    except Exception:  # a record that does not fit: report_sections says so and shows its fields
        keys = set(cls.model_fields) - set(GraphResult.model_fields)
    try:
        return cls.report_sections(rec), keys
    except Exception as exc:  # a drawing bug must not lose the report: show the fields as stored
        note = f"{cls.__name__}.report_sections failed: {type(exc).__name__}: {exc}; shown as stored"
        own = {k: rec[k] for k in keys if k in rec}
        return [TraceSection(title="trace", status="bad", note=note)] + field_sections(own, cls.model_fields), keys


def _png(data: bytes, alt: str) -> str:
    return f'<img class="plot" alt="{esc(alt)}" src="data:image/png;base64,{base64.b64encode(data).decode()}">'


def _comparison_plot(labels: list[str], c: RunComparison) -> str:
    """Accuracy, LLM calls per question and latency per question of each run, as one PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sums = [s for _, _, s in c.runs]
    panels = [("accuracy (%)", [s["overall"]["accuracy"] * 100 for s in sums]),
              ("LLM calls / question", [s["cost"]["per_question_llm_calls"] for s in sums]),
              ("latency / question (s)", [s["cost"]["mean_latency_s"] for s in sums])]
    fig, axes = plt.subplots(1, 3, figsize=(max(9.0, 1.3 * len(labels) * 3), 3.4), squeeze=False)
    for ax, (title, vals) in zip(axes[0], panels):
        bars = ax.bar(range(len(labels)), vals, color="#4f6dbd")
        ax.set_xticks(range(len(labels)), labels, rotation=20 if len(labels) > 3 else 0, ha="right" if len(labels) > 3 else "center",
                      fontsize=8)
        for b, v in zip(bars, vals):
            ax.text(b.get_x() + b.get_width() / 2, b.get_height(), f"{v:.3g}", ha="center", va="bottom", fontsize=8)
        ax.set_title(title, fontsize=10)
        ax.margins(y=0.15)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    return _png(buf.getvalue(), "comparison of the runs: accuracy, LLM calls and latency per question")


def _benchmark_parts(run_dirs: list[str | Path], c: RunComparison) -> tuple[str, str]:
    """The benchmark's own comparison tables (e.g. REAPER's Table 1) and PlanRAG's Figure 5 plot (accuracy on SR and
    MR questions per method); a part that cannot be made (the data is not on this machine …) becomes a note."""
    try:
        extra = benchmark_comparison(c, run_dirs)
        tables = f"<pre>{esc(extra)}</pre>" if extra else ""
    except Exception as exc:  # the report is still written without it
        tables = f'<div class="note">the benchmark\'s own comparison could not be made: {esc(type(exc).__name__)}: {esc(exc)}</div>'
    try:
        with tempfile.TemporaryDirectory() as tmp:
            png = plot_comparison(run_dirs, Path(tmp) / "split.png").read_bytes()
        figure = _png(png, "accuracy on single- and multi-retrieval questions per method (PlanRAG's Figure 5)")
    except Exception as exc:
        figure = f'<div class="note">the SR/MR plot could not be drawn: {esc(type(exc).__name__)}: {esc(exc)}</div>'
    return tables, figure


def _runs_table(labels: list[str], c: RunComparison, run_dirs: list[Path]) -> str:
    rows = []
    for lab, (st, recs, _), d in zip(labels, c.runs, run_dirs):
        outs = [outcome_of(r) for r in recs.values()]
        try:
            fam = family_of(st.method).title
        except KeyError:
            fam = "(unknown method)"
        rows.append({"run": lab, "family": fam, "model": st.model or "-", "benchmark": st.benchmark, "data": st.data,
                     "questions": len(outs), "correct": outs.count("correct"), "wrong": outs.count("wrong"),
                     "failed": outs.count("failed"), "folder": str(d), "created": st.created})
    return value_html(rows)


def _result(label: str, cls: type[GraphResult] | None, rec: dict[str, Any], open_: bool) -> str:
    outcome = outcome_of(rec)
    answer = str(rec.get("answer") or "")
    short = answer if len(answer) <= 100 else answer[:100] + "…"
    tokens = (rec.get("input_tokens") or 0) + (rec.get("output_tokens") or 0)
    summary = (f'<b>{esc(label)}</b><span class="badge {outcome}">{outcome}</span>'
               f'<span class="ans">{esc(short) if short else "(no answer)"}</span>'
               f'<span class="cost">{esc(rec.get("llm_calls", 0))} LLM calls · {esc(tokens)} tokens · '
               f'{esc(rec.get("latency_s", 0))} s</span>')
    common = {"answer": answer, "gold": rec.get("gold"), "stop reason": rec.get("stop_reason"), "error": rec.get("error"),
              "retrievals": f"{rec.get('retrievals', 0)} ({rec.get('retrieval_errors', 0)} failed)",
              "LLM calls": rec.get("llm_calls"),
              "tokens": f"{rec.get('input_tokens', 0)} prompt + {rec.get('output_tokens', 0)} completion",
              "LLM time (s)": rec.get("llm_seconds"), "latency (s)": rec.get("latency_s"), "attempts": rec.get("attempts")}
    sections, family_keys = _family_part(cls, rec)
    grade = {k: v for k, v in rec.items() if k not in _RUNNER_KEYS and k not in family_keys}
    grade_sec = [TraceSection(title="Grade and item", fields=grade)] if grade else []
    body = sections_html([TraceSection(title="Result", fields=common, status="bad" if outcome == "failed" else "")]
                         + grade_sec + sections)
    return (f'<details class="result {outcome}" data-method="{esc(label)}" data-outcome="{outcome}"{" open" if open_ else ""}>'
            f"<summary>{summary}</summary>{body}</details>")


def _natural(key: str) -> list[Any]:
    return [(0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.split(r"(\d+)", key)]


def _questions(labels: list[str], c: RunComparison) -> tuple[str, int]:
    classes = [_result_class(st.method) for st, _, _ in c.runs]
    ids: dict[str, dict[str, Any]] = {}
    for _, recs, _ in c.runs:
        for i, r in recs.items():
            ids.setdefault(i, r)
    total = sum(len(recs) for _, recs, _ in c.runs)
    open_ = total <= OPEN_UP_TO
    out = []
    for n, qid in enumerate(sorted(ids, key=_natural), 1):
        first = ids[qid]
        text = str(first.get("question") or "")
        head = text if len(text) <= 200 and "\n" not in text else text.split("\n")[0][:200] + " …"
        parts = [f'<section class="question" id="q{n}"><h3><span class="qid">{esc(qid)}</span>{esc(head)}</h3>']
        if head != text:
            parts.append(f"<details><summary>full question</summary>{value_html(text)}</details>")
        parts.append(f'<div class="muted">gold: {esc(first.get("gold", ""))}</div>')
        missing = [lab for lab, (_, recs, _) in zip(labels, c.runs) if qid not in recs]
        for lab, cls, (_, recs, _) in zip(labels, classes, c.runs):
            if qid in recs:
                parts.append(_result(lab, cls, recs[qid], open_))
        if missing:
            parts.append(f'<div class="note">no result in: {esc(", ".join(missing))}</div>')
        out.append("".join(parts) + "</section>")
    return "".join(out), total


def _filters(labels: list[str], c: RunComparison) -> str:
    outs = [outcome_of(r) for _, recs, _ in c.runs for r in recs.values()]
    radios = "".join(f'<label><input type="radio" name="outcome" value="{o}"{" checked" if o == "all" else ""}> {o} '
                     f'({len(outs) if o == "all" else outs.count(o)})</label> ' for o in ("all", "correct", "wrong", "failed"))
    boxes = "".join(f'<label><input type="checkbox" name="method" value="{esc(lab)}" checked> {esc(lab)}</label> '
                    for lab in labels)
    return (f'<form id="filters" hidden><fieldset><legend>outcome</legend>{radios}</fieldset>'
            f'<fieldset><legend>method</legend>{boxes}</fieldset>'
            f'<button type="button" id="expand">expand all</button> <button type="button" id="collapse">collapse all</button> '
            f'<span id="shown" class="muted"></span></form>')


def render_html_report(run_dirs: list[str | Path], title: str = "") -> str:
    """The whole page for the run folders (see the module docstring)."""
    dirs = [Path(d) for d in run_dirs]
    c = comparison(list(run_dirs))
    labels = _labels([st for st, _, _ in c.runs], dirs)
    benchmarks = sorted({st.benchmark for st, _, _ in c.runs})
    title = title or f"ragplan report: {', '.join(labels)} on {', '.join(benchmarks)}"
    extra, split_plot = _benchmark_parts(list(run_dirs), c) if c.runs else ("", "")
    plots = [_comparison_plot(labels, c), split_plot] if c.runs else []
    for lab, d in zip(labels, dirs):
        png = d / "plot.png"
        if png.exists() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n":
            plots.append(f"<figure><figcaption>{esc(lab)}</figcaption>{_png(png.read_bytes(), f'{lab}: accuracy plot')}</figure>")
    questions, total = _questions(labels, c)
    table = value_html([dict(zip(c.headers, row)) for row in c.rows])
    digest = base64.b64encode(hashlib.sha256(_JS.encode()).digest()).decode()
    csp = f"default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'sha256-{digest}'"
    return "".join([
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{esc(csp)}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{esc(title)}</title><style>{_CSS}</style></head><body>",
        f'<h1>{esc(title)}</h1><div class="muted">written {esc(datetime.now().isoformat(timespec="seconds"))} · '
        f"{len(dirs)} run(s) · {total} result(s)</div>",
        f'<h2 id="runs">Runs</h2>{_runs_table(labels, c, dirs)}',
        f'<h2 id="comparison">Comparison</h2>{table}<div class="note">({esc(c.note)})</div>{extra}',
        f'<h2 id="plots">Plots</h2>{"".join(plots) or "<p class=muted>no plots</p>"}',
        f'<h2 id="questions">Questions</h2>{_filters(labels, c)}{questions or "<p class=muted>no results yet</p>"}',
        f"<script>{_JS}</script></body></html>\n",
    ])


def write_html_report(run_dirs: list[str | Path], out: str | Path, title: str = "") -> Path:
    """Render the page and write it atomically to ``out`` (folders created); returns the path."""
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, render_html_report(run_dirs, title))
    return path
