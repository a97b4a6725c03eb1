"""Endpoint faults for the fault suite (tests/test_fault_suite.py) and its figures (benchmarks/faults.py).

:class:`FaultInjector` wraps a stub responder (``tests/openai_server.py``) and answers some requests with
a fault instead: ``429`` with a ``Retry-After`` header, ``500``, ``503``, a hang past the client's timeout,
or a malformed ``200`` body (JSON cut off, an object without ``choices``, an empty body). In the
*recoverable* mode each distinct request is faulted at most once, so every retry gets a real reply and
every question can finish; in the *persistent* mode the chosen fault answers every attempt, so
questions must end as failures with a reason. :func:`run_with_faults` runs one graph of any family over
its test data (``tests/family_data/``) through ``ragplan.eval`` and measures the run: finished, failed
(with or without a reason), crashed, lost, duplicated, faults injected and retried, wall time against the
deadline.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from tests.openai_server import Fault

__all__ = ["KINDS", "MALFORMED_BODIES", "FaultInjector", "RunFigures", "run_with_faults"]

#: The fault kinds, in table order.
KINDS = ("429", "500", "503", "hang", "malformed")

#: Malformed 200 bodies: JSON cut off, a completion without choices, an empty body.
MALFORMED_BODIES = ('{"id": "chatcmpl-x", "object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assi',
                    '{"id": "chatcmpl-x", "object": "chat.completion", "model": "stub-model"}',
                    "")

#: What a failure's recorded reason says for each fault kind.
REASON_WORDS = {"429": ("429", "rate"), "500": ("500",), "503": ("503",), "hang": ("timeout", "timed out"),
                "malformed": ("malformed",)}


def request_key(body: dict[str, Any]) -> str:
    """What makes a request the same request again (a retry sends the same body)."""
    keep = {k: body.get(k) for k in ("messages", "tools", "tool_choice", "response_format")}
    return hashlib.blake2b(json.dumps(keep, sort_keys=True, default=str).encode(), digest_size=12).hexdigest()


class FaultInjector:
    """A stub responder that answers some requests with faults (see the module docstring)."""

    def __init__(self, inner: Callable[[Any], Any], kinds: tuple[str, ...] = KINDS, *, rate: float = 0.5, seed: int = 0,
                 persistent: bool = False, hang_s: float = 2.5, retry_after_s: float = 0.05) -> None:
        """``rate``: share of new requests faulted (the first request always is); ``hang_s``: how long a hang holds."""
        self.inner, self.kinds, self.rate, self.persistent = inner, kinds, rate, persistent
        self.hang_s, self.retry_after_s = hang_s, retry_after_s
        self.rng = random.Random(seed)
        self.seen: Counter[str] = Counter()
        self.faulted: dict[str, str] = {}
        """Request key -> the fault it got first (recoverable mode: its only one)."""
        self.injected: Counter[str] = Counter()
        """Faults injected, by kind."""
        self._lock = threading.Lock()

    def fault(self, kind: str) -> Fault:
        """The stub reply for one fault of ``kind``."""
        if kind == "429":
            return Fault(status=429, retry_after_s=self.retry_after_s, retry_after_ms=None)
        if kind in ("500", "503"):
            return Fault(status=int(kind))
        if kind == "hang":
            return Fault(delay_s=self.hang_s)
        return Fault(body=self.rng.choice(MALFORMED_BODIES))

    def __call__(self, req: Any) -> Any:
        key = request_key(req.body)
        with self._lock:
            first = self.seen[key] == 0
            self.seen[key] += 1
            if self.persistent:
                kind = self.faulted.setdefault(key, self.rng.choice(self.kinds))
            elif first and (not self.faulted or self.rng.random() < self.rate):
                kind = self.faulted[key] = self.rng.choice(self.kinds)
            else:
                kind = ""
            if kind:
                self.injected[kind] += 1
        return self.fault(kind) if kind else self.inner(req)

    def unretried(self) -> list[str]:
        """Faulted requests that were never sent again (every retryable fault must be retried)."""
        return [k for k in self.faulted if self.seen[k] < 2]


@dataclass
class RunFigures:
    """What one run under faults produced."""

    method: str
    scenario: str
    questions: int = 0
    finished: int = 0
    """Questions answered without a recorded error."""
    failed_with_reason: int = 0
    """Questions that failed with a stop reason and an error message."""
    failed_without_reason: int = 0
    crashed: int = 0
    """Failures recorded as ``crash`` (an exception escaped a graph: a bug)."""
    lost: int = 0
    """Questions with no line in results.jsonl."""
    duplicated: int = 0
    """Extra lines for a question that already had one."""
    injected: int = 0
    """Faulty replies sent (a persistent fault answers every attempt of a request)."""
    faulted: int = 0
    """Distinct requests that got a fault."""
    retried: int = 0
    """Faulted requests that were sent again (a retry)."""
    wall_s: float = 0.0
    deadline_s: float = 0.0
    errors: list[str] = field(default_factory=list)
    """The recorded reasons of the failed questions."""

    def row(self) -> dict[str, Any]:
        """The figures as a table row."""
        return {k: v for k, v in self.__dict__.items() if k != "errors"}


@functools.lru_cache(maxsize=1)
def _parser() -> Any:
    """The CLI's parser, built once per process (it only parses here)."""
    from ragplan.cli import build_parser

    return build_parser()


