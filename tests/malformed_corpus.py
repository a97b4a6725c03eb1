"""The malformed-output corpus (issue 13 §3): bad replies for every LLM decision of every family.

A *decision* is one kind of LLM call a graph makes: a structured decision, named by the schema the
request forces (``Plan``, ``RetrievalAction``, ``QueryAssessment``, ``Proposal`` …), or a free-text call
(``text``: REAPER's planner, FLARE's draft). :func:`discover` runs every graph of langgraph.json once with
well-formed replies and keeps, for each decision, the first graph that asks it and the JSON schema the
request sends. :func:`cases_for` then writes the bad replies for that decision from its schema — each a
distinct reply a real model could send:

* an empty reply; prose instead of a call; a fenced JSON object that does not parse;
* tool-call arguments cut off; arguments that are a JSON list; a call to a tool that was not offered;
* no arguments; only unknown fields; a JSON object of another shape as text;
* each required field missing in turn; each field with a value of the wrong type; each bounded number
  out of its range; each enum with a value outside it;
* for free-text calls: an empty reply, prose, a plan step calling an unknown tool, a step without its
  arguments, a reference to evidence no step produced, a line that is no plan step;
* the family's endless loop (``FamilyData.endless``: re-plan forever, search again forever, never finish).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable

from tests.auto_reply import auto_responder, fill_schema
from tests.openai_server import ToolReply

__all__ = ["Case", "Decision", "discover", "cases_for", "endless_cases", "decision_of"]


@dataclass(frozen=True)
class Decision:
    """One kind of LLM call: its name (schema or ``text``), the graph that makes it first, the schema it sends."""

    name: str
    method: str
    family: str
    schema: dict[str, Any]
    endless: bool = False
    """Reached only when the family's loop runs to its bound (a fallback answer): the other decisions loop."""


@dataclass(frozen=True)
class Case:
    """One bad reply (or, for ``endless``, replies by decision) for a decision."""

    decision: str
    label: str
    reply: Any
    method: str
    family: str
    endless: dict[str, Any] | None = None
    """For the loop cases: the family's endless replies by decision."""
    via_loop: bool = False
    """The decision is reached only through the family's loop (its other decisions get the endless replies)."""

    @property
    def id(self) -> str:
        """``Decision: label`` (a loop case names its graph)."""
        return f"{self.decision}: {self.label}" + (f" in {self.method}" if self.endless else "")


def decision_of(req: Any, family: str = "") -> str:
    """The decision a stub request is: its forced tool, the JSON schema's name, or ``text:<family>``."""
    tools = req.body.get("tools") or []
    name = req.forced_tool or (tools[0]["function"]["name"] if tools else None)
    if name:
        return str(name)
    fmt = req.body.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        return str(fmt["json_schema"].get("name", "json_schema"))
    return f"text:{family}"


def schema_of(req: Any) -> dict[str, Any]:
    """The JSON schema a structured request sends (``{}`` for free text)."""
    name = decision_of(req, "")
    for t in req.body.get("tools") or []:
        if t["function"]["name"] == name:
            return dict(t["function"].get("parameters") or {})
    fmt = req.body.get("response_format") or {}
    return dict((fmt.get("json_schema") or {}).get("schema") or {})


def discover(graphs: list[tuple[str, str, Any]], ask: Callable[[str, Any, Callable[[Any], Any]], Any]) -> list[Decision]:
    """Every decision of ``graphs`` (``(method, family, data)``), each with the first graph that makes it.

    ``ask(method, data, responder)`` runs one question of ``method`` with the stub answering by ``responder``.
    Each graph runs twice: with well-formed replies, then with its family's endless ones (which reach the
    fallback answers that only a loop's bound leads to).
    """
    found: dict[str, Decision] = {}
    for loop in (False, True):
        for method, family, data in graphs:
            if loop and not data.endless:
                continue
            inner = loop_responder(data) if loop else auto_responder(data.overrides, data.text)
            seen: list[Any] = []

            def respond(req: Any, inner: Callable[[Any], Any] = inner, seen: list[Any] = seen) -> Any:
                seen.append(req)
                return inner(req)

            ask(method, data, respond)
            for req in seen:
                name = decision_of(req, family)
                if name not in found:
                    found[name] = Decision(name, method, family, schema_of(req), endless=loop)
    return list(found.values())


