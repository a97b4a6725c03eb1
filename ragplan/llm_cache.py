"""Record and replay of every LLM call: :class:`LLMCache`, a LangChain cache on disk keyed by the SHA-256 of what
LangChain hands it, one JSON file an entry written once (the first writer wins, so a recording run sees what its
replay will see); a replay miss raises :class:`LLMCacheMiss` before any request is sent."""

from __future__ import annotations

import contextvars
import functools
import hashlib
import json
import threading
import weakref
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from langchain_core.caches import RETURN_VAL_TYPE, BaseCache
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessageChunk, message_chunk_to_message, messages_from_dict
from langchain_core.outputs import ChatGeneration, Generation

from ragplan.jsonl import atomic_write

__all__ = ["LLMCache", "LLMCacheMiss", "CacheUsage", "digest_of", "llm_cache", "track_cache_usage", "attach_cache",
           "model_with", "memo", "fingerprint_of", "FORMAT"]

FORMAT = 2
"""Version of the entry files (format 1 keyed requests by a parse of ``llm_string``; it is not read any more)."""


class LLMCacheMiss(LookupError):
    """Replay found no recorded response for a request (or its entry is unreadable); nothing was sent."""

    def __init__(self, model: str, digest: str, directory: str | Path, reason: str = "") -> None:
        self.model, self.digest, self.directory = model, digest, str(directory)
        super().__init__(
            f"replay: no recorded response for this {model} request in the LLM cache {directory} "
            f"(request key {digest[:12]}{'; ' + reason if reason else ''}); replay serves recorded requests only — "
            "record them first by running without --replay")


def digest_of(prompt: str, llm_string: str) -> str:
    """The key of one LangChain cache lookup: SHA-256 (hex) of ``prompt`` and ``llm_string`` as given."""
    return hashlib.sha256(f"{prompt}\0{llm_string}".encode()).hexdigest()


def _dump_generation(gen: Any) -> dict[str, Any]:
    """A chat generation as JSON (a chat model's cache holds nothing else); a streamed message whole, without its id."""
    msg = message_chunk_to_message(gen.message) if isinstance(gen.message, AIMessageChunk) else gen.message
    return {"message": msg.model_copy(update={"id": None}).model_dump(mode="json"), "generation_info": gen.generation_info}


def _load_generation(d: dict[str, Any]) -> ChatGeneration:
    msg = messages_from_dict([{"type": d["message"]["type"], "data": d["message"]}])[0]
    return ChatGeneration(message=msg, generation_info=d.get("generation_info"))


class CacheUsage(dict[str, bool]):
    """The entries one run read or wrote: digest -> whether this run recorded it (False: served from the cache)."""

    def digests(self) -> list[str]:
        """Every entry used, sorted."""
        return sorted(self.copy())  # (a copy: a request still in flight may add one)

    def summary(self) -> dict[str, Any]:
        """``{"entries", "replayed", "recorded", "fingerprint"}`` of the entries used."""
        used = self.copy()
        recorded = sum(used.values())
        return {**fingerprint_of(list(used)), "replayed": len(used) - recorded, "recorded": recorded}


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


