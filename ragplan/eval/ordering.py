"""The order of group values in tables and plots: known ordinal scales in their order, else natural order
(numbers as numbers, before words), ``None`` last (docs/evaluation.md, "Order of groups")."""

from __future__ import annotations

import re
from typing import Iterable

__all__ = ["ORDINAL_SCALES", "ordered_categories"]

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


def _scale_for(values: list[str]) -> tuple[str, ...] | None:
    present = {v.strip().lower() for v in values}
    for scale in ORDINAL_SCALES:  # a scale may hold a word that otherwise means "missing" (none < SR < MR)
        if (present - _MISSING) and present - (_MISSING - set(scale)) <= set(scale):
            return scale
    return None


def _natural(text: str) -> tuple:
    """Text with its numbers compared as numbers: ``2hop`` < ``3hop1`` < ``10hop``; a number alone first."""
    parts = _NUMBER.split(text.strip())
    return tuple((0, float(p), "") if i % 2 else (1, 0.0, p) for i, p in enumerate(parts) if i % 2 or p)


def ordered_categories(values: Iterable[object]) -> list[str]:
    """The distinct values (as strings) in reading order (see the module docstring)."""
    vals = list(dict.fromkeys(str(v) for v in values))
    scale = _scale_for(vals)

    def key(v: str) -> tuple:
        low = v.strip().lower()
        if scale is not None and low in scale:
            return (0, float(scale.index(low)), low)
        if low in _MISSING:
            return (2, 0.0, low)
        return (1, 0.0, _natural(low))

    return sorted(vals, key=key)
