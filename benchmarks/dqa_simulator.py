"""Benchmark DQA's fast simulators against the straightforward implementation on official-size clones: "ratio" (target
≥ 10×) and "e2e" (whole verify loop, cold, target ≥ 100×) are straightforward ÷ fast; "agree" / "gold" count the
questions both sides decide alike / that match the answer. Usage: python benchmarks/dqa_simulator.py [--help]."""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/ holds the straightforward reference

from benchmarks.common import load_baseline, print_rows, save_report  # noqa: E402
from ragplan.methods.planrag.cql import read_graph_data  # noqa: E402
from ragplan.methods.planrag.data import clear_scenario_cache, load_questions, load_scenario  # noqa: E402
from ragplan.methods.planrag.generate import generate_clone  # noqa: E402
from ragplan.methods.planrag.grade import best_decision, solve_question  # noqa: E402
from ragplan.methods.planrag.locating import LocatingSolution  # noqa: E402
from tests.dqa_reference import reference_building, reference_locating  # noqa: E402

TARGET = 10.0       # simulation: straightforward / fast
E2E_TARGET = 100.0  # dqa verify per question, reading and parsing included


def _close(a: dict[Any, float], b: dict[Any, float]) -> bool:
    return a.keys() == b.keys() and all(math.isclose(a[k], b[k], rel_tol=1e-9, abs_tol=1e-9) for k in a)


def _time(fn: Any) -> float:
    """Seconds ``fn()`` takes."""
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _cold(fn: Any) -> float:
    """Seconds ``fn()`` takes from an empty scenario cache."""
    clear_scenario_cache()
    return _time(fn)


def run_scenario(scenario: str, n: int, seed: int, repeat: int, workdir: Path) -> dict[str, Any]:
    """Generate ``n`` official-size questions of ``scenario`` and time both implementations on them."""
    out = workdir / scenario
    gen_s = _time(lambda: generate_clone(out, scenario, n, seed=seed, size="official"))
    questions = load_questions(out, scenario)
    scripts = list(dict.fromkeys(q.script for q in questions))
    # fast, from a cold cache each round: parse + compile each script once, then the decisions; and the verify loop
    fast_parse = fast_sim = math.inf
    for _ in range(repeat):
        fast_parse = min(fast_parse, _cold(lambda: [load_scenario(s, scenario) for s in scripts]))
        fast_sim = min(fast_sim, _time(lambda: [best_decision(q) for q in questions]))
    fast_verify = min(_cold(lambda: [best_decision(q) for q in questions]) for _ in range(repeat))
    fast_best = [best_decision(q) for q in questions]
    sols = [solve_question(q) for q in questions]  # every option's effect, for the agreement check
    fast_effects = [{o.node: o.profit for o in s.options} if isinstance(s, LocatingSolution)
                    else {o.building_id: o.price for o in s.options} for s in sols]
    # straightforward, end to end: read and parse each question's script, then the reference
    ref_parse = ref_sim = 0.0
    ref = []
    for q in questions:
        t0 = time.perf_counter()
        data = read_graph_data(q.script)
        t1 = time.perf_counter()
        ref.append(reference_locating(data, q.country, q.home) if scenario == "locating"
                   else reference_building(data, q.goods))
        ref_parse, ref_sim = ref_parse + t1 - t0, ref_sim + time.perf_counter() - t1
    agree = sum(1 for fb, fe, (rb, re_) in zip(fast_best, fast_effects, ref)
                if fb == (None if rb is None else str(rb)) and _close(fe, re_))
    first, n, ref_total = read_graph_data(scripts[0]), len(questions), ref_parse + ref_sim
    return {"scenario": scenario, "questions": n, "scripts": len(scripts), "script_nodes": len(first.nodes),
            "script_relationships": len(first.rels), "script_kb": round(scripts[0].stat().st_size / 1024, 1),
            "generate_s": round(gen_s, 3), "fast_parse_s": round(fast_parse, 4), "fast_sim_s": round(fast_sim, 4),
            "ref_parse_s": round(ref_parse, 4), "ref_sim_s": round(ref_sim, 4), "ratio": round(ref_sim / fast_sim, 1),
            "fast_verify_ms_per_q": round(fast_verify / n * 1000, 3),
            "ref_verify_ms_per_q": round(ref_total / n * 1000, 2),
            "e2e_ratio": round(ref_total / fast_verify, 1), "agree": agree,
            "gold": sum(1 for fb, q in zip(fast_best, questions) if fb == q.answer)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--questions", type=int, default=5,
                    help="questions per scenario (default 5: ≈1.5 min, nearly all of it the straightforward side and generation)")
    ap.add_argument("--seed", type=int, default=0, help="generator seed (default 0)")
    ap.add_argument("--scenario", choices=["both", "locating", "building"], default="both")
    ap.add_argument("--repeat", type=int, default=3, help="cold-cache rounds of the fast side; the best is kept (default 3)")
    ap.add_argument("--workdir", type=Path, help="generate the clones here (kept) instead of a temporary folder")
    ap.add_argument("--baseline", type=Path, help="a JSON report saved earlier with --save: show it in the table")
    ap.add_argument("--save", type=Path, help="write this run's report as JSON")
    args = ap.parse_args(argv)
    if args.questions < 1 or args.repeat < 1:
        ap.error("--questions and --repeat must be at least 1")
    scenarios = ["locating", "building"] if args.scenario == "both" else [args.scenario]
    with tempfile.TemporaryDirectory(prefix="dqa-bench-") as tmp:
        rows = [run_scenario(s, args.questions, args.seed, args.repeat, args.workdir or Path(tmp)) for s in scenarios]
    print_rows(rows, [("scenario", "s"), ("questions", "d"), ("scripts", "d"), ("script_kb", ".1f"),
                      ("fast_parse_s", ".3f"), ("ref_parse_s", ".3f"), ("fast_sim_s", ".3f"), ("ref_sim_s", ".2f"),
                      ("ratio", ".1f"), ("fast_verify_ms_per_q", ".2f"), ("ref_verify_ms_per_q", ".1f"),
                      ("e2e_ratio", ".1f"), ("agree", "d"), ("gold", "d")],
               key="scenario", baseline=load_baseline(args.baseline), compare="fast_verify_ms_per_q")
    for field, target, what in (("ratio", TARGET, "simulation"), ("e2e_ratio", E2E_TARGET, "dqa verify per question")):
        below = [r["scenario"] for r in rows if r[field] < target]
        print(f"{what}, straightforward / fast: " + ", ".join(f"{r['scenario']} {r[field]:.1f}x" for r in rows)
              + f"; target >= {target:.0f}x: " + ("met" if not below else "NOT met for " + ", ".join(below)))
    save_report(args.save, "dqa_simulator", rows, questions=args.questions, seed=args.seed, repeat=args.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
