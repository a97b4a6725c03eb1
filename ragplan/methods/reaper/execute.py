"""Running a REAPER plan: every step once, in dependency order, independent steps in parallel; ``#Ej`` is replaced by
step j's output. Never raises or hangs: failures and timeouts are recorded, dependants skipped with the reason."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
import inspect
import json
import threading
import time
from typing import Any, Callable, Literal

from langchain_core.tools import BaseTool
from pydantic import BaseModel, Field
from pydantic_core import to_jsonable_python

from ragplan.methods.reaper.plan import EVIDENCE_REF, RetrievalPlan, PlanArg, PlanStep
from ragplan.methods.reaper.validate import bind_args, reference_problems
from ragplan.state.trace_sections import excerpt


__all__ = ["StepEvidence", "ExecutionResult", "run_plan_async", "run_plan", "to_jsonable", "render_for_text"]


class StepEvidence(BaseModel):
    """What one step did: its resolved arguments and output, or why it failed or was skipped."""

    index: int
    evidence_var: str
    tool: str
    purpose: str = ""
    status: Literal["ok", "error", "timeout", "skipped"]
    args: dict[str, Any] = Field(default_factory=dict)
    """Arguments by name after ``#Ej`` substitution (JSON-able)."""
    output: Any = None
    """The tool's output made JSON-able (None unless status is ok)."""
    error: str | None = None
    started: float | None = None
    """Seconds from the start of the execution to the tool call (None: never called)."""
    elapsed_ms: float = 0.0


class ExecutionResult(BaseModel):
    """The evidence of every step (in plan order) and how the steps were scheduled."""

    evidence: list[StepEvidence] = Field(default_factory=list)
    waves: list[list[int]] = Field(default_factory=list)
    """Step numbers by dependency depth: wave 0 needs no other step, wave k needs some step of wave k-1."""
    elapsed_ms: float = 0.0


def to_jsonable(value: Any) -> Any:
    """``value`` as plain JSON data (pydantic models, dataclasses, LangChain documents and messages included)."""
    if isinstance(value, (set, frozenset)):  # in a fixed order: the evidence goes into the responder's prompt
        items = [to_jsonable(v) for v in value]
        try:
            return sorted(items)
        except TypeError:  # mixed or unorderable values: by their JSON text
            return sorted(items, key=lambda v: json.dumps(v, sort_keys=True))
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if hasattr(value, "page_content"):  # a LangChain Document: its text and metadata, not every field of the model
        return {"page_content": value.page_content, "metadata": to_jsonable(getattr(value, "metadata", {}))}
    if hasattr(value, "content") and hasattr(value, "type"):  # a LangChain message: its content
        return to_jsonable(value.content)
    if isinstance(value, dict):
        return to_jsonable_python({k: to_jsonable(v) for k, v in value.items()}, fallback=str)
    return to_jsonable_python(value, fallback=str)


def render_for_text(value: Any, limit: int | None = 2000) -> str:
    """The text put in place of ``#Ej`` inside a string: the text itself, or compact JSON, cut at ``limit``."""
    v = to_jsonable(value)
    s = v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, separators=(",", ":"))
    return s if limit is None or len(s) <= limit else s[: max(0, limit - 1)] + "…"


def _in_daemon_thread(fn: Callable[[], Any]) -> "asyncio.Future[Any]":
    """Run ``fn`` in a daemon thread; the returned future can be abandoned without waiting for it."""
    fut: concurrent.futures.Future[Any] = concurrent.futures.Future()
    fut.set_running_or_notify_cancel()  # (a time-out cancels the waiting side only; the thread still finishes)
    ctx = contextvars.copy_context()

    def work() -> None:
        try:
            fut.set_result(ctx.run(fn))
        except BaseException as exc:  # noqa: BLE001  (reported as the step's error)
            fut.set_exception(exc)

    threading.Thread(target=work, name="reaper-step", daemon=True).start()
    return asyncio.wrap_future(fut)