class LLMCache(BaseCache):
    """The on-disk record of ``model``'s (``provider:name``) requests and responses; ``replay`` serves from it only."""

    def __init__(self, directory: str | Path, replay: bool = False, model: str = "") -> None:
        self.directory, self.replay, self.model = Path(directory), bool(replay), model or "chat model"

    def __repr__(self) -> str:
        return f"LLMCache({str(self.directory)!r}, replay={self.replay}, model={self.model!r})"

    def path_of(self, digest: str) -> Path:
        """Where the entry of ``digest`` lives."""
        return self.directory / digest[:2] / digest[2:4] / f"{digest}.json"

    @staticmethod
    def _read(path: Path) -> tuple[dict[str, Any], list[Generation]]:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("format") != FORMAT:
            raise ValueError(f"entry format {data.get('format')}, this ragplan reads format {FORMAT}")
        return data, [_load_generation(g) for g in data["generations"]]

    def check(self, digest: str) -> str:
        """Why the entry of ``digest`` cannot be replayed (``""`` when it can): missing, not a file, unreadable, or
        not the request its name says (the recorded request's SHA-256 is not ``digest``)."""
        path = self.path_of(digest)
        if not path.is_file():
            return f"{path}: " + ("not a file" if path.exists() else "missing")
        try:
            data = self._read(path)[0]
            prompt = data["messages"] if isinstance(data["messages"], str) else json.dumps(data["messages"])
            if digest_of(prompt, data["llm_string"]) != digest:
                return f"{path}: the recorded request does not hash to its name (the entry was altered)"
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            return f"{path}: unreadable ({type(exc).__name__}: {exc})"
        return ""

    def _older(self) -> str:
        """Why the folder's entries cannot serve this ragplan (written in an older format), or ``""``."""
        for path in self.directory.glob("??/??/*.json"):
            try:
                old = json.loads(path.read_text(encoding="utf-8")).get("format")
            except (OSError, ValueError, AttributeError):
                continue
            return "" if old == FORMAT else (f"the folder was recorded by an older ragplan (entry format {old}, keyed "
                                             f"differently; this ragplan reads format {FORMAT}): record it again")
        return ""

    def lookup(self, prompt: str, llm_string: str) -> RETURN_VAL_TYPE | None:
        """The recorded generations of this request; a miss is None (record) or :class:`LLMCacheMiss` (replay)."""
        digest = digest_of(prompt, llm_string)
        path = self.path_of(digest)
        try:
            gens = self._read(path)[1]
        except (OSError, ValueError, KeyError, TypeError) as exc:  # missing or damaged: (re-)recorded, or a clear miss
            if self.replay:
                why = self._older() if isinstance(exc, FileNotFoundError) else f"its entry {path} is unreadable: {exc}"
                raise LLMCacheMiss(self.model, digest, self.directory, why) from None
            return None
        if (usage := _usage.get()) is not None:  # (one dict operation: questions' threads note at once)
            usage.setdefault(digest, False)
        return gens

    def update(self, prompt: str, llm_string: str, return_val: RETURN_VAL_TYPE) -> None:
        """Store a response (first writer wins) and hand the caller what the entry holds, in place."""
        if self.replay:  # a replay miss raised before the request
            return
        digest = digest_of(prompt, llm_string)
        path = self.path_of(digest)
        entry = {"format": FORMAT, "digest": digest, "model": self.model, "llm_string": llm_string,
                 "messages": json.loads(prompt),  # (a chat model's prompt is its messages as JSON)
                 "generations": [_dump_generation(g) for g in return_val],
                 "recorded": datetime.now(timezone.utc).isoformat(timespec="seconds")}
        path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(entry, ensure_ascii=False, indent=1, default=str)
        if not atomic_write(path, text, exclusive=True):  # an entry another writer made first is kept
            try:
                self._read(path)
            except (OSError, ValueError, KeyError, TypeError):  # a damaged entry is replaced
                atomic_write(path, text)
        return_val[:] = self._read(path)[1]  # type: ignore[index]  # LangChain returns this very list to the caller
        if (usage := _usage.get()) is not None:
            usage[digest] = True

    def clear(self, **kwargs: Any) -> None:
        """Delete every entry (not in replay mode)."""
        if self.replay:
            raise RuntimeError(f"{self!r}: a replay cache is read-only")
        for path in self.directory.glob("??/??/*.json"):
            path.unlink(missing_ok=True)


def llm_cache(directory: str | Path, replay: bool = False, model: str = "") -> LLMCache:
    """The process-wide :class:`LLMCache` of ``directory`` in the given mode, for the chat model named ``model``."""
    return _llm_cache(str(Path(directory).expanduser().resolve()), bool(replay), model)


_llm_cache = functools.cache(LLMCache)


def model_with(model: BaseChatModel, **update: Any) -> BaseChatModel:
    """A copy of ``model`` with fields replaced (``cache=…``), without LangChain's memo of its serialised form."""
    copy = model.model_copy(update=update)
    copy.__dict__.pop("_serialized", None)
    return copy


_memos: dict[tuple[int, Any], tuple[weakref.ref[Any], Any]] = {}
_memo_lock = threading.RLock()


def memo(obj: Any, key: Any, make: Callable[[], Any]) -> Any:
    """``make()``, made once per live ``obj`` and ``key``, also when a batch's worker threads ask at once."""
    k = (id(obj), key)
    with _memo_lock:
        if (hit := _memos.get(k)) is not None and hit[0]() is obj:
            return hit[1]
        value = make()
        _memos[k] = (weakref.ref(obj, lambda _: _memos.pop(k, None)), value)  # (dropped when obj is collected)
    return value


def attach_cache(model: BaseChatModel, cache: LLMCache) -> BaseChatModel:
    """``model`` with ``cache`` as its cache: a copy, made once per (model, cache) while the model lives."""
    return model if model.cache is cache else memo(model, cache, lambda: model_with(model, cache=cache))
