"""Fault figures: every graph of every family through ``ragplan.eval`` against an endpoint injecting faults (each kind,
mixed, recoverable, persistent); one row per family and scenario. Goal: 0 lost, duplicated or crashed, every
failure with a reason, every fault retried, every run inside its deadline. Usage: benchmarks/faults.py [--help]."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from benchmarks.common import add_report_flags, print_rows, save_report  # noqa: E402

SCENARIOS: list[tuple[str, tuple[str, ...], bool]] = [
    ("429", ("429",), False), ("500", ("500",), False), ("503", ("503",), False), ("hang", ("hang",), False),
    ("malformed", ("malformed",), False), ("mixed", ("429", "500", "503", "hang", "malformed"), False),
    ("persistent mixed", ("429", "500", "503", "hang", "malformed"), True),
]
SUMMED = ("questions", "finished", "failed_with_reason", "failed_without_reason", "crashed", "lost", "duplicated",
          "injected", "faulted", "retried", "wall_s", "deadline_s")


def main(argv: list[str] | None = None) -> int:
    """Run every graph under every scenario and print one row per family and scenario."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=1, help="runs per graph and scenario, each with another seed")
    add_report_flags(ap, "wall time")
    args = ap.parse_args(argv)
    os.environ.pop("OPENAI_API_KEY", None)
    warnings.simplefilter("ignore")
    import ragplan.llm as llm
    from ragplan.registry import families
    from tests.auto_reply import auto_responder
    from tests.fault_injection import run_with_faults

    llm.BACKOFF_S = 0.05  # the malformed-reply backoff, short so the table takes minutes, not hours
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for fam in families():
            data = importlib.import_module(f"tests.family_data.{fam.name}").make(root)
            for scenario, kinds, persistent in SCENARIOS:
                row: dict[str, Any] = {"family/scenario": f"{fam.name} / {scenario}", "graphs": len(fam.graphs),
                                       **dict.fromkeys(SUMMED, 0), "in_time": 0}
                for spec in fam.graphs:
                    for r in range(args.repeat):
                        run_dir = root / "runs" / f"{spec.name}-{scenario.replace(' ', '_')}-{r}"
                        figures, _ = run_with_faults(spec.name, data.eval(spec.name),
                                                     auto_responder(data.overrides, data.text), run_dir,
                                                     scenario=scenario, kinds=kinds, persistent=persistent,
                                                     seed=r * 7919 + sum(map(ord, spec.name + scenario)))
                        for k in SUMMED:
                            row[k] += getattr(figures, k)
                        row["in_time"] += int(figures.wall_s < figures.deadline_s)
                rows.append(row)
                print(f"  {row['family/scenario']}: {row['finished']}/{row['questions']} finished, "
                      f"{row['failed_with_reason']} failed with a reason, {row['lost']} lost, {row['duplicated']} duplicated, "
                      f"{row['retried']}/{row['faulted']} faulted requests retried", file=sys.stderr)
    print(f"Faults over every graph of every family ({args.repeat} run(s) per graph and scenario); "
          "sums over the family's graphs")
    print_rows(rows, [("family/scenario", "s"), ("graphs", "d"), ("questions", "d"), ("finished", "d"),
                      ("failed_with_reason", "d"), ("crashed", "d"), ("lost", "d"), ("duplicated", "d"),
                      ("injected", "d"), ("faulted", "d"), ("retried", "d"), ("wall_s", ".1f"), ("deadline_s", ".0f"), ("in_time", "d")],
               key="family/scenario", baseline=args.baseline, compare="wall_s")
    bad = [r["family/scenario"] for r in rows if r["lost"] or r["duplicated"] or r["crashed"] or r["failed_without_reason"]
           or r["retried"] < r["faulted"] or r["in_time"] < r["graphs"] * args.repeat]
    print("goal (0 lost, 0 duplicated, 0 crashed, every failure with a reason, every fault retried, no run past its "
          f"deadline): {'met' if not bad else 'NOT met for ' + ', '.join(bad)}")
    save_report(args.save, "faults", rows, repeat=args.repeat)
    return 0 if not bad else 1


if __name__ == "__main__":
    sys.exit(main())
