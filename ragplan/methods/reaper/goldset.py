"""A deterministic gold set of retail questions with their REAPER plans, grounded in a generated shop: spread over
:data:`CATEGORIES`, split about 80/20 train/test within each, arguments by the rule of the metrics module."""

from __future__ import annotations

import contextlib
import datetime as dt
import math
import random
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

from ragplan.jsonl import atomic_write, jsonl_text, read_jsonl_objects
from ragplan.methods.reaper.plan import RetrievalPlan, PlanStep, format_plan, parse_plan
from ragplan.tools.retail.tools import PURPOSES, singular
from ragplan.tools.retail.dates import resolve_range
from ragplan.tools.retail.shop import load_shop

__all__ = ["GoldExample", "CATEGORIES", "generate_goldset", "write_goldset", "load_goldset"]

CATEGORIES = ["no_retrieval", "prod_search", "prod_qna", "context_qna", "review_summary", "customer_support",
              "shipment_status", "date_math", "date_shipment", "search_qna", "shipment_qna", "compatible",
              "shipment_compat"]


_FIELDS = ("id", "question", "context", "gold_plan", "tool_sequence", "category")


@dataclass
class GoldExample:
    """One gold question: the page context, the canonical gold plan and its tool sequence."""

    id: str
    question: str
    context: dict[str, Any]
    """``{product_id, product_title, history, date}`` (empty id/title off a product page)."""
    gold_plan: str
    """Canonical plan text (``""`` for no retrieval)."""
    tool_sequence: list[str]
    category: str
    split: str = "train"

    @property
    def plan(self) -> RetrievalPlan:
        """The gold plan parsed."""
        return parse_plan(self.gold_plan).plan


def _plan(*calls: tuple[str, list[Any], dict[str, Any]]) -> RetrievalPlan:
    return RetrievalPlan(steps=[PlanStep(index=k, purpose=PURPOSES[tool], evidence_var=f"E{k}", tool=tool, args=args,
                                         kwargs=kwargs) for k, (tool, args, kwargs) in enumerate(calls, 1)])


_SMALL_TALK = ["hi there", "hello, how are you today?", "thanks, that's all I needed", "good morning!",
               "you've been really helpful", "can you tell me a joke?", "what's your name?", "bye for now",
               "who made you?", "ok cool", "never mind", "what can you help me with?"]
_GENERAL = ["how many ounces are in a cup?", "what is the capital of Australia?", "how do I convert celsius to "
            "fahrenheit?", "what does 5G mean?", "why is the sky blue?", "how long should I boil an egg?",
            "what's the difference between a latte and a cappuccino?", "how do I clean a cast iron pan?",
            "what does mAh stand for on a battery?", "how often should I rotate my car tires?",
            "what is dark chocolate made of?", "how many miles is a marathon?", "what is a mirrorless camera?",
            "how many watts does a typical laptop use?", "what does an all-season tire mean?"]
_OPENERS = ["", "", "", "hey, ", "quick question: ", "um, ", "so "]
_SUPPORT = ["how do i cancel all subscribe and save items", "how do I return an item I bought last month?",
            "when will I get my refund?", "can I change the shipping address on an order?",
            "how do I cancel an order that hasn't shipped yet?", "what is your return policy for electronics?",
            "how do I update my credit card?", "do you ship internationally?", "how can I reset my password?",
            "what payment methods do you accept?", "how do I use a gift card?", "is there a warranty on my purchase?",
            "how do I delete my account?", "what do I do if my package was stolen?",
            "can I skip a subscribe and save delivery?", "how much does expedited shipping cost?",
            "how do I get a receipt for my order?", "my item arrived damaged, what now?",
            "how do I contact a seller?", "can I return an opened item?", "how do I change my email address?",
            "do you price match?", "how long does standard shipping take?", "can I exchange shoes for another size?"]
