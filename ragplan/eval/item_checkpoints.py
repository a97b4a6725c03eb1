"""Per-question checkpoints of an evaluation run: a question in flight at a kill continues from its last node.

The runner compiles its graph with a :class:`LoopSqliteSaver` over ``RUN_DIR/checkpoints.sqlite``; each
attempt at a question is its own LangGraph thread, ``<item id>#<attempt>``. On ``--resume`` a question that
has no result line yet but has a checkpoint continues from its last finished node (its finished LLM calls
are not made again), and one whose graph had finished before the kill (the record was not written yet)
is graded from its checkpointed state without running anything. A rate-limited attempt that finished
(with the 429 recorded) is retried in a fresh thread, the next attempt number. Once a question's result
line is written its threads are deleted, so the file holds only questions in flight.

Each node's checkpoint is written while the next node runs (LangGraph's ``durability="async"``): a
question's LLM calls do not wait for the disk, and a kill loses at most the checkpoint of the node that
had just finished besides the node in flight (``"sync"``, as ``ragplan ask`` uses, cost a fifth of the
runner's throughput at concurrency 16 in ``benchmarks/checkpoints.py``). Checkpoints cost CPU (a
SQLite write per finished node); with ``RunSettings.checkpoints = False`` (``ragplan eval
--no-checkpoints``) the runner runs each question from scratch instead, as before.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import ChannelVersions, Checkpoint, CheckpointMetadata, CheckpointTuple
from langgraph.checkpoint.sqlite import SqliteSaver

from ragplan.checkpoints import checkpoint_serde

__all__ = ["ItemCheckpoints", "LoopSqliteSaver", "CHECKPOINT_FILE", "BUSY_TIMEOUT_S"]

CHECKPOINT_FILE = "checkpoints.sqlite"
"""The checkpoint file's name in a run folder."""
BUSY_TIMEOUT_S = 60.0
"""How long a write waits for another process's write to the same file (each holds it for a moment)."""

class LoopSqliteSaver(SqliteSaver):
    """LangGraph's SQLite saver with its async methods run on the event loop itself.

    A checkpoint write is one small SQLite transaction (WAL, ``synchronous=NORMAL``: no fsync), well under
    a millisecond; aiosqlite's thread hand-offs (several per write) cost the runner more CPU than the
    writes themselves, so the writes are made where LangGraph asks for them.
    """

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """:meth:`get_tuple`, on the loop."""
        return self.get_tuple(config)

    async def alist(self, config: RunnableConfig | None, *, filter: dict[str, Any] | None = None,
                    before: RunnableConfig | None = None, limit: int | None = None) -> AsyncIterator[CheckpointTuple]:
        """:meth:`list`, on the loop."""
        for tup in self.list(config, filter=filter, before=before, limit=limit):
            yield tup

    async def aput(self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata,
                   new_versions: ChannelVersions) -> RunnableConfig:
        """:meth:`put`, on the loop."""
        return self.put(config, checkpoint, metadata, new_versions)

    async def aput_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str,
                          task_path: str = "") -> None:
        """:meth:`put_writes`, on the loop."""
        self.put_writes(config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        """:meth:`delete_thread`, on the loop."""
        self.delete_thread(thread_id)

    async def aget_delta_channel_history(self, *, config: RunnableConfig, channels: Sequence[str]) -> Mapping[str, Any]:
        """:meth:`get_delta_channel_history`, on the loop."""
        return self.get_delta_channel_history(config=config, channels=channels)


class ItemCheckpoints:
    """The checkpoints of one run folder (open with :meth:`open`, close with :meth:`close`)."""

    def __init__(self, path: str | os.PathLike[str], *, enabled: bool = True) -> None:
        """Checkpoints in the SQLite file ``path`` (created when missing); ``enabled=False`` keeps none."""
        self.path = Path(path)
        self.enabled = enabled
        self.saver: LoopSqliteSaver | None = None
        self._conn: sqlite3.Connection | None = None
        self._threads: set[str] = set()
        self._first: dict[str, int] = {}

    async def open(self) -> LoopSqliteSaver | None:
        """Connect and read which threads the file holds; the saver to compile the graph with (None when off)."""
        if not self.enabled:
            return None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # one file for every worker process of a run (--workers): a writer waits up to BUSY_TIMEOUT_S for another's
        self._conn = sqlite3.connect(str(self.path), timeout=BUSY_TIMEOUT_S, check_same_thread=False)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")  # safe against a killed process; no fsync per commit
        self.saver = LoopSqliteSaver(self._conn, serde=checkpoint_serde())
        self.saver.setup()
        self._threads = {str(row[0]) for row in self._conn.execute("SELECT DISTINCT thread_id FROM checkpoints")}
        return self.saver

    async def close(self) -> None:
        """Close the connection (safe to call twice)."""
        if self._conn is not None:
            self._conn.close()
            self._conn, self.saver = None, None

    @staticmethod
    def _thread(item_id: str, attempt: int) -> str:
        return f"{item_id}#{attempt}"

    def _attempts(self, item_id: str) -> list[int]:
        """The attempt numbers of the question's threads in the file, in order."""
        head = f"{item_id}#"
        return sorted(int(t[len(head):]) for t in self._threads if t.startswith(head) and t[len(head):].isdigit())

    async def run(self, graph: Any, item_id: str, attempt: int, graph_input: dict[str, Any], ctx: Any,
                  limit: int) -> dict[str, Any]:
        """This invocation's ``attempt`` (1-based) at the question: a fresh run, or the continuation of a checkpoint."""
        if not self.enabled:
            return dict(await graph.ainvoke(graph_input, context=ctx, config={"recursion_limit": limit}))
        if item_id not in self._first:  # continue the last attempt a killed invocation left (else attempt 1)
            self._first[item_id] = (self._attempts(item_id) or [1])[-1]
        thread = self._thread(item_id, self._first[item_id] + attempt - 1)
        config: RunnableConfig = {"configurable": {"thread_id": thread}, "recursion_limit": limit}
        if thread not in self._threads:
            self._threads.add(thread)
            return dict(await graph.ainvoke(graph_input, context=ctx, config=config, durability="async"))
        snap = await graph.aget_state(config)
        if snap.next:  # killed in flight: on from the last finished node
            return dict(await graph.ainvoke(None, context=ctx, config=config, durability="async"))
        if snap.created_at is None:  # a thread id without a checkpoint: run it afresh
            return dict(await graph.ainvoke(graph_input, context=ctx, config=config, durability="async"))
        return dict(snap.values)  # the graph had finished; only the result line was missing

    async def forget(self, item_id: str) -> None:
        """Delete the question's threads (its result line is written)."""
        if not self.enabled:
            return
        assert self.saver is not None, "ItemCheckpoints.open() first"
        for n in self._attempts(item_id):
            await self.saver.adelete_thread(self._thread(item_id, n))
            self._threads.discard(self._thread(item_id, n))
        self._first.pop(item_id, None)

    def holds(self, item_id: str, attempt: int) -> bool:
        """Whether the file holds a thread for this attempt at the question."""
        return self._thread(item_id, attempt) in self._threads
