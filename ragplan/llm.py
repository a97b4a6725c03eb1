"""Chat models by name (:func:`load_chat_model`, :func:`chat_model_for`) and typed LLM decisions (:func:`decide`): a
forced tool, the endpoint's JSON schema or a text reply, repaired a bounded number of times, retried on a malformed
reply (the OpenAI client retries transport errors itself); a failure is a :class:`Decision` of a typed ``kind``."""

from __future__ import annotations

import contextvars
import functools
import json
import os
import platform
import re
import threading
import time
import weakref
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any, Callable, Generic, Sequence, TypeVar

import httpx
from langchain_core.exceptions import OutputParserException
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.output_parsers import JsonOutputParser, PydanticToolsParser
from langchain_core.outputs import ChatGeneration
from pydantic import BaseModel, SecretStr, ValidationError
from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential_jitter

from ragplan.llm_cache import LLMCache, LLMCacheMiss, attach_cache, llm_cache, memo
from ragplan.state.failure import FailureKind, failed
from ragplan.state.usage import Usage

__all__ = ["load_chat_model", "endpoint_problem", "chat_model_for", "Decision", "decide", "decide_for", "LLMConfigError",
           "generate", "message_text", "cache_of", "kind_of", "failure_update", "MALFORMED_REPLY", "BACKOFF_S", "MAX_BACKOFF_S",
           "ReplyTooLong", "MAX_REPLY_CHARS", "on_request", "on_send"]

T = TypeVar("T", bound=BaseModel)

#: The exception types a malformed ``200 OK`` reply raises while LangChain reads it (see the module docstring).
MALFORMED_REPLY: tuple[type[BaseException], ...] = (json.JSONDecodeError, UnicodeDecodeError, TypeError, IndexError,
                                                    AttributeError, KeyError, ValueError)
#: First wait before a retry of a malformed reply (doubles each retry); the OpenAI client's own first delay.
BACKOFF_S = 0.5
#: Longest wait between two attempts.
MAX_BACKOFF_S = 8.0
#: Retries when the model does not say how many it allows (a chat model object without ``max_retries``).
DEFAULT_RETRIES = 2
#: Longest reply (text and tool-call arguments, in characters) read when no ``max_reply_chars`` is given.
MAX_REPLY_CHARS = 200_000
#: Entered (in the caller's context) around each chat call, given whether the model's requests call :data:`on_send`
#: (it counts the request: then, else at once); None = nobody.
on_request: contextvars.ContextVar[Callable[[bool], AbstractContextManager[Any]] | None] = contextvars.ContextVar(
    "ragplan_on_request", default=None)
#: Called (in the caller's context) by the OpenAI client built here just before it sends each request over HTTP; it
#: may wait (for a free request slot); None = nothing to do.
on_send: contextvars.ContextVar[Callable[[], None] | None] = contextvars.ContextVar("ragplan_on_send", default=None)


_HOOKED: weakref.WeakSet[Any] = weakref.WeakSet()  # the OpenAI clients made here (their requests call on_send)


def _before_send(request: Any) -> None:
    """The HTTP client's request hook: :data:`on_send`."""
    if (hook := on_send.get()) is not None:
        hook()


def _sends_hook(model: Any) -> bool:
    """Whether ``model``'s requests call :data:`on_send` (an OpenAI client made by :func:`load_chat_model`)."""
    return getattr(getattr(model, "bound", model), "root_client", None) in _HOOKED


class ReplyTooLong(ValueError):
    """A reply longer than ``max_reply_chars``: a malformed reply (retried, then recorded), never kept."""


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
    provider, sep, name = spec.strip().partition(":")
    if sep and provider and "/" not in provider:
        return provider.strip().lower(), name.strip()
    return "openai", spec.strip()


_PROVIDER_KEYS = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY", "google_genai": "GOOGLE_API_KEY",
                  "mistralai": "MISTRAL_API_KEY", "groq": "GROQ_API_KEY", "together": "TOGETHER_API_KEY"}