_SEARCH = ["show me some options for {q}", "I'm looking for {q}", "what {q} do you have?", "recommend some {q}",
           "do you sell {q}?", "can you find {q} for me", "what are the best {q}?", "I want to buy {q}",
           "any good {q} available?", "search for {q}", "I need {q}, what do you suggest?"]
_QNA = ["What is the {a} of this {s}?", "What's the {a} on this {s}?", "Can you tell me the {a} for this {s}?",
        "I'd like to know this {s}'s {a}.", "what {a} does this {s} have", "Which {a} is this {s}?"]
_REVIEW = ["what do people say about this?", "are the reviews good for this {s}?", "what do customers complain "
           "about with this {s}?", "is this {s} any good according to buyers?", "summarize the reviews please",
           "how do people rate it?", "do buyers like this {s}?", "what are the pros and cons people mention?"]
_ANAPHORA: dict[str, list[str]] = {
    "colour": ["does it come in {c}?", "what colors is this available in?", "is there a {c} version of this?"],
    "material": ["what is it made of?", "what material is this?"],
    "weight": ["how heavy is it?", "how much does this weigh?"], "dimensions": ["how big is it?"],
    "screen_size": ["how big is the screen?", "what size display does it have?"],
    "storage": ["how much storage does it have?"], "memory": ["how much RAM does this have?"],
    "tread_depth": ["how deep is the tread on these?"], "season": ["can I use these in the snow?"],
    "compatible_with": ["will this work with my {m}?", "which models does this fit?"],
    "nut_free": ["is it safe for someone with a nut allergy?", "does it contain nuts?"],
    "gluten_free": ["is this gluten free?"], "dishwasher_safe": ["can I put it in the dishwasher?"],
    "oven_safe_to": ["how hot can it go in the oven?"], "wireless_charging": ["does it support wireless charging?"],
    "battery": ["how long does the battery last?"], "pod_format": ["what kind of pods does it take?"],
    "capacity": ["what's its capacity?"], "water_resistant": ["is it waterproof?"],
    "sizes": ["do they come in size 10?", "what sizes do they come in?"], "caffeinated": ["is there caffeine in these?"],
    "page_yield": ["how many pages will it print?"], "print_speed": ["how fast does it print?"],
    "sensor": ["what's the resolution on it?"], "wattage": ["how many watts is it?"],
    "fits_laptops_up_to": ["will my 15 inch laptop fit in it?"], "video": ["can it shoot 4K?"],
}
_ANY_ANAPHORA = ["tell me more about it", "what are its main features?", "is it worth it for the price?"]
_HISTORY = [["hi"], ["I'm looking at this product"], ["show me this item"], ["is this in stock?"]]
_COLOURS = ["red", "blue", "black", "white", "green", "pink", "gray"]
_SHIP = ["Where is my {k}?", "Has my {k} shipped yet?", "track my {k} order", "what's the status of the {k} I ordered?",
         "When is my {k} going to be delivered?", "is my {k} on the way?", "did my {k} arrive?",
         "which carrier is bringing my {k}?"]
_DATES = [("tomorrow", ["What's the date tomorrow?"]), ("next week", ["Which dates does next week cover?"]),
          ("last week", ["What were the dates of last week?"]), ("this weekend", ["What dates is this weekend?"]),
          ("in 3 days", ["What will the date be in 3 days?"]), ("next friday", ["What's the date next friday?"]),
          ("last month", ["Which dates were last month?"]), ("2 weeks ago", ["What was the date 2 weeks ago?"]),
          ("yesterday", ["What was yesterday's date?"]), ("next month", ["When does next month start and end?"]),
          ("in 10 days", ["What date is it in 10 days?"]), ("this month", ["What dates does this month span?"])]
_DATE_Q = ["{E}: what's the date range?", "Which dates is {e}?", "Can you work out the dates for {e}?"]
_DATE_SHIP_FUT = ["What time will my {k} arrive {e}?", "Is my {k} still coming {e}?", "Will the {k} get here {e}?",
                  "what time is my {k} delivery {e}?"]
