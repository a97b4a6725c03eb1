"""Per-question checkpoints of an evaluation run: a question in flight at a kill continues from its last node.

A :class:`SqliteSaver` over ``RUN_DIR/checkpoints.sqlite``, one thread per attempt (``<item id>#<attempt>``),
a checkpoint after every node (only the output for a graph of one step: :func:`durability`); the LLM requests sent
for each question are logged beside it before they go out. At close, recorded questions' threads are deleted together,
and both files are removed when no question is left. Given a PostgreSQL URL (``eval --checkpoint-db``) the
checkpoints go to a :class:`PostgresSaver` in a schema of the run's own instead, dropped when no question is left.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import threading
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Iterator

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START
from langgraph.types import Durability

from ragplan.checkpoints import checkpoint_serde, connect_postgres, connect_sqlite, saver_on

__all__ = ["ItemCheckpoints", "CHECKPOINT_FILE", "durability"]

CHECKPOINT_FILE = "checkpoints.sqlite"
"""The checkpoint file's name in a run folder."""


def _logged(data: bytes) -> Iterator[str]:
    """The question ids of a request log (a line torn by a kill is no request)."""
    for line in data.splitlines():
        try:
            yield str(json.loads(line))
        except ValueError:
            continue


def durability(graph: Any) -> Durability:
    """``exit`` for a graph of one node that only leads to the end: it takes one step, so its output is the only
    checkpoint a resume can use (a kill during the step runs it again either way); ``async`` (after every node) else."""
    b = graph.builder
    one_step = (len(b.nodes) == 1 and not any(b.branches.values()) and not any(n.ends for n in b.nodes.values())
                and all(end == END for start, end in b.edges if start != START))
    return "exit" if one_step else "async"


def _run(graph: Any, graph_input: dict[str, Any] | None, ctx: Any, config: RunnableConfig, fresh: bool,
         stop: threading.Event) -> dict[str, Any]:
    """The graph's output for the question (see :meth:`ItemCheckpoints.run`), stopping after a step once ``stop`` is set."""
    if not fresh:
        snap = graph.get_state(config)
        if snap.tasks:  # killed in flight: on from its last checkpoint (tasks whose writes were saved are not run
            graph_input = None  # again; checkpoints are written in the background, so the next one may be missing)
        elif snap.created_at is not None:
            return dict(snap.values)  # the graph had finished; only the result line was missing
    out: Any = {}
    mode = durability(graph) if graph.checkpointer else None
    for out in graph.stream(graph_input, config, context=ctx, stream_mode="values", durability=mode):
        if stop.is_set():
            break
    return dict(out)


