"""REAPER training data (paper §4.1–4.2): the seed pool, TEvo tool views and DQS sampling."""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

import numpy as np
from sklearn.preprocessing import normalize

from ragplan.jsonl import read_jsonl_objects
from ragplan.methods.reaper.plan import RetrievalPlan, parse_plan
from ragplan.methods.reaper.validate import check_plan
from ragplan.tools.registry import ToolRegistry, ToolSpec

__all__ = ["DESCRIPTION_PARAPHRASES", "DatagenError", "SeedExample", "ToolView", "sample_examples", "load_seed_examples",
           "load_query_pool", "evolve_tools", "rename_plan", "template_variants", "diverse_query_sample"]

DESCRIPTION_PARAPHRASES: dict[str, list[str]] = {
    "prod_search": [
        "Searches the catalogue for items that fit what the customer is shopping for and returns the top hits "
        "(id, title, price, rating). Good for requests for options, ideas or recommendations.",
        "Finds products for a free-text need such as 'waterproof hiking boots'; gives back the best-matching "
        "product ids with their titles, prices and star ratings.",
        "Product finder: turns a short description of a wanted item into a ranked list of matching products.",
    ],
    "prod_qna": [
        "Answers one question about one product, using its attributes, seller Q&A and description. Give it the "
        "product id and the question.",
        "Looks up facts about a single item (size, material, compatibility, ingredients, ...) relevant to a "
        "question. Inputs: product id, question.",
        "Product fact lookup: returns the attribute values and text snippets of the given product that best "
        "answer the question asked about it.",
    ],
    "review_summary": [
        "Condenses the customer reviews of one product: mean rating, the star distribution and the most "
        "frequent praise and complaints. Takes the product id.",
        "Tells what buyers think of a product, from its reviews (ratings, recurring pros and cons). Input: the "
        "product id.",
    ],
    "shipment_status": [
        "Looks up the customer's own orders and where they are: carrier, expected and actual delivery. Narrow it "
        "down by product keywords, a delivery date range (e.g. from date_math), or both.",
        "Order tracker: returns the customer's matching orders with their delivery status; filters are words "
        "from the item name and an expected-delivery window.",
    ],
    "customer_support": [
        "Finds help-centre articles on store policies and procedures, such as returns, refunds, cancellations, "
        "subscriptions, payment, warranty, shipping and account settings.",
        "Answers 'how do I ...' and policy questions from the shop's help pages. Input: the support question.",
    ],
    "date_math": [
        "Converts a relative time phrase ('yesterday', 'next week', 'in 2 days') into a concrete date range other "
        "tools accept; with operation='format_date_time' and a strftime fmt it prints a date or delivery time.",
        "Date helper: resolves phrases like 'tomorrow' to a date range relative to today, or formats a datetime "
        "from an earlier step.",
    ],
    "compatible_products": [
        "Given a base product and a product type, lists items of that type that fit the base product, such as "
        "a case for a phone or cartridges for a printer.",
        "Accessory matcher: returns products of the requested kind that are compatible with the given product id.",
    ],
}


class DatagenError(ValueError):
    """A seed or query file cannot be used; the message starts with ``file:line:``."""


@dataclass(frozen=True)
class SeedExample:
    """One annotated example: a customer query with its page context and target plan."""

    source_id: str
    query: str
    context: dict[str, Any]
    plan: RetrievalPlan
    line: int = 0

    def tools(self) -> list[str]:
        """The plan's tools, each once, in order."""
        return list(dict.fromkeys(self.plan.tools()))


def _read_rows(path: str | Path, registry: ToolRegistry | None, need_plan: bool) -> Iterator[tuple[int, dict, Any]]:
    """``(line, row, plan or None)`` per line ``{query, context?, plan?, id?}``, each checked, its plan validated."""
    for n, row in read_jsonl_objects(path, DatagenError):
        if not isinstance(row.get("query"), str) or not row["query"].strip():
            raise DatagenError(f"{path}:{n}: 'query' must be a non-empty string")
        if not isinstance(row.get("context", {}), dict):
            raise DatagenError(f"{path}:{n}: 'context' must be a JSON object")
        if (need_plan or row.get("plan") is not None) and not isinstance(row.get("plan"), str):
            raise DatagenError(f"{path}:{n}: 'plan' must be a string with the plan text")
        res = parse_plan(row["plan"]) if row.get("plan") is not None else None
        errs = [*res.errors, *(check_plan(res.plan, registry) if registry is not None else [])] if res else []
        if errs:
            raise DatagenError(f"{path}:{n}: plan {errs[0]}")
        yield n, row, res.plan if res else None


def load_seed_examples(path: str | Path, registry: ToolRegistry | None = None) -> list[SeedExample]:
    """The seed pool: every line ``{query, context, plan}`` (optional ``id``), each plan parsed and validated."""
    out = [SeedExample(str(row.get("id", f"seed-{n}")), row["query"].strip(), dict(row.get("context") or {}), plan, n)
           for n, row, plan in _read_rows(path, registry, need_plan=True)]
    if not out:
        raise DatagenError(f"{path}: no examples")
    return out


def load_query_pool(path: str | Path, registry: ToolRegistry | None = None) -> list[dict[str, Any]]:
    """The large pool: lines ``{query, context?, plan?, id?}``; plans, when present, are parsed and validated."""
    return [{"id": str(row.get("id", f"query-{n}")), "query": row["query"].strip(),
             "context": dict(row.get("context") or {}), "plan": plan}
            for n, row, plan in _read_rows(path, registry, need_plan=False)]