_DATE_SHIP_PAST = ["Did my {k} get delivered {e}?", "what time was my {k} delivered {e}?",
                   "was the {k} dropped off {e}?"]
_DATE_SHIP_ANY = ["Which of my packages are arriving {e}?", "what deliveries do I have {e}?",
                  "anything scheduled to arrive {e}?"]
_SEARCH_QNA = ["Find me {q} — {sub}", "Show me {q}; {sub}", "I'm shopping for {q}. {sub}",
               "Look up {q} and tell me: {sub}"]
_SHIP_QNA = ["The {k} I ordered — {sub}", "About my {k} order: {sub}", "I bought a {k} recently. {sub}",
             "question about the {k} I purchased: {sub}"]
_ACCESSORY = {"smartphones": ["phone case", "charger"], "printers": ["ink cartridge"], "cameras": ["camera battery"],
              "coffee makers": ["coffee pod"], "tires": ["tire chain"], "laptops": ["laptop bag"]}
_COMPAT = ["what {a}s work with this?", "I need a {a} for this {s}", "show me compatible {a}s",
           "which {a}s fit this {s}?", "does anything like a {a} go with this?", "recommend a {a} that fits it"]
_SHIP_COMPAT = ["I need a {a} for the {k} I bought", "What {a}s fit my {k} order?",
                "find {a}s that work with the {k} I ordered", "which {a} should I get for my new {k}?"]


def _short(p: dict[str, Any]) -> str:
    words = p["product_type"].split()
    return " ".join([*words[:-1], singular(words[-1])])


def _search_phrase(rng: random.Random, p: dict[str, Any]) -> str:
    s = _short(p)
    opts = [f"{s}s", f"{p['brand'].lower()} {s}s", f"{s}s under ${int(math.ceil(p['price'] / 25.0) * 25)}"]
    colour = p["attributes"].get("colour")
    if isinstance(colour, str):
        opts.append(f"{colour.lower()} {s}s")
    opts += [k for k in p.get("keywords", []) if len(k) > 3]
    if p["attributes"].get("nut_free") in ("yes", True):
        opts.append(f"nut free chocolate {str(p['attributes'].get('form', 'coins')).lower()}")
    return rng.choice(opts).replace("ss ", "s ").strip()


def _anaphora(rng: random.Random, p: dict[str, Any]) -> str:
    t = rng.choice([t for k in p["attributes"] if k in _ANAPHORA for t in _ANAPHORA[k]] + _ANY_ANAPHORA)
    fits = p["attributes"].get("compatible_with") or ["phone"]
    return t.format(c=rng.choice(_COLOURS), m=fits[0])


