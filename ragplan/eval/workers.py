"""Worker processes for ``ragplan eval --workers N``: a run's questions in several processes, so it uses every core.

**Why.** A batch run waits on the LLM, but every question also costs the runner about 20 ms of CPU
(the OpenAI client, the chat model, the asyncio loop and LangGraph, the checkpoint writes), all in one
Python process. At a high concurrency that one core is the limit (``benchmarks/batch.py``: 64
questions against a 200 ms endpoint kept 32 requests in flight only half of the time). Several
processes each run part of the questions with a share of the concurrency.

**How.** The parent does everything that comes before the first question (the benchmark, the run's
settings and check, ``invocations.jsonl``), then starts N workers, each with ``concurrency // N``
questions in flight (the remainder to the first ones). A worker asks the parent for a question each
time one of its slots is free, so the work is balanced to the last question whatever each one costs.
The parent hands the questions out by data (the family's :meth:`~ragplan.family.MethodFamily.data_key`:
PlanRAG's script): a worker gets the next question of a data it already holds first, then the first
data nobody holds (one it held in the previous run of this process, when there is one), and only
when every remaining question belongs to a data another worker holds and that worker has no free
slot, one of those (its data is then opened in both). So each distinct script is loaded by one
worker, except at the very end of a run. Each worker runs the same per-question code as a run in
one process (:func:`~ragplan.eval.question_runner.run_questions`): it appends its records to
``results.jsonl`` itself (one write per line under ``flock``, fsynced) and writes its checkpoints into
the run's one SQLite file (WAL, busy timeout); it reports each finished question to the parent (the
progress bar) and, at the end, the LLM cache entries it used. The parent then reads
``results.jsonl`` and writes the summary as it always does.

Workers are forked from a ``forkserver`` that has the heavy modules imported (LangGraph, LangChain,
the OpenAI client, the families), and they are kept for the next run of the same Python process (a
sweep, ``ragplan compare``, a notebook, the benchmark): what a process keeps between runs — loaded
scripts and their query workers, chat-model clients — stays warm, as it does in a single-process run.
A run's jobs bring the parent's environment variables and working directory, so a worker behaves as
the parent would at that moment.

**Faults.** Ctrl-C is the parent's to handle (workers ignore SIGINT; the parent kills them when the
run is interrupted). A worker whose parent is gone (``kill -9``) sees its pipe close and exits at
once: nothing keeps writing into a run folder that a ``--resume`` may be finishing. A worker that dies
(a crash, the OOM killer, a kill) loses only the questions it had in flight: they stay pending (each
continues from its checkpoint on ``--resume``), the data it held go to the other workers, and the
run's summary says what happened under ``runner.unfinished``. Nothing is lost or recorded twice, and
the parent never waits on a dead process.

**When.** ``workers = "auto"`` (the default) takes min(cores, concurrency // 8) processes with at
least 4 questions each, and one process (the single-process path, unchanged) when that is 1, for a
Python chat-model object (it cannot cross processes), or when the run's settings or benchmark
cannot be pickled.
"""

from __future__ import annotations

import asyncio
import atexit
import multiprocessing
import os
import pickle
import queue
import signal
import threading
from collections import deque
from dataclasses import dataclass, field, replace
from pathlib import Path
from multiprocessing.connection import Connection
from typing import Any, Callable

from ragplan.eval.benchmark import Item
from ragplan.eval.item_checkpoints import CHECKPOINT_FILE, ItemCheckpoints
from ragplan.eval.item_contexts import data_keys
from ragplan.eval.question_runner import RunJob, run_questions
from ragplan.family import MethodFamily
from ragplan.llm_cache import track_cache_usage

__all__ = ["choose_workers", "workers_setting", "WorkerPool", "WorkersOutcome", "run_in_workers", "worker_pool",
           "PRELOAD", "CONCURRENCY_PER_WORKER", "QUESTIONS_PER_WORKER"]