def _call(tool: Any, kwargs: dict[str, Any]) -> Any:
    """An awaitable calling ``tool``: a LangChain tool with a coroutine (or another runnable) on the loop, a sync
    LangChain tool or callable in a daemon thread that a time-out can abandon."""
    if isinstance(tool, BaseTool) and getattr(tool, "coroutine", None) is None:
        return _in_daemon_thread(lambda: tool.invoke(kwargs))
    if hasattr(tool, "ainvoke"):  # a LangChain tool with a coroutine, or another runnable
        return tool.ainvoke(kwargs)
    if inspect.iscoroutinefunction(tool) or inspect.iscoroutinefunction(getattr(tool, "__call__", None)):
        return tool(**kwargs)
    return _in_daemon_thread(lambda: tool(**kwargs))


def _resolve(arg: PlanArg, outputs: dict[int, Any], limit: int | None) -> Any:
    if arg.kind == "ref":
        return outputs[arg.refs[0]]
    if arg.kind == "template":
        return EVIDENCE_REF.sub(lambda m: render_for_text(outputs[int(m.group(1))], limit)
                                if int(m.group(1)) in outputs else m.group(0), arg.value)
    return arg.value


def _coerce(name: str, type_: str, value: Any, limit: int | None) -> Any:
    """Fit an earlier step's output to a text parameter: the field named like it (``product_id`` of an order or
    the first search hit, as the paper's ``prod_qna(#E1, …)`` intends), else the output as text."""
    if type_ != "str" or isinstance(value, str):
        return value
    first = value[0] if isinstance(value, list) and value else value
    if isinstance(first, dict):
        for key in (name, name.removeprefix("base_")):
            if isinstance(first.get(key), (str, int)):
                return str(first[key])
    return render_for_text(value, limit)


def _static_skips(plan: RetrievalPlan) -> tuple[dict[int, list[int]], dict[int, str]]:
    """Position -> dependency positions, position -> reason it cannot run (a forward reference can: it waits)."""
    steps = plan.steps
    deps, problems = reference_problems(plan)
    skip: dict[int, str] = {}
    for pos, kind, message in problems:
        if kind != "forward_ref":
            skip.setdefault(pos, f"skipped: {message}")
    changed = True
    while changed:  # dependants of steps that cannot run cannot run either
        changed = False
        for pos, ds in deps.items():
            bad = next((d for d in ds if d in skip), None)
            if pos not in skip and bad is not None:
                skip[pos] = (f"skipped: depends on #{steps[bad].evidence_var} (step {steps[bad].index}), "
                             "which cannot run")
                changed = True
    return deps, skip


def _waves(plan: RetrievalPlan, deps: dict[int, list[int]], skip: dict[int, str]) -> list[list[int]]:
    @functools.cache
    def depth(p: int) -> int:
        return 1 + max((depth(d) for d in deps[p]), default=-1)

    runnable = [p for p in range(len(plan.steps)) if p not in skip]
    out: list[list[int]] = [[] for _ in range(max(map(depth, runnable), default=-1) + 1)]
    for p in runnable:
        out[depth(p)].append(plan.steps[p].index)
    return out


