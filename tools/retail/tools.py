"""REAPER's seven retail tools as LangChain tools over a generated shop, and the ``retail`` tool registry.

The shop and its ``today`` are settings of :func:`build_retail_registry`, never plan arguments."""

from __future__ import annotations

import datetime as dt
import functools
import re
from collections.abc import Callable
from typing import Any

from ragplan.tools.registry import ArgSpec, ToolRegistry, ToolSpec
from ragplan.tools.retail.catalog import PRODUCT_TYPES, TYPE_SYNONYMS
from ragplan.tools.retail.dates import (
    ToolError, format_values, parse_datetime, parse_day, parse_range_arg, resolve_range,
)
from ragplan.tools.retail.reviews import summarise_reviews
from ragplan.tools.retail.shop import Shop, load_shop
from ragplan.tools.retrieval import split_sentences

__all__ = ["RetailTools", "build_retail_registry", "TOOL_NAMES", "NEW_TOOLS", "PURPOSES", "compatibility",
           "resolve_product_type", "singular"]

# name -> (description, args, example, aliases, purpose in generated plans)
_SPECS: dict[str, tuple[str, list[ArgSpec], str, list[str], str]] = {
    "prod_search": (
        "Looks up the shop's catalogue for products matching a shopping need and returns the best matches with their "
        "ids, titles, prices and star ratings. Use it when the customer wants options or recommendations.",
        [ArgSpec("query", "str", True, "the kind of product wanted, in a few words")],
        '#E1 = prod_search("nut free chocolate coins")',
        ["product_search", "search_catalog", "find_products"], "Fetch product search results"),
    "prod_qna": (
        "Answers a question about one specific product: returns its attributes and the facts, seller Q&A and "
        "description sentences closest to the question. Needs the product id and the question.",
        [ArgSpec("product_id", "str", True, "the 10-character product id"),
         ArgSpec("question", "str", True, "the customer's question about that product")],
        '#E1 = prod_qna("J6FLBNBQ31", "What is the tread depth of the MICHELIN Defender LTX M/S tire?")',
        ["product_information", "product_facts", "product_qa"], "Fetch specific information about the product"),
    "review_summary": (
        "Summarises what customers say about one product: average star rating, how many reviews gave each star, and "
        "the praise and complaints that come up repeatedly. Needs the product id.",
        [ArgSpec("product_id", "str", True, "the 10-character product id")],
        '#E1 = review_summary("J6FLBNBQ31")',
        ["summarize_reviews", "review_insights", "customer_reviews"], "Summarise the product's customer reviews"),
    "shipment_status": (
        "Finds the customer's orders and their delivery status (carrier, estimated and actual delivery time). Filter "
        "by keywords from the product name and/or by a date range the estimated delivery falls in (from date_math).",
        [ArgSpec("keywords", "str", False, "words from the ordered product's name, e.g. 'sheet pan'"),
         ArgSpec("date_range", "date_range", False, "estimated-delivery window, usually the output of date_math")],
        '#E2 = shipment_status(keywords="sheet pan", date_range=#E1)',
        ["order_status", "track_package", "delivery_status"], "Fetch shipment status"),
    "customer_support": (
        "Searches the help centre for policies and how-to answers: returns, refunds, cancelling orders or Subscribe & "
        "Save, payments, warranties, shipping options and account questions.",
        [ArgSpec("question", "str", True, "the customer's support question")],
        '#E1 = customer_support("how do i cancel all subscribe and save items")',
        ["help_center", "support_faq", "customer_service"], "Ask customer support"),
    "date_math": (
        "Turns a relative date such as 'tomorrow', 'last week' or 'in 3 days' into a date range for other tools, or "
        "with operation 'format_date_time' and a strftime format (e.g. '%I:%M %p') formats a datetime or an order's "
        "delivery time from an earlier step.",
        [ArgSpec("expr", "any", True, "a date expression, or a datetime / range / order from an earlier step"),
         ArgSpec("operation", "str", False, "omit for a date range; 'format_date_time' or 'days_from_today'"),
         ArgSpec("fmt", "str", False, "strftime format for format_date_time")],
        '#E1 = date_math("tomorrow")',
        ["date_calculator", "resolve_date", "time_math"], "Fetch the date range"),
    "compatible_products": (
        "Lists products of a given type that work with a base product, e.g. cases for a phone, ink for a printer, "
        "batteries for a camera, pods for a coffee maker or bags for a laptop. Needs the base product id and the type.",
        [ArgSpec("base_product_id", "str", True, "id of the product the accessory must fit"),
         ArgSpec("product_type", "str", True, "the kind of product wanted, e.g. 'phone case' or 'ink cartridge'")],
        '#E1 = compatible_products(base_product_id="B0135KI4X8", product_type="ink cartridge")',
        ["find_compatible", "accessory_finder", "compatibility_search"], "Find compatible products"),
}
TOOL_NAMES = list(_SPECS)
PURPOSES = {name: spec[4] for name, spec in _SPECS.items()}
"""The purpose written into generated plans' steps (gold set, classifier baseline), by tool."""
RANGE_OPERATIONS = ("", "date_range", "range", "resolve")  # date_math operations that resolve expr to a date range
NEW_TOOLS = ["compatible_products"]
"""Tools left out by ``include_new_tool=False`` (the novel-tool experiment)."""
_QUESTION_WORDS = set("what which how does did the this that these are is can will for with and has have product item "
                      "they them its".split())
