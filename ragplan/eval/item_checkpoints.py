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
runner's throughput at concurrency 16 in ``benchmarks/checkpoints.py``). The writes the questions in
flight make during one turn of the event loop commit in one SQLite transaction
(:class:`LoopSqliteSaver`). Checkpoints still cost CPU (each finished node's state is serialized); with
``RunSettings.checkpoints = False`` (``ragplan eval --no-checkpoints``) the runner runs each question from
scratch instead, as before.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import warnings
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (WRITES_IDX_MAP, ChannelVersions, Checkpoint, CheckpointMetadata,
                                      CheckpointTuple, get_checkpoint_metadata)
from langgraph.checkpoint.sqlite import SqliteSaver

from ragplan.checkpoints import checkpoint_serde

__all__ = ["ItemCheckpoints", "LoopSqliteSaver", "CHECKPOINT_FILE", "BUSY_TIMEOUT_S"]

CHECKPOINT_FILE = "checkpoints.sqlite"
"""The checkpoint file's name in a run folder."""
BUSY_TIMEOUT_S = 60.0
"""How long a write waits for another process's write to the same file (each holds it for a moment)."""

_COLUMNS = ("(thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, value) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)")
_PUT = ("INSERT OR REPLACE INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, "
        "checkpoint, metadata) VALUES (?, ?, ?, ?, ?, ?, ?)")
_PUT_WRITES_REPLACE = "INSERT OR REPLACE INTO writes " + _COLUMNS
_PUT_WRITES_IGNORE = "INSERT OR IGNORE INTO writes " + _COLUMNS


class LoopSqliteSaver(SqliteSaver):
    """LangGraph's SQLite saver whose writes on the event loop commit together, once per turn of the loop.

    The runner's graph writes a checkpoint and its task writes after every node of every question in
    flight: ``single_rag`` makes eleven writes per question, each its own SQLite transaction in
    :class:`SqliteSaver`. Here a write made on a running loop is serialized at once (it saves the state
    of that moment) and queued, and a callback scheduled with ``call_soon`` commits the whole queue in one
    transaction: the writes that the questions in flight made during the same turn of the loop share it
    (about 3.5 writes per transaction at concurrency 32 in ``benchmarks/batch.py``, +0.02 of efficiency
    there). The commit comes before the loop next waits for I/O, so a kill loses what it lost before:
    the checkpoint being written. Outside a running loop a write commits at once, as
    :class:`SqliteSaver`'s do; every read (:meth:`get_tuple`, :meth:`list` …) and :meth:`flush` commit
    the queue first.

    A commit that fails in the callback is raised by the next write or :meth:`flush`: that question
    records the failure with its reason, as it would have recorded the failure of its own write.

    The async methods run on the event loop itself: aiosqlite's thread hand-offs (several per write) cost
    the runner more CPU than the writes.
    """

    def __init__(self, conn: sqlite3.Connection, *, serde: Any = None) -> None:
        """The saver over ``conn`` (``serde`` as :class:`SqliteSaver`'s)."""
        super().__init__(conn, serde=serde)
        self._pending: list[tuple[str, str, list[tuple[Any, ...]]]] = []  # (thread id, statement, rows), in order
        self._scheduled: asyncio.Handle | None = None
        self._failed: BaseException | None = None

    def _queue(self, thread_id: str, statement: str, rows: list[tuple[Any, ...]]) -> None:
        """Queue one statement's rows: committed by the loop's next callback, or now when no loop runs here."""
        self._raise_failed()
        with self.lock:
            self._pending.append((thread_id, statement, rows))
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.flush()
            return
        if self._scheduled is None:
            self._scheduled = loop.call_soon(self._flush_soon)

    def _flush_soon(self) -> None:
        """The loop's commit: a failure is kept for the next write or :meth:`flush` to raise."""
        self._scheduled = None
        try:
            self._commit()
        except Exception as exc:  # raised to the next writer (a callback's exception would only be logged)
            self._failed = exc

    def _raise_failed(self) -> None:
        """Raise (once) the failure of a commit made by the loop's callback."""
        if self._failed is not None:
            exc, self._failed = self._failed, None
            raise exc

    def _commit(self) -> None:
        """Commit every queued write in one transaction, or none of them (the queue is emptied either way)."""
        with self.lock:
            pending, self._pending = self._pending, []
            if not pending:
                return
            self.setup()  # (under the lock, as SqliteSaver.cursor does)
            cur = self.conn.cursor()
            try:
                for _thread, statement, rows in pending:
                    cur.executemany(statement, rows)
                self.conn.commit()
            except BaseException:
                self.conn.rollback()
                raise
            finally:
                cur.close()

    def flush(self) -> None:
        """Commit every queued write now; raise the failure of a commit the loop's callback made.

        (A callback still scheduled then finds the queue empty.)
        """
        self._commit()
        self._raise_failed()

    def put(self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata,
            new_versions: ChannelVersions) -> RunnableConfig:
        """Queue a checkpoint (as :meth:`SqliteSaver.put` writes it); its config, as that returns it."""
        conf = config["configurable"]
        thread_id, checkpoint_ns = str(conf["thread_id"]), conf["checkpoint_ns"]
        type_, blob = self.serde.dumps_typed(checkpoint)
        meta = json.dumps(get_checkpoint_metadata(config, metadata), ensure_ascii=False).encode("utf-8", "ignore")
        self._queue(thread_id, _PUT, [(thread_id, checkpoint_ns, checkpoint["id"], conf.get("checkpoint_id"), type_,
                                       blob, meta)])
        return {"configurable": {"thread_id": conf["thread_id"], "checkpoint_ns": checkpoint_ns,
                                 "checkpoint_id": checkpoint["id"]}}

    def put_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str,
                   task_path: str = "") -> None:
        """Queue a task's writes (as :meth:`SqliteSaver.put_writes` writes them)."""
        conf = config["configurable"]
        thread_id = str(conf["thread_id"])
        statement = _PUT_WRITES_REPLACE if all(w[0] in WRITES_IDX_MAP for w in writes) else _PUT_WRITES_IGNORE
        rows = [(thread_id, str(conf["checkpoint_ns"]), str(conf["checkpoint_id"]), task_id, task_path,
                 WRITES_IDX_MAP.get(channel, idx), channel, *self.serde.dumps_typed(value))
                for idx, (channel, value) in enumerate(writes)]
        self._queue(thread_id, statement, rows)

    def delete_thread(self, thread_id: str) -> None:
        """Queue the deletion of a thread (its writes still queued are dropped: they would be deleted)."""
        thread_id = str(thread_id)
        with self.lock:
            self._pending = [p for p in self._pending if p[0] != thread_id]
        self._queue(thread_id, "DELETE FROM checkpoints WHERE thread_id = ?", [(thread_id,)])
        self._queue(thread_id, "DELETE FROM writes WHERE thread_id = ?", [(thread_id,)])

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """:meth:`SqliteSaver.get_tuple`, after committing the queue."""
        self.flush()
        return super().get_tuple(config)

    def list(self, config: RunnableConfig | None, *, filter: dict[str, Any] | None = None,
             before: RunnableConfig | None = None, limit: int | None = None) -> Iterator[CheckpointTuple]:
        """:meth:`SqliteSaver.list`, after committing the queue."""
        self.flush()
        return super().list(config, filter=filter, before=before, limit=limit)

    def get_delta_channel_history(self, *, config: RunnableConfig, channels: Sequence[str]) -> Mapping[str, Any]:
        """:meth:`SqliteSaver.get_delta_channel_history`, after committing the queue."""
        self.flush()
        return super().get_delta_channel_history(config=config, channels=channels)

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
        """Commit the queued writes and close the connection (safe to call twice).

        A commit that fails here is a warning, not an error: the results are written already, and what it
        loses is at most where the questions still in flight had got to (they run afresh on ``--resume``).
        """
        if self._conn is None:
            return
        conn, saver = self._conn, self.saver
        self._conn, self.saver = None, None
        try:
            if saver is not None:
                saver.flush()
        except Exception as exc:
            warnings.warn(f"{self.path}: the last checkpoints could not be written ({type(exc).__name__}: {exc})",
                          RuntimeWarning, stacklevel=2)
        finally:
            conn.close()

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
