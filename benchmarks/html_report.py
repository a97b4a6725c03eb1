"""Benchmark the HTML report: per run size N of two synthetic PlanRAG-shaped runs, ``render_s``, ``page_mb`` and with
``--browser`` ``browser_s`` (headless Chromium loading it). No LLM, no network.
Usage: python benchmarks/html_report.py [--sizes 50,200,1000] [--browser] [--save FILE.json] [--baseline FILE.json]"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from common import add_report_flags, print_rows, save_report  # noqa: E402

from ragplan.eval.html_report import write_html_report  # noqa: E402
from ragplan.eval.runfolder import RunFolder, RunSettings  # noqa: E402


def _record(i: int, method: str) -> dict:
    """One PlanRAG-shaped record of question ``i``."""
    rows = "\n".join(f"node_{k:02d} | {1000 + 37 * k} | {0.1 * k:.2f}" for k in range(60))[:1500]
    plan = [f"Find the trade value of each node reachable from node_{i % 7:02d}",
            "Compare the merchants' power in each candidate node", "Estimate the profit change", "Pick the best node"]
    steps = [{"index": s + 1, "plan_step": s + 1, "plan_step_text": plan[s], "thought": f"I need step {s + 1} of the plan.",
              "action": "graph_db", "query": f"MATCH (n:Trade_node)-[r:FLOWS]->(m) WHERE n.name = 'node_{s:02d}' RETURN m.name, r.value",
              "observation": rows, "ok": True, "row_count": 25, "total_rows": 60, "query_ms": 12.5} for s in range(4)]
    return {"id": f"locating-1445-{i}", "method": method, "model": "openai:gpt-4o-mini", "scenario": "locating", "year": 1445,
            "question": "Business rules … " * 40 + f"Which node should merchant {i} go to?", "answer": f"node_{i % 5:02d}",
            "gold": "node_01", "correct": i % 5 == 1, "verdict": f"node_{i % 5:02d}: +1.3 % vs best node_01 +16.6 %",
            "retrievals": 4, "retrieval_errors": 0, "executed_queries": [], "llm_calls": 10, "input_tokens": 12000,
            "output_tokens": 600, "llm_seconds": 8.2, "latency_s": 9.1, "stop_reason": "plan_done", "error": "", "attempts": 1,
            "rationale": "The flows favour node_01.", "plan": plan,
            "plan_history": [{"version": 0, "steps": plan, "reason": "initial"},
                             {"version": 1, "steps": plan[2:], "reason": "the flows changed", "after_step": 2}],
            "steps": steps, "replans": [{"after_step": s + 1, "replan": s == 1, "reason": "fine"} for s in range(4)],
            "decision_check": {"chosen": f"node_{i % 5:02d}", "best": "node_01", "correct": i % 5 == 1}}


def measure(n: int, root: Path, browser: bool) -> dict:
    """The figures for two runs of ``n`` questions each."""
    dirs = []
    for method in ("planrag", "iter_rag"):
        folder = RunFolder(root / f"{method}-{n}")
        folder.save_settings(RunSettings(method=method, benchmark="dqa-locating", data="/synthetic", model="openai:gpt-4o-mini"))
        with open(folder.results_file, "w", encoding="utf-8") as fh:
            fh.writelines(json.dumps(_record(i, method)) + "\n" for i in range(n))
        dirs.append(folder.path)
    out = root / f"report-{n}.html"
    t0 = time.perf_counter()
    write_html_report(dirs, out)
    row = {"questions": n, "results": 2 * n, "render_s": time.perf_counter() - t0, "page_mb": out.stat().st_size / 1e6}
    if browser and (exe := shutil.which("chromium")):
        t0 = time.perf_counter()
        proc = subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-sync",
                               "--disable-background-networking", "--disable-component-update",
                               f"--user-data-dir={root / f'profile-{n}'}", "--dump-dom", out.as_uri()],
                              capture_output=True, text=True, timeout=600)
        row["browser_s"] = time.perf_counter() - t0
        assert f"{2 * n} of {2 * n} results shown" in proc.stdout  # the page loaded and its script ran
    return row


def main() -> None:
    """Run the measurement and print the table."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="50,200,1000", help="questions per run (comma-separated)")
    ap.add_argument("--browser", action="store_true", help="also time headless Chromium loading each page")
    add_report_flags(ap, "render_s")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rows = [measure(int(s), Path(tmp), a.browser) for s in a.sizes.split(",") if s.strip()]
    print_rows(rows, [("questions", "d"), ("results", "d"), ("render_s", ".2f"), ("page_mb", ".1f"), ("browser_s", ".1f")],
               "questions", a.baseline, "render_s")
    save_report(a.save, "html_report", rows)


if __name__ == "__main__":
    main()
