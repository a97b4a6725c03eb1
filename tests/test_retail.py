"""The REAPER retail suite: a generated shop (deterministic for a seed) and every tool over its real stores.

One 80-product shop per module; its FAISS indexes are built by the first search with the real
all-MiniLM-L6-v2 (loaded once per process). Expected values are read from the stores themselves
(products.jsonl, orders.sqlite), never from the generator's templates.
"""

from __future__ import annotations

import argparse
import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from ragplan.tools.suites import get_suite
from ragplan.tools.retail import (
    NEW_TOOLS, TOOL_NAMES, ShopError, ToolError, build_retail_registry, generate_shop, load_shop,
)
from ragplan.tools.retail.dates import resolve_range

TODAY = "2026-11-22"  # a Sunday
TOMORROW = "2026-11-23"


@pytest.fixture(scope="module")
def shop_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return generate_shop(tmp_path_factory.mktemp("shop"), seed=3, n_products=80, n_orders=60, today=TODAY)


@pytest.fixture(scope="module")
def shop(shop_dir: Path):
    s = load_shop(shop_dir)
    yield s
    s.close()


@pytest.fixture(scope="module")
def tools(shop_dir: Path) -> dict[str, Any]:
    return {s.name: s.tool for s in build_retail_registry(str(shop_dir))}


def _of_type(shop, ptype: str) -> list[dict[str, Any]]:
    return [p for p in shop.products.values() if p["product_type"] == ptype]


# --- the shop --------------------------------------------------------------------------------------

def test_generate_is_deterministic_per_seed(tmp_path: Path) -> None:
    a = generate_shop(tmp_path / "a", seed=5, n_products=40, n_orders=30)
    b = generate_shop(tmp_path / "b", seed=5, n_products=40, n_orders=30)
    files = sorted(f.name for f in a.iterdir() if f.is_file())
    assert {"meta.json", "products.jsonl", "orders.sqlite", "faq.jsonl"} <= set(files)
    for name in files:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
    c = generate_shop(tmp_path / "c", seed=6, n_products=40, n_orders=30)
    assert (c / "products.jsonl").read_bytes() != (a / "products.jsonl").read_bytes()
    d = generate_shop(tmp_path / "d", seed=5, n_products=40, n_orders=12)  # orders have their own random stream
    assert (d / "products.jsonl").read_bytes() == (a / "products.jsonl").read_bytes()
    assert json.loads((a / "meta.json").read_text())["seed"] == 5


def test_shop_contents(shop, shop_dir: Path) -> None:
    meta = json.loads((shop_dir / "meta.json").read_text())
    assert meta["today"] == TODAY and meta["counts"]["products"] == len(shop.products) == 80
    assert 35 <= len(shop.faq) <= 45 and meta["counts"]["faq"] == len(shop.faq)
    for pid, p in shop.products.items():
        assert re.fullmatch(r"[A-Z0-9]{10}", pid)
        assert p["title"] and p["brand"] and p["price"] > 0 and p["attributes"] and p["qna"] and p["description"]
        assert len(p["reviews"]) >= 3 and all(1 <= r["rating"] <= 5 for r in p["reviews"])
    assert {"tires", "sheet pans", "chocolate", "phone cases", "chargers", "running shoes", "coffee makers",
            "laptop bags"} <= {p["product_type"] for p in shop.products.values()}
    orders = shop.orders()
    assert len(orders) == meta["counts"]["orders"] == 60
    for o in orders:
        assert o["product_id"] in shop.products and o["order_date"][:10] <= TODAY
        assert (o["delivered_at"] is not None) == (o["status"] in ("delivered", "returned")), o
        if o["status"] in ("shipped", "out for delivery", "preparing for shipment", "delayed"):
            assert o["estimated_delivery"][:10] >= TODAY


def test_load_shop_refuses_a_non_shop(tmp_path: Path) -> None:
    with pytest.raises(ShopError, match="no shop"):
        load_shop(tmp_path)
    with pytest.raises(ShopError):
        build_retail_registry(str(tmp_path))