class ItemCheckpoints:
    """The checkpoints of one run folder (open with :meth:`open`, close with :meth:`close`)."""

    def __init__(self, path: str | os.PathLike[str], *, enabled: bool = True, db: str = "", key: str = "") -> None:
        """Checkpoints in the SQLite file ``path`` (created when missing), or in the PostgreSQL database ``db`` (a URL),
        in a schema named after ``key`` (the run's); ``enabled=False`` keeps none."""
        self.path = Path(path)
        self.enabled = enabled
        self.db, self.schema = db, "ragplan_eval_" + hashlib.sha256(key.encode()).hexdigest()[:16]
        self.saver: Any = None  # a SqliteSaver or PostgresSaver
        self._threads: set[str] = set()
        self._first: dict[str, int] = {}
        self._log, self._fd, self._sent, self._lock = Path(f"{self.path}.requests"), -1, Counter[str](), threading.Lock()
        self._done: list[str] = []  # recorded questions' threads, deleted at close

    async def open(self) -> Any:
        """Connect and read which threads the file holds; the saver (None when off). Closed again on failure."""
        if not self.enabled:
            return None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn: Any = connect_postgres(self.db) if self.db else connect_sqlite(self.path)
        try:
            saver = saver_on(conn, checkpoint_serde(), self.schema)
            self._threads = {str(t.config["configurable"]["thread_id"]) for t in saver.list(None)}
            if self._log.exists():
                self._sent.update(_logged(self._log.read_bytes()))
            self._fd = os.open(self._log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        except BaseException:
            conn.close()
            raise
        self.saver = saver
        return saver

    async def close(self) -> None:
        """Close the connection (safe to call twice, and when :meth:`open` was not called or failed); with no thread
        left, the files are removed (their pages would stay allocated)."""
        saver, self.saver = self.saver, None
        with self._lock:  # (a given-up question's thread may still be sending)
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
        if saver is not None:
            try:
                if self._threads:  # questions left for a resume: only the recorded ones' threads go
                    for thread in self._done:
                        saver.delete_thread(thread)
                elif self.db:
                    saver.conn.execute(f"DROP SCHEMA IF EXISTS {self.schema} CASCADE")
                if not self._threads:  # removed before the close: SQLite copies no log into a file that is gone
                    for path in (self.path, Path(f"{self.path}-wal"), Path(f"{self.path}-shm"), self._log):
                        path.unlink(missing_ok=True)
                self._done.clear()
            finally:
                with saver.lock:  # (not while a given-up question's thread writes)
                    saver.conn.close()

    def counter(self, item_id: str) -> Callable[[], None]:
        """What to call before each LLM request of the question: the request is logged (so a kill does not lose it)."""
        line = (json.dumps(item_id) + "\n").encode()

        def sent() -> None:
            with self._lock:
                if self._fd >= 0:
                    os.write(self._fd, line)
                    self._sent[item_id] += 1
        return sent

    def requests(self, item_id: str) -> int:
        """LLM requests logged for the question over every invocation (0 when checkpoints are off)."""
        return self._sent[item_id]

    @staticmethod
    def _thread(item_id: str, attempt: int) -> str:
        return f"{item_id}#{attempt}"

    def _attempts(self, item_id: str) -> list[int]:
        """The attempt numbers of the question's threads in the file, in order."""
        head = f"{item_id}#"
        return sorted(int(t[len(head):]) for t in self._threads if t.startswith(head) and t[len(head):].isdigit())

    async def run(self, graph: Any, item_id: str, attempt: int, graph_input: dict[str, Any], ctx: Any,
                  limit: int) -> dict[str, Any]:
        """This invocation's ``attempt`` (1-based) at the question: a fresh run, or the continuation of a checkpoint.
        The graph runs in a worker thread, whole; cancelled, the thread stops after the step it is in."""
        config: RunnableConfig = {"recursion_limit": limit}
        fresh = True
        if self.enabled:
            if item_id not in self._first:  # continue the last attempt a killed invocation left (else attempt 1)
                self._first[item_id] = (self._attempts(item_id) or [1])[-1]
            thread = self._thread(item_id, self._first[item_id] + attempt - 1)
            config["configurable"] = {"thread_id": thread}
            fresh = thread not in self._threads
            self._threads.add(thread)
        stop = threading.Event()
        try:
            return await asyncio.to_thread(_run, graph, graph_input, ctx, config, fresh, stop)
        finally:
            stop.set()

    def keep_only(self, item_ids: set[str]) -> None:
        """Only these questions are still to run: the threads of any other (recorded before a kill) are forgotten."""
        for item_id in {t.rpartition("#")[0] for t in self._threads} - item_ids:
            self.forget(item_id)

    def forget(self, item_id: str) -> None:
        """The question's result line is written: its threads are deleted at :meth:`close` (a kill before that
        leaves them in the file, where a resume ignores them: the question is recorded)."""
        for n in self._attempts(item_id):
            self._done.append(self._thread(item_id, n))
            self._threads.discard(self._thread(item_id, n))
        self._first.pop(item_id, None)
        self._sent.pop(item_id, None)

    def holds(self, item_id: str, attempt: int) -> bool:
        """Whether the file holds a thread for this attempt at the question."""
        return self._thread(item_id, attempt) in self._threads
