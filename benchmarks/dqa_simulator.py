"""`ragplan dqa verify` end to end (a fresh process, as a user runs it) against the straightforward annotator on a
generated clone in the official layout and sizes (200 locating questions, a q<N>.cql each, up to 20 sharing a content
as the official clone's share 10; 101 building questions, a script each). Rounds alternate a verify run with a share
of the reference, so load falls on both; "ratio" = reference / verify (wall; "cpu" likewise), target ≥ 100×; "agree"
counts the questions both decide alike, "gold" verify's agreement with the answers. Usage: python
benchmarks/dqa_simulator.py."""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests/ holds the straightforward reference

from benchmarks.common import add_report_flags, print_rows, save_report  # noqa: E402
from ragplan.methods.planrag.cql import read_graph_data  # noqa: E402
from ragplan.methods.planrag.data import load_questions  # noqa: E402
from ragplan.methods.planrag.generate import generate_clone  # noqa: E402
from tests.dqa_reference import reference_building, reference_locating  # noqa: E402

TARGET = 100.0
OFFICIAL = {"locating": 200, "building": 101}


def _children_cpu() -> float:
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    return use.ru_utime + use.ru_stime


def run_verify(clone: Path, scenario: str) -> tuple[float, float, list[dict[str, Any]]]:
    """Wall and CPU seconds of ``ragplan dqa verify --json`` in a fresh process, and its rows."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    cpu, t0 = _children_cpu(), time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "ragplan", "dqa", "verify", "--data", str(clone), "--scenario", scenario,
                          "--json"], capture_output=True, text=True, env=env)
    wall, cpu = time.perf_counter() - t0, _children_cpu() - cpu
    if out.returncode != 0:
        raise SystemExit(f"ragplan dqa verify failed ({out.returncode}): {out.stderr.strip()[-2000:]}")
    return wall, cpu, [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


def run_scenario(scenario: str, n: int, seed: int, rounds: int, workdir: Path) -> dict[str, Any]:
    """Generate ``n`` questions of ``scenario`` in the official layout and time verify and the reference on them."""
    clone = workdir / scenario
    t0 = time.perf_counter()
    generate_clone(clone, scenario, n, seed=seed, size="official")
    gen_s = time.perf_counter() - t0
    questions = load_questions(clone, scenario)
    walls, cpus, ref_best = [], [], {}
    ref_wall = ref_cpu = 0.0
    for r in range(rounds):  # a verify run, then this round's share of the reference
        wall, cpu, rows = run_verify(clone, scenario)
        walls.append(wall)
        cpus.append(cpu)
        t0, c0 = time.perf_counter(), time.process_time()
        for q in questions[r::rounds]:  # read and parse each question's script, then the reference
            data = read_graph_data(q.script)
            best = (reference_locating(data, q.country, q.home) if scenario == "locating"
                    else reference_building(data, q.goods))[0]
            ref_best[q.num] = None if best is None else str(best)
        ref_wall, ref_cpu = ref_wall + time.perf_counter() - t0, ref_cpu + time.process_time() - c0
    verify_wall, verify_cpu = statistics.median(walls), statistics.median(cpus)
    return {"scenario": scenario, "questions": len(questions),
            "scripts": len({q.script.read_bytes() for q in questions}),
            "generate_s": round(gen_s, 1), "verify_s": round(verify_wall, 3), "verify_cpu_s": round(verify_cpu, 3),
            "ref_s": round(ref_wall, 1), "ref_cpu_s": round(ref_cpu, 1), "ratio": round(ref_wall / verify_wall, 1),
            "cpu_ratio": round(ref_cpu / verify_cpu, 1),
            "agree": sum(1 for row in rows if row["simulated"] == ref_best[row["question_num"]]),
            "gold": sum(1 for row in rows if row["agree"]), "load": round(os.getloadavg()[0], 1)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--questions", type=int, help="questions per scenario (default: the official 200 locating, 101 "
                    "building; the reference takes about 2.5 s / 1 s a question on an idle machine)")
    ap.add_argument("--seed", type=int, default=0, help="generator seed (default 0)")
    ap.add_argument("--scenario", choices=["both", "locating", "building"], default="both")
    ap.add_argument("--rounds", type=int, default=3, help="verify runs (the median is kept), each followed by a share "
                                                          "of the reference (default 3)")
    ap.add_argument("--workdir", type=Path, help="generate the clones here (kept) instead of a temporary folder")
    add_report_flags(ap, "verify_s")
    args = ap.parse_args(argv)
    if (args.questions is not None and args.questions < 1) or args.rounds < 1:
        ap.error("--questions and --rounds must be at least 1")
    scenarios = ["locating", "building"] if args.scenario == "both" else [args.scenario]
    with tempfile.TemporaryDirectory(prefix="dqa-bench-") as tmp:
        rows = [run_scenario(s, args.questions or OFFICIAL[s], args.seed, args.rounds, args.workdir or Path(tmp))
                for s in scenarios]
    print_rows(rows, [("scenario", "s"), ("questions", "d"), ("scripts", "d"), ("verify_s", ".2f"), ("ref_s", ".1f"),
                      ("ratio", ".1f"), ("verify_cpu_s", ".2f"), ("ref_cpu_s", ".1f"), ("cpu_ratio", ".1f"),
                      ("agree", "d"), ("gold", "d"), ("load", ".1f")],
               key="scenario", baseline=args.baseline, compare="verify_s")
    below = [r["scenario"] for r in rows if r["ratio"] < TARGET]
    print("ragplan dqa verify end to end, straightforward / verify: "
          + ", ".join(f"{r['scenario']} {r['ratio']:.1f}x (cpu {r['cpu_ratio']:.1f}x)" for r in rows)
          + f"; target >= {TARGET:.0f}x: " + ("met" if not below else "NOT met for " + ", ".join(below)))
    save_report(args.save, "dqa_simulator", rows, seed=args.seed, rounds=args.rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
