"""The typed result every method family shares, built from a graph's output dict; a family's result class adds its
fields and overrides the small methods below, so the entry points need not know the family."""

from __future__ import annotations

from typing import Annotated, Any, Callable, Self

from langgraph.channels import DeltaChannel
from pydantic import BaseModel, Field, ValidationError
from pydantic_core import to_jsonable_python
from typing_extensions import Required, TypedDict

from ragplan.state.failure import Failure
from ragplan.state.trace_sections import TraceSection, field_sections
from ragplan.state.usage import Usage, add_usage

__all__ = ["GraphOutput", "GraphResult", "changes", "delta", "merge_by_index"]


def merge_by_index(model: Any) -> Callable[[list[Any] | None, list[Any] | None], list[Any]]:
    """A reducer of items by ``index``: a later one replaces an earlier; a dict (:func:`changes`), its fields."""
    def merge(left: list[Any] | None, right: list[Any] | None) -> list[Any]:
        out: dict[int, Any] = {}
        for x in (left or []) + (right or []):
            patch = isinstance(x, dict) and x.get("index") in out
            x = model.model_validate({**dict(out[x["index"]]), **x} if patch else x)
            out[x.index] = x
        return [out[i] for i in sorted(out)]
    return merge


def changes(item: Any, *fields: str) -> dict[str, Any]:
    """``item``'s index and ``fields`` only: a change that does not write the item's long texts again."""
    return {"index": item.index, **{f: getattr(item, f) for f in fields}}


def delta(merge: Callable[[Any, Any], Any]) -> DeltaChannel:
    """``merge`` as a :class:`DeltaChannel` (beta): checkpoints keep a marker; the list is rebuilt from the writes."""
    return DeltaChannel(lambda old, writes: merge(old, [x for w in writes for x in w]))


class GraphOutput(TypedDict, total=False):
    """What every graph returns besides its family's fields (each family's output extends it)."""

    question: Required[str]
    """The question asked."""
    usage: Annotated[Usage, add_usage]
    """LLM calls, tokens and LLM time of the whole run, summed over nodes."""
    error: str
    """A recorded failure (endpoint down, unparseable output after repairs), empty when none."""
    failure: Failure
    """The typed failure behind ``error`` (its kind from the exception's type, the node, the message)."""


class GraphResult(BaseModel):
    """Fields every finished run has, whatever its family."""

    method: str = Field(default="", description="The graph that ran.")
    question: str = Field(default="", description="The question asked.")
    answer: str = Field(default="", description="The final answer ('' when the run failed before answering).")
    usage: Usage = Field(default_factory=Usage, description="LLM calls, tokens and LLM time of the whole run.")
    stop_reason: str = Field(default="", description="Why the run ended (the family's stop reasons).")
    error: str = Field(default="", description="A recorded failure, empty when none.")
    failure: Failure | None = Field(default=None,
                                    description="The typed failure behind `error` (kind, node, message).")
    wall_time_s: float = Field(default=0.0, description="Wall time of the whole run in seconds (set by the caller).")
    thread_id: str = Field(default="", description="The checkpoint thread of the run ('' when it was not checkpointed); "
                           "continue it with `ragplan resume ID` or `ragplan.api.resume(ID)`.")
    pending_review: dict[str, Any] = Field(default_factory=dict, description="The plan waiting for a person's review "
                                           "(the interrupt's payload) when stop_reason is awaiting_review.")

    @classmethod
    def from_state(cls, state: dict[str, Any], **extra: Any) -> Self:
        """Build from a graph's output dict (objects, or plain dicts from a LangGraph server)."""
        data = {k: v for k, v in (state or {}).items() if k in cls.model_fields and v is not None}
        return cls.model_validate({**data, **extra})

    def retrievals(self) -> int:
        """Retrieval actions the run executed (queries sent, tools called); each family says what counts."""
        raise NotImplementedError(f"{type(self).__name__} must say what counts as a retrieval")

    def retrieval_errors(self) -> int:
        """Retrieval actions that failed (refused, timed out, errored)."""
        return 0

    def executed_queries(self) -> list[str]:
        """The search queries the run actually sent to its retriever, in order (what retrieval-only evaluation
        scores, e.g. ``ragplan eval retrieval --queries RUN_DIR``); empty for families without text queries."""
        return []

    def record(self) -> dict[str, Any]:
        """The family's own fields for a run record (JSON-able): plan, steps, evidence …"""
        own = (k for k in type(self).model_fields if k not in GraphResult.model_fields)
        return {k: to_jsonable_python(getattr(self, k)) for k in own}

    def summary_lines(self) -> list[str]:
        """Lines for ``ragplan ask`` under the answer: the family's rationale, stop reason and counts."""
        return [f"Stopped: {self.stop_reason or '-'}   Retrievals: {self.retrievals()}"]

    @classmethod
    def run_metrics(cls, record: dict[str, Any]) -> dict[str, float]:
        """The family's figures of one run record (``results.jsonl`` line) that an evaluation summary averages; a
        figure the record lacks is left out."""
        return {}

    @classmethod
    def report_sections(cls, record: dict[str, Any]) -> list[TraceSection]:
        """A run record's family part as report sections, drawn by :meth:`trace_sections`; a record that does not
        fit the result (written by another version), or a drawing that fails, is shown field by field instead, so
        nothing is hidden."""
        try:
            res = cls.from_state(record)
            drawn = cls.drawn_fields()
            rest = {k: v for k, v in res.record().items() if k not in drawn}
            return res.trace_sections() + field_sections(rest, cls.model_fields)
        except Exception as exc:  # noqa: BLE001  (a report is still written)
            why = (f"does not fit {cls.__name__} ({exc.error_count()} problem(s))" if isinstance(exc, ValidationError)
                   else f"{cls.__name__}.report_sections failed: {type(exc).__name__}: {exc}")
            own = {k: record[k] for k in dict.fromkeys([*cls.model_fields, *cls().record()])
                   if k in record and k not in GraphResult.model_fields}
            return [TraceSection(title="record", status="bad", note=f"{why}; shown as stored")
                    ] + field_sections(own, cls.model_fields)

    @classmethod
    def drawn_fields(cls) -> set[str]:
        """The record fields :meth:`trace_sections` draws: those the class defining it declares, and what its
        :meth:`record` adds; every other field (a later subclass's, a shared base's) is shown by its shape."""
        owner: Any = next(c for c in cls.__mro__ if "trace_sections" in vars(c))
        return set(owner.model_fields) - set(owner.__mro__[1].model_fields) | set(cls().record()) - set(cls.model_fields)

    def trace_sections(self) -> list[TraceSection]:
        """The family's own drawing of its plan, steps, evidence and decisions (the fields in :meth:`drawn_fields`)."""
        return []
