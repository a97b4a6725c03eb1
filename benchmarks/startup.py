"""Benchmark the start-up of everyday commands (`ragplan --help`, `graphs`, `cypher`), each a fresh process, beside
importing langgraph + langchain_openai and a bare interpreter: medians of wall, CPU (user + sys) and peak memory.
Usage: python benchmarks/startup.py [--runs 7] [--root CHECKOUT] [--save FILE.json] [--baseline FILE.json]"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from common import add_report_flags, print_rows, save_report  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CYPHER = ["cypher", "--graph", str(ROOT / "examples" / "trade_network.cql"), "MATCH (n:Trade_node) RETURN count(n)"]
#: name -> (arguments after `python`, wall-time target in seconds or None)
COMMANDS = {
    "python (bare)": (["-c", "pass"], None),
    "import langgraph + langchain_openai": (["-c", "import langgraph.graph, langchain_openai"], None),
    "ragplan --help": (["-m", "ragplan", "--help"], 0.4),
    "ragplan graphs": (["-m", "ragplan", "graphs"], 1.3),
    "ragplan cypher": (["-m", "ragplan", *CYPHER], 1.5),
}


def run_once(args: list[str], root: Path) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds (user + sys) and peak RSS in MB of one ``python ARGS`` in ``root``."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(root)}
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, *args], cwd=root, env=env, stdout=subprocess.DEVNULL)
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"`python {' '.join(args)}` failed in {root}")
    return wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024


def main() -> None:
    """Run the measurement and print the table."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=7, help="runs of each command (the median is shown)")
    ap.add_argument("--root", type=Path, default=ROOT, help="the checkout whose ragplan is measured (default this one)")
    add_report_flags(ap, "cpu_s")
    a = ap.parse_args()
    got: dict[str, list[tuple[float, float, float]]] = {name: [] for name in COMMANDS}
    for _ in range(a.runs):
        for name, (args, _target) in COMMANDS.items():
            got[name].append(run_once(args, a.root.resolve()))
    rows = [{"command": name, "wall_s": statistics.median(w for w, _, _ in got[name]),
             "cpu_s": statistics.median(c for _, c, _ in got[name]), "rss_mb": statistics.median(m for *_, m in got[name]),
             "target_wall_s": target} for name, (_, target) in COMMANDS.items()]
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; {a.runs} runs each, medians")
    print_rows(rows, [("command", "s"), ("wall_s", ".2f"), ("cpu_s", ".2f"), ("rss_mb", ".0f"), ("target_wall_s", "")],
               "command", a.baseline, "cpu_s")
    save_report(a.save, "startup", rows, runs=a.runs, root=str(a.root))


if __name__ == "__main__":
    main()
