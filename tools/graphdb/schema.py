"""Graph schema (PlanRAG's ``(:Label {prop, …})`` style, with an example value and counts) and rows, for a prompt."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any, Iterator

__all__ = ["GraphSchema", "LabelInfo", "RelInfo", "merge_examples", "format_value", "format_rows"]


@dataclass
class LabelInfo:
    """A node label with its count and property keys (each with one example value)."""

    label: str
    count: int
    properties: dict[str, Any] = field(default_factory=dict)


@dataclass
class RelInfo:
    """A relationship type between two labels with its count and property keys."""

    type: str
    source: str
    target: str
    count: int
    properties: dict[str, Any] = field(default_factory=dict)


@dataclass
class GraphSchema:
    """What a store holds: labels and relationship types with property keys and example values."""

    labels: list[LabelInfo] = field(default_factory=list)
    relationships: list[RelInfo] = field(default_factory=list)

    def to_prompt(self) -> str:
        """Render the schema as prompt text: one line per label and per relationship pattern."""
        out = ["Nodes (label {property: example value}) and their counts:"]
        out += [f"  (:{lab.label} {_props(lab.properties)})  -- {lab.count} nodes" for lab in self.labels]
        out.append("Relationships (direction as stored) and their counts:")
        out += [f"  (:{r.source})-[:{r.type} {_props(r.properties)}]->(:{r.target})  -- {r.count} relationships"
                for r in self.relationships]
        if not self.labels:
            out.append("  (the graph is empty)")
        return "\n".join(out)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form of the schema."""
        return asdict(self)


def _props(props: dict[str, Any], limit: int = 0) -> str:
    return "{" + _join((f"{k}: {format_value(v, quote=True, limit=limit)}" for k, v in props.items()), limit) + "}"


def _join(parts: Iterator[str], limit: int) -> str:
    """``", ".join(parts)``, ending in ``…`` once past ``limit`` characters (if ``limit``)."""
    out, size = [], 0
    for part in parts:
        if limit and size > limit:
            out.append("…")
            break
        out.append(part)
        size += len(part) + 2
    return ", ".join(out)


def merge_examples(maps: list[dict[str, Any]]) -> dict[str, Any]:
    """Union of the keys of ``maps`` (first-seen order) with the first non-null value of each."""
    out: dict[str, Any] = {}
    for m in maps:
        for k, v in m.items():
            if k not in out or out[k] is None:
                out[k] = v
    return out


def format_value(value: Any, *, quote: bool = False, limit: int = 0) -> str:
    """Render one value compactly: floats to 6 significant digits, strings bare (or quoted); lists and maps end in
    ``…`` once past ``limit`` characters (if ``limit``)."""
    if value is None or isinstance(value, bool):
        return json.dumps(value)  # null, true, false
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value)
        text = f"{value:.6g}"
        return text if any(ch in text for ch in ".en") else text + ".0"  # keep floats visibly floats
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False) if quote else value
    if isinstance(value, dict):
        if "labels" in value and "properties" in value:  # a node
            return f"(:{':'.join(value['labels'])} {_props(value['properties'], limit)})"
        if "type" in value and "properties" in value and "start" in value:  # a relationship
            return f"[:{value['type']} {_props(value['properties'], limit)}]"
        return _props(value, limit)
    if isinstance(value, (list, tuple)):
        return "[" + _join((format_value(v, quote=True, limit=limit) for v in value), limit) + "]"
    return str(value)


def format_rows(columns: list[str], rows: list[dict[str, Any]], total_rows: int | None = None,
                total_exact: bool = True, max_chars: int = 0) -> str:
    """Render result rows as a compact ``a | b`` table with a note when rows were cut by the cap; with ``max_chars``,
    formatting stops soon after that many characters (the caller cuts the text there)."""
    if not rows:
        return f"columns: {' | '.join(columns)}\n(no rows)" if columns else "(no rows)"
    lines, size = [" | ".join(columns)], 0
    for r in rows:
        if max_chars and size > max_chars:
            break
        lines.append(" | ".join(format_value(r.get(c), limit=max_chars) for c in columns))
        size += len(lines[-1]) + 1
    if total_rows is not None and total_rows > len(rows):
        lines.append(f"({len(rows)} of {'' if total_exact else 'at least '}{total_rows} rows shown: the row cap was "
                     "reached; aggregate, filter or ORDER BY … LIMIT to see what matters)")
    return "\n".join(lines)
