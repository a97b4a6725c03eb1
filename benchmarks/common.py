"""What the benchmark scripts share: saving a run's figures, reading a baseline, printing a table with ratios."""

from __future__ import annotations

import argparse
import json
import platform
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

__all__ = ["save_report", "print_rows", "add_report_flags"]


def add_report_flags(ap: argparse.ArgumentParser, compare: str) -> None:
    """``--save FILE.json`` (this run's report) and ``--baseline FILE.json`` (its ``compare`` and the ratio shown)."""
    ap.add_argument("--save", type=Path, help="write this run's report as JSON")
    ap.add_argument("--baseline", type=Path, help=f"a report saved with --save: show its {compare} and the ratio")


def save_report(path: Path | None, name: str, rows: list[dict[str, Any]], **meta: Any) -> None:
    """Write ``{benchmark, created, machine, rows, …}`` as JSON when ``path`` is given."""
    if path is None:
        return
    report = {"benchmark": name, "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
              "machine": f"{platform.machine()} {platform.python_version()}", "rows": rows, **meta}
    path.write_text(json.dumps(report, indent=2))
    print(f"saved {path}")


def print_rows(rows: list[dict[str, Any]], columns: list[tuple[str, str]], key: str, baseline: Path | None = None,
               compare: str = "") -> None:
    """A fixed-width table of ``rows`` (``columns``: field, format), with the ``compare`` of the ``baseline`` report's
    rows (one saved earlier with ``--save``) and the ratio."""
    from ragplan.eval.figures import format_table

    base = {r.get(key): r for r in json.loads(baseline.read_text()).get("rows", [])} if baseline else {}
    ratio = baseline is not None and bool(compare)
    cells = []
    for r in rows:
        line = [format(r.get(c), f) if r.get(c) is not None else "-" for c, f in columns]
        if ratio:
            b = base.get(r.get(key), {}).get(compare)
            line += ["-", "-"] if b in (None, 0) else [f"{b:.3g}", f"{r.get(compare, 0) / b:.2f}"]
        cells.append(line)
    heads = [c for c, _ in columns] + (["baseline", "ratio"] if ratio else [])
    print(format_table(heads, cells, style="plain", right=True))
