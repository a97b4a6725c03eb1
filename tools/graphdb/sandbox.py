"""The embedded store's worker processes: every query with a time, memory and result budget (docs/reliability.md)."""

from __future__ import annotations

import datetime
import io
import json
import os
import pickle
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections import OrderedDict, deque
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Iterable

from ragplan.tools.graphdb.readonly import QueryRefused
from ragplan.tools.graphdb.sandbox_worker import HEADER, encode_frame, proc_status
from ragplan.tools.graphdb.script import ScriptError, Statement
from ragplan.tools.graphdb.store import QueryError, QueryTimeout

__all__ = ["QuerySandbox", "SandboxSettings", "WORKERS", "WorkerBudget", "WorkerExit"]

WORKER_SCRIPT = Path(__file__).with_name("sandbox_worker.py")
#: Resident memory a worker may hold beyond graph + budget before the parent kills it (file pages, stacks).
_RSS_SLACK = 64 << 20
_POLL_S = 0.05


@dataclass(frozen=True)
class SandboxSettings:
    """Budgets of the worker processes that run an embedded store's untrusted queries."""

    memory_budget_mb: int = 1024
    """Memory one query may use beyond the loaded graph (and at most ``WORKERS.memory_mb``); past it the query is
    stopped."""
    grace_s: float = 1.0
    """How long past its time budget a query may run before its worker is killed."""
    max_workers: int = 2
    """Worker processes per store (each holds a copy of the graph), within ``WORKERS.max_workers``; more queries wait."""
    max_result_mb: int = 16
    """Largest result (all returned values together) a query may send back."""
    max_values: int = 100_000
    """Most values (each number, string, list, map …) a result may hold: past it the query fails, naming the bound."""
    max_value_depth: int = 64
    """Deepest nesting of lists / maps in a returned value."""
    start_timeout_s: float = 60.0
    """How long a worker may take to start and load the graph."""


def size_text(n_bytes: int) -> str:
    """``1073741824`` -> ``"1 GB"``, ``536870912`` -> ``"512 MB"``."""
    gb = n_bytes / (1 << 30)
    if gb < 1:
        return f"{max(1, round(n_bytes / (1 << 20)))} MB"
    return f"{gb:.0f} GB" if gb.is_integer() else f"{gb:.1f} GB"


def timeout_message(timeout_s: float, detail: str = "") -> str:
    """What the LLM reads when a query ran out of time."""
    return (f"the query ran past the {timeout_s:g} s time budget and was stopped" + (f" ({detail})" if detail else "")
            + ": anchor the MATCH on a property, bound variable-length paths (e.g. *1..3), and aggregate, filter or "
            "LIMIT early")


def crash_message(what: str) -> str:
    """What the LLM reads when the engine crashed on a query."""
    return (f"the query crashed the query engine ({what}) and was stopped; the engine was restarted: "
            "write a simpler query (fewer nested subqueries, UNION arms and brackets)")


@dataclass(frozen=True)
class WorkerExit:
    """A worker process that has ended, for monitoring and tests."""

    pid: int
    reason: str
    """timeout, memory, crash, closed, start (failed to start) or broken."""
    peak_rss_bytes: int
    """The highest peak resident size seen (sampled every 50 ms while a query runs, and before a kill)."""


class _Stop(Exception):
    """Reading a reply ended early: ``timeout``, ``memory``, ``shared`` (memory), ``died`` or ``broken`` (a malformed reply)."""


class _GoneWhileIdle(Exception):
    """The worker ended between queries (not this query's doing): the pool retries with a fresh one."""


class _ReplyUnpickler(pickle.Unpickler):
    """Unpickles worker replies: plain data and date/time values, nothing that names other code."""

    def find_class(self, module: str, name: str) -> Any:
        if module == "datetime" and name in ("date", "datetime", "time", "timedelta", "timezone"):
            return getattr(datetime, name)
        raise pickle.UnpicklingError(f"unexpected type {module}.{name} in a worker reply")