def endpoint_problem(spec: str, base_url: str = "", replay: bool = False) -> str | None:
    """Why the model ``spec`` cannot be reached as configured (None when usable; ``replay`` needs no key or URL)."""
    provider, name = split_model_spec(spec)
    if not name:
        return "The model name is empty.\n" + HOW_TO_CONFIGURE
    key = _PROVIDER_KEYS.get(provider)
    if key and not os.environ.get(key) and not (base_url or replay):
        return f"{key} is not set and no --base-url was given.\n" + HOW_TO_CONFIGURE
    return None


def cache_of(cache_dir: str, replay: bool, model: str = "") -> LLMCache | None:
    """The record/replay cache of ``model`` (None without ``cache_dir``); LLMConfigError for replay without one."""
    if replay and not cache_dir:
        raise LLMConfigError("llm_replay (--replay) needs llm_cache_dir (--llm-cache DIR): the cache to replay from")
    return llm_cache(cache_dir, replay, model) if cache_dir else None


def load_chat_model(
    spec: str, *, base_url: str = "", temperature: float = 0.0, timeout_s: float = 120.0, max_retries: int = 3,
    cache_dir: str = "", replay: bool = False,
) -> BaseChatModel:
    """The chat model for ``spec``, built once per process per setting (:class:`LLMConfigError` without an endpoint).

    With ``base_url`` (or provider ``openai``) it is ``ChatOpenAI`` with endpoint, key, timeout and retries set on its
    OpenAI clients, so LangChain's description of it (the cache key) holds only what changes the answer; other
    providers go through ``init_chat_model``. ``cache_dir`` / ``replay``: :mod:`ragplan.llm_cache`.
    """
    if problem := endpoint_problem(spec, base_url, replay):
        raise LLMConfigError(problem)
    provider, name = split_model_spec(spec)
    with _models_lock:  # (functools.cache does not lock: questions' threads asking at once would each build one)
        cache = cache_of(cache_dir, replay, f"{provider}:{name}")
        return _chat_model(provider, name, base_url, float(temperature), float(timeout_s), int(max_retries), cache,
                           bool(replay))


_models_lock = threading.Lock()


@functools.cache  # one model per setting and process (every node of every question asks)
def _chat_model(provider: str, name: str, base_url: str, temperature: float, timeout_s: float, max_retries: int,
                cache: LLMCache | None, replay: bool) -> BaseChatModel:
    cached: dict[str, Any] = {"cache": cache} if cache is not None else {}
    if base_url or provider == "openai":
        import openai
        from langchain_openai import ChatOpenAI
        from openai.types.chat import ChatCompletion, ChatCompletionMessage
        from openai.types.chat.chat_completion import Choice

        platform.platform()  # what the OpenAI client reads at its first request, resolved once, not per thread
        for reply_type in (ChatCompletionMessage, Choice, ChatCompletion):  # (else built at the first reply)
            reply_type.model_rebuild()
        secret = os.environ.get("OPENAI_API_KEY") or "not-needed"  # (an empty key is refused by the endpoint)
        sync = openai.OpenAI(base_url=base_url or None, api_key=secret, timeout=timeout_s, max_retries=max_retries,
                             http_client=openai.DefaultHttpxClient(event_hooks={"request": [_before_send]}))
        _HOOKED.add(sync)
        async_ = openai.AsyncOpenAI(base_url=base_url or None, api_key=secret, timeout=timeout_s, max_retries=max_retries)
        return ChatOpenAI(model=name, temperature=temperature, stream_usage=True, api_key=SecretStr(secret),
                          root_client=sync, client=sync.chat.completions, root_async_client=async_,
                          async_client=async_.chat.completions, **cached)
    from langchain.chat_models import init_chat_model

    env_key = _PROVIDER_KEYS.get(provider)
    extra: dict[str, Any] = {**cached, "temperature": temperature, "timeout": timeout_s, "max_retries": max_retries}
    if replay and env_key and not os.environ.get(env_key):  # never sent: replay answers from the cache
        extra["api_key"] = "not-needed"
    return init_chat_model(name, model_provider=provider, **extra)


