"""A small generated shop: catalogue and help centre (JSONL), orders and shipments (SQLite), FAISS indexes built on
first search; deterministic for a seed, ``meta.json`` written last, a few scripted orders for the paper's plans."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import random
import shutil
import sqlite3
import threading
from collections import Counter
from pathlib import Path
from typing import Any

from ragplan.jsonl import atomic_write, jsonl_text, read_json, read_jsonl_objects
from ragplan.tools.retail.catalog import make_catalog
from ragplan.tools.retail.dates import ToolError, parse_day
from ragplan.tools.retail.faq import faq_entries
from ragplan.tools.retail.reviews import make_reviews

__all__ = ["generate_shop", "load_shop", "Shop", "FORMAT", "ShopError"]

FORMAT = "ragplan-retail-shop/1"
CARRIERS = ["UPS", "USPS", "FedEx", "DHL", "OnTrac"]
_SCHEMA = """
CREATE TABLE orders (order_id TEXT PRIMARY KEY, product_id TEXT NOT NULL, title TEXT NOT NULL, keywords TEXT NOT NULL,
                     quantity INTEGER NOT NULL, total_price REAL NOT NULL, order_date TEXT NOT NULL, status TEXT NOT NULL);
CREATE TABLE shipments (order_id TEXT PRIMARY KEY REFERENCES orders(order_id), carrier TEXT, tracking_number TEXT,
                        estimated_delivery TEXT NOT NULL, delivered_at TEXT);
