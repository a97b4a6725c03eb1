"""Product reviews: generated per product type, and summarised by counting recurring phrases (``review_summary``)."""

from __future__ import annotations

import datetime as dt
import random
import re
from collections import Counter
from typing import Any

__all__ = ["ASPECTS", "make_reviews", "summarise_reviews"]

_GENERIC = (["good value for the money", "arrived well packaged", "exactly as described"],
            ["not worth the price", "the packaging was damaged on arrival"])
# product type -> (praise, complaints)
ASPECTS: dict[str, tuple[list[str], list[str]]] = {
    "tires": (["quiet on the highway", "great grip in the rain", "a smooth comfortable ride",
               "steady handling in light snow"],
              ["noisy at highway speed", "the tread wore down quickly", "poor traction on ice"]),
    "tire chains": (["easy to put on in the cold", "solid traction on packed snow"],
                    ["the links rusted after one season", "hard to tension properly"]),
    "sheet pans": (["heats evenly with no hot spots", "cookies brown perfectly", "sturdy and does not warp"],
                   ["warped in a hot oven", "the finish stained after a few uses", "food sticks to the surface"]),
    "chocolate": (["rich creamy flavour", "melts smoothly", "kids loved the coins"],
                  ["arrived melted", "too sweet for my taste", "tastes waxy"]),
    "smartphones": (["the battery lasts all day", "the camera takes sharp photos", "a bright beautiful screen"],
                    ["the battery drains fast", "gets hot while gaming", "the speaker sounds tinny"]),
    "phone cases": (["fits the phone perfectly", "survived several drops", "feels great in the hand"],
                    ["the edges started peeling", "the buttons are hard to press", "turned yellow after a month"]),
    "chargers": (["charges the phone quickly", "stays cool while charging", "compact for travel"],
                 ["stopped working after a few weeks", "charges slowly", "the cable frayed at the connector"]),
    "running shoes": (["comfortable on long runs", "light and responsive", "plenty of room in the toe box"],
                      ["runs small", "the heel rubs and causes blisters", "the sole wore through quickly"]),
    "coffee makers": (["brews hot coffee fast", "easy to clean", "makes a great cup every morning"],
                      ["the carafe drips when pouring", "leaks water from the base", "the coffee is not hot enough"]),
    "coffee pods": (["smooth flavour with no bitterness", "a bold rich aroma"],
                    ["weak and watery coffee", "several pods were crushed"]),
    "laptops": (["fast and snappy for daily work", "the battery lasts all day", "a sharp bright display"],
                ["the fan gets loud", "the trackpad feels cheap", "the battery drains fast"]),
    "laptop bags": (["plenty of pockets for cables", "comfortable straps", "the laptop sleeve is well padded"],
                    ["the zipper broke", "the straps dig into the shoulders"]),
    "printers": (["easy wireless setup", "sharp text and vivid photos"],
                 ["constant paper jams", "drops the Wi-Fi connection", "burns through ink"]),
    "ink cartridges": (["sharp text and vivid photos", "the printer recognised it right away"],
                       ["the printer rejected the cartridge", "ran out of ink quickly"]),
    "cameras": (["sharp photos even in low light", "fast accurate autofocus", "light enough to carry all day"],
                ["the battery drains fast", "the menus are confusing"]),
    "camera batteries": (["holds a charge as long as the original", "fits perfectly"],
                         ["does not hold a charge", "the camera shows a battery warning"]),
}
_OPEN = {5: ["Love it.", "Excellent purchase.", "Five stars from me."], 4: ["Very good overall.", "Happy with this one."],
         3: ["It is okay.", "Mixed feelings about this."], 2: ["Not great.", "Somewhat disappointed."],
         1: ["Would not buy again.", "Very disappointed."]}
_PRO = ["{A}.", "Best part: {a}.", "{A}, which I did not expect at this price.", "Pleasantly surprised - {a}."]
_CON = ["{A}.", "My one complaint: {a}.", "Unfortunately {a}.", "Downside: {a}."]
_NAMES = ["Dana R.", "Luis M.", "Priya K.", "Tom W.", "Aiko S.", "Grace O.", "Marek P.", "Jamal B.", "Elena V.",
          "Chris T.", "Nina H."]


def _say(frames: list[str], aspect: str, rng: random.Random) -> str:
    return rng.choice(frames).format(a=aspect, A=aspect[0].upper() + aspect[1:])