class _Gen:
    """The shop's facts and one random stream; one method per category returns (question, context, plan)."""

    def __init__(self, shop: Any, rng: random.Random) -> None:
        self.rng, self.today = rng, shop.today
        self.products = sorted(shop.products.values(), key=lambda p: p["product_id"])
        self.orders = sorted(shop.orders(), key=lambda o: o["order_id"])
        self.by_id = {p["product_id"]: p for p in self.products}

    def ctx(self, p: dict[str, Any] | None = None, history: list[str] | None = None) -> dict[str, Any]:
        page = {"product_id": p["product_id"], "product_title": p["title"]} if p is not None else \
            {"product_id": "", "product_title": ""}
        return {**page, "history": list(history or []), "date": self.today.isoformat()}

    def order_kw(self, o: dict[str, Any]) -> str:
        p = self.by_id.get(o["product_id"])
        kws = [k.strip() for k in o["keywords"].split(",") if k.strip() and not k.strip().isdigit()]
        return self.rng.choice(kws[:2] if kws else [_short(p) if p else "order"])

    def no_retrieval(self):
        q = self.rng.choice(self.rng.choice([_SMALL_TALK, _GENERAL]))
        return self.rng.choice(_OPENERS) + q, self.ctx(), RetrievalPlan()

    def prod_search(self):
        q = _search_phrase(self.rng, self.rng.choice(self.products))
        return self.rng.choice(_SEARCH).format(q=q), self.ctx(), _plan(("prod_search", [q], {}))

    def prod_qna(self):
        p = self.rng.choice(self.products)
        if self.rng.random() < 0.3 and p["qna"]:
            q = self.rng.choice(p["qna"])["question"].replace("this ", f"this {_short(p)} ", 1)
        else:
            a = self.rng.choice(list(p["attributes"])).replace("_", " ").replace("colour", "color")
            q = self.rng.choice(_QNA).format(a=a, s=_short(p))
        return q, self.ctx(p), _plan(("prod_qna", [p["product_id"], q], {}))

    def context_qna(self):
        p = self.rng.choice(self.products)
        q = _anaphora(self.rng, p)
        hist = self.rng.choice(_HISTORY) if self.rng.random() < 0.4 else []
        return q, self.ctx(p, hist), _plan(("prod_qna", [p["product_id"], q], {}))

    def review_summary(self):
        p = self.rng.choice(self.products)
        q = self.rng.choice(_REVIEW).format(s=_short(p))
        return q, self.ctx(p), _plan(("review_summary", [p["product_id"]], {}))

    def customer_support(self):
        q = self.rng.choice(_OPENERS) + self.rng.choice(_SUPPORT)
        p = self.rng.choice(self.products) if self.rng.random() < 0.25 else None  # asked on some product page
        return q, self.ctx(p), _plan(("customer_support", [q], {}))

    def shipment_status(self):
        k = self.order_kw(self.rng.choice(self.orders))
        return self.rng.choice(_SHIP).format(k=k), self.ctx(), _plan(("shipment_status", [], {"keywords": k}))

    def date_math(self):
        e, qs = self.rng.choice(_DATES)
        q = self.rng.choice(qs + [t.format(e=e, E=e[:1].upper() + e[1:]) for t in _DATE_Q])
        return q, self.ctx(), _plan(("date_math", [e], {}))

    def _expr(self, o: dict[str, Any]) -> str | None:
        eta = dt.date.fromisoformat(o["estimated_delivery"][:10])
        d = (eta - self.today).days
        cands = {0: ["today"], 1: ["tomorrow"], -1: ["yesterday"], 2: ["day after tomorrow", "in 2 days"],
                 -2: ["2 days ago"]}.get(d, [f"in {d} days"] if 2 < d <= 7 else [f"{-d} days ago"] if -7 <= d < -2
                                         else [])
        cands += ["this week", "next week", "last week", "this month", "last month"]
        for e in cands:
            start, end = resolve_range(e, self.today)
            if start <= eta <= end:
                return e
        return None

    def date_shipment(self):
        o = self.rng.choice(self.orders)
        e = self._expr(o)
        if e is None:
            return None
        past = dt.date.fromisoformat(o["estimated_delivery"][:10]) < self.today
        said = "the " + e if e.startswith("day ") else e
        if self.rng.random() < 0.25:
            q = self.rng.choice(_DATE_SHIP_ANY).format(e=said)
            return q, self.ctx(), _plan(("date_math", [e], {}), ("shipment_status", [], {"date_range": "#E1"}))
        k = self.order_kw(o)
        q = self.rng.choice(_DATE_SHIP_PAST if past else _DATE_SHIP_FUT).format(k=k, e=said)
        return q, self.ctx(), _plan(("date_math", [e], {}),
                                    ("shipment_status", [], {"keywords": k, "date_range": "#E1"}))

    def search_qna(self):
        p = self.rng.choice(self.products)
        q, sub = _search_phrase(self.rng, p), _anaphora(self.rng, p)
        text = self.rng.choice(_SEARCH_QNA).format(q=q, sub=sub)
        return text, self.ctx(), _plan(("prod_search", [q], {}), ("prod_qna", ["#E1", sub], {}))

    def shipment_qna(self):
        o = self.rng.choice(self.orders)
        p = self.by_id.get(o["product_id"])
        if p is None:
            return None
        k, sub = self.order_kw(o), _anaphora(self.rng, p)
        text = self.rng.choice(_SHIP_QNA).format(k=k, sub=sub)
        return text, self.ctx(), _plan(("shipment_status", [], {"keywords": k}), ("prod_qna", ["#E1", sub], {}))

    def compatible(self):
        p = self.rng.choice([p for p in self.products if p["product_type"] in _ACCESSORY] or self.products)
        a = self.rng.choice(_ACCESSORY.get(p["product_type"], ["charger"]))
        q = self.rng.choice(_COMPAT).format(a=a, s=_short(p))
        return q, self.ctx(p), _plan(("compatible_products", [p["product_id"], a], {}))

    def shipment_compat(self):
        os_ = [o for o in self.orders if self.by_id.get(o["product_id"], {}).get("product_type") in _ACCESSORY]
        if not os_:
            return None
        o = self.rng.choice(os_)
        a = self.rng.choice(_ACCESSORY[self.by_id[o["product_id"]]["product_type"]])
        k = self.order_kw(o)
        q = self.rng.choice(_SHIP_COMPAT).format(a=a, k=k)
        return q, self.ctx(), _plan(("shipment_status", [], {"keywords": k}), ("compatible_products", ["#E1", a], {}))


