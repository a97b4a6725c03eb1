"""A question's trace as report sections: what a family's result shows of its run record, without saying how to
draw it. A renderer (:mod:`ragplan.eval.html_report`) draws values by their shape: a list of dicts is a table, a list
of strings an ordered list, a long or multi-line string preformatted text, a dict a list of labelled values."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field
from pydantic.fields import FieldInfo

__all__ = ["TraceSection", "field_sections", "excerpt"]


class TraceSection(BaseModel):
    """One titled part of a question's trace (a plan version, a retrieval step, the evidence …)."""

    title: str = Field(description="What the part is, e.g. 'Plan v1' or 'Step 2 · graph_db'.")
    note: str = Field(default="", description="One line under the title (a reason, a description of the field).")
    status: Literal["", "ok", "bad"] = Field(
        default="", description="bad: a failure to see at a glance (a refused query, an invalid plan); ok: a success.")
    fields: dict[str, Any] = Field(default_factory=dict, description="Labelled values, in order, drawn by their shape.")
    text: str = Field(default="", description="Preformatted text: a query, a plan as printed, an observation.")
    value: Any = Field(default=None, description="Any JSON value, drawn by its shape (a list of dicts is a table).")
    items: list["TraceSection"] = Field(default_factory=list, description="Ordered sub-parts (steps, iterations …).")


def field_sections(values: dict[str, Any], described: dict[str, FieldInfo] | None = None) -> list[TraceSection]:
    """One section per non-empty value, titled by its key, noted with the field's description when known."""
    return [TraceSection(title=key.replace("_", " "), value=value,
                         note=getattr((described or {}).get(key), "description", None) or "")
            for key, value in values.items() if value not in (None, "", [], {})]


def excerpt(text: str, limit: int = 200) -> str:
    """A display copy of ``text`` (the normalised answer, a draft quoted in a decision): cut at ``limit`` characters
    with "…", so a record never repeats a large text in full."""
    return text if len(text) <= limit else text[:limit] + "…"
