"""Everyday commands start without the heavy libraries (issue 23), each case in a fresh interpreter: the registry
with every graph built, `ragplan graphs`, `ragplan cypher` and `ragplan ask --method M --help` import no ML, plotting
or driver library (the first two not the OpenAI client either), and `ragplan --help` not even LangGraph, LangChain or
pydantic."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "sentence_transformers", "faiss", "kglite", "matplotlib", "neo4j", "numpy", "scipy", "sklearn",
         "transformers")
FRAMEWORK = ("langgraph", "langchain_core", "langchain_openai", "openai", "pydantic")

SCRIPT = """
import contextlib, io, json, sys
out = io.StringIO()
argv = json.loads(sys.argv[1])
with contextlib.redirect_stdout(out):
    if argv is None:
        from ragplan.registry import families
        for fam in families():
            for g in fam.graphs:
                g.build()
        code = 0
    else:
        from ragplan.cli import main
        try:
            code = main(argv)
        except SystemExit as exc:  # --help
            code = exc.code
print(json.dumps({"code": code, "out": out.getvalue(), "modules": sorted({m.split(".")[0] for m in sys.modules})}))
"""

CASES = {
    "registry and every graph built": (None, HEAVY + ("openai", "langchain_openai"), ""),
    "ragplan graphs": (["graphs"], HEAVY + ("openai", "langchain_openai"), "planrag"),
    "ragplan --help": (["--help"], HEAVY + FRAMEWORK, "cypher"),
    "ragplan cypher": (["cypher", "--graph", str(ROOT / "examples" / "trade_network.cql"), "MATCH (n) RETURN count(n)"],
                       HEAVY + ("langchain_core",), "(1 row"),
    "ragplan ask --method instructrag --help": (["ask", "--method", "instructrag", "--help"], HEAVY,
                                                 "--instruction-graph"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_command_imports_no_heavy_library(case):
    argv, forbidden, expect = CASES[case]
    env = {**os.environ, "HF_HUB_OFFLINE": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    proc = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(argv)], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    assert res["code"] == 0 and expect in res["out"], res["out"][-2000:]
    assert sorted(set(forbidden) & set(res["modules"])) == []


def test_graphs_builds_no_other_commands_parser():
    """`ragplan graphs` (a command of the CLI's own module) imports no other command's module to build its parser."""
    code = ("import contextlib, io, sys\nfrom ragplan.cli import COMMAND_MODULES, main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n    main(['graphs'])\n"
            "print(sorted(set(COMMAND_MODULES.values()) & set(sys.modules)))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1] == "[]"