def chat_model_for(ctx: Any, role: str = "") -> BaseChatModel:
    """The chat model a node should use: an object a Python caller gave, else one built by name; a ``role``'s
    (``planner``, ``responder``) ``<role>_chat_model`` / ``<role>_model`` wins over ``chat_model`` / ``model``."""
    obj = (getattr(ctx, f"{role}_chat_model", None) if role else None) or getattr(ctx, "chat_model", None)
    cache_dir, replay = getattr(ctx, "llm_cache_dir", ""), bool(getattr(ctx, "llm_replay", False))
    if obj is not None:
        if not isinstance(obj, BaseChatModel):
            raise LLMConfigError(f"chat_model must be a LangChain chat model object, not {type(obj).__name__}; "
                                 "to name a model use the `model` setting (e.g. openai:gpt-4o-mini)")
        cache = cache_of(cache_dir, replay, f"{type(obj).__name__}:{getattr(obj, 'model_name', '') or getattr(obj, 'model', '')}")
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
    kind: FailureKind | None = None
    """Why there is no value: from the exception's type (:func:`kind_of`), ``unparseable`` or ``config``."""

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


def kind_of(exc: BaseException) -> FailureKind:
    """The :data:`~ragplan.state.failure.FailureKind` of an exception an LLM call raised, from its type."""
    import openai  # (imported here, on a failure, so that listing or drawing the graphs does not load it)

    kinds: tuple[tuple[tuple[type[BaseException], ...], FailureKind], ...] = (  # the first match wins
        ((LLMCacheMiss,), "replay_miss"), ((LLMConfigError,), "config"), ((openai.RateLimitError,), "rate_limit"),
        ((openai.APITimeoutError, httpx.TimeoutException, TimeoutError), "timeout"),  # (a timeout is a connection error)
        ((openai.APIConnectionError, httpx.TransportError, ConnectionError), "connection"),
        ((openai.AuthenticationError, openai.PermissionDeniedError), "auth"), ((openai.NotFoundError,), "not_found"))
    for types, kind in kinds:
        if isinstance(exc, types):
            return kind
    if isinstance(exc, openai.APIStatusError):
        return "server_error" if exc.status_code >= 500 else "bad_request"
    return "malformed_reply" if _malformed(exc) else "error"


def _malformed(exc: BaseException) -> bool:
    import openai

    return isinstance(exc, MALFORMED_REPLY) and not isinstance(exc, (ValidationError, openai.OpenAIError, LLMCacheMiss))


def _retries_of(model: Any) -> int:
    """The retries the model's client allows for a 5xx (``max_retries``), used for malformed replies too."""
    bound = getattr(model, "bound", model)
    n = getattr(getattr(bound, "root_client", None), "max_retries", None)
    n = getattr(bound, "max_retries", None) if n is None else n
    return max(0, int(n)) if isinstance(n, int) else DEFAULT_RETRIES


def _invoke(call: Callable[[], Any], retries: int, spent: list[Usage], cap: int = MAX_REPLY_CHARS,
            model: Any = None) -> tuple[Any, float]:
    """``(call(), seconds)``, a malformed reply (or one over ``cap`` characters) retried ``retries`` times; failed
    attempts' costs go to ``spent``."""
    for attempt in Retrying(stop=stop_after_attempt(retries + 1), retry=retry_if_exception(_malformed), reraise=True,
                            wait=wait_exponential_jitter(initial=BACKOFF_S, max=MAX_BACKOFF_S, jitter=BACKOFF_S / 4)):
        with attempt, (hook(_sends_hook(model)) if (hook := on_request.get()) is not None else nullcontext()):
            t0 = time.perf_counter()
            try:
                out = call()
                raw = out.get("raw") if isinstance(out, dict) else out
                size = len(_visible(raw)) if isinstance(raw, BaseMessage) else 0
                if size > cap:
                    raise ReplyTooLong(f"the reply has {size:,} characters, more than max_reply_chars={cap:,}")
                return out, time.perf_counter() - t0
            except Exception as exc:
                took = round(time.perf_counter() - t0, 4)
                spent.append(Usage(llm_seconds=took) if isinstance(exc, LLMCacheMiss) else Usage(llm_calls=1, llm_seconds=took))
                raise
    raise AssertionError("unreachable")