class _Worker:
    """One worker process: started at once, ready after it has loaded the graph, then one query at a time."""

    def __init__(self, graph_fd: int, settings: SandboxSettings, memory_bytes: int) -> None:
        self.settings, self.budget = settings, memory_bytes
        self.dead = self.ready = False
        self.rss_limit = self.base_rss = self.growth = 0
        self.exit_reason = ""
        """Why the process ended: timeout, memory, crash, closed, start (failed to start) or broken."""
        self.peak_rss = 0
        """Highest peak resident size seen, in bytes (sampled while queries run and before a kill)."""
        self._stderr = tempfile.TemporaryFile(prefix="ragplan-graph-worker-")
        env = {"MIMALLOC_ARENA_RESERVE": "64MiB", **os.environ}  # reserve small arenas so RLIMIT_DATA counts use
        try:
            self.proc = subprocess.Popen([sys.executable, "-P", str(WORKER_SCRIPT), str(graph_fd), str(self.budget)],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, env=env,
                                         close_fds=True, pass_fds=(graph_fd,), start_new_session=True)
        except OSError as exc:
            self._stderr.close()
            raise QueryError(f"the query worker could not be started: {exc}") from exc
        self._fd = self.proc.stdout.fileno()  # type: ignore[union-attr]
        self._poller = select.poll()
        self._poller.register(self._fd, select.POLLIN | select.POLLHUP | select.POLLERR)

    def _read_exact(self, n: int, deadline: float, watch_memory: bool) -> bytes:
        buf = bytearray()
        next_check = time.monotonic() + _POLL_S
        while len(buf) < n:
            now = time.monotonic()
            if watch_memory and now >= next_check:
                next_check = now + _POLL_S
                rss = self._sample_memory()
                if rss > self.rss_limit > 0:
                    raise _Stop("memory")
                if WORKERS.over(self, rss):
                    raise _Stop("shared")
            if now >= deadline:
                raise _Stop("timeout")
            if self._poller.poll(max(1, int(min(deadline - now, _POLL_S) * 1000))):
                if not (chunk := os.read(self._fd, min(n - len(buf), 1 << 20))):
                    raise _Stop("died")
                buf += chunk
        return bytes(buf)

    def _read_reply(self, deadline: float, watch_memory: bool) -> Any:
        (size,) = HEADER.unpack(self._read_exact(HEADER.size, deadline, watch_memory))
        if size > (int(self.settings.max_result_mb) << 20) + (1 << 20):
            raise _Stop("broken")  # the worker broke the protocol (it caps its replies itself)
        try:
            return _ReplyUnpickler(io.BytesIO(self._read_exact(size, deadline, watch_memory))).load()
        except (pickle.UnpicklingError, EOFError, ValueError, TypeError) as exc:
            raise _Stop("broken") from exc

    def ensure_ready(self) -> None:
        """Wait until the worker has loaded the graph (only the first time)."""
        if self.ready:
            return
        try:
            reply = self._read_reply(time.monotonic() + self.settings.start_timeout_s, watch_memory=False)
        except _Stop as stop:
            tail = self._stderr_tail(0)
            self.kill("start")
            if stop.args[0] == "timeout":
                raise QueryError(f"the query worker did not load the graph within {self.settings.start_timeout_s:g} s") from None
            raise QueryError("the query worker could not load the graph: " + (tail.strip().splitlines() or ["it exited"])[-1]) from None
        if not (isinstance(reply, tuple) and reply and reply[0] == "ready"):
            self.kill("start")
            if isinstance(reply, tuple) and len(reply) == 5 and reply[0] == "script_error":
                raise ScriptError(*reply[1:])
            raise QueryError("the query worker did not start properly")
        self.base_rss = self._sample_memory()
        self.rss_limit = self.base_rss + self.budget + _RSS_SLACK
        self.ready = True

    def _sample_memory(self) -> int:
        """The worker's resident size now (0 if unknown); keeps :attr:`peak_rss` up to date (from ``VmHWM``:
        ``wait4``'s ``ru_maxrss`` would also count the parent's memory that the child had before ``exec``)."""
        try:
            rss, hwm = proc_status(self.proc.pid, "VmRSS", "VmHWM")
        except (OSError, ValueError, IndexError):
            return 0
        self.peak_rss = max(self.peak_rss, hwm)
        return rss

    def kill(self, reason: str = "closed") -> None:
        """End the process now (if it still runs) and release its pipes."""
        if self.dead:
            return
        self.dead = True
        self.exit_reason = self.exit_reason or reason
        if self.proc.returncode is None:
            self._sample_memory()
            self.proc.kill()  # (a process that has just ended is not signalled)
            with suppress(subprocess.TimeoutExpired):
                self.proc.wait(10.0)
        for stream in (self.proc.stdin, self.proc.stdout):
            with suppress(OSError):
                stream.close()  # type: ignore[union-attr]
        self._stderr.close()

    def _stderr_tail(self, mark: int) -> str:
        try:
            self._stderr.seek(max(mark, self._stderr.seek(0, io.SEEK_END) - 8192))
            return self._stderr.read().decode("utf-8", "replace")
        except (OSError, ValueError):
            return ""

    def query(self, cypher: str, *, row_cap: int, timeout_s: float, deadline: float,
              keep_id: list[str]) -> tuple[list[str], list[dict[str, Any]], int, list[str]]:
        """Run one checked query by ``deadline`` (its ``timeout_s`` less any wait): ``(columns, rows, total, warnings)``."""
        if self.ready and self.proc.poll() is not None:
            self.kill("crash")
            raise _GoneWhileIdle
        try:
            self.ensure_ready()
            mark = self._stderr.seek(0, io.SEEK_END)
            left_s = max(0.001, min(timeout_s, deadline - time.monotonic()))
            hard_timeout = left_s + self.settings.grace_s
            request = {"cypher": cypher, "row_cap": row_cap, "timeout_ms": max(1, int(left_s * 1000)),
                       "hard_timeout_s": hard_timeout, "max_result_bytes": int(self.settings.max_result_mb) << 20,
                       "max_values": int(self.settings.max_values),
                       "max_value_depth": int(self.settings.max_value_depth), "keep_id": keep_id}
            try:
                self.proc.stdin.write(encode_frame(request))  # type: ignore[union-attr]
                self.proc.stdin.flush()  # type: ignore[union-attr]
                reply = self._read_reply(time.monotonic() + hard_timeout, watch_memory=True)
            except (_Stop, BrokenPipeError) as stop:
                kind = stop.args[0] if isinstance(stop, _Stop) else "died"
                raise self._death_error(mark, timeout_s) if kind == "died" else self._ended(kind, timeout_s) from None
        except QueryError:
            raise
        except BaseException as exc:  # KeyboardInterrupt, a broken reply: the worker's state is unknown
            self.kill("broken")
            if isinstance(exc, Exception):
                raise QueryError(f"the query worker failed: {type(exc).__name__}: {exc}") from exc
            raise
        if isinstance(reply, tuple) and len(reply) == 5 and reply[0] == "rows":
            _, columns, rows, total, warnings = reply
            return list(columns), list(rows), int(total), list(warnings)
        kind, message = (reply[1], reply[2]) if isinstance(reply, tuple) and len(reply) == 3 else ("error", "")
        raise self._error(kind, timeout_s, message)

    def _ended(self, kind: str, timeout_s: float) -> Exception:
        """Kill the worker that ran out of time or memory (``shared``: the run-wide budget) or broke the protocol,
        and say why."""
        self.kill("memory" if kind == "shared" else kind)
        return self._error(kind, timeout_s, "the engine did not stop, so its worker was ended")

    def _death_error(self, mark: int, timeout_s: float) -> Exception:
        with suppress(subprocess.TimeoutExpired):
            self.proc.wait(5.0)
        rc = self.proc.returncode
        low = self._stderr_tail(mark).lower()
        if any(s in low for s in ("memory allocation of", "out of memory", "memoryerror", "cannot allocate", "unable to allocate")):
            return self._ended("memory", timeout_s)
        if rc == -signal.SIGXCPU:
            return self._ended("timeout", timeout_s)
        self.kill("crash")
        if "overflowed its stack" in low:
            what = "a stack overflow"
        elif rc is not None and rc < 0:
            try:
                what = f"killed by {signal.Signals(-rc).name}"
            except ValueError:
                what = f"killed by signal {-rc}"
        else:
            what = f"exit status {rc}" if rc is not None else "it stopped answering"
        return QueryError(crash_message(what))

    def _error(self, kind: str, timeout_s: float, detail: str) -> Exception:
        """The error of a query that ended in ``kind`` (``detail``: the engine's words, if any)."""
        if kind == "timeout":
            return QueryTimeout(timeout_message(timeout_s, detail))
        if kind == "refused":
            return QueryRefused(f"the store is read-only: {detail}")
        stopped = (" and was stopped: avoid cartesian products (MATCH (a), (b), …) and long variable-length paths, do "
                   "not build huge lists or strings (reduce, collect, range), and aggregate, filter or LIMIT early")
        return QueryError({
            "memory": f"the query exceeded the {size_text(self.budget)} memory budget{stopped}",
            "shared": f"the query exceeded the {size_text(int(WORKERS.memory_mb) << 20)} memory budget shared by the "
                      f"queries running at once (it used the most){stopped}",
            "broken": "the query worker sent a malformed reply and was restarted; try the query again",
            "format": "FORMAT CSV is not supported here: return columns (RETURN a, b …) instead",
            "too_big": f"the result is larger than {size_text(int(self.settings.max_result_mb) << 20)} and was not "
                       "returned: return fewer or smaller values (count(*), size(x) or a LIMIT instead of a huge "
                       "list or string)",
            "too_many": f"the result holds more than {self.settings.max_values:,} values and was not returned: return "
                        "fewer rows or shorter lists (count(*), size(x), or aggregate, filter or LIMIT first)",
            "too_deep": f"a returned value nests lists or maps more than {self.settings.max_value_depth} levels deep: "
                        "return something flatter",
        }.get(kind) or detail or "the query failed in the engine")


