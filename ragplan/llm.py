"""Chat models by name, and typed LLM decisions with a bounded repair.

* :func:`load_chat_model` turns ``provider:name`` (+ an optional OpenAI-compatible base URL) into a
  LangChain chat model, once per process. Graphs never build a model at import time; nodes get it
  from the run's context through :func:`chat_model_for`.
* :func:`decide` asks the model for one pydantic object (a plan, a verdict, an action) with
  structured output, shows a parse error back to the model for a bounded number of repairs, and never
  raises: a failure comes back as a :class:`Decision` with ``error`` set, which nodes record in state.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
import weakref
from dataclasses import dataclass, field
from typing import Any, Generic, Sequence, TypeVar

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, ValidationError

from ragplan.llm_cache import LLMCache, LLMCacheMiss, attach_cache, llm_cache
from ragplan.llm_retry import call_with_retries, malformed_reply, retries_of, unusable_output
from ragplan.state.usage import Usage

__all__ = ["load_chat_model", "endpoint_problem", "chat_model_for", "Decision", "decide", "decide_for", "LLMConfigError",
           "generate", "structured_model", "parse_reply", "cache_of"]

T = TypeVar("T", bound=BaseModel)


class LLMConfigError(RuntimeError):
    """No usable LLM endpoint is configured; the message says how to configure one."""


HOW_TO_CONFIGURE = (
    "No LLM endpoint is configured. ragplan needs a chat model:\n"
    "  * OpenAI: export OPENAI_API_KEY=sk-…   (model e.g. --model openai:gpt-4o-mini)\n"
    "  * an OpenAI-compatible server: --base-url URL --model openai:<served model name>, or export RAGPLAN_BASE_URL=URL\n"
    "      vLLM       http://localhost:8000/v1\n"
    "      Ollama     http://localhost:11434/v1\n"
    "      llama.cpp  http://localhost:8080/v1\n"
    "      LM Studio  http://localhost:1234/v1\n"
    "  * another LangChain provider: --model anthropic:…, google_genai:… with its package installed and its key set."
)


def split_model_spec(spec: str) -> tuple[str, str]:
    """``"openai:gpt-4o-mini"`` -> ``("openai", "gpt-4o-mini")``; no provider means ``openai``."""
    spec = spec.strip()
    if ":" in spec:
        provider, name = spec.split(":", 1)
        if provider and "/" not in provider:
            return provider.strip().lower(), name.strip()
    return "openai", spec


_PROVIDER_KEYS = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY", "google_genai": "GOOGLE_API_KEY",
                  "mistralai": "MISTRAL_API_KEY", "groq": "GROQ_API_KEY", "together": "TOGETHER_API_KEY"}


def endpoint_problem(spec: str, base_url: str = "", replay: bool = False) -> str | None:
    """Why the model named ``spec`` cannot be reached as configured, or None when it looks usable.

    With ``replay`` every call is served from the LLM cache, so no key or base URL is needed.
    """
    provider, name = split_model_spec(spec)
    if not name:
        return "The model name is empty.\n" + HOW_TO_CONFIGURE
    if base_url or replay:
        return None
    key = _PROVIDER_KEYS.get(provider)
    if key and not os.environ.get(key):
        return f"{key} is not set and no --base-url was given.\n" + HOW_TO_CONFIGURE
    return None


_models: dict[tuple, BaseChatModel] = {}
_models_lock = threading.Lock()


def cache_of(cache_dir: str, replay: bool) -> LLMCache | None:
    """The record/replay cache of these settings (None without ``cache_dir``); raises :class:`LLMConfigError`
    for replay without a cache."""
    if replay and not cache_dir:
        raise LLMConfigError("llm_replay (--replay) needs llm_cache_dir (--llm-cache DIR): the cache to replay from")
    return llm_cache(cache_dir, replay) if cache_dir else None


def load_chat_model(
    spec: str, *, base_url: str = "", temperature: float = 0.0, timeout_s: float = 120.0, max_retries: int = 3,
    cache_dir: str = "", replay: bool = False,
) -> BaseChatModel:
    """The chat model for ``spec``, built once per process per setting.

    With ``base_url`` (or provider ``openai``) it is a ``ChatOpenAI`` pointed at that endpoint, which
    covers OpenAI, vLLM, Ollama, llama.cpp server and LM Studio; other providers go through LangChain's
    ``init_chat_model``. With ``cache_dir`` every call goes through the record/replay cache
    (:mod:`ragplan.llm_cache`); with ``replay`` only through it, and no key or endpoint is needed.
    Raises :class:`LLMConfigError` when no endpoint is configured.
    """
    problem = endpoint_problem(spec, base_url, replay)
    if problem:
        raise LLMConfigError(problem)
    cache = cache_of(cache_dir, replay)
    key = (spec, base_url, float(temperature), float(timeout_s), int(max_retries),
           str(cache.directory) if cache else "", bool(replay))
    known = _models.get(key)  # the common case, without the lock (every node of every question asks)
    if known is not None:
        return known
    with _models_lock:
        if key in _models:
            return _models[key]
        provider, name = split_model_spec(spec)
        cached: dict[str, Any] = {"cache": cache} if cache is not None else {}
        if base_url or provider == "openai":
            from pydantic import SecretStr

            from ragplan.llm_openai import OpenAICompatibleChat

            secret = os.environ.get("OPENAI_API_KEY") or ("not-needed" if base_url or replay else None)
            api_key = SecretStr(secret) if secret else None
            model: BaseChatModel = OpenAICompatibleChat(
                model=name, base_url=base_url or None, api_key=api_key, temperature=temperature,
                timeout=timeout_s, max_retries=max_retries, stream_usage=True, **cached,
            )
        else:
            from langchain.chat_models import init_chat_model

            env_key = _PROVIDER_KEYS.get(provider)
            extra: dict[str, Any] = {**cached, "temperature": temperature, "timeout": timeout_s, "max_retries": max_retries}
            if replay and env_key and not os.environ.get(env_key):  # never sent: replay answers from the cache
                extra["api_key"] = "not-needed"
            model = init_chat_model(name, model_provider=provider, **extra)
        _models[key] = model
        return model


def chat_model_for(ctx: Any, role: str = "") -> BaseChatModel:
    """The chat model a node should use: an object a Python caller gave, else one built by name.

    ``role`` names a model role of the context (``planner``, ``responder`` …): its ``<role>_chat_model``
    object or ``<role>_model`` name wins when set; otherwise ``chat_model`` / ``model`` are used. With
    ``llm_cache_dir`` (and ``llm_replay``) set, the model records to (replays from) that cache.
    """
    obj = getattr(ctx, f"{role}_chat_model", None) if role else None
    obj = obj or getattr(ctx, "chat_model", None)
    cache_dir, replay = getattr(ctx, "llm_cache_dir", ""), bool(getattr(ctx, "llm_replay", False))
    if obj is not None:
        if not isinstance(obj, BaseChatModel):
            raise LLMConfigError(f"chat_model must be a LangChain chat model object, not {type(obj).__name__}; "
                                 "to name a model use the `model` setting (e.g. openai:gpt-4o-mini)")
        cache = cache_of(cache_dir, replay)
        return attach_cache(obj, cache) if cache is not None else obj  # a copy: the caller's object is left as it is
    spec = (getattr(ctx, f"{role}_model", "") if role else "") or ctx.model
    return load_chat_model(spec, base_url=ctx.base_url, temperature=ctx.temperature,
                           timeout_s=ctx.llm_timeout_s, max_retries=ctx.llm_max_retries, cache_dir=cache_dir,
                           replay=replay)


@dataclass
class Decision(Generic[T]):
    """The outcome of :func:`decide`: the parsed object, or the reason there is none."""

    result: T | None
    """The parsed object (None when the decision failed)."""
    usage: Usage = field(default_factory=Usage)
    error: str = ""
    attempts: int = 0
    kind: str = ""
    """Why there is no value: ``endpoint`` (request failed), ``config`` (no usable model), ``parse`` (no valid reply)."""

    @property
    def ok(self) -> bool:
        """Whether a valid object was obtained."""
        return self.result is not None

    @property
    def value(self) -> T:
        """The parsed object; only read it after checking :attr:`ok` (raises ``ValueError`` otherwise)."""
        if self.result is None:
            raise ValueError(f"no decision: {self.error}")
        return self.result


def _usage_of(msg: Any, seconds: float) -> Usage:
    meta = getattr(msg, "usage_metadata", None) or {}
    return Usage(llm_calls=1, input_tokens=int(meta.get("input_tokens", 0) or 0),
                 output_tokens=int(meta.get("output_tokens", 0) or 0), llm_seconds=round(seconds, 4))


def generate(model: Any, messages: Sequence[BaseMessage], *, options: dict[str, Any] | None = None) -> tuple[Any, Usage, str]:
    """One free-text call (a draft, a plan in a text format): ``(message or None, usage, error)``; never raises.

    ``options`` are extra request parameters (e.g. ``logprobs=True``); a model that rejects them is
    called without. For outputs that are text by nature; every *decision* goes through :func:`decide`.
    """
    spent: list[Usage] = []  # failed attempts (a malformed reply is retried: ragplan.llm_retry)

    def call() -> Any:
        try:
            return (model.bind(**options) if options else model).invoke(list(messages))
        except (TypeError, ValueError, NotImplementedError) as exc:
            if not options or malformed_reply(exc):
                raise
            return model.invoke(list(messages))

    try:
        msg, took = call_with_retries(call, retries_of(model), lambda e, s: spent.append(failed_attempt(e, s)))
    except Exception as exc:  # endpoint down, auth, timeout after the client's retries, malformed replies after ours
        return None, sum(spent, Usage()), request_failed(exc, len(spent), 300, model)
    return msg, sum(spent, Usage()) + _usage_of(msg, took), ""


def failed_attempt(exc: BaseException, seconds: float) -> Usage:
    """What a failed request cost: one call and its time, except a replay miss (nothing was sent: no call)."""
    if isinstance(exc, LLMCacheMiss):
        return Usage(llm_seconds=round(seconds, 4))
    return Usage(llm_calls=1, llm_seconds=round(seconds, 4))


def request_failed(exc: BaseException, attempts: int, limit: int = 500, model: Any = None) -> str:
    """The recorded reason of a failed LLM request (a malformed reply says so, with how many were tried; an
    endpoint that could not be reached is named, when ``model`` knows its URL)."""
    malformed = malformed_reply(exc)
    if malformed:
        return f"LLM request failed: malformed reply ({attempts} attempt{'s' * (attempts != 1)}): {malformed}"
    where = ""
    name = type(exc).__name__
    url = getattr(model, "openai_api_base", None)
    if url and ("Connection" in name or "Timeout" in name) and url not in str(exc):
        where = f" (endpoint {url})"
    return f"LLM request failed: {name}: {str(exc)[:limit]}{where}"


def message_text(msg: Any) -> str:
    """The text content of a chat message, stripped."""
    return (msg.content if isinstance(msg.content, str) else str(msg.content)).strip()


_JSON_BLOCK = re.compile(r"\{.*\}", re.S)


def parse_json_object(text: str, schema: type[T]) -> T:
    """Parse the first JSON object in ``text`` (fenced or bare) into ``schema``; raises ValueError."""
    m = _JSON_BLOCK.search(text or "")
    if not m:
        raise ValueError("the reply holds no JSON object")
    try:
        data = json.loads(m.group(0))
    except json.JSONDecodeError as exc:
        raise ValueError(f"the JSON object does not parse: {exc}") from exc
    if isinstance(data, dict) and set(data) == {"name", "arguments"} and isinstance(data["arguments"], dict):
        data = data["arguments"]
    try:
        return schema.model_validate(data)
    except ValidationError as exc:
        raise ValueError(_short_validation(exc)) from exc


def _short_validation(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'value'}: {e['msg']}" for e in exc.errors()[:6])


def _text_instruction(schema: type[T]) -> str:
    return (
        "Reply with one JSON object only (no prose around it) that matches this JSON schema:\n"
        + json.dumps(schema.model_json_schema(), separators=(",", ":"))
    )


_structured: dict[tuple[int, type, str], tuple[Any, Any]] = {}
_structured_lock = threading.Lock()


def structured_model(model: BaseChatModel, schema: type[BaseModel], method: str) -> Any:
    """``model`` with ``schema`` bound the way its provider does structured output (a forced tool, or a
    response format), built once per (model, schema, method).

    The parsing is ours (:func:`parse_reply`), so a call is one plain model call: no schema rebuilt per
    call and none of the parallel runnable (and its threads) that ``include_raw=True`` adds.
    Raises ``NotImplementedError`` for a model without structured output.
    """
    key = (id(model), schema, method)
    with _structured_lock:
        hit = _structured.get(key)
        if hit is not None and hit[0]() is model:
            return hit[1]
    chain = model.with_structured_output(schema, method=method)  # type: ignore[arg-type]
    bound = getattr(chain, "first", None)  # RunnableSequence(model with the tool / format bound | parser)
    if bound is None:
        raise NotImplementedError(f"{type(model).__name__} gives no bindable structured output")
    kwargs = getattr(bound, "kwargs", None)
    ls_format = (kwargs or {}).get("ls_structured_output_format")
    if isinstance(ls_format, dict) and isinstance(ls_format.get("schema"), type):
        # the tracing metadata names the schema as a class, which LangChain turns into a JSON schema on
        # every call (~0.4 ms of pydantic work); give it the JSON schema, made once, instead
        from langchain_core.utils.function_calling import convert_to_json_schema

        bound = bound.bind(ls_structured_output_format={**ls_format, "schema": convert_to_json_schema(ls_format["schema"])})
    with _structured_lock:
        if len(_structured) > 512:  # models are long-lived (cached by name); drop entries of collected ones
            for k in [k for k, (ref, _) in _structured.items() if ref() is None]:
                del _structured[k]
        _structured[key] = (weakref.ref(model), bound)
    return bound


def parse_reply(raw: Any, schema: type[T]) -> tuple[T | None, str]:
    """The ``schema`` object in a reply (its forced tool call, or a JSON object in its text), or the reason there is none."""
    calls = getattr(raw, "tool_calls", None) or []
    problem = ""
    for call in sorted(calls, key=lambda c: c.get("name") != schema.__name__):
        try:
            return schema.model_validate(call.get("args") or {}), ""
        except ValidationError as exc:
            problem = _short_validation(exc)
            break
    for bad in getattr(raw, "invalid_tool_calls", None) or []:
        problem = problem or f"the tool call's arguments do not parse: {str(bad.get('error') or bad.get('args'))[:200]}"
    content = raw.content if isinstance(raw.content, str) else str(raw.content)
    if problem and not content.strip():
        return None, problem
    try:
        return parse_json_object(content, schema), ""
    except ValueError as exc:
        return None, problem or str(exc)


def decide(
    model: BaseChatModel, messages: Sequence[BaseMessage], schema: type[T], *, method: str = "function_calling",
    max_repairs: int = 2,
) -> Decision[T]:
    """Ask ``model`` for one ``schema`` object; repair up to ``max_repairs`` times; never raise.

    ``method`` is ``function_calling`` (tool calling), ``json_schema`` (the endpoint's JSON mode) or
    ``text`` (a JSON object in the reply). A model without tool calling falls back to ``text``. A
    reply that does not parse is shown back to the model with the error; an endpoint failure (after
    the client's own retries) ends the decision with the error recorded.
    """
    convo: list[BaseMessage] = list(messages)
    usage = Usage()
    runnable: Any = model
    if method != "text":
        try:
            runnable = structured_model(model, schema, method)
        except (NotImplementedError, ValueError, TypeError):
            method, runnable = "text", model
    if method == "text":
        convo = [*convo[:-1], SystemMessage(_text_instruction(schema)), convo[-1]] if convo else convo
    last_error = ""
    retries = retries_of(runnable)
    for attempt in range(1, max_repairs + 2):
        spent: list[Usage] = []
        try:  # a malformed reply (JSON cut off, no choices …) is retried like a 5xx: ragplan.llm_retry
            raw, took = call_with_retries(lambda: runnable.invoke(convo), retries,
                                          lambda e, s: spent.append(failed_attempt(e, s)))
        except Exception as exc:  # endpoint down, auth, timeout after retries: recorded, never raised
            usage = sum(spent, usage)
            last_error = unusable_output(exc)
            if last_error:  # the model's output could not even be read (a tool call's arguments not an object)
                convo = [*convo, HumanMessage(f"That reply could not be used: {last_error}. Answer again with a "
                                              f"valid {schema.__name__} object and nothing else.")]
                continue
            return Decision(None, usage, request_failed(exc, len(spent), model=model), attempt, "endpoint")
        usage = sum(spent, usage) + _usage_of(raw, took)
        parsed, last_error = parse_reply(raw, schema)
        if parsed is not None:
            return Decision(parsed, usage, "", attempt)
        convo = [*convo, AIMessage(content=_visible(raw)),
                 HumanMessage(f"That reply could not be used: {last_error}. Answer again with a valid "
                              f"{schema.__name__} object and nothing else.")]
    return Decision(None, usage, f"no valid {schema.__name__} after {max_repairs + 1} attempts: {last_error}", max_repairs + 1,
                    "parse")


def decide_for(ctx: Any, messages: Sequence[BaseMessage], schema: type[T], *, role: str = "") -> Decision[T]:
    """:func:`decide` with the model, method and repair bound of a run's context; never raises.

    A context whose model cannot be built (no endpoint configured, a wrong object) gives a
    ``config`` failure with the reason, recorded like any other.
    """
    try:
        model = chat_model_for(ctx, role)
    except Exception as exc:  # LLMConfigError, provider import errors, bad arguments
        return Decision(None, Usage(), f"no usable chat model: {exc}", 0, "config")
    return decide(model, messages, schema, method=ctx.structured_output, max_repairs=ctx.max_repairs)


def failure_update(d: Decision[Any], node: str) -> dict[str, Any]:
    """The state update a node returns for a failed decision: the error, its usage, and why the run stops.

    An endpoint or configuration failure ends the run (``llm_error``); output that could not be parsed
    after the repairs ends retrieval (``llm_unparseable``) but still lets the answer step try.
    """
    reason = "llm_unparseable" if d.kind == "parse" else "llm_error"
    return {"usage": d.usage, "error": f"{node}: {d.error}", "stop_reason": reason, "answer": ""}


def _visible(msg: Any) -> str:
    """The assistant reply as text (tool-call arguments included) to show it back during a repair."""
    content = msg.content if isinstance(msg.content, str) else json.dumps(msg.content)
    calls = getattr(msg, "tool_calls", None) or []
    if calls:
        content += "\n" + "\n".join(json.dumps({"name": c.get("name"), "arguments": c.get("args")}) for c in calls)
    return content or "(empty reply)"