def _usage_of(msg: Any, seconds: float) -> Usage:
    meta = getattr(msg, "usage_metadata", None) or {}
    return Usage(llm_calls=1, input_tokens=int(meta.get("input_tokens", 0) or 0),
                 output_tokens=int(meta.get("output_tokens", 0) or 0), llm_seconds=round(seconds, 4))


def request_failed(exc: BaseException, attempts: int, model: Any = None, limit: int = 500) -> str:
    """The recorded reason of a failed LLM request (a malformed reply's attempts; an unreachable endpoint named)."""
    if _malformed(exc):
        what = ("not JSON" if isinstance(exc, json.JSONDecodeError) else "not UTF-8" if isinstance(exc, UnicodeDecodeError)
                else "too long" if isinstance(exc, ReplyTooLong) else "not a chat completion")
        return (f"LLM request failed: malformed reply ({attempts} attempt{'s' * (attempts != 1)}): the reply is {what} "
                f"({type(exc).__name__}: {str(exc)[:160]})")
    url = str(getattr(getattr(model, "root_client", None), "base_url", "") or "").rstrip("/")
    where = f" (endpoint {url})" if url and kind_of(exc) in ("connection", "timeout") and url not in str(exc) else ""
    return f"LLM request failed: {type(exc).__name__}: {str(exc)[:limit]}{where}"


def generate(model: Any, messages: Sequence[BaseMessage], *, options: dict[str, Any] | None = None,
             max_reply_chars: int = MAX_REPLY_CHARS) -> Decision[Any]:
    """One free-text call (a draft, a plan in a text format): a :class:`Decision` holding the message; never raises.
    ``options`` are extra request parameters (``logprobs=True``); a model that rejects them is called without."""
    spent: list[Usage] = []
    try:
        if options:
            try:  # once with the options: a model or endpoint that refuses them (or a malformed reply) is asked without
                msg, took = _invoke(lambda: model.bind(**options).invoke(list(messages)), 0, [], max_reply_chars, model)
                return Decision(msg, _usage_of(msg, took), "", 1)
            except ReplyTooLong:
                spent.append(Usage(llm_calls=1))  # answered without the options: asked again below
            except (TypeError, ValueError, NotImplementedError):
                pass
        msg, took = _invoke(lambda: model.invoke(list(messages)), _retries_of(model), spent, max_reply_chars, model)
    except Exception as exc:  # endpoint down, auth, timeout after the client's retries, malformed replies after ours
        return Decision(None, sum(spent, Usage()), request_failed(exc, len(spent), model, 300), 1, kind_of(exc))
    return Decision(msg, sum(spent, Usage()) + _usage_of(msg, took), "", 1)


def message_text(msg: Any) -> str:
    """The text content of a chat message, stripped."""
    return (msg.content if isinstance(msg.content, str) else str(msg.content)).strip()


def _short_validation(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'value'}: {e['msg']}" for e in exc.errors()[:6])


def _from_text(text: str, schema: type[T]) -> tuple[T | None, str]:
    """The ``schema`` object in a JSON reply (fenced or bare; ``{"name", "arguments"}`` unwrapped), or why not."""
    try:
        data = JsonOutputParser().parse(text or "")
    except OutputParserException as exc:
        return None, f"the reply holds no JSON object ({str(exc).splitlines()[0][:160]})"
    if isinstance(data, dict) and set(data) == {"name", "arguments"} and isinstance(data["arguments"], dict):
        data = data["arguments"]
    try:
        return schema.model_validate(data), ""
    except ValidationError as exc:
        return None, _short_validation(exc)