async def run_plan_async(plan: RetrievalPlan, registry: Any, *, timeout_s: float | None = 30.0, max_parallel: int = 4,
                       ref_text_limit: int | None = 2000) -> ExecutionResult:
    """Run every step of ``plan`` with the bound tools of ``registry``; never raises. ``timeout_s`` limits each
    call, ``ref_text_limit`` an output rendered into a string argument (None: no limit)."""
    t0 = time.perf_counter()
    steps = plan.steps
    deps, skip = _static_skips(plan)
    evidence: dict[int, StepEvidence] = {}
    outputs: dict[int, Any] = {}  # var number -> raw output
    sem = asyncio.Semaphore(max(1, int(max_parallel)))
    tasks: dict[int, asyncio.Task[None]] = {}

    def record(pos: int, status: str, **kw: Any) -> None:
        s = steps[pos]
        evidence[pos] = StepEvidence(index=s.index, evidence_var=s.evidence_var, tool=s.tool, purpose=s.purpose,
                                     status=status, **kw)  # type: ignore[arg-type]

    async def run(pos: int) -> None:
        s: PlanStep = steps[pos]
        if deps[pos]:
            await asyncio.wait([tasks[d] for d in set(deps[pos])])
        failed = next((d for d in deps[pos] if d not in evidence or evidence[d].status != "ok"), None)
        if failed is not None:
            if failed not in evidence:  # the runner itself broke on that step
                record(failed, "error", error="internal error")
            f = evidence[failed]
            why = f.error if f.status != "skipped" else "it was skipped"
            record(pos, "skipped", error=f"skipped: depends on #{f.evidence_var} (step {f.index}), which "
                                         f"{'failed' if f.status != 'skipped' else 'did not run'}: {excerpt(why or '', 199)}")
            return
        spec = registry.get(s.tool) if registry is not None else None
        bound, surplus, _ = bind_args(s, registry)
        problem = (f"unknown tool {s.tool!r}" if spec is None else
                   f"tool {s.tool!r} is not bound to an implementation (a specs-only registry)"
                   if getattr(spec, "tool", None) is None else
                   f"{spec.signature} takes at most {len(spec.args)} arguments; {len(s.args)} given by position"
                   if surplus else None)
        if problem is not None or spec is None:
            record(pos, "error", error=problem)
            return
        types = {a.name: a.type for a in spec.args}
        kwargs = {k: _coerce(k, types.get(k, "any"), _resolve(a, outputs, ref_text_limit), ref_text_limit)
                  for k, a in bound.items()}
        async with sem:
            started = time.perf_counter()
            status, out, error = "ok", None, None
            try:
                task = asyncio.ensure_future(_call(spec.tool, kwargs))
                if not (await asyncio.wait({task}, timeout=timeout_s))[0]:
                    task.cancel()
                    status, error = "timeout", f"timed out after {timeout_s:g} s"
                else:
                    out = task.result()
            except Exception as exc:  # noqa: BLE001  (a tool failure is the step's result)
                status, error = "error", f"{type(exc).__name__}: {excerpt(' '.join(str(exc).split()), 499)}"
            timing = {"started": started - t0, "elapsed_ms": (time.perf_counter() - started) * 1000}
        shown_out = None
        if status == "ok":
            try:
                shown_out = to_jsonable(out)
                outputs[s.var_number] = out
            except Exception as exc:  # noqa: BLE001
                status, error = "error", f"the output cannot be recorded: {type(exc).__name__}: {exc}"
        record(pos, status, args=to_jsonable(kwargs), output=shown_out, error=error, **timing)

    for pos, reason in skip.items():
        record(pos, "skipped", error=reason)
    tasks.update({pos: asyncio.ensure_future(run(pos)) for pos in range(len(steps)) if pos not in skip})
    await asyncio.gather(*tasks.values(), return_exceptions=True)
    for pos, t in tasks.items():  # a bug in the runner itself still yields a record
        if pos not in evidence:
            exc = t.exception() if not t.cancelled() else None
            record(pos, "error", error=f"internal error: {exc!r}")
    return ExecutionResult(evidence=[evidence[p] for p in range(len(steps))], waves=_waves(plan, deps, skip),
                           elapsed_ms=(time.perf_counter() - t0) * 1000)


def run_plan(plan: RetrievalPlan, registry: Any, **kw: Any) -> ExecutionResult:
    """Synchronous :func:`run_plan_async` (works inside a running event loop too, via a helper thread)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(run_plan_async(plan, registry, **kw))
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="reaper-run-plan") as pool:
        return pool.submit(asyncio.run, run_plan_async(plan, registry, **kw)).result()
