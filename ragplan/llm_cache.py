"""Record and replay of every LLM call: a content-addressed on-disk cache of chat requests and their responses.

:class:`LLMCache` is a LangChain :class:`~langchain_core.caches.BaseCache` set as a chat model's ``cache``
field (:func:`ragplan.llm.load_chat_model` builds models with it; a model object a Python caller gave is
copied with it). LangChain asks the cache before every request and hands it every response, so each
decision and each free-text call of every node goes through it, streamed or not, sync or async.

**The key** of a request is the SHA-256 of one canonical JSON object (keys sorted, compact)::

    {"v": 1, "model": "openai:gpt-4o-mini", "settings": {...}, "messages": [...]}

* ``model`` — ``provider:name`` of the chat model;
* ``settings`` — what changes the answer: the model's own settings (temperature, top_p, seed, max_tokens,
  logprobs …) and the call's bound arguments (``tools``, ``tool_choice``, ``response_format`` — a pydantic
  class there is replaced by its JSON schema —, ``logprobs``, ``stop`` …). Transport settings are left
  out (base URL, API key, timeout, retries, organisation, proxy, headers, ``stream_usage``), and so are
  LangSmith's ``ls_*`` tracing arguments: a cache recorded against one server replays without it;
* ``messages`` — the conversation as LangChain serialises it, without message ids and without the
  ``response_metadata`` / ``usage_metadata`` of earlier replies (neither is sent to the endpoint).

**An entry** is one JSON file ``DIR/ab/cd/<digest>.json`` (two levels of fan-out by the digest's first
four hex digits) holding the request (model, settings, messages) and the response's generations (each
message's full ``model_dump``: content, tool calls, ``usage_metadata``, ``response_metadata`` with
logprobs). Files are written to a temporary name, fsynced and linked into place, so a kill never leaves
a torn entry and concurrent writers (threads, processes) are safe: the first entry written for a key
wins, and every caller — the one that lost the race included — continues with what the file holds. So a
recording run sees exactly what a replay of it will see.

**Replay** (``replay=True``) serves from the cache only: a miss raises :class:`LLMCacheMiss` before any
request is sent, which :func:`ragplan.llm.decide` / :func:`~ragplan.llm.generate` record like any endpoint
failure (``stop_reason = llm_error``, the reason in ``error``).

**Which entries a run used** is counted per run with :func:`track_cache_usage` (a context variable, so
the questions of one run count together across threads and async tasks); :meth:`CacheUsage.summary` gives
the count and a fingerprint (SHA-256 over the sorted digests) that a run folder records.
"""

from __future__ import annotations

import ast
import contextvars
import hashlib
import json
import os
import re
import sys
import threading
import uuid
import weakref
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterator, Sequence

from langchain_core.caches import RETURN_VAL_TYPE, BaseCache
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessageChunk, message_chunk_to_message, messages_from_dict
from langchain_core.outputs import ChatGeneration, Generation
from pydantic import BaseModel

__all__ = ["LLMCache", "LLMCacheMiss", "CacheRequest", "CacheUsage", "cache_request", "llm_cache", "track_cache_usage",
           "attach_cache", "model_with", "fingerprint_of", "FORMAT"]

FORMAT = 1
"""Version of the key and of the entry files; part of every key, so a format change never serves stale entries."""

#: Model and call settings that only say how to reach the endpoint (never what it answers): not keyed.
TRANSPORT = re.compile(r"api_key|api_base|api_url|base_url|endpoint|timeout|retries|organization|proxy|headers|"
                       r"http_client|http_async_client|default_query|stream_usage|^streaming$|^stream$|verbose|"
                       r"callbacks|^tags$|^metadata$|rate_limiter|^cache$|^client$|^async_client$|^ls_")
#: Settings that name the model (they go into ``model``).
MODEL_NAME_KEYS = ("model_name", "model", "model_id", "deployment_name")
_CLASS = re.compile(r"<class '([A-Za-z_][\w.]*)'>")


class LLMCacheMiss(LookupError):
    """Replay found no recorded response for a request (or its entry is unreadable); nothing was sent."""

    def __init__(self, model: str, digest: str, directory: str | Path, reason: str = "") -> None:
        self.model, self.digest, self.directory = model, digest, str(directory)
        super().__init__(
            f"replay: no recorded response for this {model} request in the LLM cache {directory} "
            f"(request key {digest[:12]}{'; ' + reason if reason else ''}); replay serves recorded requests only — "
            "record them first by running without --replay")


