"""Graph schema (PlanRAG's ``(:Label {prop, …})`` style, with an example value and counts) and rows, for a prompt."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any

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


def _props(props: dict[str, Any]) -> str:
    return "{" + ", ".join(f"{k}: {format_value(v, quote=True)}" for k, v in props.items()) + "}"


def merge_examples(maps: list[dict[str, Any]]) -> dict[str, Any]:
    """Union of the keys of ``maps`` (first-seen order) with the first non-null value of each."""
    out: dict[str, Any] = {}
    for m in maps:
        for k, v in m.items():
            if k not in out or out[k] is None:
                out[k] = v
    return out


def format_value(value: Any, *, quote: bool = False) -> str:
    """Render one value compactly: floats to 6 significant digits, strings bare (or quoted)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value)
        text = f"{value:.6g}"
        return text if any(ch in text for ch in ".en") else text + ".0"  # keep floats visibly floats
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False) if quote else value
    if isinstance(value, dict):
        if "labels" in value and "properties" in value:  # a node
            return f"(:{':'.join(value['labels'])} {_props(value['properties'])})"
        if "type" in value and "properties" in value and "start" in value:  # a relationship
            return f"[:{value['type']} {_props(value['properties'])}]"
        return _props(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(format_value(v, quote=True) for v in value) + "]"
    return str(value)


def format_rows(columns: list[str], rows: list[dict[str, Any]], total_rows: int | None = None,
                total_exact: bool = True) -> str:
    """Render result rows as a compact ``a | b`` table with a note when rows were cut by the cap."""
    if not rows:
        return f"columns: {' | '.join(columns)}\n(no rows)" if columns else "(no rows)"
    lines = [" | ".join(columns)]
    lines += [" | ".join(format_value(r.get(c)) for c in columns) for r in rows]
    if total_rows is not None and total_rows > len(rows):
        lines.append(f"({len(rows)} of {'' if total_exact else 'at least '}{total_rows} rows shown: the row cap was "
                     "reached; aggregate, filter or ORDER BY … LIMIT to see what matters)")
    return "\n".join(lines)