@dataclass
class ToolView:
    """One TEvo rendering of the tools: the specs shown (renamed, paraphrased, in order) and the renaming."""

    specs: list[ToolSpec]
    mapping: dict[str, str] = field(default_factory=dict)
    """Original tool name -> the name shown (every tool of the registry, shown or not)."""


def _rename_text(text: str, mapping: dict[str, str]) -> str:
    if not mapping:
        return text
    pat = re.compile(r"(?<![\w.])(" + "|".join(re.escape(k) for k in sorted(mapping, key=len, reverse=True)) + r")(?!\w)")
    return pat.sub(lambda m: mapping[m.group(1)], text)


def rename_plan(plan: RetrievalPlan, mapping: dict[str, str]) -> RetrievalPlan:
    """``plan`` with every tool renamed by ``mapping`` (also where a purpose names a tool)."""
    steps = [s.model_copy(update={"tool": mapping.get(s.tool, s.tool), "purpose": _rename_text(s.purpose, mapping)})
             for s in plan.steps]
    return RetrievalPlan(steps=steps)


def evolve_tools(registry: ToolRegistry, needed: Iterable[str], rng: random.Random, *, rename_prob: float = 0.5,
                 paraphrase_prob: float = 0.7) -> ToolView:
    """A TEvo tool view: the needed tools plus a random subset of the rest, shuffled, renamed from each spec's
    ``aliases`` (never two to one name) and paraphrased from :data:`DESCRIPTION_PARAPHRASES`."""
    needed = [n for n in dict.fromkeys(needed) if n in registry]
    others = [n for n in registry.names() if n not in needed]
    extra = sorted(rng.sample(others, rng.randint(0, len(others))), key=others.index)
    mapping: dict[str, str] = {}
    for spec in registry:
        name = spec.name
        if spec.aliases and rng.random() < rename_prob:
            cand = [a for a in spec.aliases if a not in mapping.values() and a not in registry]
            if cand:
                name = rng.choice(cand)
        mapping[spec.name] = name
    shown = needed + extra
    rng.shuffle(shown)
    specs = []
    for n in shown:
        shown_spec = registry.get(n)
        assert shown_spec is not None  # the shown names come from the registry
        pool = DESCRIPTION_PARAPHRASES.get(n, [])
        desc = rng.choice(pool) if pool and rng.random() < paraphrase_prob else shown_spec.description
        specs.append(replace(shown_spec, name=mapping[n], description=_rename_text(desc, mapping),
                             example=_rename_text(shown_spec.example, mapping), tool=None, aliases=[]))
    return ToolView(specs, mapping)


def sample_examples(pool: Sequence[SeedExample], exclude: str, rng: random.Random, k_max: int = 3) -> list[SeedExample]:
    """1..k_max in-context examples from the pool, never the example being trained on."""
    cand = [e for e in pool if e.source_id != exclude]
    if not cand:
        return []
    return rng.sample(cand, rng.randint(1, min(k_max, len(cand))))


_TEMPLATES = ["{q}", "{q}?", "hi, {q}", "quick question: {q}", "can you tell me {q}", "i'd like to know {q}",
              "{q} please", "hey there - {q}", "could you help: {q}"]


def template_variants(examples: Sequence[SeedExample], rng: random.Random, per_example: int = 4) -> list[dict[str, Any]]:
    """A larger query pool from the seed pool by light template variation (each keeps its seed's plan)."""
    out = []
    for ex in examples:
        base = ex.query.rstrip("?").strip()
        base = base[:1].lower() + base[1:]
        for k, t in enumerate(rng.sample(_TEMPLATES[1:], min(per_example, len(_TEMPLATES) - 1))):
            out.append({"id": f"{ex.source_id}-v{k + 1}", "query": t.format(q=base), "context": dict(ex.context),
                        "plan": ex.plan})
    return out


def diverse_query_sample(initial: Sequence[str], large: Sequence[str], embedder: Any, rng: random.Random, *,
                         trim: float = 0.1, size: int | None = None) -> tuple[list[int], dict[str, Any]]:
    """DQS: sorted indices into ``large`` and a report: by highest cosine similarity to ``initial``, the ``trim``
    fractions at both ends dropped (at least one each from 3 queries on), ``size`` of the rest sampled."""
    size = len(initial) if size is None else size
    if not large:
        return [], {"large": 0, "dropped_similar": [], "dropped_dissimilar": [], "kept": []}
    a, b = (normalize(np.asarray(embedder.encode(list(q)), dtype=np.float64)) for q in (initial, large))
    sim = a @ b.T                                   # S[i, j] = cos(initial_i, large_j)
    score = np.round(sim.max(axis=0), 9)
    order = sorted(range(len(large)), key=lambda j: (score[j], j))
    n = len(large)
    cut = max(1, math.floor(trim * n + 1e-9)) if n >= 3 and trim > 0 else 0
    low, high = order[:cut], order[n - cut:] if cut else []
    refined = sorted(order[cut:n - cut] if cut else order)
    kept = sorted(rng.sample(refined, min(size, len(refined))))
    return kept, {"large": n, "dropped_similar": sorted(high), "dropped_dissimilar": sorted(low), "kept": kept,
                  "max_similarity": [float(s) for s in score]}
