"""The per-question part of an evaluation run: run (bounded async concurrency), retry on rate limits with
exponential backoff, grade, and append each question's record to ``results.jsonl`` (fsynced before it counts as
done). A question past its time budget or one that crashes is recorded with the reason. Each question's data
(:meth:`~ragplan.family.MethodFamily.data_key`) is prepared once per run, shared by its questions and let go
after the last; a failed ``prepare`` hands nothing on.
"""

from __future__ import annotations

import asyncio
import gc
import random
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import fields
from functools import partial
from typing import Any, Callable, Coroutine, Iterable, Iterator

from ragplan.eval.benchmark import Benchmark, Item
from ragplan.eval.item_checkpoints import CHECKPOINT_FILE, ItemCheckpoints
from ragplan.eval.runfolder import RunFolder, RunSettings, record_line
from ragplan.family import MethodFamily
from ragplan.llm import on_request, on_send
from ragplan.redact import keys_read_once
from ragplan.state.result import GraphResult
from ragplan.state.usage import Usage

__all__ = ["ResultWriter", "run_questions", "is_rate_limited", "ItemContexts", "data_keys"]


def is_rate_limited(out: dict[str, Any]) -> bool:
    """Whether a run's output failed on a rate limit (worth waiting for): its typed failure's kind, never its text."""
    failed = out.get("failure")
    return (failed.get("kind") if isinstance(failed, dict) else getattr(failed, "kind", None)) == "rate_limit"


def data_keys(family: MethodFamily, items: Iterable[Item]) -> list[str]:
    """Each question's data key, in order (questions with the same key read the same data)."""
    names = family.context_fields()
    return [family.data_key({k: v for k, v in it.context.items() if k in names}) for it in items]


class ItemContexts:
    """Contexts of a run's questions, the family's data prepared once per distinct data."""

    def __init__(self, family: MethodFamily, method: str, base: dict[str, Any], items: Iterable[Item],
                 prepare: bool = True) -> None:
        """``base``: the settings every question shares; ``items``: the questions this invocation will run;
        ``prepare=False``: the data is opened where the graph runs (a LangGraph server), not here."""
        self.family, self.method, self.base, self.open_data = family, method, base, prepare
        self.fields = family.context_fields()
        self._pending: Counter[str] = Counter(data_keys(family, items))
        self._handles: dict[str, dict[str, Any]] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self.prepared = 0
        """How many distinct data were prepared (each distinct script loaded once: this many loads)."""

    def _prepare(self, ctx: Any) -> dict[str, Any]:
        """Run ``prepare`` on ``ctx``; the fields it set (the data's handles), or nothing when it failed."""
        before = {f.name: getattr(ctx, f.name) for f in fields(ctx)}
        try:
            if self.family.prepare(self.method, ctx):  # a problem: the graph opens the data itself and says why
                return {}
        except Exception:  # likewise
            return {}
        return {k: getattr(ctx, k) for k, v in before.items() if getattr(ctx, k) is not v}

    async def get(self, item: Item) -> Any:
        """A fresh context for ``item``, with its data's prepared handles."""
        key = data_keys(self.family, [item])[0]
        ctx = self.family.context(**{**self.base, **{k: v for k, v in item.context.items() if k in self.fields}})
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            if key not in self._handles:
                self._handles[key] = await asyncio.to_thread(self._prepare, ctx) if self.open_data else {}
                self.prepared += self.open_data
                return ctx
        for name, value in self._handles[key].items():
            setattr(ctx, name, value)
        return ctx

    def release(self, item: Item) -> None:
        """``item`` is done: when it was the last question of its data, let the data go."""
        key = data_keys(self.family, [item])[0]
        self._pending[key] -= 1
        if self._pending[key] <= 0:
            self._handles.pop(key, None)
            self._locks.pop(key, None)


