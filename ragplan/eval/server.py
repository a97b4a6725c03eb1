"""``ragplan eval --server URL``: each question's graph runs on a LangGraph server (langgraph_sdk), one thread per
attempt tagged with the run, question and attempt, so a resume joins, collects, continues or starts each; the context
sent is the run's JSON settings without secrets (the server's environment supplies keys); grading stays local."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient

from ragplan.eval.benchmark import Item
from ragplan.eval.runfolder import RunFolder, RunSettings
from ragplan.family import context_settings
from ragplan.state.failure import FailureKind, failed

__all__ = ["ServerRuns", "SERVER_NODE", "server_failed"]

SERVER_NODE = "langgraph_server"
"""The ``failure.node`` of a question the server could not run (down, unreachable, 5xx): a resume runs it again."""
RETRIES = 3
"""Further tries of a question after a connection loss or a 5xx (a run that errored is recorded at once, as a graph
that raises in-process is)."""
BACKOFF_S = 1.0
"""First wait before such a retry; doubles each time."""


def _client(url: str) -> LangGraphClient:
    """The SDK's client for ``url`` (its API key and timeouts) on a transport that tries each connection once, so the
    tries are :data:`RETRIES`: the SDK's transport retries a refused connection five times over 7.5 s, inside each of
    these retries and of its own join reconnects, which kept each question over a minute on a server that was down."""
    http = get_client(url=url).http.client  # (not connected yet: nothing to close)
    return LangGraphClient(httpx.AsyncClient(base_url=http.base_url, headers=http.headers, timeout=http.timeout,
                                             transport=httpx.AsyncHTTPTransport(retries=0)))


def server_failed(rec: dict[str, Any]) -> bool:
    """Whether a record is a question the server could not run (so ``--resume`` runs it again)."""
    f = rec.get("failure")
    return isinstance(f, dict) and f.get("node") == SERVER_NODE and f.get("kind") in ("connection", "server_error")


def _fault(exc: BaseException) -> FailureKind | None:
    """The failure kind of a server fault worth retrying (None for any other exception)."""
    if isinstance(exc, httpx.TransportError):  # refused, dropped, timed out
        return "connection"
    if isinstance(exc, httpx.HTTPStatusError) and exc.response.status_code >= 500:
        return "server_error"
    return None


class RunError(Exception):
    """A run that ended in error on the server (the graph raised): the question's record says so, as in-process."""


@dataclass
class ServerRuns:
    """The runs of one run folder on one LangGraph server (:meth:`open`, then :meth:`run` per attempt)."""

    settings: RunSettings
    folder: RunFolder
    base: dict[str, Any]
    items: dict[str, Item]
    client: Any = None
    attempts: dict[str, list[int]] = field(default_factory=dict)
    """Attempt numbers of each question's threads on the server (from the metadata search)."""
    first: dict[str, int] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.folder.path.resolve()}@{self.settings.created}"

    async def open(self) -> "ServerRuns":
        """Connect and find the run's threads on the server."""
        if self.base.get("chat_model") is not None:
            raise ValueError("a chat-model object cannot be sent to a LangGraph server: name the model (model=…)")
        self.client = _client(self.settings.server)
        seen, page = 0, 200
        while True:
            try:
                batch = await self.client.threads.search(metadata={"ragplan_run": self.key}, limit=page,
                                                         offset=seen, select=["thread_id", "metadata"])
            except httpx.HTTPError as exc:  # no question is started on a server that cannot be reached
                raise ConnectionError(f"LangGraph server {self.settings.server}: {type(exc).__name__}: {exc}") from None
            for t in batch:
                meta = t.get("metadata") or {}
                self.attempts.setdefault(str(meta.get("ragplan_question")), []).append(int(meta.get("ragplan_attempt", 1)))
            seen += len(batch)
            if len(batch) < page:  # the last page
                return self

    def _thread(self, item_id: str, n: int) -> str:
        return str(uuid.uuid5(uuid.NAMESPACE_URL, f"{self.key}#{item_id}#{n}"))

    async def run(self, item_id: str, attempt: int, graph_input: dict[str, Any], ctx: Any,
                  limit: int) -> dict[str, Any]:
        """This invocation's ``attempt`` at the question on the server: its output, or a failure naming the server."""
        # continue the last attempt an earlier invocation left
        n = self.first.setdefault(item_id, max(self.attempts.get(item_id) or [1])) + attempt - 1
        k = 0
        while True:
            try:
                known = k > 0 or n in self.attempts.get(item_id, ())  # the thread may hold a run: look first
                return await self._attempt(item_id, n, graph_input, ctx, limit, known)
            except httpx.HTTPError as exc:
                kind = _fault(exc)
                if kind is None or k == RETRIES:
                    why = f"LangGraph server {self.settings.server}: {type(exc).__name__}: {exc}"
                    return failed(kind or "error", SERVER_NODE, why, answer="", stop_reason="crash")
            await asyncio.sleep(BACKOFF_S * 2 ** k)
            k += 1

    async def _attempt(self, item_id: str, n: int, graph_input: dict[str, Any], ctx: Any, limit: int,
                       known: bool) -> dict[str, Any]:
        """Join the thread's run still going, return a finished result, or start (or continue) the run."""
        tid, runs, state = self._thread(item_id, n), self.client.runs, {}
        meta = {"ragplan_run": self.key, "ragplan_question": item_id, "ragplan_attempt": n}
        await self.client.threads.create(thread_id=tid, metadata=meta, if_exists="do_nothing")
        if known:
            going = [r for r in await runs.list(tid, limit=5) if r["status"] in ("pending", "running")]
            if going:  # a client killed mid-run, or a retry after a dropped connection: reattach
                return await self._join(tid, going[0]["run_id"])
            state = await self.client.threads.get_state(tid)
            if state.get("checkpoint") and not state.get("next") and state.get("values"):
                return dict(state["values"])  # the graph had finished; only the record was missing
        given = {**self.base, **self.items[item_id].context}  # what the run sets; the server's own env fills the rest
        context = {k: v for k, v in context_settings(ctx).items() if k in given}
        run = await runs.create(tid, self.settings.method, input=None if state.get("next") else graph_input,
                                context=context, config={"recursion_limit": limit}, multitask_strategy="reject")
        return await self._join(tid, run["run_id"])

    async def _join(self, tid: str, run_id: str) -> dict[str, Any]:
        """The run's output; a question given up here (past item_timeout_s, or the batch stopped) stops it there."""
        try:
            out = await self.client.runs.join(tid, run_id)
        except asyncio.CancelledError:
            await asyncio.shield(self._cancel(tid, run_id))
            raise
        if isinstance(out, dict) and isinstance(out.get("__error__"), dict):
            err = out["__error__"]
            raise RunError(f"LangGraph server {self.settings.server}: {err.get('error')}: {err.get('message')}")
        return dict(out or {})

    async def _cancel(self, tid: str, run_id: str) -> None:
        with contextlib.suppress(httpx.HTTPError):  # the server is gone or the run ended meanwhile: nothing left to stop
            await self.client.runs.cancel(tid, run_id)

    async def close(self) -> None:
        """Close the connection."""
        if self.client is not None:
            await self.client.aclose()