def test_shop_files_are_the_shared_jsonl_text(shop, shop_dir: Path) -> None:
    """The shop writes its JSONL with ragplan.jsonl's writer, one record a line even with Unicode line separators."""
    from ragplan.jsonl import jsonl_text, read_jsonl_objects

    rows = [{"q": "a\u2028b\u2029c\x85d é"}, {"n": [1, 2]}]
    (shop_dir.parent / "rows.jsonl").write_text(jsonl_text(rows), encoding="utf-8")
    assert jsonl_text(rows).count("\n") == 2 and "\u2028" in jsonl_text(rows)
    assert read_jsonl_objects(shop_dir.parent / "rows.jsonl") == [(1, rows[0]), (2, rows[1])]
    stored = [{k: v for k, v in p.items() if k not in ("rating", "review_count")} for p in shop.products.values()]
    assert (shop_dir / "products.jsonl").read_text(encoding="utf-8") == jsonl_text(stored)


def test_date_arithmetic_imports_no_other_retail_module() -> None:
    """ToolError lives in dates.py, the lightest module that raises it: date arithmetic does not load the shop."""
    import ast

    import ragplan.tools.retail.dates as dates

    tree = ast.parse(Path(dates.__file__).read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not {m for m in imported if m and m.startswith("ragplan.tools.retail")}, imported


# --- the tools over the real stores ---------------------------------------------------------------

def test_prod_search_finds_the_product(tools, shop) -> None:
    hits = tools["prod_search"].invoke({"query": "nut free chocolate coins"})
    assert 1 <= len(hits) <= 5 and json.dumps(hits)
    assert "Nut-Free" in hits[0]["title"] and "Coins" in hits[0]["title"]
    assert hits[0]["rating"] == shop.products[hits[0]["product_id"]]["rating"]
    printer = _of_type(shop, "printers")[0]
    top = tools["prod_search"].invoke({"query": f"{printer['attributes']['model']} wireless printer"})[0]
    assert shop.products[top["product_id"]]["attributes"].get("model") == printer["attributes"]["model"]
    with pytest.raises(ToolError):
        tools["prod_search"].invoke({"query": "  "})


def test_prod_qna_returns_the_right_attribute(tools, shop) -> None:
    tire = next(p for p in _of_type(shop, "tires") if "TrailGuard LTX" in p["title"])
    out = tools["prod_qna"].invoke({"product_id": tire["product_id"],
                                    "question": f"What is the tread depth of the {tire['title']}?"})
    assert out["attributes"]["tread_depth"] == tire["attributes"]["tread_depth"]
    depth = tire["attributes"]["tread_depth"].split()[0]  # e.g. 11/32
    assert all(depth in e["text"] for e in out["evidence"][:2]), out["evidence"]
    assert any(e.get("attribute") == "tread_depth" for e in out["evidence"])
    json.dumps(out)
    choc = next(p for p in _of_type(shop, "chocolate") if "Nut-Free" in p["title"])
    ev = tools["prod_qna"].invoke({"product_id": choc["product_id"], "question": "is this safe for a nut allergy?"})["evidence"]
    assert "nut" in ev[0]["text"].lower()


def test_review_summary_matches_the_stored_reviews(tools, shop) -> None:
    for p in sorted(shop.products.values(), key=lambda p: -len(p["reviews"]))[:5]:
        s = tools["review_summary"].invoke({"product_id": p["product_id"]})
        ratings = [r["rating"] for r in p["reviews"]]
        assert s["review_count"] == len(ratings)
        assert s["average_rating"] == round(sum(ratings) / len(ratings), 2)
        assert s["rating_counts"] == {str(k): ratings.count(k) for k in (5, 4, 3, 2, 1)}
        for key, rated in (("pros", lambda r: r >= 4), ("cons", lambda r: r <= 2)):
            for item in s[key]:  # each phrase is counted in the texts, not taken from a list
                pat = re.compile(rf"\b{re.escape(item['phrase'])}\b")
                found = sum(1 for r in p["reviews"] if rated(r["rating"]) and pat.search(f"{r['title']}. {r['text']}".lower()))
                assert found == item["reviews"], (item, p["product_id"])
        json.dumps(s)
    assert any(tools["review_summary"].invoke({"product_id": p["product_id"]})["pros"] for p in shop.products.values())


def test_shipment_status_with_a_date_math_range(tools, shop_dir: Path) -> None:
    rng = tools["date_math"].invoke({"expr": "tomorrow"})
    assert (rng["start"], rng["end"]) == (TOMORROW, TOMORROW)
    found = tools["shipment_status"].invoke({"keywords": "sheet pan", "date_range": rng})
    with sqlite3.connect(shop_dir / "orders.sqlite") as con:
        want = {r[0] for r in con.execute(
            "SELECT o.order_id FROM orders o JOIN shipments s USING (order_id) "
            "WHERE o.title LIKE '%Sheet Pan%' AND substr(s.estimated_delivery, 1, 10) = ?", (TOMORROW,))}
    assert want and {o["order_id"] for o in found} == want
    assert all(o["estimated_delivery"].startswith(TOMORROW) for o in found)
    same = tools["shipment_status"].invoke({"date_range": f"{TOMORROW}..{TOMORROW}", "keywords": "my sheet pans"})
    assert [o["order_id"] for o in same] == [o["order_id"] for o in found]
    when = tools["date_math"].invoke({"expr": found, "operation": "format_date_time", "fmt": "%I:%M %p"})
    assert when[0]["formatted"] == "02:30 PM" and when[0]["order_id"] == found[0]["order_id"]
    with pytest.raises(ToolError, match="kayak"):
        tools["shipment_status"].invoke({"keywords": "inflatable kayak"})
    with pytest.raises(ToolError, match="none is estimated to arrive"):
        tools["shipment_status"].invoke({"keywords": "sheet pan", "date_range": {"start": "2027-03-01", "end": "2027-03-02"}})
    recent = tools["shipment_status"].invoke({})
    assert 1 <= len(recent) <= 10 and json.dumps(recent)


def test_shipment_status_puts_the_named_product_type_first(tools, shop) -> None:
    cams = tools["shipment_status"].invoke({"keywords": "camera"})  # cameras and camera batteries both match
    types = [shop.products[o["product_id"]]["product_type"] for o in cams]
    assert types[0] == "cameras" and types == sorted(types, key=lambda t: t != "cameras")
    yesterday = tools["date_math"].invoke({"expr": "yesterday"})
    ordered = [o for o in cams if o["order_date"].startswith(yesterday["start"])]
    assert ordered and ordered[0]["status"] == "preparing for shipment"  # the paper's "camera I ordered yesterday"


def test_customer_support_finds_the_cancel_subscription_article(tools) -> None:
    hits = tools["customer_support"].invoke({"question": "how do i cancel all subscribe and save items"})
    assert "Subscribe & Save" in hits[0]["question"] and "cancel" in hits[0]["question"].lower()
    assert hits[0]["topic"] == "subscribe & save" and hits[0]["answer"]
    assert tools["customer_support"].invoke({"question": "how many days do I have to send something back"})[0]["topic"] == "returns"


@pytest.mark.parametrize("expr, start, end", [
    ("today", TODAY, TODAY), ("Tomorrow", TOMORROW, TOMORROW), ("yesterday", "2026-11-21", "2026-11-21"),
    ("next week", "2026-11-23", "2026-11-29"), ("last week", "2026-11-09", "2026-11-15"),
    ("this week", "2026-11-16", "2026-11-22"), ("last month", "2026-10-01", "2026-10-31"),
    ("next month", "2026-12-01", "2026-12-31"), ("in 3 days", "2026-11-25", "2026-11-25"),
    ("last 30 days", "2026-10-23", TODAY), ("two weeks ago", "2026-11-08", "2026-11-08"),
    ("next 2 weeks", TODAY, "2026-12-06"), ("friday", "2026-11-27", "2026-11-27"),
    ("last friday", "2026-11-20", "2026-11-20"), ("november", "2026-11-01", "2026-11-30"),
    ("2026-11-01..2026-11-10", "2026-11-01", "2026-11-10"), ("2026-12-24", "2026-12-24", "2026-12-24"),
    ("day after tomorrow", "2026-11-24", "2026-11-24"), ("this weekend", "2026-11-21", TODAY),
])
def test_date_math_expressions(expr: str, start: str, end: str) -> None:
    import datetime as dt

    a, b = resolve_range(expr, dt.date.fromisoformat(TODAY))
    assert (a.isoformat(), b.isoformat()) == (start, end)


def test_date_math_tool(tools, shop_dir: Path) -> None:
    dm = tools["date_math"]
    assert dm.invoke({"expr": "last 30 days"})["start"] == "2026-10-23"
    assert dm.invoke({"expr": "2026-11-23T14:30:00", "operation": "format_date_time", "fmt": "%I:%M %p"})["formatted"] == "02:30 PM"
    text = dm.invoke({"expr": "Estimated delivery time: 2026-11-23T09:05:00", "operation": "format_date_time", "fmt": "%I:%M %p"})
    assert text["formatted"] == "09:05 AM"
    both = dm.invoke({"expr": {"start": "2026-11-23", "end": "2026-11-29"}, "operation": "format_date_time", "fmt": "%b %d"})
    assert (both["start"]["formatted"], both["end"]["formatted"]) == ("Nov 23", "Nov 29")
    assert dm.invoke({"expr": "2026-12-01", "operation": "days_from_today"})["days_from_today"] == 9
    for bad in ({"expr": "when pigs fly"}, {"expr": "tomorrow", "operation": "moon_phase"},
                {"expr": "no date here", "operation": "format_date_time", "fmt": "%H"},
                {"expr": "2026-11-23T10:00:00", "operation": "format_date_time", "fmt": "hours"},
                {"expr": {"start": "soon", "end": "later"}}):  # (a range read as shipment_status reads its own)
        with pytest.raises(ToolError) as err:
            dm.invoke(bad)
        assert err.value.tool == "date_math"
    later = {s.name: s.tool for s in build_retail_registry(str(shop_dir), today="2026-12-25")}
    assert later["date_math"].invoke({"expr": "tomorrow"})["start"] == "2026-12-26"


def test_compatible_products(tools, shop) -> None:
    for phone in _of_type(shop, "smartphones"):
        out = tools["compatible_products"].invoke({"base_product_id": phone["product_id"], "product_type": "phone case"})
        assert out["product_type"] == "phone cases" and out["compatible"], phone["title"]
        for c in out["compatible"]:
            assert phone["attributes"]["model"] in shop.products[c["product_id"]]["attributes"]["compatible_with"]
    printer = _of_type(shop, "printers")[0]
    ink = tools["compatible_products"].invoke({"base_product_id": printer["product_id"], "product_type": "ink cartridges"})
    assert ink["compatible"] and all(printer["attributes"]["model"] in shop.products[c["product_id"]]["attributes"]["compatible_with"]
                                     for c in ink["compatible"])
    laptop = _of_type(shop, "laptops")[0]
    none = tools["compatible_products"].invoke({"base_product_id": laptop["product_id"], "product_type": "phone case"})
    assert none["compatible"] == [] and "note" in none
    with pytest.raises(ToolError, match="unknown product type"):
        tools["compatible_products"].invoke({"base_product_id": laptop["product_id"], "product_type": "garden hose"})


@pytest.mark.parametrize("a, b, why", [
    ({"model": "M1"}, {"compatible_with": ["M1"]}, "made for the M1"),
    ({"compatible_with": ["M2"]}, {"model": "M2"}, "the base product is made for the M2"),
    ({"compatible_with": ["X", "Y"]}, {"compatible_with": ["Y"]}, "both fit the Y"),
    ({"tire_size": "235/65R18"}, {"tire_sizes": ["235/65R18"]}, "fits tire size 235/65R18"),
    ({"tire_sizes": ["205/55R16"]}, {"tire_size": "205/55R16"}, "is tire size 205/55R16, which the base product fits"),
    ({"tire_size": "205/55R16"}, {"tire_size": "205/55R16"}, "same tire size 205/55R16"),
    ({"pod_format": "BrewDisc"}, {"pod_format": "BrewDisc"}, "uses BrewDisc pods"),
    ({"screen_size": "14 in"}, {"fits_laptops_up_to": "15.6 in"}, "holds laptops up to 15.6 in (base is 14 in)"),
    ({"fits_laptops_up_to": "15.6 in"}, {"screen_size": "14 in"}, "its 14 in screen fits a bag for up to 15.6 in"),
    ({"fits_laptops_up_to": "15.6 in"}, {"screen_size": "16 in"}, None),
    ({"model": "M1", "tire_size": "A"}, {"compatible_with": ["M2"], "tire_size": "B", "pod_format": "P"}, None),
])
def test_compatibility_reasons(a, b, why) -> None:
    from ragplan.tools.retail.tools import compatibility

    base_type = "laptops" if "screen_size" in a else "bags"
    assert compatibility({"attributes": a, "product_type": base_type},
                         {"attributes": b, "product_type": "laptops" if "screen_size" in b else "x"}) == why


def test_unknown_product_id_is_a_clear_error(tools) -> None:
    for name, args in (("prod_qna", {"product_id": "ZZZZZZZZZ9", "question": "how big is it?"}),
                       ("review_summary", {"product_id": "ZZZZZZZZZ9"}),
                       ("compatible_products", {"base_product_id": "ZZZZZZZZZ9", "product_type": "phone case"})):
        with pytest.raises(ToolError, match="unknown product id 'ZZZZZZZZZ9'") as err:
            tools[name].invoke(args)
        assert err.value.tool == name


# --- registry -------------------------------------------------------------------------------------

def test_registry_specs(monkeypatch: pytest.MonkeyPatch, shop_dir: Path) -> None:
    import ragplan.tools.retail.tools as rt

    def no_store(*a: Any, **k: Any) -> Any:
        raise AssertionError("a specs-only registry must not open a store")

    monkeypatch.setattr(rt, "load_shop", no_store)
    reg = build_retail_registry()
    assert reg.names() == TOOL_NAMES and len(reg) == 7 and all(s.tool is None for s in reg)
    assert get_suite("retail").names() == TOOL_NAMES
    sigs = {s.name: s.signature for s in reg}
    assert sigs["prod_qna"] == "prod_qna(product_id, question)"
    assert sigs["shipment_status"] == "shipment_status(keywords=…, date_range=…)"
    assert sigs["date_math"] == "date_math(expr, operation=…, fmt=…)"
    assert sigs["compatible_products"] == "compatible_products(base_product_id, product_type)"
    assert {a.name: a.type for a in reg.get("shipment_status").args}["date_range"] == "date_range"
    for s in reg:
        m = re.fullmatch(r"#E(\d+) = (\w+)\((.*)\)", s.example)
        assert m and m.group(2) == s.name and m.group(3), s.example
        assert s.description and len(s.aliases) >= 2 and s.name not in s.aliases
    assert "compatible_products" not in build_retail_registry(include_new_tool=False)
    assert NEW_TOOLS == ["compatible_products"]
    assert "Example: #E1 = prod_search(" in reg.prompt_block()


def test_bound_registry_matches_its_specs(shop_dir: Path) -> None:
    reg = build_retail_registry(str(shop_dir), include_new_tool=False)
    assert reg.names() == [n for n in TOOL_NAMES if n not in NEW_TOOLS]
    for s in reg:
        assert s.tool.name == s.name and s.tool.description == s.description
        assert list(s.tool.args_schema.model_fields) == [a.name for a in s.args]
        assert [f.is_required() for f in s.tool.args_schema.model_fields.values()] == [a.required for a in s.args]


def test_cli_make_shop(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from ragplan.methods.reaper.cli import add_shop_parser, run_shop

    parser = argparse.ArgumentParser()
    add_shop_parser(parser.add_subparsers(dest="cmd"))
    args = parser.parse_args(["make-shop", "--out", str(tmp_path / "s"), "--seed", "2", "--products", "20",
                              "--orders", "10", "--today", "2026-06-01"])
    assert run_shop(args) == 0 and "20 products" in capsys.readouterr().out
    meta = json.loads((tmp_path / "s" / "meta.json").read_text())
    assert (meta["seed"], meta["today"], meta["counts"]["orders"]) == (2, "2026-06-01", 10)
    assert run_shop(parser.parse_args(["make-shop", "--out", str(tmp_path / "x"), "--today", "June 1"])) == 2
    assert "--today" in capsys.readouterr().err