_NOISE = set("my the a an of for order orders package packages item items delivery shipment shipments new".split())
SEARCH_K, QNA_K, FAQ_K, MAX_ORDERS, MAX_COMPATIBLE = 5, 4, 3, 10, 10  # each tool's result size


def _num(v: Any) -> float | None:
    m = re.search(r"\d+(?:\.\d+)?", str(v or ""))
    return float(m.group()) if m else None


def compatibility(base: dict[str, Any], cand: dict[str, Any]) -> str | None:
    """Why ``cand`` fits ``base`` (a short reason), or None when it does not; reads attributes only."""
    a, b = base["attributes"], cand["attributes"]
    a_fits, b_fits = set(a.get("compatible_with") or []), set(b.get("compatible_with") or [])
    a_size, b_size, a_pods = a.get("tire_size"), b.get("tire_size"), a.get("pod_format")
    bag_fits = (base["product_type"] == "laptops" and b.get("fits_laptops_up_to")
                and (_num(a.get("screen_size")) or 99) <= (_num(b["fits_laptops_up_to"]) or 0))
    fits_bag = (cand["product_type"] == "laptops" and a.get("fits_laptops_up_to")
                and (_num(b.get("screen_size")) or 99) <= (_num(a["fits_laptops_up_to"]) or 0))
    reasons = [  # (whether it fits, why), the first that fits answers
        (a.get("model") in b_fits, f"made for the {a.get('model')}"),
        (b.get("model") in a_fits, f"the base product is made for the {b.get('model')}"),
        (a_fits & b_fits, f"both fit the {', '.join(sorted(a_fits & b_fits))}"),
        (a_size in (b.get("tire_sizes") or []), f"fits tire size {a_size}"),
        (b_size in (a.get("tire_sizes") or []), f"is tire size {b_size}, which the base product fits"),
        (a_size and a_size == b_size, f"same tire size {a_size}"),
        (a_pods and a_pods == b.get("pod_format"), f"uses {a_pods} pods"),
        (bag_fits, f"holds laptops up to {b.get('fits_laptops_up_to')} (base is {a.get('screen_size')})"),
        (fits_bag, f"its {b.get('screen_size')} screen fits a bag for up to {a.get('fits_laptops_up_to')}"),
    ]
    return next((why for fits, why in reasons if fits), None)


def singular(word: str) -> str:
    """A plural word's singular, roughly (``batteries`` → ``battery``, ``cases`` → ``case``, ``boxes`` → ``box``)."""
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("sses", "xes", "ches", "shes", "zzes")):
        return word[:-2]
    return word[:-1] if word.endswith("s") and not word.endswith("ss") and len(word) > 3 else word


def _norm(text: str) -> tuple[str, ...]:
    return tuple(singular(w) for w in re.findall(r"[a-z0-9\-]+", text.lower()))


_TYPE_NAMES = [(t, _norm(name)) for t, syns in TYPE_SYNONYMS.items() for name in (t, *syns)]


def resolve_product_type(text: str) -> str | None:
    """The product type a free-text name means (``"ink cartridge"`` → ``ink cartridges``), or None."""
    q = _norm(text)
    if not q:
        return None
    best, best_score = None, 0.0
    for t, n in _TYPE_NAMES:
        if n == q:
            return t
        shared = len(set(n) & set(q))
        score = shared / len(set(n) | set(q)) + (0.5 if shared == len(set(n)) else 0.0) if shared else 0.0
        if score > best_score:
            best, best_score = t, score
    return best


def _words(text: str) -> list[str]:
    return [singular(w) for w in re.findall(r"[a-z0-9][a-z0-9/\-]*", str(text).lower())]


