"""A responder for the OpenAI stub that answers any request from the schema it forces (tests only).

Structured-output requests name a tool (function calling) or a JSON schema; the reply fills that schema
with a valid instance: per-tool overrides first (so a test can steer a method down a path), then
defaults, enums' first value, one item per array, ``"stub"`` for free strings. Requests without a
schema (free-text calls such as REAPER's planner) get ``text(request)``. So a test can run any graph of
any family over the real ``langchain-openai`` client without scripting it call by call.
"""

from __future__ import annotations

from typing import Any, Callable

from tests.openai_server import ToolReply

__all__ = ["fill_schema", "auto_responder"]


def fill_schema(schema: dict[str, Any], defs: dict[str, Any] | None = None) -> Any:
    """A value that validates against the JSON ``schema`` (the subset pydantic emits)."""
    defs = defs if defs is not None else schema.get("$defs") or schema.get("definitions") or {}
    if "$ref" in schema:
        return fill_schema(defs[schema["$ref"].split("/")[-1]], defs)
    if "default" in schema:
        return schema["default"]
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        if key in schema:
            opts = [s for s in schema[key] if s.get("type") != "null"] or schema[key]
            return fill_schema(opts[0], defs)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if kind == "object" or "properties" in schema:
        return {k: fill_schema(v, defs) for k, v in (schema.get("properties") or {}).items()}
    if kind == "array":
        return [fill_schema(schema.get("items") or {"type": "string"}, defs)
                for _ in range(max(1, int(schema.get("minItems", 1))))]
    if kind == "integer":
        return int(schema.get("minimum", 1))
    if kind == "number":
        lo, hi = schema.get("minimum", 0.0), schema.get("maximum", 1.0)
        return (lo + hi) / 2
    if kind == "boolean":
        return False
    return "stub"


def auto_responder(overrides: dict[str, Any] | None = None,
                   text: Callable[[Any], str] | str = "No retrieval needed.") -> Callable[[Any], Any]:
    """A stub responder: the forced tool's schema filled (``overrides[tool]`` merged over it), else ``text``."""
    overrides = overrides or {}

    def respond(req: Any) -> Any:
        tools = req.body.get("tools") or []
        name = req.forced_tool or (tools[0]["function"]["name"] if tools else None)
        schema = None
        if name:
            schema = next(t["function"].get("parameters") or {} for t in tools if t["function"]["name"] == name)
        else:
            fmt = req.body.get("response_format") or {}
            if fmt.get("type") == "json_schema":
                name, schema = fmt["json_schema"].get("name", ""), fmt["json_schema"].get("schema") or {}
        if schema is None:
            return text(req) if callable(text) else text
        args = fill_schema(schema)
        extra = overrides.get(name)
        args.update(extra(req) if callable(extra) else extra or {})
        return ToolReply(name, args)

    return respond
