"""HTML for run-record values and trace sections, every piece of text escaped.

Records hold LLM output (answers, thoughts, queries, observations), so nothing from a record reaches the
page unescaped: every string goes through :func:`html.escape`, attribute values included. Values are
drawn by their shape (see :mod:`ragplan.state.trace_sections`): a list of dicts is a table, a list of
short values an ordered list, a dict a list of labelled values, a long or multi-line string
preformatted text. Very long strings are cut (the run folder keeps them whole).
"""

from __future__ import annotations

import html
import json
from typing import Any

from ragplan.state.trace_sections import TraceSection

__all__ = ["esc", "value_html", "sections_html", "MAX_TEXT"]

MAX_TEXT = 20_000
"""Characters of one string shown in a report; the rest is cut with a note (results.jsonl keeps it all)."""

_MAX_DEPTH = 5
_MAX_ROWS = 200


def esc(value: Any) -> str:
    """``value`` as text safe inside HTML elements and quoted attributes."""
    return html.escape(str(value), quote=True)


def _cut(text: str) -> str:
    if len(text) <= MAX_TEXT:
        return esc(text)
    return esc(text[:MAX_TEXT]) + f'<span class="cut"> … {len(text) - MAX_TEXT} more characters in results.jsonl</span>'


def _scalar(v: Any, cell: bool = False) -> str:
    if v is None:
        return '<span class="none">–</span>'
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return esc(f"{v:.4g}")
    if isinstance(v, int):
        return esc(v)
    text = str(v)
    if not text:
        return '<span class="none">–</span>'
    if "\n" in text or (len(text) > 160 and not cell):  # in a table cell long prose wraps; lines keep their breaks
        return f"<pre>{_cut(text)}</pre>"
    return f"<span>{_cut(text)}</span>"


def _table(rows: list[dict[str, Any]], depth: int) -> str:
    cols: list[str] = []
    for r in rows:
        cols += [k for k in r if k not in cols]
    head = "".join(f"<th>{esc(c)}</th>" for c in cols)
    body = "".join("<tr>" + "".join(f"<td>{value_html(r.get(c), depth + 1, cell=True)}</td>" for c in cols) + "</tr>"
                   for r in rows[:_MAX_ROWS])
    more = f'<p class="cut">… {len(rows) - _MAX_ROWS} more rows in results.jsonl</p>' if len(rows) > _MAX_ROWS else ""
    return f'<div class="scroll"><table class="data"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>{more}'


def value_html(v: Any, depth: int = 0, cell: bool = False) -> str:
    """Any JSON value as HTML, by its shape (nested values too, to a bounded depth); ``cell``: inside a table."""
    if depth > _MAX_DEPTH:
        return f"<pre>{_cut(json.dumps(v, ensure_ascii=False, default=str))}</pre>"
    if isinstance(v, dict):
        if not v:
            return '<span class="none">–</span>'
        return "<dl>" + "".join(f"<dt>{esc(k)}</dt><dd>{value_html(x, depth + 1)}</dd>" for k, x in v.items()) + "</dl>"
    if isinstance(v, (list, tuple)):
        if not v:
            return '<span class="none">–</span>'
        if all(isinstance(x, dict) for x in v):
            return _table(list(v), depth)
        return "<ol>" + "".join(f"<li>{value_html(x, depth + 1)}</li>" for x in v[:_MAX_ROWS]) + "</ol>"
    return _scalar(v, cell)


def _fields(fields: dict[str, Any]) -> str:
    shown = {k: v for k, v in fields.items() if v is not None and v != "" and v != [] and v != {}}
    if not shown:
        return ""
    return '<dl class="fields">' + "".join(f"<dt>{esc(k)}</dt><dd>{value_html(v, 1)}</dd>" for k, v in shown.items()) + "</dl>"


def _section(s: TraceSection, depth: int) -> str:
    parts = [f'<div class="sec-title">{esc(s.title)}</div>']
    if s.note:
        parts.append(f'<div class="note">{esc(s.note)}</div>')
    parts.append(_fields(s.fields))
    if s.text:
        parts.append(f"<pre>{_cut(s.text)}</pre>")
    if s.value is not None and s.value != [] and s.value != {} and s.value != "":
        parts.append(value_html(s.value, 1))
    if s.items and depth < _MAX_DEPTH:
        parts.append('<ol class="items">' + "".join(f"<li>{_section(x, depth + 1)}</li>" for x in s.items) + "</ol>")
    cls = "sec" + (f" {s.status}" if s.status else "")
    return f'<div class="{cls}">' + "".join(parts) + "</div>"


def sections_html(sections: list[TraceSection]) -> str:
    """Trace sections as nested blocks (title, note, labelled fields, preformatted text, value, sub-parts)."""
    return "".join(_section(s, 0) for s in sections)