class WorkerBudget:
    """The query workers of every embedded store in this process: a run-wide cap on their number and memory."""

    def __init__(self, max_workers: int = 16, memory_mb: int = 512) -> None:
        self.max_workers = max_workers
        """Live worker processes across all stores; a store needing one more takes another store's least recently
        used idle worker, or its query waits (within its time budget)."""
        self.memory_mb = memory_mb
        """Memory all running queries together may use beyond their graphs; past it the one using the most is
        stopped. One query may use at most this or its store's ``memory_budget_mb``."""
        self.cond = threading.Condition()
        self.live: set[_Worker] = set()
        self.idle: OrderedDict[_Worker, weakref.ref[QuerySandbox]] = OrderedDict()  # least recently used first

    def worker_memory(self, settings: SandboxSettings) -> int:
        """One worker's memory budget in bytes."""
        return max(32, min(int(settings.memory_budget_mb), int(self.memory_mb))) << 20

    def over(self, worker: _Worker, rss: int) -> bool:
        """Whether the live workers' growth past their loaded graphs (``worker`` now at ``rss``) is over
        ``memory_mb`` and ``worker`` grew the most."""
        worker.growth = max(0, rss - worker.base_rss)
        growths = [w.growth for w in list(self.live) if not w.dead]
        return sum(growths) > int(self.memory_mb) << 20 and worker.growth >= max(growths, default=0)


