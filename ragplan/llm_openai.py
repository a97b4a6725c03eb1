"""The chat model for OpenAI-compatible endpoints: LangChain's ``ChatOpenAI``, with a cheaper plain call.

A batch run's CPU is spent mostly between the LLM's replies, and at a high concurrency that CPU is what
keeps requests from being in flight (``benchmarks/batch.py``). Of the ~2 ms of CPU that one
``ChatOpenAI.invoke`` of a tool-calling decision costs, about half is the OpenAI SDK's typed layer
around the HTTP request: ``create()`` walks the whole request (messages, tool schema) through its
TypedDict ``transform`` (which renames no key and converts no value in a chat completion that
LangChain built from plain dicts and strings), then builds a pydantic ``ChatCompletion`` from the reply,
which LangChain turns straight back into a dict (``model_dump``).

:class:`OpenAICompatibleChat` sends the same request through the same SDK client, by its documented
"undocumented endpoint" call (``client.post(path, body=…, cast_to=object)``): the same HTTP body,
headers, authentication, timeout, retries with backoff (``max_retries``, ``Retry-After``), the same
``openai`` exceptions for every status and connection error (which LangChain maps as it always
does), and LangChain's own reading of the reply (``_create_chat_result`` on the JSON). It skips the
request transform and the response models. Only plain, non-streaming chat-completion calls take this
way; anything else — streaming, ``response_format`` (``json_schema`` structured output), the
Responses API — is ``ChatOpenAI``'s own code, unchanged. ``tests/test_openai_chat.py`` checks that
both ways send the same body and read replies and errors the same.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, NoReturn

import openai
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatResult
from langchain_openai import ChatOpenAI
from langchain_openai.chat_models import base as _lc_openai

__all__ = ["OpenAICompatibleChat"]

_request_options: Callable[..., Any] | None
try:  # the SDK's own request options (headers, query, extra body, timeout, bearer auth)
    from openai._base_client import make_request_options as _request_options
except ImportError:  # pragma: no cover - an SDK without it: every call goes through ChatOpenAI's own path
    _request_options = None

#: Payload keys that are request options of ``create()``, not fields of the JSON body.
_OPTION_KEYS = ("extra_headers", "extra_query", "extra_body", "timeout")


class OpenAICompatibleChat(ChatOpenAI):
    """``ChatOpenAI`` whose plain chat-completion calls skip the SDK's request transform and response models."""

    def _direct(self, payload: dict[str, Any], client: Any) -> tuple[dict[str, Any], Any] | None:
        """The JSON body and request options of a plain call, or None when ``ChatOpenAI``'s own path must take it."""
        if (_request_options is None or client is None or payload.get("stream") or "response_format" in payload
                or self.include_response_headers or self._use_responses_api(payload)):
            return None
        options = {k: payload.pop(k) for k in _OPTION_KEYS if k in payload}
        return payload, _request_options(**options, security={"bearer_auth": True})

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        """A chat completion: the direct way for a plain call, ``ChatOpenAI``'s own for anything else."""
        direct = self._direct(self._get_request_payload(messages, stop=stop, **kwargs),
                              self.root_client if self.client is not None else None)
        if direct is None:
            return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)
        try:
            reply = self.root_client.post("/chat/completions", body=direct[0], cast_to=object, options=direct[1])
        except openai.APIError as e:
            _raise_mapped(e)
        return self._create_chat_result(_as_json(reply), {})

    async def _agenerate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                         run_manager: AsyncCallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        """:meth:`_generate` through the async client."""
        direct = self._direct(self._get_request_payload(messages, stop=stop, **kwargs), self.root_async_client)
        if direct is None:
            return await super()._agenerate(messages, stop=stop, run_manager=run_manager, **kwargs)
        try:
            reply = await self.root_async_client.post("/chat/completions", body=direct[0], cast_to=object,
                                                      options=direct[1])
        except openai.APIError as e:
            _raise_mapped(e)
        return self._create_chat_result(_as_json(reply), {})


def _raise_mapped(e: openai.APIError) -> NoReturn:
    """Raise what ``ChatOpenAI`` raises for this SDK error (LangChain's typed errors: rate limit, context overflow …)."""
    if isinstance(e, openai.BadRequestError):
        _lc_openai._handle_openai_bad_request(e)
    _lc_openai._handle_openai_api_error(e)
    raise e  # (both always raise)


def _as_json(reply: Any) -> Any:
    """The reply as JSON data: the SDK hands back the text of a body that was not labelled JSON."""
    if isinstance(reply, (str, bytes)):  # read it as JSON all the same: an HTML page, an empty or cut-off body
        return json.loads(reply)  # raise json.JSONDecodeError (ragplan.llm_retry: a malformed reply, retried)
    return reply