@dataclass(frozen=True)
class CacheRequest:
    """One chat request as the cache keys it (see the module docstring)."""

    model: str
    """``provider:name`` of the chat model."""
    settings: dict[str, Any]
    """The request-affecting settings (model settings and the call's bound arguments), transport left out."""
    messages: list[Any]
    """The conversation, serialised by LangChain, ids and earlier replies' metadata left out."""
    digest: str
    """SHA-256 (hex) of the canonical JSON of the other three fields and the format version."""


def _resolve(path: str) -> Any:
    """The class a ``<class 'path'>`` in a call's arguments names (among loaded modules), or its last name."""
    parts = path.split(".")
    for i in range(len(parts) - 1, 0, -1):
        obj: Any = sys.modules.get(".".join(parts[:i]))
        for name in parts[i:]:
            obj = getattr(obj, name, None)
        if isinstance(obj, type):
            return obj
    return parts[-1]


@lru_cache(maxsize=512)
def _class_value(cls: Any) -> str:
    """What a class in a call's arguments stands for, as a Python literal: a pydantic class's JSON schema, else its name."""
    if isinstance(cls, type) and issubclass(cls, BaseModel):
        return repr({"class": cls.__name__, "json_schema": cls.model_json_schema()})
    return repr(f"class {getattr(cls, '__name__', cls)}")


def _literal(text: str, classes: Sequence[Any] = ()) -> Any:
    """A Python repr of call arguments as data (the n-th class replaced by ``classes[n]``'s schema), or the text."""
    found = iter(classes)
    try:
        return ast.literal_eval(_CLASS.sub(lambda m: _class_value(next(found, m.group(1))), text))
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return text


def _kept(settings: dict[str, Any]) -> dict[str, Any]:
    """``settings`` without transport, secrets, model names and unset values."""
    return {k: v for k, v in settings.items()
            if not TRANSPORT.search(k) and k not in MODEL_NAME_KEYS and k != "_type" and v is not None
            and not (isinstance(v, dict) and v.get("type") == "secret")}


def _split_llm_string(llm_string: str, classes: Sequence[Any] = ()) -> tuple[str, dict[str, Any]]:
    """``(provider:name, settings)`` from LangChain's ``llm_string`` (see the module docstring)."""
    try:
        ser, end = json.JSONDecoder().raw_decode(llm_string)
    except json.JSONDecodeError:
        ser, end = None, 0
    if isinstance(ser, dict) and llm_string[end:end + 3] == "---":  # an lc-serialisable model: its constructor + call
        kwargs = ser.get("kwargs") or {}
        ids = ser.get("id") or []
        provider = str(ids[-2]) if len(ids) >= 2 else str(ser.get("name") or "")
        name = next((str(kwargs[k]) for k in MODEL_NAME_KEYS if kwargs.get(k)), "")
        call = _literal(llm_string[end + 3:], classes)
        call = dict(call) if isinstance(call, list) and all(isinstance(x, tuple) and len(x) == 2 for x in call) else {"call": call}
        return f"{provider}:{name}", {**_kept(kwargs), **_kept(call)}
    params = _literal(llm_string, classes)  # another model: its invocation parameters and the call's
    if isinstance(params, list) and all(isinstance(x, tuple) and len(x) == 2 for x in params):
        d = dict(params)
        name = next((str(d[k]) for k in MODEL_NAME_KEYS if d.get(k)), "")
        return f"{d.get('_type', 'unknown')}:{name}", _kept(d)
    return "unknown:", {"llm_string": llm_string}


def _message(d: Any) -> Any:
    """A serialised message as keyed: without its id and the metadata of an earlier reply."""
    if isinstance(d, dict) and isinstance(d.get("kwargs"), dict):
        d = {**d, "kwargs": {k: v for k, v in d["kwargs"].items() if k not in ("id", "response_metadata", "usage_metadata")}}
    return d


def _canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


@lru_cache(maxsize=1024)
def _settings_memo(llm_string: str, classes: tuple[Any, ...]) -> tuple[str, str]:
    model, settings = _split_llm_string(llm_string, classes)
    return model, _canonical(settings)


