"""The typed record of a failure: what kind, in which node, and the message. The kind is set where the failure is
caught, from the exception's type (:func:`ragplan.llm.kind_of` for LLM calls), never parsed back from the message."""

from __future__ import annotations

from typing import Any, Literal

from typing_extensions import TypedDict

__all__ = ["Failure", "FailureKind", "failure", "failed"]

FailureKind = Literal[
    "rate_limit",  # 429 after the client's own retries
    "timeout",  # the endpoint did not answer in time
    "connection",  # the endpoint could not be reached
    "auth",  # 401 / 403: a bad key, no access
    "bad_request",  # another 4xx: a request option or a prompt the endpoint refuses
    "not_found",  # 404: no such model or path
    "server_error",  # 5xx after the client's own retries
    "malformed_reply",  # 200 with a body that is not a chat completion, after ragplan's retries
    "unparseable",  # the model's output did not parse after the bounded repair
    "replay_miss",  # replay mode: the request was not recorded in the LLM cache
    "config",  # no usable chat model (no endpoint configured, a wrong object)
    "query_refused",  # a retrieval query refused by the store (a write, a bad statement)
    "query_error",  # a retrieval query that failed in the store
    "tool_error",  # a tool that raised
    "setup",  # a model, index or store the run needs could not be loaded
    "budget",  # a time or step budget ran out
    "error",  # anything else
]


class Failure(TypedDict):
    """One failure, recorded in a run's state (``failure``) and in its evaluation record."""

    kind: FailureKind
    """What failed, from the exception's type."""
    node: str
    """The node (step) where it was caught."""
    message: str
    """The readable reason (the same text as the state's ``error``)."""


def failure(kind: FailureKind, node: str, message: str) -> Failure:
    """A :class:`Failure` record."""
    return {"kind": kind, "node": node, "message": message}


def failed(kind: FailureKind, node: str, error: str, **update: Any) -> dict[str, Any]:
    """A node's state update for a failure: ``update``, the readable ``error`` and its typed ``failure``."""
    return {**update, "error": error, "failure": failure(kind, node, error)}