#: Modules the forkserver imports once, so a worker starts with them loaded (a fork, not 1 s of imports).
PRELOAD = ["ragplan.eval.workers", "ragplan.eval.registry", "ragplan.registry", "langchain_openai"]
#: ``auto``: one worker per this many questions in flight (below it one process keeps up; see benchmarks/batch.py).
CONCURRENCY_PER_WORKER = 8
#: ``auto``: each worker gets at least this many questions (a worker's start is not worth fewer).
QUESTIONS_PER_WORKER = 4


def _cores() -> int:
    """The cores this process may run on (its CPU affinity where the system tells it, else the machine's)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def workers_setting(text: str) -> int | str:
    """A ``--workers`` value: ``auto`` or a positive whole number (a ValueError says what is wrong)."""
    t = text.strip().lower()
    if t == "auto":
        return "auto"
    if not t.isdigit() or int(t) < 1:
        raise ValueError(f"--workers takes a positive whole number or 'auto', not {text!r}")
    return int(t)


def choose_workers(job: RunJob, *, chat_model_given: bool = False) -> tuple[int, str | None]:
    """How many processes run ``job`` (1 = this one), and a message when the run's explicit setting cannot be met."""
    setting, pending = job.settings.workers, len(job.items)
    if setting == "auto":
        n = min(_cores(), job.concurrency // CONCURRENCY_PER_WORKER, pending // QUESTIONS_PER_WORKER)
        if n <= 1 or chat_model_given or not _picklable(job):
            return 1, None
        return n, None
    if isinstance(setting, bool) or not isinstance(setting, int) or setting < 1:
        return 1, f"workers must be a positive number or 'auto', not {setting!r}"
    n = max(1, min(setting, job.concurrency, pending))
    if n > 1 and chat_model_given:
        return 1, (f"workers={setting}: a Python chat-model object cannot be sent to worker processes; "
                   "give the model by name (provider:model) or run with workers=1")
    if n > 1 and not _picklable(job):
        return 1, f"workers={setting}: the run's settings or benchmark cannot be sent to worker processes (not picklable)"
    return n, None


def _picklable(job: RunJob) -> bool:
    try:
        pickle.dumps(job)
    except Exception:  # any object pickle refuses (locks, open clients, lambdas …)
        return False
    return True


# ---------------------------------------------------------------------------------------------- the worker side

class _PipeSource:
    """A worker's questions, asked from the parent as its slots come free (a
    :class:`~ragplan.eval.question_runner.QuestionSource`): at the start one request for every slot, later one
    per finished question, one request at a time so the answers come back in order."""

    def __init__(self, conn: Connection, slots: int) -> None:
        self.conn, self.slots = conn, slots
        self.loop = asyncio.get_running_loop()
        self.replies: asyncio.Queue[Any] = asyncio.Queue()
        self.lock = asyncio.Lock()
        self.buffer: deque[tuple[Item, bool]] = deque()
        self.handed = self.finished = 0
        self.done = False

    def deliver(self, reply: Any) -> None:
        """The parent's answer (from the pipe's reader thread)."""
        self.loop.call_soon_threadsafe(self.replies.put_nowait, reply)

    def note_finished(self) -> None:
        """A question was recorded: tell the parent (a slot is free)."""
        self.finished += 1
        self.conn.send(("finished",))

    async def next(self) -> tuple[Item, bool] | None:
        """The next question; asks the parent for as many as there are free slots when none is at hand."""
        async with self.lock:
            if not self.buffer and not self.done:
                self.conn.send(("want", max(1, self.slots - (self.handed - self.finished))))
                reply = await self.replies.get()
                if reply is None:
                    self.done = True
                else:
                    self.buffer.extend(reply)
            if not self.buffer:
                return None
            self.handed += 1
            return self.buffer.popleft()


class _Inbox:
    """Where the reader thread puts what the parent sends: jobs for the main thread, answers for the running job."""

    def __init__(self) -> None:
        self.jobs: queue.Queue[Any] = queue.Queue()
        self.source: _PipeSource | None = None
        self.lock = threading.Lock()

    def listen(self, conn: Connection) -> None:
        """Read the pipe until the parent says stop; a closed pipe means the parent is gone, so exit now."""
        try:
            while True:
                msg = conn.recv()
                if msg[0] == "stop":
                    break
                if msg[0] == "run":
                    self.jobs.put(msg[1:])
                elif msg[0] == "items":
                    with self.lock:
                        source = self.source
                    if source is not None:
                        source.deliver(msg[1])
        except (EOFError, OSError):
            os._exit(1)  # the parent was killed: stop writing into its run folder (--resume finishes it)
        self.jobs.put(None)


def _serve(conn: Connection) -> None:
    """A worker process: run the jobs the parent sends, one after the other, until it says stop."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's: it stops the workers itself
    inbox = _Inbox()
    threading.Thread(target=inbox.listen, args=(conn,), daemon=True, name="ragplan-worker-pipe").start()

    async def run(job: RunJob) -> int:
        source = _PipeSource(conn, job.concurrency)
        with inbox.lock:
            inbox.source = source
        try:
            return await run_questions(job, source.note_finished, source=source)
        finally:
            with inbox.lock:
                inbox.source = None

    while True:
        msg = inbox.jobs.get()
        if msg is None:
            return
        job, environ, cwd = msg
        os.environ.clear()
        os.environ.update(environ)
        os.chdir(cwd)
        try:
            with track_cache_usage() as usage:
                prepared = asyncio.run(run(job))
            conn.send(("done", prepared, usage.digests()))
        except Exception as exc:  # the job could not run (its graph, its checkpoint file …): the parent reports it
            conn.send(("failed", f"{type(exc).__name__}: {exc}"))


# ---------------------------------------------------------------------------------------------- the parent side

@dataclass
class _Worker:
    process: Any
    conn: Connection


@dataclass
class WorkersOutcome:
    """What the workers of one run reported."""

    prepared: int = 0
    """Data prepared (loaded scripts …), summed over the workers."""
    shared: int = 0
    """How many times a worker opened data another worker holds (to take over questions at the end of a run)."""
    digests: list[str] = field(default_factory=list)
    """The LLM cache entries the workers used."""
    unfinished: list[str] = field(default_factory=list)
    """One line per worker that stopped before the run's end (died or failed), with the reason."""


class _Dispatch:
    """Which question goes to which worker next (see the module docstring): by data, balanced to the end."""

    def __init__(self, items: list[Item], keys: list[str], slots: list[int], affinity: dict[str, int]) -> None:
        self.queues: dict[str, deque[Item]] = {}
        for item, key in zip(items, keys):
            self.queues.setdefault(key, deque()).append(item)
        self.remaining = len(items)
        self.slots = slots
        self.in_flight = [0] * len(slots)
        self.owner: dict[str, int] = {}
        self.mine: list[deque[str]] = [deque() for _ in slots]  # data each worker holds, in order
        # data nobody holds yet: those a worker held in the previous run (still loaded there), then the rest
        self.before: list[deque[str]] = [deque() for _ in slots]
        self.fresh: deque[str] = deque()
        for k in self.queues:
            w = affinity.get(k)
            (self.before[w] if w is not None and w < len(slots) else self.fresh).append(k)
        self.affinity = affinity
        self.shared: set[tuple[int, str]] = set()
        """(worker, data) pairs where a worker took questions of data another worker holds."""

    def _first(self, keys: deque[str]) -> str | None:
        while keys and (not self.queues[keys[0]] or keys[0] in self.owner):
            keys.popleft()
        return keys[0] if keys else None

    def _pick(self, w: int) -> str | None:
        mine = self.mine[w]
        while mine and not self.queues[mine[0]]:
            mine.popleft()
        if mine:
            return mine[0]
        for keys in (self.before[w], self.fresh, *(self.before[v] for v in range(len(self.slots)) if v != w)):
            key = self._first(keys)
            if key is not None:
                return key
        busy = [k for k, o in self.owner.items() if self.queues[k] and self.in_flight[o] >= self.slots[o]]
        return max(busy, key=lambda k: len(self.queues[k]), default=None)  # a worker without a free slot: share its data

    def take(self, w: int) -> tuple[Item, bool] | None | bool:
        """The next question for worker ``w`` and whether more of its data may follow; None when every question
        is handed out; False when ``w`` should wait (what is left belongs to workers that will take it)."""
        key = self._pick(w)
        if key is None:
            return None if self.remaining == 0 else False
        if key not in self.owner:
            self.owner[key] = w
            self.affinity[key] = w
            self.mine[w].append(key)
        elif self.owner[key] != w and (w, key) not in self.shared:
            self.shared.add((w, key))  # its data is opened in this worker too
        item = self.queues[key].popleft()
        self.remaining -= 1
        self.in_flight[w] += 1
        return item, bool(self.queues[key]) or self.owner[key] != w  # a worker sharing data keeps it to its end

    def finished(self, w: int) -> None:
        """Worker ``w`` recorded a question."""
        self.in_flight[w] -= 1

    def gone(self, w: int) -> int:
        """Worker ``w`` stopped: its data go to the others; returns how many questions it had in flight."""
        for k in self.mine[w]:
            if self.owner.get(k) == w:
                del self.owner[k]
                self.fresh.append(k)
        self.mine[w].clear()
        lost, self.in_flight[w], self.slots[w] = self.in_flight[w], 0, 0
        return lost


class WorkerPool:
    """Worker processes forked from a preloaded forkserver, kept between runs of this process."""

    def __init__(self) -> None:
        """An empty pool; workers are started by :meth:`ensure`."""
        self._mp = multiprocessing.get_context("forkserver")
        self._mp.set_forkserver_preload(PRELOAD)
        self.workers: list[_Worker] = []
        self.affinity: dict[str, int] = {}
        """Which worker held which data in the previous runs (they get it first again: it is still loaded)."""

    def ensure(self, n: int) -> list[_Worker]:
        """The first ``n`` workers, each alive (a dead one is replaced in its place)."""
        for i in range(n):
            if i < len(self.workers) and self.workers[i].process.is_alive():
                continue
            parent, child = self._mp.Pipe(duplex=True)
            proc = self._mp.Process(target=_serve, args=(child,), daemon=True, name=f"ragplan-eval-worker-{i + 1}")
            proc.start()
            child.close()  # only the worker holds its end: the parent sees EOF when it dies
            w = _Worker(proc, parent)
            if i < len(self.workers):
                self.workers[i].conn.close()
                self.workers[i] = w
                self.affinity = {k: o for k, o in self.affinity.items() if o != i}  # a new process holds nothing
            else:
                self.workers.append(w)
        return self.workers[:n]

    def close(self, timeout: float = 5.0) -> None:
        """Stop every worker: ask, wait up to ``timeout`` seconds, then kill."""
        for w in self.workers:
            try:
                w.conn.send(("stop",))
            except OSError:
                pass
        for w in self.workers:
            w.process.join(timeout)
            if w.process.is_alive():
                w.process.kill()
                w.process.join(timeout)
            w.conn.close()
        self.workers = []

    def kill(self) -> None:
        """Kill every worker now (the run was interrupted: what they had in flight stays pending for ``--resume``)."""
        for w in self.workers:
            if w.process.is_alive():
                w.process.kill()
        for w in self.workers:
            w.process.join(5.0)
            w.conn.close()
        self.workers = []


_pool: WorkerPool | None = None
_pool_lock = threading.Lock()


def worker_pool() -> WorkerPool:
    """This process's pool (created on first use, stopped at exit)."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = WorkerPool()
            atexit.register(_pool.close)
        return _pool


def _discard_pool() -> None:
    global _pool
    with _pool_lock:
        pool, _pool = _pool, None
    if pool is not None:
        atexit.unregister(pool.close)
        pool.kill()


async def run_in_workers(job: RunJob, family: MethodFamily, n: int,
                         on_finished: Callable[[], None] | None = None) -> WorkersOutcome:
    """Run ``job``'s questions in ``n`` worker processes; ``on_finished`` once per recorded question (on this loop)."""
    pool = worker_pool()
    workers = pool.ensure(n)
    slots = [job.concurrency // n + (1 if i < job.concurrency % n else 0) for i in range(n)]
    dispatch = _Dispatch(job.items, data_keys(family, job.items), slots, pool.affinity)
    outcome = WorkersOutcome()
    digests: set[str] = set()
    running: set[int] = set()
    waiting: list[int] = []  # workers whose request waits until a question can go to them
    loop = asyncio.get_running_loop()
    all_done = loop.create_future()
    environ, cwd = dict(os.environ), os.getcwd()

    wants = [0] * n

    def answer(w: int) -> None:
        batch: list[tuple[Item, bool]] = []
        while len(batch) < wants[w] and isinstance(got := dispatch.take(w), tuple):
            batch.append(got)
        if batch or dispatch.remaining == 0:
            workers[w].conn.send(("items", batch or None))
        else:
            waiting.append(w)  # answered when a question can go to it

    def stop(w: int, why: str) -> None:
        running.discard(w)
        for fd in (workers[w].conn.fileno(), workers[w].process.sentinel):
            loop.remove_reader(fd)
        lost = dispatch.gone(w)
        if why:
            outcome.unfinished.append(f"worker {w + 1} {why}" + (f"; its {lost} question(s) in flight are left for "
                                                                 "--resume" if lost else ""))
        for v in [v for v in waiting if v != w]:  # what it held can go to the others now
            waiting.remove(v)
            answer(v)
        if not running and not all_done.done():
            all_done.set_result(None)

    def readable(w: int) -> None:
        if w not in running:
            return
        conn, proc = workers[w].conn, workers[w].process
        dead = not proc.is_alive()  # before reading: a worker that died has sent all it ever will
        try:
            while w in running and conn.poll():
                msg = conn.recv()
                if msg[0] == "want":
                    wants[w] = int(msg[1])
                    answer(w)
                elif msg[0] == "finished":
                    dispatch.finished(w)
                    if on_finished:
                        on_finished()
                    for v in list(waiting):  # a slot came free: a waiting worker may take over now
                        waiting.remove(v)
                        answer(v)
                elif msg[0] == "done":
                    outcome.prepared += int(msg[1])
                    digests.update(msg[2])
                    stop(w, "")
                else:
                    stop(w, f"stopped: {msg[1]}")
        except (EOFError, OSError):
            dead = True
        if dead and w in running:
            proc.join(1.0)  # its pipe may close a moment before its exit status is known
            code = proc.exitcode
            stop(w, f"was killed by signal {-code}" if isinstance(code, int) and code < 0 else f"exited ({code})")

    if job.settings.checkpoints:  # create the shared file (WAL, tables) before several processes open it at once
        checkpoints = ItemCheckpoints(Path(job.run_dir) / CHECKPOINT_FILE)
        await checkpoints.open()
        await checkpoints.close()
    for i, w in enumerate(workers):
        try:
            w.conn.send(("run", replace(job, items=[], concurrency=slots[i]), environ, cwd))
        except OSError as exc:
            outcome.unfinished.append(f"worker {i + 1} could not be started on the run: {exc}")
            dispatch.gone(i)
            continue
        running.add(i)
        loop.add_reader(w.conn.fileno(), readable, i)
        loop.add_reader(w.process.sentinel, readable, i)
    clean = False
    try:
        if running:
            await all_done
        clean = True
    finally:
        for i in list(running):
            for fd in (workers[i].conn.fileno(), workers[i].process.sentinel):
                loop.remove_reader(fd)
        if not clean:  # interrupted (Ctrl-C, cancelled): the workers are mid-run; stop them now
            _discard_pool()
    if dispatch.remaining:
        outcome.unfinished.append(f"{dispatch.remaining} question(s) were not started (no worker left); --resume runs them")
    outcome.digests = sorted(digests)
    outcome.shared = len(dispatch.shared)
    return outcome