def _settings_of(llm_string: str) -> tuple[str, str]:
    """``(model, canonical settings)``, memoised by the string and the classes it names (a reloaded module's
    class is another class)."""
    return _settings_memo(llm_string, tuple(_resolve(p) for p in _CLASS.findall(llm_string)))


def cache_request(prompt: str, llm_string: str) -> CacheRequest:
    """The :class:`CacheRequest` of one LangChain cache lookup (``prompt`` = the serialised messages)."""
    model, settings = _settings_of(llm_string)
    try:
        messages = [_message(m) for m in json.loads(prompt)]
    except (json.JSONDecodeError, TypeError):
        messages = [prompt]
    body = {"v": FORMAT, "model": model, "settings": json.loads(settings), "messages": messages}
    return CacheRequest(model, body["settings"], messages, hashlib.sha256(_canonical(body).encode()).hexdigest())


def _dump_generation(gen: Generation) -> dict[str, Any]:
    msg = getattr(gen, "message", None)
    if msg is None:
        return {"text": gen.text, "generation_info": gen.generation_info}
    if isinstance(msg, AIMessageChunk):
        msg = message_chunk_to_message(msg)
    return {"message": msg.model_copy(update={"id": None}).model_dump(mode="json"), "generation_info": gen.generation_info}


def _load_generation(d: dict[str, Any]) -> Generation:
    if "message" not in d:
        return Generation(text=d.get("text", ""), generation_info=d.get("generation_info"))
    msg = messages_from_dict([{"type": d["message"]["type"], "data": d["message"]}])[0]
    return ChatGeneration(message=msg, generation_info=d.get("generation_info"))


