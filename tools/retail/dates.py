"""Deterministic date arithmetic for ``date_math`` against a fixed ``today`` (the shop's): expressions such as
tomorrow, next week, ``in 3 days``, ``2 weeks ago``, weekdays, month names, ISO dates and ranges to inclusive
date ranges, and formatting."""

from __future__ import annotations

import calendar
import datetime as dt
import re
from typing import Any

from dateutil.relativedelta import relativedelta, weekday
from langchain_core.tools import ToolException

__all__ = ["ToolError", "parse_day", "resolve_range", "parse_range_arg", "format_values", "parse_datetime"]


class ToolError(ToolException):
    """A retail tool call that cannot be answered (unknown product id, no matching order, bad date)."""

    tool = ""
    """The tool that raised it, set by the registry's tools ("" when raised outside one)."""


_NUM = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
        "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "couple": 2, "few": 3}
_WEEKDAYS = [d.lower() for d in calendar.day_name]
_MONTHS = [m.lower() for m in calendar.month_name][1:]
_ISO = re.compile(r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?)?")
_HELP = ("use e.g. 'today', 'tomorrow', 'next week', 'last month', 'in 3 days', 'last 30 days', 'friday', "
         "'2026-11-20' or '2026-11-01..2026-11-10'")


def _month(d: dt.date) -> tuple[dt.date, dt.date]:
    return d.replace(day=1), d.replace(day=calendar.monthrange(d.year, d.month)[1])


def _shift(today: dt.date, n: int, unit: str) -> dt.date:
    return today + relativedelta(**{f"{unit}s": n})


def _number(tok: str) -> int | None:
    return int(tok) if tok.isdigit() else _NUM.get(tok)


def parse_day(value: Any, what: str, error: type[ValueError] = ValueError) -> dt.date:
    """``value`` (a date or ``YYYY-MM-DD``) as a date; ``error`` naming ``what`` when it is none."""
    try:
        return value if isinstance(value, dt.date) else dt.date.fromisoformat(str(value))
    except ValueError:
        raise error(f"{what} should be a date (YYYY-MM-DD), got {value!r}") from None


def parse_datetime(text: str) -> dt.datetime | None:
    """The first ISO date or datetime in ``text`` (a date alone → midnight), or None."""
    m = _ISO.search(text or "")
    if not m:
        return None
    try:
        return dt.datetime.fromisoformat(m.group().replace(" ", "T"))
    except ValueError:
        return None


def resolve_range(expr: str, today: dt.date) -> tuple[dt.date, dt.date]:
    """The inclusive (start, end) dates an expression means relative to ``today``; ToolError if none."""
    raw = " ".join(str(expr or "").strip().split())
    text = re.sub(r"[,?!]", "", raw.lower())
    text = re.sub(r"^(?:on|by|for|during|from|since|the)\s+|\s+(?:from now|from today)$", "", text)
    text = re.sub(r"\bthe\b\s*", "", text).strip()
    iso = _ISO.findall(raw)
    if iso and re.fullmatch(r"\s*\S+\s*(?:\.\.|to|/|–)\s*\S+\s*", raw) and len(iso) == 2:
        a, b = (parse_datetime(x) for x in iso)
        if a and b:
            return (a.date(), b.date()) if a <= b else (b.date(), a.date())
    if len(iso) == 1 and _ISO.fullmatch(raw.strip()) and (parsed := parse_datetime(iso[0])):
        return parsed.date(), parsed.date()
    single = {"today": 0, "now": 0, "tonight": 0, "this morning": 0, "this evening": 0, "tomorrow": 1, "yesterday": -1,
              "day after tomorrow": 2, "day before yesterday": -2}
    if text in single:
        d = today + dt.timedelta(days=single[text])
        return d, d
    m = re.fullmatch(r"(this|current|next|coming|last|past|previous) (week|month|year|weekend)", text)
    if m:
        k = {"this": 0, "current": 0, "next": 1, "coming": 1}.get(m.group(1), -1)
        unit = m.group(2)
        if unit in ("week", "weekend"):
            monday = today - dt.timedelta(days=today.weekday()) + dt.timedelta(weeks=k)
            return (monday + dt.timedelta(days=5), monday + dt.timedelta(days=6)) if unit == "weekend" else \
                (monday, monday + dt.timedelta(days=6))
        if unit == "month":
            return _month(today.replace(day=1) + relativedelta(months=k))
        return dt.date(today.year + k, 1, 1), dt.date(today.year + k, 12, 31)
    units = r"(day|week|month|year)s?"
    m = re.fullmatch(r"(in |after )?(?:a )?(\w+)(?: of)? " + units + "( ago)?", text)  # "in 3 days", "2 weeks ago"
    if m and bool(m.group(1)) != bool(m.group(4)) and (count := _number(m.group(2))) is not None:
        d = _shift(today, -count if m.group(4) else count, m.group(3))
        return d, d
    m = re.fullmatch(r"(last|past|previous|next|coming|within|within next|over next) (?:a )?(\w+)(?: of)? " + units, text)
    if m and (n := _number(m.group(2))) is not None:
        back = m.group(1) in ("last", "past", "previous")
        d = _shift(today, -n if back else n, m.group(3))
        return (d, today) if back else (today, d)
    m = re.fullmatch(r"(?:(this|next|last|coming|past) )?(" + "|".join(_WEEKDAYS) + ")", text)
    if m:  # last: the one before today; next: the one after today; else today or the next one
        back = m.group(1) in ("last", "past")
        d = today + relativedelta(days=-1 if back else 1 if m.group(1) == "next" else 0,
                                  weekday=weekday(_WEEKDAYS.index(m.group(2)), -1 if back else 1))
        return d, d
    m = re.fullmatch(r"(?:(this|next|last) )?(?:in )?(" + "|".join(_MONTHS) + r")(?: (\d{4}))?", text)
    if m:
        month = _MONTHS.index(m.group(2)) + 1
        year = int(m.group(3)) if m.group(3) else today.year + {"next": 1, "last": -1}.get(m.group(1) or "", 0)
        if m.group(1) == "next" and month > today.month:
            year -= 1
        if m.group(1) == "last" and month < today.month:
            year += 1
        return _month(dt.date(year, month, 1))
    raise ToolError(f"cannot read the date expression {raw!r}; {_HELP}")