def loop_responder(data: Any) -> Callable[[Any], Any]:
    """Well-formed replies that keep the family's loop going (``FamilyData.endless``) until its bound ends it."""
    loops = {k: v for k, v in data.endless.items() if k != "text"}
    return auto_responder({**data.overrides, **loops}, data.endless.get("text", data.text))


def _wrong_value(spec: dict[str, Any]) -> Any:
    """A value of the wrong type for a field of JSON schema ``spec``."""
    kind = spec.get("type")
    if kind is None and "anyOf" in spec:
        kinds = {s.get("type") for s in spec["anyOf"]}
        kind = next((k for k in ("array", "object", "number", "integer", "boolean", "string") if k in kinds), "string")
    if kind in ("number", "integer"):
        return "several"
    if kind == "boolean":
        return "perhaps"
    if kind == "array":
        return {"first": "not a list"}
    if kind == "object":
        return "not an object"
    return {"nested": ["not", "text"]}


def _structured_cases(d: Decision) -> list[tuple[str, Any]]:
    props: dict[str, Any] = d.schema.get("properties") or {}
    required: list[str] = list(d.schema.get("required") or [])
    valid = fill_schema(d.schema)
    first = required[0] if required else next(iter(props), "value")
    out: list[tuple[str, Any]] = [
        ("empty reply", ""),
        ("prose instead of a call", "Let me think about this carefully before I decide anything."),
        ("fenced JSON that does not parse", f'```json\n{{"{first}": "unfinished\n```'),
        ("arguments cut off", ToolReply(d.name, {}, raw=f'{{"{first}": "')),
        ("arguments are a list", ToolReply(d.name, {}, raw=json.dumps(list(valid.values())[:2] or ["x"]))),
        ("call to a tool not offered", ToolReply("web_search", {"search_query": "what to do next"})),
        ("a JSON object of another shape as text", json.dumps({"result": "done", "confidence": "high"})),
    ]
    if required:
        out += [("no arguments", ToolReply(d.name, {})),
                ("only unknown fields", ToolReply(d.name, {"unexpected": 1, "other": "x"}))]
    for f in required:
        out.append((f"missing {f}", ToolReply(d.name, {k: v for k, v in valid.items() if k != f})))
    for f, spec in props.items():
        out.append((f"wrong type for {f}", ToolReply(d.name, {**valid, f: _wrong_value(spec)})))
        if "maximum" in spec or "minimum" in spec:
            out.append((f"{f} out of range", ToolReply(d.name, {**valid, f: float(spec.get("maximum", 0)) + 41.5})))
        if "enum" in spec:
            out.append((f"{f} outside its choices", ToolReply(d.name, {**valid, f: "none_of_these"})))
    return out


TEXT_CASES: list[tuple[str, str]] = [
    ("empty reply", ""),
    ("prose instead of a plan", "I would first check the order and then answer the customer kindly."),
    ("a step calling an unknown tool", 'Step 1: Search the web - #E1 = web_search("blender return policy")'),
    ("a step without its arguments", "Step 1: Ask the help centre - #E1 = customer_support()"),
    ("a reference to evidence no step produced", 'Step 1: Ask the help centre - #E1 = customer_support("#E7 returns")'),
    ("a line that is no plan step", "#E1 customer_support returns blender 30 days"),
]


def cases_for(d: Decision) -> list[Case]:
    """The bad replies for decision ``d`` (see the module docstring)."""
    pairs = TEXT_CASES if d.name.startswith("text:") else _structured_cases(d)
    return [Case(d.name, label, reply, d.method, d.family, via_loop=d.endless) for label, reply in pairs]


def endless_cases(graphs: list[tuple[str, str, Any]]) -> list[Case]:
    """One case per graph whose family's data says how to keep its loop going forever."""
    out = []
    for method, family, data in graphs:
        if data.endless:
            out.append(Case("loop", f"endless ({', '.join(sorted(data.endless))})", None, method, family, data.endless))
    return out
