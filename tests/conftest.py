"""Shared fixtures: the toy trade network on disk and in the embedded store, scripted contexts."""

from __future__ import annotations

import fcntl
import gc
import os
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
if os.environ.get("PYTEST_XDIST_WORKER"):
    # Several pytest-xdist workers share the cores: one torch/BLAS thread each (and in the processes a test starts),
    # rather than every worker's training spinning one thread per core against the others.
    os.environ.setdefault("OMP_NUM_THREADS", "1")

from ragplan.tools.graphdb import EmbeddedGraphStore  # noqa: E402
from tests.data import QUESTION, TRADE_NETWORK  # noqa: E402
from tests.openai_server import OpenAIStub  # noqa: E402


SLOW_FIRST = [
    "test_eval_server", "test_furepa_assessor", "test_replay", "test_reaper_tables", "test_graphdb_process",
    "test_instructrag_training", "test_entry_points", "test_malformed_outputs", "test_fault_suite", "test_html_report",
    "test_postgres_checkpoints", "test_checkpoints", "test_layout", "test_run_recovery", "test_reaper_grading",
    "test_graphdb_resources", "test_import_cost", "test_retail", "test_plan_review", "test_eval_sweep",
    "test_dqa_parser", "test_docs", "test_eval_runner", "test_langgraph_dev", "test_cli",
]
"""The modules that take longest, longest first. scripts/test.sh hands each module to one pytest-xdist worker
(``--dist loadfile``: its module fixtures are built once) in collection order (``--no-loadscope-reorder``); these
start first, so none of them is left to run alone at the end; while the first one builds the test data every family
shares (``every_family_data``), the next ones need none of it. A module not named here only starts later."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(SLOW_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.stem, len(rank)))  # stable: each module's own order is kept


@pytest.fixture(autouse=True)
def _older_objects_frozen() -> None:
    """Before each test, the earlier tests' garbage is collected and what is left (imports, module and session
    fixtures) is frozen out of later collections: ``ragplan eval`` makes one full collection per run, which in a test
    worker would otherwise walk every object torch, the graphs and the fixtures made (about 0.5 s a run)."""
    gc.collect()
    gc.freeze()


@pytest.fixture(autouse=True)
def _checkpoint_db(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every `ragplan ask` is checkpointed: keep each test's checkpoints out of the user's state folder."""
    monkeypatch.setenv("RAGPLAN_CHECKPOINT_DB", str(tmp_path_factory.mktemp("checkpoints") / "checkpoints.sqlite"))


@pytest.fixture
def local_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests against the local stub: 127.0.0.1 bypasses any configured proxy, and no real key is set, so the
    stub's base URL alone must be enough."""
    if any(k.lower().endswith("_proxy") for k in os.environ):
        monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
        monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


@contextmanager
def shared_folder(factory: pytest.TempPathFactory, name: str) -> Iterator[Path]:
    """A folder of this test run shared by every pytest-xdist worker, held under an exclusive lock in the block: test
    data built there once by whichever worker comes first (the others wait, then find it built), not once per worker."""
    base = factory.getbasetemp()
    run = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    folder = run / f"shared-{name}"
    folder.mkdir(exist_ok=True)
    with open(run / f"shared-{name}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield folder
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@pytest.fixture(scope="session")
def every_family_data(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Every registered family's test data (tests/family_data/<family>.py), built once per test run (shared by the
    xdist workers); a family without a data module fails the tests that use it."""
    import importlib
    import importlib.util

    from ragplan.registry import families

    out = {}
    with shared_folder(tmp_path_factory, "families") as root:
        for fam in families():
            if importlib.util.find_spec(f"tests.family_data.{fam.name}") is None:
                pytest.fail(f"family {fam.name!r} has no test data: add tests/family_data/{fam.name}.py")
            out[fam.name] = importlib.import_module(f"tests.family_data.{fam.name}").make(root)
    return out


@pytest.fixture(scope="module")
def module_stub() -> Iterator[OpenAIStub]:
    """One local OpenAI-compatible stub for the module (:meth:`OpenAIStub.script` sets each test's answers)."""
    with OpenAIStub() as stub:
        yield stub


@pytest.fixture
def serve(module_stub: OpenAIStub) -> Callable[..., AbstractContextManager[OpenAIStub]]:
    """``with serve(replies) as stub`` (or ``serve(responder=…)``): the module's stub, scripted afresh."""

    @contextmanager
    def serve(replies: Any = (), responder: Any = None) -> Iterator[OpenAIStub]:
        yield module_stub.script(replies, responder)

    return serve


@pytest.fixture
def trade_cql(tmp_path: Path) -> Path:
    """The toy trade network written as a .cql script."""
    p = tmp_path / "trade.cql"
    p.write_text(TRADE_NETWORK)
    return p


@pytest.fixture
def trade_store() -> Iterator[EmbeddedGraphStore]:
    """The toy trade network in the embedded engine (its query workers stopped after the test)."""
    with EmbeddedGraphStore.from_text(TRADE_NETWORK, source="trade.cql") as store:
        yield store


@pytest.fixture
def question() -> str:
    """The toy locating question."""
    return QUESTION