class CacheUsage:
    """The entries one run read or wrote (thread-safe); see :func:`track_cache_usage`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.replayed: set[str] = set()
        """Digests served from the cache."""
        self.recorded: set[str] = set()
        """Digests this run wrote (its requests that were not in the cache yet)."""

    def add(self, digest: str, recorded: bool) -> None:
        """Count one entry the run used."""
        with self._lock:
            (self.recorded if recorded else self.replayed).add(digest)

    def digests(self) -> list[str]:
        """Every entry used, sorted."""
        with self._lock:
            return sorted(self.replayed | self.recorded)

    def summary(self) -> dict[str, Any]:
        """``{"entries", "replayed", "recorded", "fingerprint"}`` of the entries used."""
        with self._lock:
            replayed, recorded = len(self.replayed - self.recorded), len(self.recorded)
        return {**fingerprint_of(self.digests()), "replayed": replayed, "recorded": recorded}


def fingerprint_of(digests: Sequence[str]) -> dict[str, Any]:
    """``{"entries": n, "fingerprint": sha256 of the sorted digests, one per line}``."""
    ds = sorted(set(digests))
    return {"entries": len(ds), "fingerprint": hashlib.sha256("\n".join(ds).encode()).hexdigest()}


_usage: contextvars.ContextVar[CacheUsage | None] = contextvars.ContextVar("ragplan_llm_cache_usage", default=None)


@contextmanager
def track_cache_usage() -> Iterator[CacheUsage]:
    """Count the cache entries used by every LLM call made inside this block (its threads and tasks too)."""
    usage = CacheUsage()
    token = _usage.set(usage)
    try:
        yield usage
    finally:
        _usage.reset(token)


def _note(digest: str, recorded: bool) -> None:
    usage = _usage.get()
    if usage is not None:
        usage.add(digest, recorded)


class LLMCache(BaseCache):
    """The on-disk record of chat requests and responses in ``directory``; ``replay`` serves from it only."""

    def __init__(self, directory: str | Path, replay: bool = False) -> None:
        self.directory = Path(directory)
        self.replay = bool(replay)

    def __repr__(self) -> str:
        return f"LLMCache({str(self.directory)!r}, replay={self.replay})"

    def path_of(self, digest: str) -> Path:
        """Where the entry of ``digest`` lives."""
        return self.directory / digest[:2] / digest[2:4] / f"{digest}.json"

    def has(self, digest: str) -> bool:
        """Whether the cache holds an entry for ``digest``."""
        return self.path_of(digest).is_file()

    def entries(self) -> Iterator[Path]:
        """Every entry file."""
        yield from sorted(self.directory.glob("??/??/*.json"))

    def _read(self, path: Path) -> list[Generation]:
        data = json.loads(path.read_text(encoding="utf-8"))
        return [_load_generation(g) for g in data["generations"]]

    def lookup(self, prompt: str, llm_string: str) -> RETURN_VAL_TYPE | None:
        """The recorded generations of this request; a miss is None (record) or :class:`LLMCacheMiss` (replay)."""
        req = cache_request(prompt, llm_string)
        path = self.path_of(req.digest)
        try:
            gens = self._read(path)
        except FileNotFoundError:
            if self.replay:
                raise LLMCacheMiss(req.model, req.digest, self.directory) from None
            return None
        except (OSError, ValueError, KeyError, TypeError) as exc:  # a damaged entry: re-recorded, or a clear miss
            if self.replay:
                raise LLMCacheMiss(req.model, req.digest, self.directory, f"its entry {path} is unreadable: {exc}") from None
            return None
        _note(req.digest, recorded=False)
        return gens

    def update(self, prompt: str, llm_string: str, return_val: RETURN_VAL_TYPE) -> None:
        """Store a response (first writer wins) and hand the caller what the entry holds, in place."""
        if self.replay:  # never reached: a replay miss raises before the request
            return
        req = cache_request(prompt, llm_string)
        path = self.path_of(req.digest)
        entry = {"format": FORMAT, "digest": req.digest, "model": req.model, "settings": req.settings,
                 "messages": req.messages, "generations": [_dump_generation(g) for g in return_val],
                 "recorded": datetime.now(timezone.utc).isoformat(timespec="seconds")}
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{req.digest}.{os.getpid()}.{uuid.uuid4().hex}.tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(json.dumps(entry, ensure_ascii=False, indent=1, default=str))
            fh.flush()
            os.fsync(fh.fileno())
        try:
            os.link(tmp, path)  # atomic and exclusive: an entry another writer made first is kept
        except FileExistsError:
            try:
                self._read(path)
            except (OSError, ValueError, KeyError, TypeError):  # a damaged entry is replaced
                os.replace(tmp, path)
        except OSError:  # a file system without hard links: rename (atomic; the last writer wins)
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
        stored = self._read(path)
        return_val[:] = stored  # type: ignore[index]  # LangChain returns this very list to the caller
        _note(req.digest, recorded=True)

    def clear(self, **kwargs: Any) -> None:
        """Delete every entry (not in replay mode)."""
        if self.replay:
            raise RuntimeError(f"{self!r}: a replay cache is read-only")
        for path in self.entries():
            path.unlink(missing_ok=True)


_caches: dict[tuple[str, bool], LLMCache] = {}
_caches_lock = threading.Lock()


def llm_cache(directory: str | Path, replay: bool = False) -> LLMCache:
    """The process-wide :class:`LLMCache` of ``directory`` in the given mode."""
    key = (str(Path(directory).expanduser().resolve()), bool(replay))
    with _caches_lock:
        if key not in _caches:
            _caches[key] = LLMCache(key[0], key[1])
        return _caches[key]


def model_with(model: BaseChatModel, **update: Any) -> BaseChatModel:
    """A copy of ``model`` with fields replaced (``temperature=…``, ``cache=…``); ``model`` is left as it was.

    LangChain keeps a model's serialised form once computed (it is what its cache keys requests by);
    a plain ``model_copy`` would carry the old one over, so the copy drops it.
    """
    copy = model.model_copy(update=update)
    copy.__dict__.pop("_serialized", None)
    return copy


_attached: dict[tuple[int, int], tuple[Any, BaseChatModel]] = {}
_attached_lock = threading.Lock()


def attach_cache(model: BaseChatModel, cache: LLMCache) -> BaseChatModel:
    """``model`` with ``cache`` as its cache: a copy, made once per (model, cache) while the model lives."""
    if model.cache is cache:
        return model
    key = (id(model), id(cache))
    with _attached_lock:
        hit = _attached.get(key)
        if hit is not None and hit[0]() is model:
            return hit[1]
        if len(_attached) > 256:
            for k in [k for k, (ref, _) in _attached.items() if ref() is None]:
                del _attached[k]
        copy = model_with(model, cache=cache)
        _attached[key] = (weakref.ref(model), copy)
        return copy
