"""Which products fit which (``compatible_products``, by attributes only), and product-type names."""

from __future__ import annotations

import re
from typing import Any

from ragplan.tools.retail.catalog import TYPE_SYNONYMS

__all__ = ["compatibility", "resolve_product_type", "singular"]


def _num(v: Any) -> float | None:
    m = re.search(r"\d+(?:\.\d+)?", str(v or ""))
    return float(m.group()) if m else None


def compatibility(base: dict[str, Any], cand: dict[str, Any]) -> str | None:
    """Why ``cand`` fits ``base`` (a short reason), or None when it does not; reads attributes only."""
    a, b = base["attributes"], cand["attributes"]
    a_fits, b_fits = set(a.get("compatible_with") or []), set(b.get("compatible_with") or [])
    if a.get("model") and a["model"] in b_fits:
        return f"made for the {a['model']}"
    if b.get("model") and b["model"] in a_fits:
        return f"the base product is made for the {b['model']}"
    if a_fits & b_fits:
        return f"both fit the {', '.join(sorted(a_fits & b_fits))}"
    if a.get("tire_size") and a["tire_size"] in (b.get("tire_sizes") or []):
        return f"fits tire size {a['tire_size']}"
    if b.get("tire_size") and b["tire_size"] in (a.get("tire_sizes") or []):
        return f"is tire size {b['tire_size']}, which the base product fits"
    if a.get("tire_size") and a["tire_size"] == b.get("tire_size"):
        return f"same tire size {a['tire_size']}"
    if a.get("pod_format") and a["pod_format"] == b.get("pod_format"):
        return f"uses {a['pod_format']} pods"
    if base["product_type"] == "laptops" and b.get("fits_laptops_up_to"):
        if (_num(a.get("screen_size")) or 99) <= (_num(b["fits_laptops_up_to"]) or 0):
            return f"holds laptops up to {b['fits_laptops_up_to']} (base is {a.get('screen_size')})"
    if cand["product_type"] == "laptops" and a.get("fits_laptops_up_to"):
        if (_num(b.get("screen_size")) or 99) <= (_num(a["fits_laptops_up_to"]) or 0):
            return f"its {b.get('screen_size')} screen fits a bag for up to {a['fits_laptops_up_to']}"
    return None


def singular(word: str) -> str:
    """A plural word's singular, roughly (``batteries`` → ``battery``, ``cases`` → ``case``, ``boxes`` → ``box``)."""
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("sses", "xes", "ches", "shes", "zzes")):
        return word[:-2]
    return word[:-1] if word.endswith("s") and not word.endswith("ss") and len(word) > 3 else word


def _norm(text: str) -> tuple[str, ...]:
    return tuple(singular(w) for w in re.findall(r"[a-z0-9\-]+", text.lower()))


def resolve_product_type(text: str) -> str | None:
    """The product type a free-text name means (``"ink cartridge"`` → ``ink cartridges``), or None."""
    q = _norm(text)
    if not q:
        return None
    best, best_score = None, 0.0
    for t, syns in TYPE_SYNONYMS.items():
        for name in (t, *syns):
            n = _norm(name)
            if n == q:
                return t
            shared = len(set(n) & set(q))
            score = shared / len(set(n) | set(q)) + (0.5 if shared == len(set(n)) else 0.0) if shared else 0.0
            if score > best_score:
                best, best_score = t, score
    return best