def _without_product_name(question: str, p: dict[str, Any]) -> str:
    """``question`` minus the product's id and any run of 3+ words (2+ of them alphabetic) copied from its title."""
    q = re.sub(re.escape(p["product_id"]), " ", question, flags=re.I)
    toks = [(m.group().lower(), m.start(), m.end()) for m in re.finditer(r"[A-Za-z0-9]+", q)]
    title = f" {' '.join(re.findall(r'[a-z0-9]+', p['title'].lower()))} "
    cuts, i = [], 0
    while i < len(toks):
        best = 0  # the longest run of question words from toks[i] on that the title holds
        while i + best < len(toks) and f" {' '.join(t for t, _, _ in toks[i:i + best + 1])} " in title:
            best += 1
        if best >= 3 and sum(t.isalpha() for t, _, _ in toks[i:i + best]) >= 2:  # a name, not just "235/65R18 106T"
            cuts.append((toks[i][1], toks[i + best - 1][2]))
            i += best
        else:
            i += 1
    for a, b in reversed(cuts):
        q = q[:a] + q[b:]
    q = " ".join(q.split())
    content = [w for w in re.findall(r"[a-z]{3,}", q.lower()) if w not in _QUESTION_WORDS]
    return q if content else question  # nothing left but "is it an …?": the name was the question


def _brief(p: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"product_id": p["product_id"], "title": p["title"], "brand": p["brand"], "product_type": p["product_type"],
            "price": p["price"], "rating": p.get("rating"), "review_count": p.get("review_count", 0), **extra}