CREATE INDEX shipments_eta ON shipments(estimated_delivery);
"""
# product type, ordered (days before today, time), estimated delivery (days from today, time), status, delivered (days, time)
_SCRIPTED = [
    ("sheet pans", (-2, "19:12"), (1, "14:30"), "shipped", None),
    ("smartphones", (-6, "08:47"), (-3, "16:00"), "delivered", (-3, "15:42")),
    ("cameras", (-1, "10:41"), (4, "18:00"), "preparing for shipment", None),
    ("running shoes", (-3, "21:05"), (0, "17:45"), "out for delivery", None),
    ("printers", (-12, "13:20"), (-8, "12:00"), "delivered", (-8, "11:16")),
]


class ShopError(ValueError):
    """A shop directory that is missing, incomplete or not made by ``generate_shop``."""


def _at(day: dt.date, offset: int, hhmm: str) -> dt.datetime:
    return dt.datetime.combine(day + dt.timedelta(days=offset), dt.time.fromisoformat(hhmm))


def _order(rng: random.Random, p: dict[str, Any], ordered: dt.datetime, eta: dt.datetime, status: str,
           delivered: dt.datetime | None) -> tuple[tuple, tuple]:
    oid = f"{rng.randint(100, 999)}-{rng.randint(0, 9_999_999):07d}-{rng.randint(0, 9_999_999):07d}"
    qty = 1 if rng.random() < 0.85 else 2
    carrier = rng.choice(CARRIERS)
    tracking = None if status in ("preparing for shipment", "cancelled") else \
        f"{carrier[:2].upper()}{rng.randint(10**11, 10**12 - 1)}"
    keywords = ", ".join(dict.fromkeys([*p["keywords"], p["brand"].lower(), p["product_type"]]))
    return ((oid, p["product_id"], p["title"], keywords, qty, round(p["price"] * qty, 2), ordered.isoformat(), status),
            (oid, None if status == "cancelled" else carrier, tracking, eta.isoformat(),
             delivered.isoformat() if delivered else None))


def _make_orders(rng: random.Random, products: list[dict[str, Any]], n: int, today: dt.date) -> list[tuple[tuple, tuple]]:
    by_type: dict[str, list[dict[str, Any]]] = {}
    for p in products:
        by_type.setdefault(p["product_type"], []).append(p)
    out: list[tuple[tuple, tuple]] = []
    for ptype, (od, ot), (ed, et), status, deliv in _SCRIPTED:
        if len(out) < n and by_type.get(ptype):
            out.append(_order(rng, rng.choice(by_type[ptype]), _at(today, od, ot), _at(today, ed, et), status,
                              _at(today, *deliv) if deliv else None))
    while len(out) < n:
        p = rng.choice(products)
        days_ago = min(90, int(rng.expovariate(1 / 25)))  # recent orders are the common case
        ordered = _at(today, -days_ago, f"{rng.randint(6, 11 if days_ago == 0 else 23):02d}:{rng.randint(0, 59):02d}")
        eta = _at(ordered.date(), rng.randint(1, 6), f"{rng.randint(9, 20):02d}:{rng.choice([0, 15, 30, 45]):02d}")
        delivered = None
        if rng.random() < 0.04:
            status = "cancelled"
        elif eta.date() < today:
            if rng.random() < 0.03:
                status, eta = "delayed", _at(today, rng.randint(1, 3), "20:00")
            else:
                late = dt.timedelta(days=1) if rng.random() < 0.1 else dt.timedelta(0)
                delivered = min(max(eta + late - dt.timedelta(minutes=rng.randint(0, 180)),
                                    _at(eta.date(), 0, "08:00") + late), _at(today, -1, "21:00"))
                status = "returned" if (today - delivered.date()).days > 7 and rng.random() < 0.06 else "delivered"
        elif eta.date() == today:
            status = "out for delivery"
        else:
            status = "preparing for shipment" if days_ago <= 1 else "shipped"
        out.append(_order(rng, p, ordered, eta, status, delivered))
    return out


def _catalog_passage(p: dict[str, Any]) -> dict[str, Any]:
    attrs = "; ".join(f"{k.replace('_', ' ')}: {', '.join(v) if isinstance(v, list) else v}"
                      for k, v in p["attributes"].items())
    text = f"{p['brand']} {p['product_type']}. {p['description']} {attrs}. Keywords: {', '.join(p['keywords'])}."
    return {"id": p["product_id"], "title": p["title"], "contents": text}


def _faq_passage(f: dict[str, Any]) -> dict[str, Any]:
    return {"id": f["faq_id"], "title": f["question"], "contents": f"{f['topic']}: {f['answer']}"}


def generate_shop(out_dir: str | Path, seed: int = 0, n_products: int = 400, n_orders: int = 150,
                  today: str = "2026-11-22") -> Path:
    """Write a shop for ``seed`` into ``out_dir`` (created; a previous shop there is replaced); returns the path."""
    if n_products < 1 or n_orders < 0:
        raise ValueError(f"a shop needs at least 1 product and 0 or more orders (--products {n_products}, "
                         f"--orders {n_orders})")
    day = parse_day(today, "today (--today)")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "meta.json").unlink(missing_ok=True)  # incomplete until rewritten
    shutil.rmtree(out / "index", ignore_errors=True)
    products = make_catalog(random.Random(f"{seed}:catalog"), n_products)
    rrng = random.Random(f"{seed}:reviews")
    for p in products:
        p["reviews"] = make_reviews(rrng, p["product_type"], p["product_id"], day)
    orders = _make_orders(random.Random(f"{seed}:orders"), products, n_orders, day)
    faq = faq_entries()
    atomic_write(out / "products.jsonl", jsonl_text(products))
    atomic_write(out / "faq.jsonl", jsonl_text(faq))
    atomic_write(out / "catalog_passages.jsonl", jsonl_text([_catalog_passage(p) for p in products]))
    atomic_write(out / "faq_passages.jsonl", jsonl_text([_faq_passage(f) for f in faq]))
    tmp = out / "orders.sqlite.tmp"
    tmp.unlink(missing_ok=True)
    with contextlib.closing(sqlite3.connect(tmp)) as con, con:  # committed, then closed
        con.executescript(_SCHEMA)
        con.executemany("INSERT INTO orders VALUES (?, ?, ?, ?, ?, ?, ?, ?)", [o for o, _ in orders])
        con.executemany("INSERT INTO shipments VALUES (?, ?, ?, ?, ?)", [s for _, s in orders])
    os.replace(tmp, out / "orders.sqlite")
    types = dict(Counter(p["product_type"] for p in products))
    meta = {"format": FORMAT, "seed": seed, "today": day.isoformat(),
            "counts": {"products": len(products), "reviews": sum(len(p["reviews"]) for p in products),
                       "orders": len(orders), "faq": len(faq), "product_types": types}}
    atomic_write(out / "meta.json", json.dumps(meta, indent=2) + "\n")
    return out


def _read_jsonl(path: Path, key: str) -> list[dict[str, Any]]:
    """The objects of a JSONL file, each with ``key``; :class:`ShopError` naming the file and line of the first bad one."""
    rows = read_jsonl_objects(path, ShopError)
    if missing := next((n for n, row in rows if not str(row.get(key) or "").strip()), 0):
        raise ShopError(f"{path}:{missing}: no {key!r}")
    if not rows:
        raise ShopError(f"{path}: no records (an empty file?); regenerate the shop")
    return [row for _, row in rows]


class Shop:
    """An opened shop directory: products and FAQ in memory, orders read from SQLite, indexes on demand."""

    def __init__(self, root: str | Path, *, model_path: str = "") -> None:
        """Read ``root`` (see :func:`load_shop`); ``model_path`` is the embedding model ("" = packaged MiniLM)."""
        self.root = Path(root)
        meta_path = self.root / "meta.json"
        if not meta_path.is_file():
            raise ShopError(f"no shop at {self.root} (no meta.json); make one with "
                            f"`ragplan reaper make-shop --out {self.root}`")
        self.meta: dict[str, Any] = read_json(meta_path, ShopError, object_only=True)
        if self.meta.get("format") != FORMAT:
            raise ShopError(f"{meta_path} is not a {FORMAT} shop description")
        for name in ("products.jsonl", "faq.jsonl", "orders.sqlite"):
            if not (self.root / name).is_file():
                raise ShopError(f"incomplete shop at {self.root}: {name} is missing; regenerate it")
        self.today = parse_day(self.meta.get("today"), f"{meta_path}: 'today'", ShopError)
        """The shop's "today" (``date_math`` and the order dates are relative to it)."""
        self.model_path = model_path
        self.products: dict[str, dict[str, Any]] = {p["product_id"]: p for p in _read_jsonl(self.root / "products.jsonl",
                                                                                          "product_id")}
        for p in self.products.values():
            rs = p.get("reviews") or []
            try:
                p["rating"] = round(sum(float(r["rating"]) for r in rs) / len(rs), 1) if rs else None
            except (KeyError, TypeError, ValueError) as exc:
                raise ShopError(f"{self.root / 'products.jsonl'}: product {p['product_id']}: a review without a "
                                f"numeric rating ({exc})") from exc
            p["review_count"] = len(rs)
        self.faq: dict[str, dict[str, Any]] = {f["faq_id"]: f for f in _read_jsonl(self.root / "faq.jsonl", "faq_id")}
        self._lock = threading.Lock()
        """Guards the SQLite connection."""
        self._index_lock = threading.Lock()
        self._indexes: dict[str, Any] = {}
        self._con = sqlite3.connect(f"file:{(self.root / 'orders.sqlite').resolve()}?mode=ro", uri=True,
                                    check_same_thread=False)
        self._con.row_factory = sqlite3.Row

    def product(self, product_id: str) -> dict[str, Any]:
        """The product with this id; :class:`ToolError` naming the id when there is none."""
        pid = str(product_id or "").strip().strip("\"'").upper()
        if pid not in self.products:
            hint = "" if pid else " (the id is empty)"
            raise ToolError(f"unknown product id {product_id!r}{hint}: no product in the catalogue has it; "
                            "find ids with prod_search")
        return self.products[pid]

    def orders(self) -> list[dict[str, Any]]:
        """Every order joined with its shipment, newest order first."""
        with self._lock:
            rows = self._con.execute(
                "SELECT o.*, s.carrier, s.tracking_number, s.estimated_delivery, s.delivered_at FROM orders o "
                "JOIN shipments s USING (order_id) ORDER BY o.order_date DESC, o.order_id").fetchall()
        return [dict(r) for r in rows]

    def index(self, name: str) -> Any:
        """The FAISS :class:`~ragplan.tools.textindex.TextIndex` ``catalog`` or ``faq``, built on first use."""
        with self._index_lock:
            if name not in self._indexes:
                from ragplan.tools.textindex import TextIndex, build_index

                src = self.root / f"{name}_passages.jsonl"
                if not src.is_file():  # written by generate_shop; recreated for a hand-copied shop
                    rows = [_catalog_passage(p) for p in self.products.values()] if name == "catalog" else \
                        [_faq_passage(f) for f in self.faq.values()]
                    atomic_write(src, jsonl_text(rows))
                build_index(src, self.root / "index" / name, model_path=self.model_path, progress=False)
                self._indexes[name] = TextIndex.open(self.root / "index" / name, model_path=self.model_path)
            return self._indexes[name]

    @property
    def embedder(self) -> Any:
        """The process-wide Sentence-BERT embedder of this shop's model."""
        from ragplan.tools.embeddings import get_embedder

        return get_embedder(self.model_path)

    def close(self) -> None:
        """Close the order database and the indexes."""
        with self._lock:
            self._con.close()
        with self._index_lock:
            for ix in self._indexes.values():
                ix.close()
            self._indexes.clear()

    def __repr__(self) -> str:
        return f"Shop({str(self.root)!r}, {len(self.products)} products, today={self.today})"


load_shop = Shop
"""Open a shop directory made by :func:`generate_shop`; :class:`ShopError` when it is not one."""
