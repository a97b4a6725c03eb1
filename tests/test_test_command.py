"""The test command's pytest-xdist options keep each test module on one worker (its module fixtures, servers and
trained models are built once), whatever the pytest version does to node ids."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

MODULE = '''
import os
import pytest

pytestmark = pytest.mark.xdist_group(__name__)  # how a module asked for one worker under --dist loadgroup


@pytest.mark.parametrize("i", range(6))
def test_pid(i):
    with open(os.environ["PID_LOG"], "a") as fh:
        fh.write(f"{__name__} {os.getpid()}\\n")
'''


def test_the_test_command_runs_each_module_on_one_worker(tmp_path):
    line = next(x for x in (ROOT / "scripts" / "test.sh").read_text().splitlines() if x.startswith("exec "))
    options = shlex.split(re.search(r'"\$\{RAGPLAN_TEST_WORKERS:-\d+\}"(.*)"\$@"', line).group(1))
    assert "--dist" in options
    for name in ("test_a", "test_b", "test_c"):
        (tmp_path / f"{name}.py").write_text(MODULE)
    log = tmp_path / "pids.log"
    env = {**os.environ, "PID_LOG": str(log)}
    env.pop("PYTEST_XDIST_WORKER", None)
    # (langsmith's and anyio's pytest plugins cost each of the three processes imports these tests do not need)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:langsmith_plugin",
                           "-p", "no:anyio", "-n", "2", *options, "."],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    pids: dict[str, set[str]] = {}
    for module, pid in (x.split() for x in log.read_text().splitlines()):
        pids.setdefault(module, set()).add(pid)
    assert sorted(pids) == ["test_a", "test_b", "test_c"]
    assert all(len(p) == 1 for p in pids.values()), pids
