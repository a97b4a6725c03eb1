"""The evaluation's figures (matplotlib's Agg backend, no pyplot) and text tables; categories in reading order
(docs/evaluation.md, "Order of groups"): known ordinal scales in their order, else natural order, ``None`` last."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path
from typing import IO, Any, Iterable, Literal, Mapping, Sequence

from ragplan.jsonl import atomic_write, saved_bytes

__all__ = ["metric_label", "plot_run", "plot_sweep", "plot_retrieval_split", "plot_costs", "ORDINAL_SCALES",
           "ordered_categories", "format_table", "score_cell"]

ORDINAL_SCALES: tuple[tuple[str, ...], ...] = (
    ("easy", "medium", "hard"),
    ("low", "medium", "high"),
    ("small", "medium", "large"),
    ("none", "sr", "mr"),
    ("supports", "refutes", "not enough info"),
    ("yes", "no"),
    ("true", "false"),
    ("train", "dev", "test"),
)
"""Known ordinal scales (compared in lower case); a set of values that fits one scale takes its order."""

_NUMBER = re.compile(r"(\d+(?:\.\d+)?)")
_MISSING = {"none", "null", "nan", ""}


def _natural(text: str) -> tuple:
    """Text with its numbers compared as numbers: ``2hop`` < ``3hop1`` < ``10hop``; a number alone first."""
    parts = _NUMBER.split(text.strip())
    return tuple((0, float(p), "") if i % 2 else (1, 0.0, p) for i, p in enumerate(parts) if i % 2 or p)


def ordered_categories(values: Iterable[object]) -> list[str]:
    """The distinct values (as strings) in reading order (see the module docstring)."""
    vals = list(dict.fromkeys(str(v) for v in values))
    present = {v.strip().lower() for v in vals}  # a scale may hold a word that otherwise means "missing" (none < MR)
    scale = next((s for s in ORDINAL_SCALES if (present - _MISSING) and present - (_MISSING - set(s)) <= set(s)), None)

    def key(v: str) -> tuple:
        low = v.strip().lower()
        if scale is not None and low in scale:
            return (0, float(scale.index(low)), low)
        if low in _MISSING:
            return (2, 0.0, low)
        return (1, 0.0, _natural(low))

    return sorted(vals, key=key)


def score_cell(v: Any) -> str:
    """A score as a table shows it: ``-`` when there is none, else three decimals."""
    return "-" if v is None else f"{v:.3f}" if isinstance(v, (int, float)) else str(v)


def format_table(head: Sequence[Any], rows: Iterable[Sequence[Any]], *, right: bool = False,
                 style: Literal["markdown", "md", "grid", "plain"] = "markdown") -> str:
    """Rows under a header as text: ``markdown`` (padded), ``md`` (unpadded), ``grid`` (`` | `` and ``-+-``) or
    ``plain`` (two spaces, no rule); ``right``: every column but the first right-aligned."""
    cells = [[str(c) for c in r] for r in [head, *rows]]
    widths = [0 if style == "md" else max(len(r[i]) for r in cells) for i in range(len(head))]

    def line(r: list[str]) -> str:
        vals = [c.rjust(w) if right and i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))]
        if style in ("markdown", "md"):
            return "| " + " | ".join(vals) + " |"
        return (" | " if style == "grid" else "  ").join(vals).rstrip()

    rules = {"markdown": "|" + "|".join("-" * (w + 2) for w in widths) + "|", "md": "|---" * len(head) + "|",
             "grid": "-+-".join("-" * w for w in widths)}
    return "\n".join([line(cells[0]), *([rules[style]] if style in rules else []), *map(line, cells[1:])])


_NAMES = {"em": "EM", "f1": "F1", "label_acc": "label accuracy", "accuracy": "accuracy",
          "retrieval_ratio": "retrieval ratio", "subquery_retrieval_ratio": "sub-query retrieval ratio"}
_COLOURS = ("#3b6fb6", "#e08a2e", "#4e9a57", "#8a5aa8", "#c4453c", "#6b6b6b", "#2ba3a3", "#b59a2e")
_WRAP = 14
# few y ticks and fixed label places: a run's plot is drawn at the end of every run, and text is most of its cost
_YTICKS = (0, 50, 100)


def metric_label(name: str) -> str:
    """How a metric is named on a figure (``em`` → ``EM``, ``retrieval_ratio`` → ``retrieval ratio``)."""
    return _NAMES.get(name, name.replace("_", " "))


def _figure(figsize: tuple[float, float]) -> Any:
    """A figure on its own Agg canvas, outside pyplot (no figure manager to register, nothing to close)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize)
    FigureCanvasAgg(fig)
    return fig


def _save(fig: Any, path: str | Path | IO[bytes], tight: bool = True) -> Any:
    """Write ``fig`` (laid out tight unless placed by hand) as a PNG at 100 dpi, zlib level 1, unhinted glyphs."""
    import matplotlib

    if tight:
        fig.tight_layout()

    def save(f: IO[bytes]) -> None:
        fig.savefig(f, format="png", dpi=100, pil_kwargs={"compress_level": 1})

    with matplotlib.rc_context({"text.hinting": "no_hinting"}):
        if isinstance(path, (str, Path)):
            atomic_write(path, saved_bytes(save))  # (written whole)
        else:
            save(path)
    return fig