def generate_goldset(shop_dir: str | Path, seed: int = 0, n: int = 360, test_fraction: float = 0.2) -> list[GoldExample]:
    """``n`` gold examples over the shop, spread evenly over :data:`CATEGORIES`, distinct within a category,
    deterministic for (shop, seed, n); ``test_fraction`` of each category (seeded) is ``test``."""
    with contextlib.closing(load_shop(shop_dir)) as shop:  # the generator copies what it needs
        gen = _Gen(shop, random.Random(f"{seed}:goldset"))
    counts = {c: n // len(CATEGORIES) + (k < n % len(CATEGORIES)) for k, c in enumerate(CATEGORIES)}
    out: list[GoldExample] = []
    for cat in CATEGORIES:
        make: Callable[[], Any] = getattr(gen, cat)
        seen: set[tuple[str, str]] = set()
        rows: list[GoldExample] = []
        tries = 0
        while len(rows) < counts[cat] and tries < counts[cat] * 60:
            tries += 1
            got = make() if gen.orders or cat not in _NEEDS_ORDERS else None
            if got is None:
                continue
            q, ctx, plan = got
            key = (q.lower(), ctx["product_id"])
            if key in seen:
                continue
            seen.add(key)
            rows.append(GoldExample(f"{cat}-{len(rows) + 1:03d}", q, ctx, format_plan(plan), plan.tools(), cat))
        order = list(range(len(rows)))
        random.Random(f"{seed}:split:{cat}").shuffle(order)
        for i in order[: round(test_fraction * len(rows))]:
            rows[i].split = "test"
        out.extend(rows)
    return out


_NEEDS_ORDERS = {"shipment_status", "date_shipment", "shipment_qna", "shipment_compat"}


def write_goldset(path: str | Path, examples: list[GoldExample]) -> Path:
    """Write examples as JSONL (one per line, atomically); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, jsonl_text(asdict(e) for e in examples))
    return path


def load_goldset(path: str | Path) -> list[GoldExample]:
    """Read a gold-set JSONL file written by :func:`write_goldset`; ``ValueError`` naming the file and line of a bad
    record (not JSON, not an object, a missing field) or an empty file."""
    out = []
    for n, row in read_jsonl_objects(path):
        missing = [k for k in _FIELDS if k not in row]
        if missing:
            raise ValueError(f"{path}:{n}: no {', '.join(repr(k) for k in missing)}")
        out.append(GoldExample(**{k: row[k] for k in _FIELDS}, split=row.get("split", "train")))
    if not out:
        raise ValueError(f"{path}: no gold examples (an empty file?)")
    return out