WORKERS = WorkerBudget()
"""The process's worker budget: set ``WORKERS.max_workers`` / ``WORKERS.memory_mb`` before running queries."""


def _shutdown(workers: set[_Worker], graph: IO[bytes], owner_pid: int) -> None:
    """Kill a pool's workers and close its graph file (only in the process that started them)."""
    if os.getpid() != owner_pid:
        return
    with WORKERS.cond:
        for worker in list(workers):
            worker.kill()
            WORKERS.live.discard(worker)
            WORKERS.idle.pop(worker, None)
        workers.clear()
        WORKERS.cond.notify_all()
    graph.close()


class QuerySandbox:
    """The worker processes serving one graph, within the process's :data:`WORKERS` budget; thread-safe."""

    def __init__(self, statements: list[Statement], *, settings: SandboxSettings = SandboxSettings(),
                 source: str = "<graph>", keep_id: Iterable[str] = ()) -> None:
        """Load the statements in a first worker (``keep_id``: labels whose ``id`` results show); :class:`ScriptError`
        or :class:`QueryError` leave nothing running."""
        self.settings, self.source, self.keep_id = settings, source, sorted(keep_id)
        self._graph = tempfile.TemporaryFile(prefix="ragplan-graph-")  # already unlinked: no leftovers
        self._graph.write(json.dumps([source, [(st.line, st.text) for st in statements]]).encode())
        self._graph.flush()
        self._ref = weakref.ref(self)
        self._workers: set[_Worker] = set()
        self._pid = os.getpid()
        self._closed = self._released = False
        self.exits: deque[WorkerExit] = deque(maxlen=64)
        """The most recent worker exits, oldest first."""
        self._finalizer = weakref.finalize(self, _shutdown, self._workers, self._graph, self._pid)
        try:
            self.warm_up()  # before any other worker can start: the first one rewrites the file
        except BaseException:
            self.close()
            raise

    def run(self, cypher: str, *, row_cap: int, timeout_s: float) -> tuple[list[str], list[dict[str, Any]], int, list[str]]:
        """Run one checked query in a worker: ``(columns, rows, total_rows, warnings)``, or a query error.
        Waiting for a free worker (and starting it) counts in ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        for _ in range(3):
            if (worker := self._checkout(deadline)) is None:
                raise QueryTimeout(timeout_message(timeout_s, f"no query worker was free: all {WORKERS.max_workers} of "
                                                              "this process's workers were busy"))
            try:
                return worker.query(cypher, row_cap=row_cap, timeout_s=timeout_s, deadline=deadline, keep_id=self.keep_id)
            except _GoneWhileIdle:
                continue
            finally:
                self._checkin(worker)
        raise QueryError(crash_message("its worker process kept ending between queries"))

    def worker_pids(self) -> list[int]:
        """Process ids of the live workers (for tests and monitoring)."""
        with WORKERS.cond:
            return sorted(w.proc.pid for w in self._workers if not w.dead)

    def warm_up(self) -> None:
        """Take a worker and wait until it has loaded the graph (starting one if none is idle)."""
        if (worker := self._checkout(time.monotonic() + self.settings.start_timeout_s)) is None:
            raise QueryError(f"no query worker became free within {self.settings.start_timeout_s:g} s to load the graph")
        try:
            worker.ensure_ready()
        finally:
            self._checkin(worker)

    def _checkout(self, deadline: float) -> _Worker | None:
        """An idle worker of this store, else a new one within the budget; ``None`` if none by ``deadline``."""
        with WORKERS.cond:
            if os.getpid() != self._pid:  # a forked child: the workers belong to the parent
                raise QueryError("this store's query workers belong to another process; open the store again here")
            while True:
                if self._closed:
                    raise QueryError("the graph store is closed")
                mine = next((w for w, ref in reversed(list(WORKERS.idle.items())) if ref() is self), None)
                if mine is not None:
                    del WORKERS.idle[mine]
                    return mine
                if len(self._workers) < max(1, self.settings.max_workers):
                    while len(WORKERS.live) >= max(1, WORKERS.max_workers) and WORKERS.idle:
                        other, ref = WORKERS.idle.popitem(last=False)  # another store's least recently used
                        owner = ref()
                        owner._retire(other) if owner is not None else other.kill()
                        WORKERS.live.discard(other)
                    if len(WORKERS.live) < max(1, WORKERS.max_workers):
                        return self._start()
                if (left := deadline - time.monotonic()) <= 0:
                    return None
                WORKERS.cond.wait(min(left, 1.0))

    def _start(self) -> _Worker:
        worker = _Worker(self._graph.fileno(), self.settings, WORKERS.worker_memory(self.settings))
        self._workers.add(worker)
        WORKERS.live.add(worker)
        return worker

    def _checkin(self, worker: _Worker) -> None:
        with WORKERS.cond:
            if not worker.dead and worker.ready:  # a worker that kept its query's memory is not kept idle
                worker.growth = max(0, worker._sample_memory() - worker.base_rss)
            if worker.dead or self._closed or self._released or worker.growth > _RSS_SLACK:
                self._retire(worker)
                if not (self._closed or self._released) and worker.ready and len(WORKERS.live) < WORKERS.max_workers:
                    with suppress(QueryError):  # replace a worker that died serving: start loading now
                        WORKERS.idle[self._start()] = self._ref
            else:
                WORKERS.idle[worker] = self._ref  # now the most recently used
            WORKERS.cond.notify_all()
            if self._closed and not self._workers:
                self._finalizer()

    def _retire(self, worker: _Worker) -> None:
        worker.kill()
        self._workers.discard(worker)
        WORKERS.live.discard(worker)
        WORKERS.idle.pop(worker, None)
        self.exits.append(WorkerExit(worker.proc.pid, worker.exit_reason, worker.peak_rss))

    def release(self) -> None:
        """Keep no idle worker: stop the idle ones now, a busy one when its query ends; later queries still run."""
        with WORKERS.cond:
            self._released = True
            for worker in [w for w, ref in WORKERS.idle.items() if ref() is self]:
                self._retire(worker)
            WORKERS.cond.notify_all()

    def close(self) -> None:
        """Stop the idle workers now and the busy ones when their query ends; then close the graph file."""
        with WORKERS.cond:
            self._closed = True
            self.release()
            busy = bool(self._workers)
        if not busy:
            self._finalizer()