class ResultWriter:
    """Appends result lines, those ready together in one write and one ``fsync`` (group commit)."""

    def __init__(self, folder: RunFolder) -> None:
        """Lines go to ``folder``'s ``results.jsonl``."""
        self.folder = folder
        self._waiting: list[tuple[bytes, asyncio.Future[None]]] = []
        self._writing = False

    async def write(self, record: dict[str, Any]) -> None:
        """Append ``record`` as a line; returns once it is on disk."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append((record_line(record), done))
        if not self._writing:
            self._writing = True
            asyncio.get_running_loop().create_task(self._drain())
        await done

    async def _drain(self) -> None:
        try:
            while self._waiting:
                batch, self._waiting = self._waiting, []
                try:
                    await asyncio.to_thread(self.folder.append_lines, [line for line, _ in batch])
                except Exception as exc:  # the disk refused (full, gone): every writer of the batch gets the error
                    for _, done in batch:
                        if not done.done():  # (a writer cancelled meanwhile)
                            done.set_exception(exc)
                    continue
                for _, done in batch:
                    if not done.done():
                        done.set_result(None)
        finally:
            self._writing = False


class GivenUp(Exception):
    """The question was given up (past its time budget, or the batch stopped) while it waited for a request slot."""


class Slots:
    """At most ``n`` LLM requests in flight; ``n`` questions, and up to ``2n`` while every question in flight is at the
    endpoint (its request sent, or ready and waiting for a slot): the next questions are made ready meanwhile, and a
    reply's slot goes at once to a ready request. A request is at the endpoint once the OpenAI client made by
    :mod:`ragplan.llm` sends it (other providers' requests are bounded by the ``n`` questions alone)."""

    def __init__(self, n: int) -> None:
        """``n``: the run's concurrency (made on the run's event loop)."""
        self.n, self.running, self.waiting, self.lock = n, 0, 0, threading.Lock()
        self.requests, self.changed, self.loop = threading.BoundedSemaphore(n), asyncio.Event(), asyncio.get_running_loop()

    async def feed(self, run: Callable[[Item], Coroutine[Any, Any, None]], items: Iterable[Item]) -> None:
        """Start ``run(item)`` for each item in turn once there is room for it (one task per question in flight, so
        a batch of any size holds as many; each calls :meth:`leave` once its graph has returned or was given up);
        returns when all are done, or raises the first failure of one."""
        tasks: set[asyncio.Task[None]] = set()
        failed: list[BaseException] = []

        def done(task: asyncio.Task[None]) -> None:
            tasks.discard(task)
            exc = None if task.cancelled() else task.exception()
            if exc is not None:
                failed.append(exc)
                self.changed.set()

        try:
            for item in items:
                while not (failed or self.running < self.n or  # room for one more question (or a failure)
                           (self.running < 2 * self.n and self.waiting >= self.running)):
                    self.changed.clear()
                    await self.changed.wait()
                if failed:
                    break
                self.running += 1
                task = asyncio.create_task(run(item))
                tasks.add(task)
                task.add_done_callback(done)
            while tasks and not failed:
                await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        finally:  # failed or cancelled: the questions still in flight are cancelled (as gather's would be)
            for task in list(tasks):
                task.cancel()
        if failed:
            raise failed[0]

    def leave(self) -> None:
        """One question fewer in flight."""
        self.running -= 1
        self.changed.set()

    def _at_endpoint(self, step: int) -> None:
        with self.lock:
            self.waiting += step
            if step > 0 and self.waiting >= self.running:  # every question is at the endpoint: room for the next one
                self.loop.call_soon_threadsafe(self.changed.set)

    @contextmanager
    def request(self, count: Callable[[], None], given_up: threading.Event, sends_hook: bool) -> Iterator[None]:
        """Around one LLM call of a question (in its thread): when the client sends the request, it waits for a slot
        (the question is then at the endpoint) and is counted; the slot is freed when the call ends. A model whose
        requests are not seen leaving is counted at once."""
        if not sends_hook:
            count()
            yield
            return
        at_endpoint = holds = False

        def send() -> None:
            nonlocal at_endpoint, holds
            if not at_endpoint:
                at_endpoint = True
                self._at_endpoint(1)
            if holds:  # the client's own retry
                return
            while not self.requests.acquire(timeout=0.2):
                if given_up.is_set():
                    raise GivenUp("the question was given up while it waited for a request slot")
            holds = True
            count()

        token = on_send.set(send)
        try:
            yield
        finally:
            on_send.reset(token)
            if holds:
                self.requests.release()
            if at_endpoint:
                self._at_endpoint(-1)


LARGE_TEXT = 1_000
"""A text longer than this (in characters) is written once per results line (:func:`once`)."""


def once(value: Any, seen: dict[str, str] | None = None, path: str = "") -> Any:
    """``value`` with each text over :data:`LARGE_TEXT` characters written in its first field only (in the line's
    order): in a later field, whole or within a longer text, it becomes ``[same text as FIELD: N characters]``.
    ``executed_queries`` stays whole."""
    seen = {} if seen is None else seen
    if isinstance(value, str) and len(value) > LARGE_TEXT:
        if not path.startswith("executed_queries["):
            for text, first in seen.items():
                if text in value:
                    value = value.replace(text, f"[same text as {first}: {len(text):,} characters]")
        if len(value) > LARGE_TEXT:
            seen.setdefault(value, path)
    elif isinstance(value, dict):
        return {k: once(v, seen, f"{path}.{k}" if path else str(k)) for k, v in value.items()}
    elif isinstance(value, list):
        return [once(v, seen, f"{path}[{i}]") for i, v in enumerate(value)]
    return value


def _record(item: Item, res: GraphResult, graded: dict[str, Any], settings: RunSettings, latency: float,
            attempts: int) -> dict[str, Any]:
    """One results.jsonl line: the item, the grade, what every family has, then the family's own fields; a large
    text is written once (:func:`once`)."""
    u = res.usage
    return once({
        "id": item.id, "method": settings.method, "model": settings.model,
        **{k: v for k, v in item.meta.items() if not k.startswith("_")},
        "question": item.question, "answer": res.answer, "gold": item.gold, **graded,
        "retrievals": res.retrievals(), "retrieval_errors": res.retrieval_errors(),
        "executed_queries": res.executed_queries(),
        "llm_calls": u.llm_calls, "input_tokens": u.input_tokens, "output_tokens": u.output_tokens,
        "llm_seconds": u.llm_seconds, "latency_s": round(latency, 3), "stop_reason": res.stop_reason,
        "error": res.error, "failure": res.failure, "attempts": attempts,
        **{k: v for k, v in res.record().items() if k not in graded},
    })


def _usage(out: dict[str, Any]) -> Usage:
    """The usage an attempt's output reports (an object, or a dict from a checkpoint)."""
    u = out.get("usage")
    return u if isinstance(u, Usage) else Usage.model_validate(u) if isinstance(u, dict) else Usage()


def _typed(family: MethodFamily, out: dict[str, Any]) -> GraphResult:
    """The family's typed result of a run's output; an output that does not fit it is a recorded failure."""
    try:
        return family.result.from_state(out)
    except Exception as exc:  # a graph returned something its own result cannot read: a bug, recorded as a failure
        return family.result(answer="", stop_reason="crash",
                             error=f"the output does not fit {family.result.__name__}: {type(exc).__name__}: {exc}")


async def run_questions(family: MethodFamily, settings: RunSettings, folder: RunFolder, items: list[Item],
                        base: dict[str, Any], bench: Benchmark, on_finished: Callable[[], None] | None = None) -> int:
    """Run and record ``items`` with the context settings ``base`` plus their own, ``on_finished`` after each;
    returns how many distinct data were prepared. The run's clock (:meth:`RunFolder.start_invocation`) starts once the
    run is set up (checkpoints open, graph compiled), with its first question."""
    checkpoints = ItemCheckpoints(folder.path / CHECKPOINT_FILE, enabled=settings.checkpoints and not settings.server,
                                  db=settings.checkpoint_db,
                                  key=f"{settings.created} {settings.method} {settings.benchmark} {folder.path.name}")
    concurrency = max(1, settings.concurrency)
    slots = Slots(concurrency)
    contexts = ItemContexts(family, settings.method, base, items, prepare=not settings.server)  # each data opened once
    writer = ResultWriter(folder)
    # each question's graph runs in the loop's default thread pool: size it to the concurrency (asyncio's own
    # default, min(32, cores + 4), would cap a run at 6 questions in flight on 2 cores)
    pool = ThreadPoolExecutor(max_workers=max(8, 2 * concurrency + 4), thread_name_prefix="ragplan-node")
    asyncio.get_running_loop().set_default_executor(pool)

    async def one(item: Item) -> None:  # (started once the run has room for it: :meth:`Slots.feed`)
        given_up = threading.Event()
        if not settings.llm_replay:  # every request sent for the question is counted, one in flight at a kill too
            on_request.set(partial(slots.request, checkpoints.counter(item.id), given_up))
        try:
            ctx = await contexts.get(item)
            limit = family.recursion_limit(ctx)
            graph_input = family.graph_input(item.question, item.inputs)
            out: dict[str, Any] = {}
            spent = Usage()  # every attempt's LLM work counts (a rate-limited attempt cost calls and tokens too)
            t0 = time.perf_counter()
            for attempts in range(1, max(0, settings.rate_limit_retries) + 2):
                try:  # (a timeout scope, not wait_for: no task of its own per question)
                    async with asyncio.timeout(settings.item_timeout_s):
                        out = await run_graph(item.id, attempts, graph_input, ctx, limit)
                except TimeoutError:
                    out = {"answer": "", "error": f"the question ran past item_timeout_s={settings.item_timeout_s:g}",
                           "stop_reason": "item_timeout"}
                except Exception as exc:  # a crash of one question is that question's recorded failure
                    out = {"answer": "", "error": f"{type(exc).__name__}: {exc}", "stop_reason": "crash"}
                spent = spent + _usage(out)
                if not is_rate_limited(out) or attempts > settings.rate_limit_retries:
                    break
                await asyncio.sleep(settings.backoff_s * 2 ** (attempts - 1) * (1 + random.random() / 2))
            latency = time.perf_counter() - t0  # every attempt and its backoff
        finally:
            given_up.set()
            slots.leave()
        spent = spent + Usage(llm_calls=max(0, checkpoints.requests(item.id) - spent.llm_calls))
        # the slot is free once the graph is done: the next question's request goes out before this one is graded
        contexts.release(item)
        if not (out.get("answer") or out.get("error") or out.get("stop_reason")):  # a failure, never an empty success
            out = {**out, "answer": "", "error": "the graph ended with no answer, no stop reason and no error",
                   "stop_reason": "crash"}
        res = _typed(family, {**out, "usage": spent})
        if res.error and not out.get("error"):
            out = {**out, "answer": "", "error": res.error, "stop_reason": res.stop_reason}
        try:
            graded = bench.grade(item, {**out, "executed_queries": res.executed_queries()})  # (retrieval-only figures)
        except Exception as exc:  # counted as wrong (0 on every metric), with the reason
            graded = {"correct": False, "grade_error": f"{type(exc).__name__}: {exc}",
                      **{m: 0.0 for m in getattr(bench, "metrics", ())}}
        await writer.write({**_record(item, res, graded, settings, latency, attempts),
                            "invocation": invocation, "finished_at": round(time.time(), 3)})
        checkpoints.forget(item.id)
        if on_finished:
            on_finished()

    server = None
    try:  # the checkpoint file is closed whatever stops the run, in its set-up too
        graph = family.graph(settings.method).build().compile(name=settings.method, checkpointer=await checkpoints.open())
        checkpoints.keep_only({it.id for it in items})
        run_graph: Callable[..., Any] = partial(checkpoints.run, graph)
        if settings.server:  # the graph runs on a LangGraph server instead, which keeps its own checkpoints
            from ragplan.eval.server import ServerRuns

            server = ServerRuns(settings, folder, base, {it.id: it for it in items})
            run_graph = (await server.open()).run
        # (the loop shuts its default executor down when it closes)
        gc.collect()  # the full collection a fresh process owes for its imports, here and not while questions wait
        invocation = folder.start_invocation()  # the run's clock: set-up above is done once per run, before it
        with keys_read_once():  # the credentials to mask, read once for the run's records
            await slots.feed(one, items)
    finally:
        await checkpoints.close()
        if server:
            await server.close()
    return contexts.prepared
