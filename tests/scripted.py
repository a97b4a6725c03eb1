"""A scripted chat model for tests: returns prepared replies in order and records every prompt.

Replies may be pydantic objects (sent back as a tool call named after their class, which is what
LangChain's structured output with function calling expects), ``AIMessage`` objects, plain strings,
or exceptions (raised, to simulate an endpoint failure).
"""

from __future__ import annotations

import itertools
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import BaseModel, PrivateAttr

_ids = itertools.count(1)


def as_message(reply: Any) -> AIMessage:
    """Turn a scripted reply into the AIMessage a real endpoint would return."""
    if isinstance(reply, AIMessage):
        return reply
    if isinstance(reply, BaseModel):
        return AIMessage(
            content="",
            tool_calls=[{"name": type(reply).__name__, "args": reply.model_dump(), "id": f"call_{next(_ids)}"}],
            usage_metadata={"input_tokens": 100, "output_tokens": 20, "total_tokens": 120},
        )
    if isinstance(reply, str):
        return AIMessage(content=reply, usage_metadata={"input_tokens": 100, "output_tokens": 20, "total_tokens": 120})
    raise TypeError(f"cannot script a reply of type {type(reply).__name__}")


class ScriptedChatModel(BaseChatModel):
    """Replies with ``replies`` in order, or with ``responder(messages, schema_name)`` when given
    (for parallel branches, whose call order is not fixed); ``prompts`` keeps every call's messages."""

    replies: list[Any] = []
    responder: Any = None
    _prompts: list[list[BaseMessage]] = PrivateAttr(default_factory=list)
    _pos: int = PrivateAttr(default=0)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    @property
    def prompts(self) -> list[list[BaseMessage]]:
        """The messages of every call so far."""
        return self._prompts

    @property
    def remaining(self) -> int:
        """Replies not used yet."""
        return len(self.replies) - self._pos

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        names = [getattr(t, "__name__", None) or (t.get("name") if isinstance(t, dict) else str(t)) for t in tools]
        return self.bind(scripted_tools=names, **kwargs)

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
        self._prompts.append(list(messages))
        if self.responder is not None:
            tools = kwargs.get("scripted_tools") or [None]
            reply = self.responder(messages, tools[0])
            if isinstance(reply, BaseException):
                raise reply
            return ChatResult(generations=[ChatGeneration(message=as_message(reply))])
        if self._pos >= len(self.replies):
            raise AssertionError(f"scripted model ran out of replies after {self._pos} calls")
        reply = self.replies[self._pos]
        self._pos += 1
        if isinstance(reply, BaseException):
            raise reply
        return ChatResult(generations=[ChatGeneration(message=as_message(reply))])