@functools.cache
def _answer_step(schema: type[BaseModel]) -> tuple[str, bool] | None:
    """``(reasoning field or "", whether it is required)`` when ``schema`` is an answer step (``answer`` and at most
    one more field, all text); None for a decision that needs fields."""
    fields = schema.model_fields
    if "answer" not in fields or len(fields) > 2 or any(f.annotation is not str for f in fields.values()):
        return None
    other = next((n for n in fields if n != "answer"), "")
    return other, bool(other) and fields[other].is_required()


_ANSWER_LINE = re.compile(r"^[\W_]*(?:final\s+)?answer[\W_]*?[:：]\s*(.*)$", re.I | re.M)
_ANSWER_IS = re.compile(r"\bthe\s+(?:final\s+|correct\s+|short\s+)?answer(?:\s+to\s+(?:\"[^\"\n]{1,300}\"|“[^”\n]{1,300}”|"
                        r"[^.:\n]{1,80}?))?\s+(?:is|would\s+be)\s*:?\s*(.+)", re.I)  # (a quoted question's own "is")


def _clean(text: str) -> str:
    """An answer without markdown, quotes, spaces runs and a closing full stop."""
    return re.sub(r"\s+", " ", text).strip().strip("*_`\"'“”‘’ ").rstrip(".").strip("*_`\"'“”‘’ ")


def _plain_answer(text: str, schema: type[T], step: tuple[str, bool]) -> tuple[T | None, str]:
    """The answer in a plain-text reply: after its last "Answer:", else "the answer is …", else its last line (the
    whole reply for a step without reasoning); the text before it is the reasoning."""
    text = (text or "").strip()
    hits = list(_ANSWER_LINE.finditer(text))
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if hits:
        rest = text[hits[-1].end(1):].strip().splitlines()
        answer, before = hits[-1].group(1) or (rest[0] if rest else ""), text[:hits[-1].start()]
    elif (said := list(_ANSWER_IS.finditer(text))):
        answer, before = re.split(r"(?<=[^\s.])\.(?:\s|$)|\n", said[-1].group(1))[0], text[:said[-1].start()]
    elif lines:
        answer, before = (lines[-1], "\n".join(lines[:-1])) if step[1] else (text, "")
    else:
        return None, "the reply is empty"
    if not _clean(answer):
        return None, "the reply names no answer after 'Answer:'"
    values = {"answer": _clean(answer), **({step[0]: before.strip()} if step[0] else {})}
    try:
        return schema.model_validate(values), ""
    except ValidationError as exc:
        return None, _short_validation(exc)


@functools.cache
def _text_instructions(schema: type[BaseModel]) -> str:
    """What a ``text``-mode prompt asks for: a last ``Answer:`` line for an answer step, else one JSON object shown
    filled in (from the schema) with LangChain's format instructions."""
    step = _answer_step(schema)
    if step is not None:
        answer = schema.model_fields["answer"].description or "the answer"
        why = (schema.model_fields[step[0]].description or step[0]).rstrip(".") if step[1] else ""
        first = f"first your {why[:1].lower()}{why[1:]}, then " if why else ""
        return f"Reply in plain text: {first}a last line of the form\nAnswer: <{answer.rstrip('.')}>"
    js = schema.model_json_schema()
    example = json.dumps(_example(js, js.get("$defs", {})), ensure_ascii=False)
    return (f"Reply with one JSON object only (no prose around it), filled in like this example:\n{example}\n"
            + JsonOutputParser(pydantic_object=schema).get_format_instructions())