def settings_for(method: str, eval_flags: list[str], base_url: str, limit: int, *, timeout_s: float,
                 concurrency: int = 2) -> Any:
    """Run settings for ``method`` from a family's ``ragplan eval`` flags (tests/family_data), as the CLI builds them."""
    from ragplan.cli.settings import parse_assignments
    from ragplan.eval.runner import RunSettings

    args = _parser().parse_args(["eval", "--method", method, *eval_flags])
    options = parse_assignments(args.benchmark_option) | ({"context_only": True} if args.context_only else {})
    context = {**parse_assignments(args.set), "llm_timeout_s": timeout_s, "llm_max_retries": 2}
    return RunSettings(method=method, benchmark=args.benchmark, data=str(Path(args.data).resolve()),
                       model="openai:stub-model", base_url=base_url, limit=limit, concurrency=concurrency,
                       context=context, benchmark_options=options, item_timeout_s=120.0, rate_limit_retries=2,
                       backoff_s=0.05)


def run_with_faults(method: str, eval_flags: list[str], responder: Callable[[Any], Any], run_dir: Path, *,
                    scenario: str, kinds: tuple[str, ...], persistent: bool = False, rate: float = 0.5, seed: int = 0,
                    limit: int = 1, timeout_s: float = 0.8, concurrency: int = 2,
                    stub: Any = None) -> tuple[RunFigures, FaultInjector]:
    """Run ``method`` over its family's eval data with faults injected; the run's figures and the injector.

    ``stub``: a running :class:`~tests.openai_server.OpenAIStub` to answer through (its responder is set to the
    injector for the run), rather than a stub started and stopped for this run alone."""
    from contextlib import nullcontext

    from ragplan.eval.registry import get_benchmark
    from ragplan.eval.runner import evaluate
    from tests.openai_server import OpenAIStub

    injector = FaultInjector(responder, kinds, rate=rate, seed=seed, persistent=persistent, hang_s=timeout_s * 3)
    if stub is not None:
        stub.responder = injector
    with OpenAIStub(responder=injector) if stub is None else nullcontext(stub) as stub:
        settings = settings_for(method, eval_flags, stub.base_url, limit, timeout_s=timeout_s, concurrency=concurrency)
        expected = [it.id for it in get_benchmark(settings.benchmark, settings.data, limit=settings.limit,
                                                  **settings.benchmark_options).items()]
        # a question's worst case: every call waits out its timeout on every client retry, and rate limits re-run it
        deadline = 120.0 + len(expected) * 60.0 / max(1, concurrency)
        t0 = time.perf_counter()
        asyncio.run(asyncio.wait_for(evaluate(settings, run_dir), timeout=deadline))
        wall = time.perf_counter() - t0
    lines = [json.loads(x) for x in (run_dir / "results.jsonl").read_text().splitlines() if x.strip()]
    ids = Counter(r["id"] for r in lines)
    figures = RunFigures(method, scenario, questions=len(expected), wall_s=round(wall, 2), deadline_s=deadline,
                         injected=sum(injector.injected.values()), faulted=len(injector.faulted),
                         retried=len(injector.faulted) - len(injector.unretried()))
    figures.lost = len(set(expected) - set(ids))
    figures.duplicated = sum(n - 1 for n in ids.values())
    for r in lines:
        if not r.get("error"):
            figures.finished += 1
        elif r.get("stop_reason") == "crash":
            figures.crashed += 1
            figures.errors.append(r["error"])
        elif r.get("stop_reason") and str(r["error"]).strip():
            figures.failed_with_reason += 1
            figures.errors.append(r["error"])
        else:
            figures.failed_without_reason += 1
    return figures, injector