def _wrap(label: str, width: int) -> str:
    return "\n".join(textwrap.wrap(str(label), width, break_long_words=True)) or str(label)


def _layout(categories: Sequence[str], n_series: int) -> tuple[list[str], dict[str, Any], float, float]:
    """Tick labels, their style, the panel width and the labels' height (inches) that keep labels apart."""
    level = [_wrap(c, _WRAP) for c in categories]
    widest = max((len(line) for lab in level for line in lab.split("\n")), default=1)
    bars = 0.3 + 0.25 * max(1, n_series)
    slot = max(bars, 0.075 * widest + 0.15)
    if len(categories) <= 4 or slot <= 0.9:
        return level, {}, len(categories) * slot + 1.0, 0.2 * max((lab.count("\n") + 1 for lab in level), default=1)
    upright = [_wrap(c, 24) for c in categories]
    lines = max(lab.count("\n") + 1 for lab in upright)
    longest = max(len(line) for lab in upright for line in lab.split("\n"))
    return upright, {"rotation": 90, "ha": "center"}, len(categories) * max(bars, 0.2 * lines + 0.15) + 1.0, 0.075 * longest + 0.2


def _pct(v: Any) -> float:
    return 100.0 * float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0.0


def _bars(ax: Any, categories: list[str], series: list[tuple[str, list[Any]]], counts: list[int] | None,
          name: Any = metric_label, bar_counts: Sequence[Sequence[int]] | None = None) -> None:
    """Grouped bars: one group per category, one bar per series (values are shares, drawn in %; None: no bar);
    ``n`` over each category (``counts``) or over each bar (``bar_counts``, one list per series)."""
    width = 0.8 / max(1, len(series))
    for k, (label, vals) in enumerate(series):
        xs = [i - 0.4 + width * (k + 0.5) for i in range(len(categories))]
        shown = [(x, _pct(v)) for x, v in zip(xs, vals) if v is not None]
        ax.bar([x for x, _ in shown], [h for _, h in shown], width, label=name(label), color=_COLOURS[k % len(_COLOURS)])
        for x, v, n in zip(xs, vals, bar_counts[k] if bar_counts is not None else ()):
            ax.text(x, _pct(v) + 1, f"n={n}", ha="center", va="bottom", fontsize=6)
    if counts is not None:
        for i, n in enumerate(counts):
            ax.text(i, 102, f"n={n}", ha="center", va="bottom", fontsize=7)
            if n and all(vals[i] is None for _, vals in series):  # questions without these scores (unanswerable)
                ax.text(i, 50, "not scored", ha="center", va="center", fontsize=7, color="#666666")
    labels, style, _, _ = _layout(categories, len(series))
    ax.set_xticks(range(len(categories)), labels, **style)
    ax.set_xlim(-0.6, len(categories) - 0.4)
    ax.set_ylim(0, 112)
    ax.set_yticks(_YTICKS, [f"{t}%" for t in _YTICKS])
    from matplotlib.transforms import ScaledTranslation

    inches = ax.get_figure(root=True).dpi_scale_trans
    ax.yaxis.set_label_coords(0, 0.5, transform=ax.transAxes + ScaledTranslation(-0.45, 0, inches))
    ax.xaxis.set_label_coords(0.5, 0)


def plot_run(s: Mapping[str, Any], path: str | Path) -> Any:
    """A run's ``plot.png``: a panel per group key and per retrieval class, a bar per ``plot_metrics`` metric."""
    metrics = [m for m in (s.get("plot_metrics") or ["accuracy"]) if m == "accuracy" or m in (s.get("metrics") or [])]
    metrics = metrics or ["accuracy"]
    panels = [(k, v) for k, v in (s.get("groups") or {}).items() if v] + [("retrieval count", s.get("retrieval") or {})]
    panels = [(k, v) for k, v in panels if v] or [("retrieval count", {"all": s["overall"]})]
    layouts = [_layout(ordered_categories(v), len(metrics)) for _, v in panels]
    widths = [max(3.0, lay[2]) for lay in layouts]
    fig = _figure((sum(widths) + 0.5, 3.6 + max(lay[3] for lay in layouts)))
    axes = fig.subplots(1, len(panels), squeeze=False, gridspec_kw={"width_ratios": widths})
    for ax, (title, vals) in zip(axes[0], panels):
        cats = ordered_categories(vals)
        _bars(ax, cats, [(m, [vals[c].get(m) for c in cats]) for m in metrics], [int(vals[c].get("n", 0)) for c in cats])
        ax.set_title(f"by {title}", fontsize=10, y=1.0)  # y given: not moved clear of top ticks (none), no measuring
    if len(metrics) > 1:
        axes[0][0].legend(fontsize=8, loc="best")
    o = s["overall"]
    head = ", ".join(f"{metric_label(m)} {_pct(o.get(m)):.1f}%" for m in metrics if o.get(m) is not None)
    what = " on ".join(str(x) for x in (s.get("method"), s.get("benchmark")) if x)
    fig.suptitle(f"{what + ' ' if what else ''}({o.get('n', 0)} questions): {head}", fontsize=11)
    # margins in inches from what the panels hold (tight_layout measures every text box: as costly as drawing)
    w, h = fig.get_size_inches()
    bottom = 0.4 + max(lay[3] for lay in layouts)
    fig.subplots_adjust(left=0.6 / w, right=1 - 0.2 / w, top=1 - 0.75 / h, bottom=bottom / h,
                        wspace=0.7 / (sum(widths) / len(widths)))
    return _save(fig, path, tight=False)


