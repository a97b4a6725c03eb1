"""Test data of each method family for tests/test_entry_points.py: one module per family, named as the family.

Each module exports ``make(root: Path) -> FamilyData``: the data flags of ``ragplan ask``, the settings of
``api.ask``, a small benchmark for ``ragplan eval`` (all written under ``root`` by the test), and how the
schema-filling stub LLM is steered so each graph really retrieves.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

__all__ = ["FamilyData", "once"]


def once(path: Path, build: Callable[[Path], Any]) -> Path:
    """``path`` (a file or folder) made by ``build(path)`` unless a finished build is there (its ``<name>.built``
    mark): in the folder the test workers share (tests/conftest.py ``every_family_data``) the first ``make`` builds
    the data and the others reuse it, never rewriting a file another worker may be reading."""
    mark = path.with_name(path.name + ".built")
    if not mark.exists():
        build(path)
        mark.touch()
    return path


@dataclass
class FamilyData:
    """What one family's graphs need in the tests: data flags, API settings, a benchmark, the stub's steering."""

    cli: Callable[[str], list[str]]
    """``ragplan ask`` flags naming the method's data (by method name)."""
    api: Callable[[str], dict[str, Any]]
    """``ragplan.api.ask`` keyword arguments naming the method's data."""
    eval: Callable[[str], list[str]]
    """``ragplan eval`` flags: ``--benchmark B --data PATH`` and any options (``--limit 1`` is added)."""
    question: str
    overrides: dict[str, Any] = field(default_factory=dict)
    """Stub replies by forced tool (schema) name: a dict merged over the schema-filled reply, or a function of the request."""
    text: str = "No retrieval needed."
    """The stub's reply to free-text calls."""
    endless: dict[str, Any] = field(default_factory=dict)
    """Replies by forced tool (``"text"`` for free-text calls) that would keep the family's loop going forever
    (re-plan, search again, never finish): the malformed-output corpus checks that the loop's bound ends it."""
