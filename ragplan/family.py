"""A method family: the one description of a paper's graphs (``FAMILY`` in each ``graphs/<family>.py``) that every
entry point reads: its graphs, typed context (the only declaration of its settings), typed result and hooks, so no
entry point asks which family it has."""

from __future__ import annotations

import inspect
import json
import re
from dataclasses import MISSING, dataclass, fields, is_dataclass
from functools import cache, cached_property
from typing import Any, Callable, Literal, get_type_hints

from langgraph.graph import StateGraph
from pydantic import TypeAdapter, ValidationError

from ragplan.redact import redact
from ragplan.state.context import LLMContext, recursion_limit_for
from ragplan.state.result import GraphResult
from ragplan.state.review import PlanReview

__all__ = ["GraphSpec", "MethodFamily", "TextRetrievalFamily", "Emit", "Builder", "END", "context_settings"]

#: What a family's graph builders return: an uncompiled graph (its state, context and schemas vary by family).
Builder = StateGraph[Any, Any, Any, Any]

#: LangGraph's end node, typed as the literal routers return.
END: Literal["__end__"] = "__end__"

#: What a trace printer writes with: one line of text.
Emit = Callable[[str], None]

#: The validator of a setting's type, built once per type (``check_settings`` runs for every question of a run).
_validator = cache(TypeAdapter)


@dataclass(frozen=True)
class GraphSpec:
    """One graph of a family."""

    name: str
    """The graph's name (langgraph.json key, ``--method``)."""
    build: Callable[[], Any]
    """Builder of the uncompiled ``StateGraph`` (tests and the runner compile their own copy)."""
    summary: str = ""
    """One line for ``ragplan graphs`` (default: the first line of the builder's docstring)."""
    uses_data: bool = True
    """Whether the graph reads the family's data (False for baselines that answer unaided, e.g. ``standard``)."""
    splits_retrievals: bool = False
    """Whether this graph's retrieval counts define the single- vs multi-retrieval (SR/MR) split of a comparison
    (PlanRAG's Figure 5 splits every method's questions by how often IterRAG retrieved)."""

    def __post_init__(self) -> None:
        if not self.summary:
            object.__setattr__(self, "summary", (inspect.getdoc(self.build) or "").partition("\n")[0])