def _example(js: dict[str, Any], defs: dict[str, Any]) -> Any:
    """A value that fits the JSON schema ``js``: its example, first choice, a bound, or a placeholder text."""
    if "$ref" in js:
        return _example(defs.get(js["$ref"].rsplit("/", 1)[-1], {}), defs)
    if js.get("examples"):
        return js["examples"][0]
    if "enum" in js or "const" in js:
        return js["enum"][0] if "enum" in js else js["const"]
    options = [o for o in js.get("anyOf") or js.get("oneOf") or [] if o.get("type") != "null"]
    if options:
        return _example(options[0], defs)
    kind = js.get("type")
    if kind == "object":
        return {k: _example(v, defs) for k, v in (js.get("properties") or {}).items()}
    if kind == "array":
        return [_example(js.get("items") or {}, defs)]
    if kind in ("number", "integer"):
        low, high = js.get("minimum", js.get("exclusiveMinimum", 0)), js.get("maximum", js.get("exclusiveMaximum"))
        return (low + high) / 2 if kind == "number" and high is not None else max(low, 1) if kind == "integer" else low
    if kind == "boolean":
        return False
    return f"<{(js.get('description') or js.get('title') or 'text').rstrip('.')[:80]}>"


@functools.cache
def _tools_parser(schema: type[BaseModel]) -> PydanticToolsParser:
    """The parser of a ``schema`` tool call, made once per schema (it holds no state between replies)."""
    return PydanticToolsParser(tools=[schema], first_tool_only=True)


def _parsed(out: Any, schema: type[T], method: str) -> tuple[T | None, str, Any]:
    """``(object or None, why not, raw message)`` of a tool-call, JSON-schema (``include_raw``) or text reply."""
    raw, parsed, error = (out.get("raw"), out.get("parsed"), out.get("parsing_error")) if isinstance(out, dict) else (out, None, None)
    if method == "function_calling" and isinstance(raw, AIMessage) and raw.tool_calls:
        try:
            parsed = _tools_parser(schema).parse_result([ChatGeneration(message=raw)])
        except Exception as exc:  # ValidationError, an unknown tool, a refusal: shown back to the model
            error = exc
    if isinstance(parsed, schema):
        return parsed, "", raw
    bad = getattr(raw, "invalid_tool_calls", None) or []
    if error is None and not bad and (method == "text" or message_text(raw)):  # JSON in the text (or for the tool call)
        parsed, problem = _from_text(message_text(raw), schema)
        step = _answer_step(schema) if method == "text" else None
        if parsed is None and step is not None:  # an answer in plain text (or in JSON that does not validate)
            parsed, problem = _plain_answer(message_text(raw), schema, step)
        return parsed, problem, raw
    problem = (_short_validation(error) if isinstance(error, ValidationError) else str(error).splitlines()[0][:200] if error
               else f"the reply holds no {schema.__name__} tool call")
    if bad:
        problem = f"the tool call's arguments do not parse: {str(bad[0].get('error') or bad[0].get('args'))[:200]}"
    return None, problem, raw


def _asking_for(convo: list[BaseMessage], instructions: str) -> list[BaseMessage]:
    """``convo`` with the reply's format asked for at the end of its last (user) message, else in its leading system
    message: no second system message or two user messages in a row, which many open models' chat templates refuse."""
    last, first = (convo[-1], convo[0]) if convo else (None, None)
    if isinstance(last, HumanMessage) and isinstance(last.content, str):
        return [*convo[:-1], HumanMessage(f"{last.content}\n\n{instructions}")]
    if isinstance(first, SystemMessage) and isinstance(first.content, str):
        return [SystemMessage(f"{first.content}\n\n{instructions}"), *convo[1:]]
    return [SystemMessage(instructions), *convo]