class RetailTools:
    """The tool functions over one shop (plain methods; :func:`build_retail_registry` wraps them)."""

    def __init__(self, shop: Shop, *, today: str | dt.date | None = None) -> None:
        """``today`` overrides the shop's."""
        self.shop = shop
        self.today = shop.today if today is None else parse_day(today, "today")

    def prod_search(self, query: str) -> list[dict[str, Any]]:
        """Top catalogue products for ``query`` (FAISS, cosine score)."""
        if not str(query or "").strip():
            raise ToolError("prod_search needs a non-empty query")
        hits = self.shop.index("catalog").search(str(query), SEARCH_K)
        return [_brief(self.shop.products[h.id], score=round(h.score, 4)) for h in hits if h.id in self.shop.products]

    def prod_qna(self, product_id: str, question: str) -> dict[str, Any]:
        """The product's attributes and the attribute lines, Q&A pairs and description sentences closest to ``question``."""
        p = self.shop.product(product_id)
        if not str(question or "").strip():
            raise ToolError("prod_qna needs a question about the product")
        cands = [{"source": "attribute", "attribute": k,
                  "text": f"{k.replace('_', ' ')}: {', '.join(map(str, v)) if isinstance(v, list) else v}"}
                 for k, v in p["attributes"].items()]
        cands += [{"source": "qna", "question": q["question"], "answer": q["answer"],
                   "text": f"Q: {q['question']} A: {q['answer']}"} for q in p["qna"]]
        cands += [{"source": "description", "text": s} for s in split_sentences(p["description"], min_chars=8)]
        vecs = self.shop.embedder.encode([_without_product_name(str(question), p)] + [c["text"] for c in cands])
        scores = vecs[1:] @ vecs[0]
        order = sorted(range(len(cands)), key=lambda i: (-float(scores[i]), i))[: QNA_K]
        evidence = [{**cands[i], "score": round(float(scores[i]), 4)} for i in order]
        return _brief(p, attributes=p["attributes"], evidence=evidence)

    def review_summary(self, product_id: str) -> dict[str, Any]:
        """Rating statistics and recurring pros/cons phrases computed from the product's reviews."""
        p = self.shop.product(product_id)
        return {"product_id": p["product_id"], "title": p["title"], **summarise_reviews(p.get("reviews") or [])}

    def shipment_status(self, keywords: str | None = None, date_range: Any = None) -> list[dict[str, Any]]:
        """Orders whose product matches every keyword and whose estimated delivery lies in ``date_range``."""
        orders = self.shop.orders()
        words = [w for w in _words(keywords or "") if w not in _NOISE]
        first: dict[str, bool] = {}
        if words:
            orders = [o for o in orders if set(words) <= set(_words(f"{o['title']} {o['keywords']}"))]
            if not orders:
                raise ToolError(f"no order matches the keywords {keywords!r}; check the product name or search "
                                "without keywords")
            # "camera" means the camera before the camera battery: product types named by the last keyword first
            for o in orders:
                ptype = self.shop.products.get(o["product_id"], {}).get("product_type", "")
                first[o["order_id"]] = _words(ptype)[-1:] == words[-1:]
            orders.sort(key=lambda o: not first[o["order_id"]])
        if date_range not in (None, "", {}):
            start, end = parse_range_arg(date_range, self.today)
            inside = [o for o in orders if start <= dt.date.fromisoformat(o["estimated_delivery"][:10]) <= end]
            if not inside:
                what = f"{len(orders)} order(s) match {keywords!r}" if words else "there are orders"
                etas = ", ".join(sorted({o["estimated_delivery"][:10] for o in orders})[-5:])
                raise ToolError(f"{what} but none is estimated to arrive between {start} and {end} (latest estimated "
                                f"deliveries: {etas})")
            orders = sorted(inside, key=lambda o: (not first.get(o["order_id"], True), o["estimated_delivery"],
                                                   o["order_id"]))
        keys = ("order_id", "product_id", "title", "quantity", "total_price", "order_date", "status", "carrier",
                "tracking_number", "estimated_delivery", "delivered_at")
        return [{k: o[k] for k in keys} for o in orders[: MAX_ORDERS]]

    def customer_support(self, question: str) -> list[dict[str, Any]]:
        """The help-centre articles closest to ``question`` (FAISS)."""
        if not str(question or "").strip():
            raise ToolError("customer_support needs a question")
        hits = self.shop.index("faq").search(str(question), FAQ_K)
        return [{**self.shop.faq[h.id], "score": round(h.score, 4)} for h in hits if h.id in self.shop.faq]

    def date_math(self, expr: Any, operation: str | None = None, fmt: str | None = None) -> Any:
        """A date range for ``expr`` (default), or ``format_date_time`` / ``days_from_today`` of a date in it."""
        op = (operation or "").strip().lower().replace(" ", "_")
        if op in RANGE_OPERATIONS:
            start, end = parse_range_arg(expr, self.today)
            return {"start": start.isoformat(), "end": end.isoformat(),  # (both readers return them in order)
                    "expression": expr if isinstance(expr, str) else "range", "today": self.today.isoformat()}
        if op in ("format_date_time", "format", "format_date", "format_time"):
            if isinstance(expr, str) and parse_datetime(expr) is None:
                start, _ = resolve_range(expr, self.today)  # "tomorrow" → its date, formatted
                expr = start.isoformat()
            return format_values(expr, fmt or "%Y-%m-%d %I:%M %p")
        if op in ("days_from_today", "days_until", "days_between"):
            found = format_values(expr, "%Y-%m-%d")
            items = found if isinstance(found, list) else [found]
            out = [{**i, "days_from_today": (dt.date.fromisoformat(i["value"][:10]) - self.today).days}
                   for i in items if "value" in i]
            if not out:
                raise ToolError("days_from_today needs a single date, datetime or order")
            return out if isinstance(found, list) else out[0]
        raise ToolError(f"unknown date_math operation {operation!r}; use none (date range), 'format_date_time' or "
                        "'days_from_today'")

    def compatible_products(self, base_product_id: str, product_type: str) -> dict[str, Any]:
        """Products of ``product_type`` that fit the base product, each with the reason (from attributes)."""
        base = self.shop.product(base_product_id)
        ptype = resolve_product_type(product_type or "")
        if ptype is None:
            raise ToolError(f"unknown product type {product_type!r}; the shop sells: {', '.join(PRODUCT_TYPES)}")
        found = [_brief(p, reason=reason) for p in self.shop.products.values()
                 if p["product_type"] == ptype and p["product_id"] != base["product_id"]
                 and (reason := compatibility(base, p))]
        found.sort(key=lambda r: (-(r["rating"] or 0), r["price"], r["product_id"]))
        out = {"base_product": {"product_id": base["product_id"], "title": base["title"],
                                "product_type": base["product_type"]},
               "product_type": ptype, "compatible": found[: MAX_COMPATIBLE]}
        if not found:
            out["note"] = f"the catalogue has no {ptype} that fit this {base['product_type'].rstrip('s')}"
        return out


def build_retail_registry(shop_dir: str | None = None, today: str | None = None, *, include_new_tool: bool = True,
                          model_path: str = "") -> ToolRegistry:
    """The ``retail`` suite: specs (names, descriptions, typed arguments, one example, aliases; in prompt order) bound
    to tools over the shop at ``shop_dir``, or specs only without it."""
    from langchain_core.tools import StructuredTool

    specs = [ToolSpec(name, desc, list(args), example, None, list(aliases))
             for name, (desc, args, example, aliases, _) in _SPECS.items() if include_new_tool or name not in NEW_TOOLS]
    if shop_dir:
        tools = RetailTools(load_shop(shop_dir, model_path=model_path), today=today)
        for s in specs:
            # (the arguments' schema is inferred from the method's signature)
            s.tool = StructuredTool.from_function(func=_naming(s.name, getattr(tools, s.name)), name=s.name,
                                                  description=s.description)
    return ToolRegistry(specs, name="retail")


def _naming(name: str, method: Callable[..., Any]) -> Callable[..., Any]:
    """``method``, its :class:`ToolError` naming the tool ``name``."""
    @functools.wraps(method)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except ToolError as err:
            err.tool = name
            raise
    return call
