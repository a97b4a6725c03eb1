"""``langgraph dockerfile`` on the project's langgraph.json writes a Dockerfile that installs the package and serves
every registered graph (what ``langgraph build`` builds; docs/deploy.md)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ragplan.registry import langgraph_graphs

ROOT = Path(__file__).resolve().parents[1]
LANGGRAPH = Path(sys.executable).parent / "langgraph"


def test_dockerfile_installs_the_package_and_serves_every_graph(tmp_path):
    if not LANGGRAPH.exists():
        pytest.skip(f"{LANGGRAPH} not installed (pip install -e '.[dev]')")
    out = tmp_path / "Dockerfile"
    proc = subprocess.run([str(LANGGRAPH), "dockerfile", "-c", "langgraph.json", str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120,
                          env={"PATH": str(LANGGRAPH.parent) + ":/usr/bin:/bin", "LANGGRAPH_CLI_NO_ANALYTICS": "1"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = out.read_text()
    assert text.startswith("FROM langchain/langgraph-api:3.11")  # langgraph.json's python_version
    deps = re.search(r"^ADD \. (/deps/\S+)$", text, re.M)  # the project folder (pyproject.toml) goes in …
    assert deps, text
    assert re.search(r"pip install .*-e \.", text) and f"WORKDIR {deps.group(1)}" in text  # … and is installed
    served = json.loads(re.search(r"^ENV LANGSERVE_GRAPHS='(.*)'$", text, re.M).group(1))
    assert served == langgraph_graphs()  # every registered graph, by the module path the package installs
