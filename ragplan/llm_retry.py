"""Malformed LLM replies: how to tell them from real errors, and the bounded retry they get.

An endpoint that answers ``200 OK`` with a body that is not a chat completion — JSON cut off in the
middle, an object without ``choices``, an empty ``choices`` list, a choice without a message, an empty
or HTML body — is a transient fault of the server (an overloaded proxy, a worker that died while
writing), exactly like a ``5xx``. The OpenAI client retries a ``5xx`` itself but not these, because
they arrive as a success and fail only while the reply is read. :func:`call_with_retries` gives them
the same treatment as the client gives a ``5xx``: up to the model's own ``max_retries`` more attempts
(``llm_max_retries`` in a run's context, default 3), waiting 0.5 s, 1 s, 2 s … (at most 8 s, with
jitter) in between — the client's own schedule. Anything else (a ``4xx``, a bad key, a wrong model
name, an unknown request option, a timeout or a ``5xx`` the client already retried) is not retried
here: it comes back at once and is recorded with its reason.

Which exceptions mean "the reply was malformed" (:func:`malformed_reply`), found by sending each kind
of body to ``langchain-openai`` through a local server (``tests/openai_server.py``):

* ``json.JSONDecodeError`` — truncated JSON, an empty body, HTML (the client's ``response.json()``);
* ``TypeError("Received response with null value for 'choices'…")`` — no ``choices`` or ``null``
  (``KeyError("Response missing 'choices' key…")`` when the reply is read as JSON, not as the SDK's model:
  :mod:`ragplan.llm_openai`);
* ``IndexError`` from LangChain's ``generations[0][0]`` — an empty ``choices`` list;
* any exception raised while LangChain turns the completion into a message
  (``_create_chat_result`` / ``_convert_dict_to_message``) — e.g. a choice without a ``message``.

One exception raised there is the model's doing, not the server's: a tool call whose arguments are
valid JSON but not an object (``[…]``, ``"…"``) fails LangChain's ``AIMessage`` validation.
:func:`unusable_output` names it; it is not retried as it is (the same request would get the same
output) but repaired like any reply that does not parse (:func:`ragplan.llm.decide` tells the model).
"""

from __future__ import annotations

import json
import random
import time
import traceback
from typing import Any, Callable, TypeVar

__all__ = ["malformed_reply", "unusable_output", "call_with_retries", "retries_of", "BACKOFF_S", "MAX_BACKOFF_S"]

R = TypeVar("R")

#: First wait before a retry of a malformed reply (doubles each retry); the OpenAI client's own first delay.
BACKOFF_S = 0.5
#: Longest wait between two attempts.
MAX_BACKOFF_S = 8.0
#: Retries when the model does not say how many it allows (a chat model object without ``max_retries``).
DEFAULT_RETRIES = 2

_READING_REPLY = frozenset({"_create_chat_result", "_convert_dict_to_message", "_convert_chunk_to_generation_chunk"})


def unusable_output(exc: BaseException) -> str:
    """Why ``exc`` means the model's output (not the server's reply) cannot be read, or ``""``: a tool call whose
    arguments are JSON but not an object, refused by LangChain's message validation."""
    if type(exc).__name__ != "ValidationError" or "tool_calls" not in str(exc):
        return ""
    frames = traceback.extract_tb(exc.__traceback__)
    if any(f.name in _READING_REPLY for f in frames):
        return "the tool call's arguments are not a JSON object"
    return ""


def malformed_reply(exc: BaseException) -> str:
    """Why ``exc`` means the endpoint's reply was malformed (a transient fault), or ``""`` when it is a real error."""
    if unusable_output(exc):
        return ""
    if isinstance(exc, json.JSONDecodeError):
        return f"the reply is not JSON ({exc.msg} at char {exc.pos})"
    if (isinstance(exc, TypeError) and "null value for 'choices'" in str(exc)) or (
            isinstance(exc, KeyError) and "missing 'choices'" in str(exc)):  # (the reply read as a dict, not a model)
        return "the reply has no choices"
    if not isinstance(exc, (TypeError, IndexError, AttributeError, KeyError, ValueError)):
        return ""
    frames = traceback.extract_tb(exc.__traceback__)
    if any(f.name in _READING_REPLY for f in frames):
        return f"the reply is not a chat completion ({type(exc).__name__}: {str(exc)[:120]})"
    last = frames[-1] if frames else None
    if (isinstance(exc, IndexError) and last is not None and last.name in ("invoke", "ainvoke")
            and "language_models" in last.filename):
        return "the reply has an empty choices list"
    return ""


def retries_of(model: Any) -> int:
    """How many retries the model's client allows for a ``5xx`` (its ``max_retries``), used for malformed replies too."""
    bound = getattr(model, "bound", model)  # a model with tools bound: the chat model underneath
    n = getattr(bound, "max_retries", None)
    return max(0, int(n)) if isinstance(n, int) else DEFAULT_RETRIES


def call_with_retries(call: Callable[[], R], retries: int,
                      on_failure: Callable[[BaseException, float], None]) -> tuple[R, float]:
    """``(call(), seconds it took)``, calling again after a malformed reply at most ``retries`` more times with
    backoff; any other error raises at once.

    ``on_failure(exc, seconds)`` is told of every failed attempt (for usage accounting) before the
    wait or the re-raise. The last malformed reply is re-raised when the retries are spent.
    """
    for attempt in range(retries + 1):
        t0 = time.perf_counter()
        try:
            return call(), time.perf_counter() - t0
        except Exception as exc:
            on_failure(exc, time.perf_counter() - t0)
            if attempt >= retries or not malformed_reply(exc):
                raise
        time.sleep(min(MAX_BACKOFF_S, BACKOFF_S * 2 ** attempt) * (1 - random.random() / 4))
    raise AssertionError("unreachable")  # the loop returns or raises
