"""Benchmark DQA's fast simulators against the straightforward implementation, on official-size data.

Generates a DQA-style clone of official size for each scenario (``ragplan.methods.planrag.generate``, size
``official``: ≈80 trade nodes and ≈665 countries per locating script, one script file per question;
≈50 goods and ≈250 buildings per building script, shared by up to three questions) and times what
``ragplan dqa verify`` does, two ways, in one run:

* fast — ``ragplan.methods.planrag.data.load_scenario`` (read, hash, parse, compile to index form; cached by
  content) and ``ragplan.methods.planrag.grade.best_decision`` per question (``solve_locating`` /
  ``solve_building``);
* straightforward — ``ragplan.methods.planrag.cql.read_graph_data`` (read and parse the question's script) and
  ``tests.dqa_reference.reference_locating`` / ``reference_building`` per question (dicts, loops and
  a deepcopy of the whole state per option).

Columns: "parse" (each distinct script once on the fast side, with compiling; each question's script
on the straightforward side) and "sim" (the decisions) in seconds, "sim ratio" straightforward ÷ fast
simulation (target ≥ 10×). "verify/q" is the end-to-end figure: milliseconds per question of the
``dqa verify`` loop from a cold cache — fast: ``best_decision`` per question; straightforward: read,
parse and simulate each question's script — and "e2e" their ratio (target ≥ 100×). "agree" counts
the questions where both pick the same decision and compute the same effect for every option (and
"gold" those where that decision is the clone's gold answer). The fast side is run ``--repeat``
times from a cold cache and its best time is kept; the straightforward side once (it is slow).
With ``--baseline FILE.json`` (written earlier with ``--save``, by this or an older version) the
table also shows the saved run's fast verify/q, this run's speed-up over it, and its e2e ratio. A
measurement, not a test: nothing is asserted.

    python benchmarks/dqa_simulator.py [--questions 5] [--seed 0] [--scenario both]
                                       [--repeat 3] [--save FILE.json] [--baseline FILE.json]
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/ holds the straightforward reference

from ragplan.methods.planrag import data as dqa_data
from ragplan.methods.planrag.cql import read_graph_data
from ragplan.methods.planrag.data import load_questions, load_scenario
from ragplan.methods.planrag.generate import generate_clone
from ragplan.methods.planrag.grade import best_decision, solve_question
from ragplan.methods.planrag.locating import LocatingSolution
from tests.dqa_reference import reference_building, reference_locating

TARGET = 10.0       # simulation: straightforward / fast
E2E_TARGET = 100.0  # dqa verify per question, reading and parsing included


def _clear_cache() -> None:
    """Forget the compiled scripts (older versions cached them in an lru_cache)."""
    clear = getattr(dqa_data, "clear_scenario_cache", None)
    if clear is not None:
        clear()
    else:  # before the content-hash cache
        dqa_data._scenario.cache_clear()


def _close(a: dict[Any, float], b: dict[Any, float]) -> bool:
    return a.keys() == b.keys() and all(math.isclose(a[k], b[k], rel_tol=1e-9, abs_tol=1e-9) for k in a)


def run_scenario(scenario: str, n: int, seed: int, repeat: int, workdir: Path) -> dict[str, Any]:
    """Generate ``n`` official-size questions of ``scenario`` and time both implementations on them."""
    out = workdir / scenario
    t0 = time.perf_counter()
    generate_clone(out, scenario, n, seed=seed, size="official")
    gen_s = time.perf_counter() - t0
    questions = load_questions(out, scenario)
    scripts = list(dict.fromkeys(q.script for q in questions))

    # fast: cold cache each round (parse + compile once per script, then one best_decision per question)
    fast_parse, fast_sim, fast_best = math.inf, math.inf, []
    for _ in range(repeat):
        _clear_cache()
        t0 = time.perf_counter()
        for s in scripts:
            load_scenario(s, scenario)
        t1 = time.perf_counter()
        best = [best_decision(q) for q in questions]
        t2 = time.perf_counter()
        fast_parse, fast_sim, fast_best = min(fast_parse, t1 - t0), min(fast_sim, t2 - t1), best
    # fast end to end: the dqa verify loop from a cold cache (each question loads its script, then decides)
    fast_verify = math.inf
    for _ in range(repeat):
        _clear_cache()
        t0 = time.perf_counter()
        for q in questions:
            best_decision(q)
        fast_verify = min(fast_verify, time.perf_counter() - t0)
    fast_effects = []
    for q in questions:  # untimed: every option's effect, for the agreement check
        sol = solve_question(q)
        if isinstance(sol, LocatingSolution):
            fast_effects.append({o.node: o.profit for o in sol.options})
        else:
            fast_effects.append({o.building_id: o.price for o in sol.options})

    # straightforward, end to end: read and parse each question's script, then the reference
    ref_parse = ref_sim = 0.0
    ref = []
    for q in questions:
        t0 = time.perf_counter()
        data = read_graph_data(q.script)
        t1 = time.perf_counter()
        if scenario == "locating":
            ref.append(reference_locating(data, q.country, q.home))
        else:
            ref.append(reference_building(data, q.goods))
        t2 = time.perf_counter()
        ref_parse, ref_sim = ref_parse + t1 - t0, ref_sim + t2 - t1

    agree = sum(1 for fb, fe, (rb, re_) in zip(fast_best, fast_effects, ref)
                if fb == (None if rb is None else str(rb)) and _close(fe, re_))
    gold = sum(1 for fb, q in zip(fast_best, questions) if fb == q.answer)
    first = read_graph_data(scripts[0])
    n = len(questions)
    return {
        "scenario": scenario,
        "questions": n,
        "scripts": len(scripts),
        "script_nodes": len(first.nodes),
        "script_relationships": len(first.rels),
        "script_kb": round(scripts[0].stat().st_size / 1024, 1),
        "generate_s": round(gen_s, 3),
        "fast_parse_s": round(fast_parse, 4),
        "fast_sim_s": round(fast_sim, 4),
        "ref_parse_s": round(ref_parse, 4),
        "ref_sim_s": round(ref_sim, 4),
        "ratio": round(ref_sim / fast_sim, 1) if fast_sim else math.inf,
        "fast_verify_ms_per_q": round(fast_verify / n * 1000, 3),
        "ref_verify_ms_per_q": round((ref_parse + ref_sim) / n * 1000, 2),
        "e2e_ratio": round((ref_parse + ref_sim) / fast_verify, 1) if fast_verify else math.inf,
        "agree": agree,
        "gold": gold,
    }


def _cell(value: Any, fmt: str, width: int) -> str:
    return f"{value:>{width}{fmt}}" if isinstance(value, (int, float)) else f"{'-':>{width}}"


def print_table(report: dict[str, Any], baseline: dict[str, Any] | None) -> None:
    env = report["environment"]
    print(f"Python {env['python']}, NumPy {env['numpy']}, {env['machine']}; seed {report['config']['seed']}, "
          f"fast side best of {report['config']['repeat']}")
    for r in report["results"]:
        print(f"  {r['scenario']}: {r['scripts']} script(s) of ≈{r['script_kb']} KB "
              f"({r['script_nodes']} nodes, {r['script_relationships']} relationships), generated in {r['generate_s']:.1f} s")
    base = {r["scenario"]: r for r in (baseline or {}).get("results", [])}
    header = (f"{'scenario':<9} {'questions':>9} {'parse fast s':>12} {'parse straight s':>16} {'sim fast s':>10} "
              f"{'sim straight s':>14} {'sim ratio':>9} {'verify/q fast ms':>16} {'verify/q straight ms':>20} "
              f"{'e2e':>7} {'agree':>6} {'gold':>5}")
    if baseline is not None:
        header += f" {'base verify/q fast ms':>21} {'speed-up':>8} {'base e2e':>8}"
    print(header)
    print("-" * len(header))
    for r in report["results"]:
        line = (f"{r['scenario']:<9} {r['questions']:>9} {r['fast_parse_s']:>12.3f} {r['ref_parse_s']:>16.3f} "
                f"{r['fast_sim_s']:>10.3f} {r['ref_sim_s']:>14.2f} {r['ratio']:>8.1f}x "
                f"{r['fast_verify_ms_per_q']:>16.2f} {r['ref_verify_ms_per_q']:>20.1f} {r['e2e_ratio']:>6.1f}x "
                f"{r['agree']:>3}/{r['questions']:<2} {r['gold']:>2}/{r['questions']:<2}")
        if baseline is not None:
            b = base.get(r["scenario"], {})
            before = b.get("fast_verify_ms_per_q")
            speedup = before / r["fast_verify_ms_per_q"] if before and r["fast_verify_ms_per_q"] else None
            b_e2e = b.get("e2e_ratio") if "fast_verify_ms_per_q" in b else None  # older reports meant another e2e
            line += f" {_cell(before, '.2f', 21)} {_cell(speedup, '.1f', 7)}x {_cell(b_e2e, '.1f', 7)}x"
        print(line)
    if baseline is not None:
        bc, c = baseline.get("config", {}), report["config"]
        note = "speed-up = the baseline's fast verify/q ÷ this run's (per question, so runs of another size compare too)"
        if (bc.get("questions"), bc.get("seed")) != (c["questions"], c["seed"]):
            note += f" (baseline: {bc.get('questions')} questions, seed {bc.get('seed')}: other scripts, compare with care)"
        print(note)
    ratios = ", ".join(f"{r['scenario']} {r['ratio']:.1f}x" for r in report["results"])
    below = [r["scenario"] for r in report["results"] if r["ratio"] < TARGET]
    print(f"sim ratio (straightforward / fast simulation): {ratios}; target >= {TARGET:.0f}x: "
          + ("met" if not below else "NOT met for " + ", ".join(below)))
    e2e = ", ".join(f"{r['scenario']} {r['e2e_ratio']:.1f}x" for r in report["results"])
    below = [r["scenario"] for r in report["results"] if r["e2e_ratio"] < E2E_TARGET]
    print(f"e2e (dqa verify per question, straightforward / fast, reading and parsing included): {e2e}; "
          f"target >= {E2E_TARGET:.0f}x: " + ("met" if not below else "NOT met for " + ", ".join(below)))


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
    baseline = json.loads(args.baseline.read_text()) if args.baseline else None
    scenarios = ["locating", "building"] if args.scenario == "both" else [args.scenario]
    with tempfile.TemporaryDirectory(prefix="dqa-bench-") as tmp:
        workdir = args.workdir or Path(tmp)
        results = [run_scenario(s, args.questions, args.seed, args.repeat, workdir) for s in scenarios]
    report = {
        "config": {"questions": args.questions, "seed": args.seed, "repeat": args.repeat, "size": "official"},
        "environment": {"python": platform.python_version(), "numpy": np.__version__, "machine": platform.machine()},
        "results": results,
    }
    print_table(report, baseline)
    if args.save:
        args.save.write_text(json.dumps(report, indent=2) + "\n")
        print(f"saved {args.save}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