def decide(
    model: BaseChatModel, messages: Sequence[BaseMessage], schema: type[T], *, method: str = "function_calling",
    max_repairs: int = 2, max_reply_chars: int = MAX_REPLY_CHARS,
) -> Decision[T]:
    """Ask ``model`` for one ``schema`` object, a reply that does not parse shown back up to ``max_repairs`` times;
    never raise. ``method``: ``function_calling``, ``json_schema`` or ``text`` (also for a model without tools)."""
    convo: list[BaseMessage] = list(messages)
    runnable: Any = model
    if method != "text":
        try:
            runnable = memo(model, (schema, method), lambda: model.bind_tools(  # with_structured_output's request,
                [schema], tool_choice=schema.__name__, parallel_tool_calls=False)  # without its chains
                if method == "function_calling" else model.with_structured_output(schema, method=method, include_raw=True))
        except (NotImplementedError, ValueError, TypeError):
            method = "text"
    if method == "text":
        convo = _asking_for(convo, _text_instructions(schema))
    again = ("ending with a last line 'Answer: …'" if method == "text" and _answer_step(schema)
             else f"with a valid {schema.__name__} object and nothing else")
    usage, problem, retries = Usage(), "", _retries_of(model)
    for attempt in range(1, max_repairs + 2):
        spent: list[Usage] = []
        try:
            out, took = _invoke(lambda: runnable.invoke(convo), retries, spent, max_reply_chars, model)
        except ValidationError as exc:  # LangChain could not make a message of the model's output: repaired
            usage, problem, shown = sum(spent, usage), _short_validation(exc), "(a reply that could not be read)"
        except Exception as exc:  # endpoint down, auth, timeout after retries: recorded, never raised
            return Decision(None, sum(spent, usage), request_failed(exc, len(spent), model), attempt, kind_of(exc))
        else:
            parsed, problem, raw = _parsed(out, schema, method)
            if parsed is not None and (cut := _cut_off(raw)):  # (a plain-text answer would be its first part)
                parsed, problem = None, cut
            usage = sum(spent, usage) + _usage_of(raw, took)
            if parsed is not None:
                return Decision(parsed, usage, "", attempt)
            shown = _visible(raw)
        convo = [*convo, AIMessage(content=shown), HumanMessage(
            f"That reply could not be used: {problem}. Answer again {again}.")]
    return Decision(None, usage, f"no valid {schema.__name__} after {max_repairs + 1} attempts: {problem}", max_repairs + 1,
                    "unparseable")


def decide_for(ctx: Any, messages: Sequence[BaseMessage], schema: type[T], *, role: str = "") -> Decision[T]:
    """:func:`decide` with the model, method and repair bound of a run's context; never raises (a model that
    cannot be built is a ``config`` failure)."""
    try:
        model = chat_model_for(ctx, role)
    except Exception as exc:  # LLMConfigError, provider import errors, bad arguments
        return Decision(None, Usage(), f"no usable chat model: {exc}", 0, "config")
    return decide(model, messages, schema, method=ctx.structured_output, max_repairs=ctx.max_repairs,
                  max_reply_chars=ctx.max_reply_chars)


def failure_update(d: Decision[Any], node: str) -> dict[str, Any]:
    """The state update of a failed decision: error, typed failure, usage, and why the run stops
    (``llm_unparseable`` still lets the answer step try; ``llm_error`` ends the run)."""
    reason = "llm_unparseable" if d.kind == "unparseable" else "llm_error"
    return failed(d.kind or "error", node, f"{node}: {d.error}", usage=d.usage, stop_reason=reason, answer="")


def _cut_off(msg: Any) -> str:
    """Why the reply is incomplete when the endpoint stopped it at its output limit (OpenAI's and compatible servers'
    ``finish_reason``, Google's ``MAX_TOKENS``, Ollama's ``done_reason``, Anthropic's ``stop_reason``), else ""."""
    meta = getattr(msg, "response_metadata", None) or {}
    why = meta.get("finish_reason") or meta.get("done_reason") or meta.get("stop_reason")
    if str(why).lower() not in ("length", "max_tokens"):
        return ""
    return f"the reply was cut off at the model's output limit ({why}) before it ended; give a shorter reply"


def _visible(msg: Any) -> str:
    """The assistant reply as text (tool-call arguments included) to show it back during a repair."""
    content = msg.content if isinstance(msg.content, str) else json.dumps(msg.content)
    if calls := getattr(msg, "tool_calls", None):
        content += "\n" + "\n".join(json.dumps({"name": c.get("name"), "arguments": c.get("args")}) for c in calls)
    return content or "(empty reply)"