def parse_range_arg(value: Any, today: dt.date) -> tuple[dt.date, dt.date]:
    """A ``date_range`` argument as (start, end): a ``{"start","end"}`` dict, ``"A..B"``, a date or an expression."""
    if isinstance(value, dict):
        if "start" not in value and "end" not in value:
            raise ToolError(f"a date_range dict needs 'start' and 'end' (ISO dates), got keys {sorted(value)}")
        a = parse_datetime(str(value.get("start") or value.get("end")))
        b = parse_datetime(str(value.get("end") or value.get("start")))
        if a is None or b is None:
            raise ToolError(f"date_range {value!r} does not hold ISO dates")
        return (a.date(), b.date()) if a <= b else (b.date(), a.date())
    if isinstance(value, (list, tuple)) and len(value) == 2:
        return parse_range_arg({"start": value[0], "end": value[1]}, today)
    if isinstance(value, str):
        return resolve_range(value, today)
    raise ToolError(f"a date range must be a {{'start','end'}} dict, a 'YYYY-MM-DD..YYYY-MM-DD' string or a date "
                    f"expression such as 'tomorrow', got {type(value).__name__}")


_DT_FIELDS = ("estimated_delivery", "delivered_at", "datetime", "date", "order_date")


def format_values(value: Any, fmt: str) -> Any:
    """``value`` with every date/datetime in it formatted with ``fmt``."""
    if isinstance(value, (list, tuple)):
        out = [format_values(v, fmt) for v in value]
        if not out:
            raise ToolError("nothing to format: the input list is empty")
        return out
    if isinstance(value, dict):
        if "start" in value or "end" in value:
            return {k: format_values(value[k], fmt) for k in ("start", "end") if value.get(k)}
        for f in _DT_FIELDS:
            if value.get(f):
                res = format_values(str(value[f]), fmt)
                return {**({"order_id": value["order_id"]} if "order_id" in value else {}), "field": f, **res}
        raise ToolError(f"no date or datetime found in {sorted(value)}; pass an ISO datetime, a date range or an order")
    when = parse_datetime(str(value))
    if when is None:
        raise ToolError(f"no ISO date or datetime in {str(value)[:80]!r} to format")
    if "%" not in fmt:
        raise ToolError(f"format {fmt!r} has no strftime directive (e.g. '%I:%M %p' or '%A, %B %d')")
    try:
        text = when.strftime(fmt)
    except ValueError as exc:
        raise ToolError(f"bad date format {fmt!r}: {exc}") from exc
    return {"value": when.isoformat(), "formatted": text}