@dataclass(frozen=True)
class MethodFamily:
    """The description of one method family (see the module docstring). Subclass to override a hook."""

    name: str
    """Family name, the module name under ``graphs/`` (``planrag``, ``think_then_act``, ``reaper`` …)."""
    title: str
    """The paper, as users cite it."""
    order: int
    """Position in listings (``ragplan graphs``, the README)."""
    context: type[LLMContext]
    """The typed settings of every graph of the family."""
    result: type[GraphResult]
    """The typed result of every graph of the family."""
    graphs: tuple[GraphSpec, ...]
    """The method's graph first, then its baselines and ablations."""
    data_help: str = ""
    """How to name the family's data on the command line (shown when it is missing)."""

    @cached_property
    def input_keys(self) -> tuple[str, ...]:
        """Keys of the graphs' input schema; a benchmark item's extra inputs outside these are dropped."""
        return tuple(get_type_hints(self.graphs[0].build().input_schema))

    def graph(self, method: str) -> GraphSpec:
        """The graph named ``method`` (KeyError when the family has none)."""
        return {g.name: g for g in self.graphs}[method]

    def context_fields(self) -> set[str]:
        """Names of the context's settings."""
        return {f.name for f in fields(self.context)}

    def make_context(self, method: str, *, model: Any = None, store: Any = None, **settings: Any) -> LLMContext:
        """The context from a model (object or ``provider:name``), the family's data handle (``store``: one object
        or path, PlanRAG's ``.cql`` script or ``GraphStore``) and settings; unknown settings are a TypeError."""
        names = self.context_fields()
        if unknown := set(settings) - names:
            raise TypeError(f"unknown setting(s) for {method}: {', '.join(sorted(unknown))}; known: {', '.join(sorted(names))}")
        kw = {k: v for k, v in settings.items() if v is not None}
        settable = self.settable()
        try:  # values of the wrong type fail here, naming the setting, not in a node halfway through the run
            kw.update(self.check_settings(method, {k: v for k, v in kw.items() if k in settable}))
        except ValueError as exc:
            raise TypeError(f"bad setting for {method}: {exc}") from None
        if model is not None:
            kw["model" if isinstance(model, str) else "chat_model"] = model
        if store is not None:
            kw.update(self.store_settings(method, store))
        return self.context(**kw)

    def settable(self) -> dict[str, tuple[Any, Any, str]]:
        """The settings a user may give as text (``--set``, ``--sweep``, Studio's form): name -> (type, default,
        description); the context's Python-only fields (``"python_only"`` in their metadata: live objects such as
        ``chat_model``) are left out."""
        hints = get_type_hints(self.context)
        return {f.name: (hints.get(f.name, Any), f.default if f.default is not MISSING else f.default_factory()
                         if f.default_factory is not MISSING else None, str(f.metadata.get("description", "")))
                for f in fields(self.context) if not f.metadata.get("python_only")}

    def check_settings(self, method: str, settings: dict[str, Any]) -> dict[str, Any]:
        """``settings`` (values from JSON or text, e.g. ``--set max_steps=8``) converted to their fields' types;
        ``ValueError`` naming the setting when one is unknown, Python-only, of the wrong type or negative (every
        numeric setting is a count, bound, threshold, timeout or temperature)."""
        known = self.settable()
        out: dict[str, Any] = {}
        for key, value in settings.items():
            if key not in known:
                why = "a Python-only setting (pass an object from Python)" if key in self.context_fields() else "not a setting"
                raise ValueError(f"{key}: {why} of {method}; settings: {', '.join(sorted(known))}")
            kind, default, _ = known[key]
            if kind in (str, str | None) and isinstance(value, (int, float)) and not isinstance(value, bool):
                value = str(value)  # `--set dqa_country=1445` reads 1445 as JSON; the setting is text
            try:
                v = _validator(kind).validate_python(value)
            except ValidationError as exc:
                msg = exc.errors()[0].get("msg", str(exc))
                raise ValueError(f"{key}={value!r}: {msg} (default {default!r})") from None
            if isinstance(v, (int, float)) and not isinstance(v, bool) and v < 0:
                raise ValueError(f"{key}={value!r}: must not be negative (default {default!r})")
            out[key] = v
        return out

    def store_settings(self, method: str, store: Any) -> dict[str, Any]:
        """Context settings for a ``store=`` argument; families without one refuse it."""
        raise TypeError(f"{method} takes no store= argument; name its data with settings ({self.data_help or 'see its context'})")

    def recursion_limit(self, ctx: Any) -> int:
        """The LangGraph recursion limit that lets a run use all its bounded steps and still answer."""
        return recursion_limit_for(ctx)

    def graph_input(self, question: str, inputs: dict[str, Any] | None = None) -> dict[str, Any]:
        """The graph input for ``question`` plus a benchmark item's (or caller's) extra inputs the graph takes."""
        extra = {k: v for k, v in (inputs or {}).items() if k in self.input_keys and k != "question"}
        return {"question": question, **extra}

    def prepare(self, method: str, ctx: Any) -> str | None:
        """Open or check the run's data before the run; a message when it cannot run (the CLI exits 2)."""
        return None

    def data_key(self, settings: dict[str, Any]) -> str:
        """Which data a benchmark question's settings name: ``ragplan eval``'s questions with one key share what
        :meth:`prepare` opens (the default key is all of the question's settings)."""
        return json.dumps(settings, sort_keys=True, default=str)

    def check_run(self, method: str, ctx: Any) -> str | None:
        """Check a whole ``ragplan eval`` run once (``ctx``: its first pending question's); a message refuses it.
        The default, :meth:`prepare`, suits data every question shares; per-question data overrides it."""
        return self.prepare(method, ctx)

    def data_line(self, ctx: Any) -> str:
        """How the trace header names the run's data (``Graph: …``, ``Retriever: …``, ``Shop: …``)."""
        return ""

    def trace(self, node: str, update: dict[str, Any], emit: Emit) -> None:
        """Print one node's update as readable lines (the family's trace); the default prints a person's plan
        reviews (every family that writes a plan records them alike) and errors."""
        for r in update.get("plan_reviews") or []:
            r = PlanReview.model_validate(r)
            what = {"approve": "approved", "edit": "edited", "reject": "rejected", "invalid": "answer refused"}[r.action]
            detail = r.reason if r.action == "reject" else r.error if r.action == "invalid" else ""
            emit(f"Review of the {'re-plan' if r.kind == 'replan' else 'plan'}: {what}{': ' + detail if detail else ''}")
            for line in r.edited.splitlines() if r.action == "edit" else []:
                emit(f"  {line}")
        if update.get("error"):
            emit(f"\nerror: {update['error']}")


class TextRetrievalFamily(MethodFamily):
    """A family whose data is text retrieval (``--retriever wiki|local --index DIR``)."""

    def prepare(self, method: str, ctx: Any) -> str | None:
        """Check the retriever a retrieving graph needs (a local index is opened now, so a bad folder is reported early)."""
        from ragplan.tools.retrievers import retriever_problem

        return retriever_problem(ctx) if self.graph(method).uses_data else None

    def data_line(self, ctx: Any) -> str:
        """``Retriever: wiki`` or ``Retriever: local DIR``."""
        return f"Retriever: {ctx.retriever}{' ' + ctx.index_dir if ctx.retriever == 'local' else ''}"


_SECRET = re.compile(r"(^|_)(api_key|key|password|passwd|secret|token)$", re.I)


def context_settings(ctx: Any) -> dict[str, Any]:
    """The run's settings worth keeping: every context field whose value is JSON (objects and secret fields left out,
    credentials in texts redacted: :func:`~ragplan.redact.redact`)."""
    values = {f.name: getattr(ctx, f.name, None) for f in fields(ctx)} if is_dataclass(ctx) else {}
    return {k: redact(v) if isinstance(v, str) else v for k, v in values.items()
            if v is not None and not _SECRET.search(k) and _is_json(v)}


def _is_json(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True