def make_reviews(rng: random.Random, product_type: str, product_id: str, today: Any, n_min: int = 3,
                 n_max: int = 12) -> list[dict[str, Any]]:
    """Reviews for one product: ``review_id, rating, title, text, author, date, verified_purchase, helpful_votes``."""
    pros, cons = ASPECTS.get(product_type, ([], []))
    pros, cons = pros + _GENERIC[0], cons + _GENERIC[1]
    quality = rng.uniform(2.6, 4.8)
    out = []
    for i in range(rng.randint(n_min, n_max)):
        rating = max(1, min(5, round(rng.gauss(quality, 1.0))))
        n_pro = {5: 2, 4: rng.choice([1, 2]), 3: 1, 2: rng.choice([0, 1]), 1: 0}[rating]
        n_con = {5: 0, 4: rng.choice([0, 0, 1]), 3: 1, 2: rng.choice([1, 2]), 1: 2}[rating]
        said = [_say(_PRO, a, rng) for a in rng.sample(pros, n_pro)] + [_say(_CON, a, rng) for a in rng.sample(cons, n_con)]
        opening = rng.choice(_OPEN[rating])
        when = today - dt.timedelta(days=rng.randint(3, 700))
        out.append({"review_id": f"R{product_id}{i:02d}", "rating": rating, "title": opening.rstrip("."),
                    "text": " ".join([opening, *said]), "author": rng.choice(_NAMES), "date": when.isoformat(),
                    "verified_purchase": rng.random() < 0.85, "helpful_votes": int(rng.expovariate(0.3))})
    return out


_STOP = set("""a an the and or but if of to in on at for with from by as is are was were be been it its this that these those
i me my we our you your he she they them their not no so very too just than then there here about after before while
which who what when where how all any some more most much one two up down out over only also do does did has have had
can will would could should really unfortunately honestly definitely pleasantly surprisingly""".split())
_NEGATION = {"not", "no", "never", "nothing", "hardly"}
_NOT_ASPECT = set("""love loved excellent purchase great good overall happy okay ok mixed feelings disappointed somewhat would buy
again star stars five four three recommend best part pleasantly surprised complaint downside unfortunately expect
price""".split())
_WORD = re.compile(r"[a-z0-9][a-z0-9'\-]*")


def _phrases(text: str, n_min: int = 2, n_max: int = 5) -> set[str]:
    """The candidate aspect phrases of one review: n-grams inside one clause, no stop word at the ends."""
    found = set()
    for clause in re.split(r"[.!?,;:()\-–]+\s", text.lower() + " "):
        words = _WORD.findall(clause)
        for n in range(n_min, n_max + 1):
            for i in range(len(words) - n + 1):
                gram = words[i:i + n]
                if (gram[0] in _STOP and gram[0] not in _NEGATION) or gram[-1] in _STOP or (i and words[i - 1] in _NEGATION):
                    continue
                if not all(w in _NOT_ASPECT for w in gram if w not in _STOP):  # not only generic words
                    found.add(" ".join(gram))
    return found


def _pick(scores: dict[str, tuple[int, int]], k: int) -> list[dict[str, Any]]:
    """Top phrases by (support, length); a phrase inside an already kept one (or containing one) is dropped."""
    order = sorted(scores.items(), key=lambda kv: (-kv[1][0], -len(kv[0].split()), kv[0]))
    kept: list[tuple[str, tuple[int, int]]] = []
    for phrase, sc in order:
        if any(f" {phrase} " in f" {p} " or f" {p} " in f" {phrase} " for p, _ in kept):
            continue
        kept.append((phrase, sc))
        if len(kept) == k:
            break
    return [{"phrase": p, "reviews": sc[0], "opposite_reviews": sc[1]} for p, sc in kept]


def summarise_reviews(reviews: list[dict[str, Any]], k: int = 5) -> dict[str, Any]:
    """Average rating, star histogram and the top ``k`` pros and cons phrases found in ``reviews``."""
    n = len(reviews)
    counts = Counter(int(r["rating"]) for r in reviews)
    good = [r for r in reviews if int(r["rating"]) >= 4]
    bad = [r for r in reviews if int(r["rating"]) <= 2]
    df_good, df_bad = (Counter(p for r in rs for p in _phrases(f"{r.get('title', '')}. {r['text']}"))
                       for rs in (good, bad))
    min_good, min_bad = (2 if len(good) >= 4 else 1), (2 if len(bad) >= 4 else 1)
    pros = {p: (c, df_bad[p]) for p, c in df_good.items() if c >= min_good and c > df_bad[p]}
    cons = {p: (c, df_good[p]) for p, c in df_bad.items() if c >= min_bad and c > df_good[p]}

    def top(rs: list[dict[str, Any]]) -> dict[str, Any] | None:
        if not rs:
            return None
        r = max(rs, key=lambda r: (int(r.get("helpful_votes", 0)), r.get("date", ""), r["review_id"]))
        return {"review_id": r["review_id"], "rating": int(r["rating"]), "text": r["text"],
                "helpful_votes": int(r.get("helpful_votes", 0))}

    return {
        "review_count": n,
        "average_rating": round(sum(int(r["rating"]) for r in reviews) / n, 2) if n else None,
        "rating_counts": {str(s): counts.get(s, 0) for s in (5, 4, 3, 2, 1)},
        "percent_favourable": round(100 * len(good) / n) if n else None,
        "pros": _pick(pros, k),
        "cons": _pick(cons, k),
        "most_helpful_favourable": top(good),
        "most_helpful_critical": top(bad),
    }