def plot_sweep(rows: Sequence[Mapping[str, Any]], key: str, metrics: Sequence[str], path: str | Path,
               title: str = "") -> Any:
    """Scores against a swept setting (Think-then-Act Figures 3/4) from ``{"value", "overall"}`` rows."""
    values = [r["value"] for r in rows]
    numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
    xs = [float(v) for v in values] if numeric else list(range(len(values)))
    labels, style, width, _ = _layout([str(v) for v in values], 1)
    fig = _figure((max(5.0, 0.5 * len(values) + 3, 0.0 if numeric else width), 4.0))
    ax = fig.subplots()
    for k, m in enumerate(metrics):
        if pts := [(x, _pct(r["overall"].get(m))) for x, r in zip(xs, rows) if r["overall"].get(m) is not None]:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=metric_label(m),
                    linestyle="--" if "retrieval" in m else "-", color=_COLOURS[k % len(_COLOURS)])
    ax.set_xticks(xs, labels, **({} if numeric else style))
    ax.set_xlabel(key)
    ax.set_ylabel("%")
    ax.set_ylim(0, 105)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(title or f"scores against {key}", fontsize=10)
    return _save(fig, path)


def plot_retrieval_split(split: Mapping[str, Mapping[str, Any]], path: str | Path | IO[bytes], note: str = "") -> Any:
    """PlanRAG's Figure 5 from ``{benchmark: {"total", "n": {SR, MR} (the reference run's, or empty),
    "methods": {label: {SR, MR}}, "counts": {label: {SR, MR}}}}``; ``n`` over each bar."""
    cats: list[str] = []
    labels = list(dict.fromkeys(m for b in split.values() for m in b.get("methods", {})))
    for bench, b in split.items():
        total, ref_n = int(b.get("total", 0)) or 1, b.get("n") or {}
        for cls in ("SR", "MR"):
            share = f" ({int(ref_n.get(cls, 0)) / total:.0%})" if ref_n else ""
            cats.append(f"{bench} {cls}{share}" if len(split) > 1 else f"{cls}{share}")
    pairs = [(b, cls) for b in split.values() for cls in ("SR", "MR")]
    series = {m: [b.get("methods", {}).get(m, {}).get(cls) for b, cls in pairs] for m in labels}
    counts = [[int(b.get("counts", {}).get(m, {}).get(cls, 0)) for b, cls in pairs] for m in labels]
    lay = _layout(cats, len(labels))
    fig = _figure((max(5.0, lay[2] + 0.5), 3.6 + lay[3]))
    ax = fig.subplots()
    _bars(ax, cats, list(series.items()), None, name=str, bar_counts=counts)
    ax.legend(fontsize=8, loc="best")
    ax.set_ylabel("accuracy")  # the ticks say %
    ax.set_title("accuracy on single- (SR) and multi-retrieval (MR) questions" + (f"\n{note}" if note else ""), fontsize=10)
    return _save(fig, path)


def plot_costs(labels: Sequence[str], summaries: Sequence[Mapping[str, Any]], path: str | Path | IO[bytes]) -> Any:
    """Accuracy, LLM calls per question and latency per question of each run (a summary each), one panel each."""
    panels = [("accuracy (%)", [s["overall"]["accuracy"] * 100 for s in summaries]),
              ("LLM calls / question", [s["cost"]["per_question_llm_calls"] for s in summaries]),
              ("latency / question (s)", [s["cost"]["mean_latency_s"] for s in summaries])]
    fig = _figure((max(9.0, 1.3 * len(labels) * 3), 3.4))
    tilt = {"rotation": 20, "ha": "right"} if len(labels) > 3 else {}
    for ax, (title, vals) in zip(fig.subplots(1, 3, squeeze=False)[0], panels):
        colours = [_COLOURS[k % len(_COLOURS)] for k in range(len(labels))]  # a colour per run, as in the other figures
        ax.bar_label(ax.bar(range(len(labels)), vals, color=colours), fmt="{:.3g}", fontsize=8)
        ax.set_xticks(range(len(labels)), labels, fontsize=8, **tilt)
        ax.set_title(title, fontsize=10)
        ax.margins(y=0.15)
    return _save(fig, path)
