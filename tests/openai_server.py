"""A scripted OpenAI-compatible HTTP server for tests (stdlib only, 127.0.0.1, no LLM).

It answers ``POST /v1/chat/completions`` (plain JSON, or SSE chunks when the request says
``"stream": true``) and ``GET /v1/models`` from a queue of scripted replies, one per request:

* a pydantic object — answered as one ``tool_calls`` choice named after its class with its JSON as
  arguments, which is what ``with_structured_output(method="function_calling")`` parses. When the
  request offers no tools (``text`` / ``json_schema`` structured output) the JSON is sent as the
  message content instead;
* ``ToolReply(name, args)`` — the same with an explicit tool name (what the JSON script holds);
  ``ToolReply(name, {}, raw='{"x": ')`` sends ``raw`` as the call's arguments text (invalid JSON);
* a string — a plain text message;
* ``Fault(status=429)`` / ``Fault(status=500)`` — an OpenAI-style error (with a short
  ``retry-after-ms`` so client retries are fast; ``retry_after_s`` sends a ``Retry-After`` header in
  seconds instead); ``Fault(delay_s=5)`` holds the request for that long first (to test client
  timeouts), then answers ``status`` (504 by default) or, with ``reply=``, that reply;
* ``Fault(body='{"choices": [')`` — a malformed reply: that raw body with ``status`` (200 by default),
  e.g. truncated JSON, JSON without ``choices``, or an empty body (``content_type=`` labels it otherwise
  than JSON, as a proxy's HTML page is).

Every request is recorded (body, headers, the tool it forced, the usage sent back), and every
answer carries ``usage`` (prompt tokens ~ prompt chars / 4, completion tokens ~ output chars / 4).
When the queue is empty the server answers 500 with ``x-should-retry: false``, so a run that asks
for more than was scripted fails at once and visibly.

In-process::

    with OpenAIStub(replies=[Plan(steps=["a"]), "hello"]) as stub:
        ChatOpenAI(base_url=stub.base_url, api_key="x", model="m")...
        stub.requests[0].forced_tool  # -> "Plan"

From another process (e.g. for ``langgraph dev``)::

    python -m tests.openai_server --port 8765 --script replies.json

where ``replies.json`` lists ``{"tool": "Plan", "args": {...}}``, ``{"text": "..."}`` or
``{"fault": {"status": 429}}``. It prints ``READY <base_url>`` when listening; the recorded requests
are served at ``GET /_stub/requests``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import threading
import time
from dataclasses import asdict, dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["Fault", "ToolReply", "RecordedRequest", "OpenAIStub", "load_script"]


@dataclass
class ToolReply:
    """A tool call with an explicit function name and arguments."""

    name: str
    args: dict[str, Any]
    raw: str | None = None
    """The arguments text sent as is instead of ``args`` as JSON (e.g. JSON cut off)."""


@dataclass
class Fault:
    """An endpoint failure: wait ``delay_s``, then answer ``status`` (or ``reply`` when given)."""

    status: int | None = None
    delay_s: float = 0.0
    message: str = "scripted fault"
    retry_after_ms: int | None = 20
    reply: Any = None
    body: str | bytes | None = None
    """A raw response body sent as is (a malformed 200 reply), instead of an error or a reply."""
    retry_after_s: float | None = None
    """Send ``Retry-After: <seconds>`` (and no ``retry-after-ms``) with the error."""
    content_type: str = "application/json"
    """The ``Content-Type`` a raw ``body`` is sent with (a proxy's HTML page says ``text/html`` …)."""


@dataclass
class RecordedRequest:
    """One request the stub received, and what it answered."""

    path: str
    body: dict[str, Any]
    headers: dict[str, str]
    answered: str = ""
    usage: dict[str, int] = field(default_factory=dict)

    @property
    def tools(self) -> list[str]:
        """Names of the tools the request offered."""
        return [t.get("function", {}).get("name", "") for t in self.body.get("tools") or []]

    @property
    def forced_tool(self) -> str | None:
        """The tool named by ``tool_choice``, if one was forced."""
        choice = self.body.get("tool_choice")
        if isinstance(choice, dict):
            return choice.get("function", {}).get("name")
        return None

    @property
    def prompt_text(self) -> str:
        """All message contents of the request joined, for assertions on prompts."""
        return "\n".join(_content_text(m.get("content")) for m in self.body.get("messages") or [])


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def _as_reply(item: Any) -> Any:
    """Normalise a scripted item: pydantic objects become ToolReply, JSON script dicts their object."""
    if isinstance(item, Fault):
        if item.reply is not None:
            item.reply = _as_reply(item.reply)
        return item
    if isinstance(item, (ToolReply, str)):
        return item
    if hasattr(item, "model_dump"):
        return ToolReply(type(item).__name__, item.model_dump(mode="json"))
    if isinstance(item, dict):
        if "tool" in item:
            return ToolReply(item["tool"], item.get("args") or {})
        if "text" in item:
            return str(item["text"])
        if "fault" in item:
            return _as_reply(Fault(**item["fault"]))
    raise TypeError(f"cannot script a reply of type {type(item).__name__}: {item!r}")


def load_script(path: str) -> list[Any]:
    """Replies from a JSON script file (a list of tool / text / fault items)."""
    with open(path, encoding="utf-8") as fh:
        return [_as_reply(x) for x in json.load(fh)]


class OpenAIStub:
    """The scripted server; use as a context manager or call ``start()`` / ``stop()``."""

    def __init__(self, replies: list[Any] | None = None, *, port: int = 0, model: str = "stub-model",
                 responder: Any = None, keep_alive: bool = False) -> None:
        """``responder(request) -> reply``, when given, answers every request instead of the queue.

        ``keep_alive`` serves HTTP/1.1 with persistent connections, as real endpoints do (the benchmarks use it:
        a new TCP connection per request costs client and server CPU that no real run pays); by default one
        request per connection (HTTP/1.0), the simplest for tests."""
        self.keep_alive = keep_alive
        self.replies: list[Any] = [_as_reply(r) for r in replies or []]
        self.responder = responder
        self.requests: list[RecordedRequest] = []
        self.model = model
        self._port = port
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ids = itertools.count(1)
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> "OpenAIStub":
        stub = self

        class Handler(_Handler):
            owner = stub
            protocol_version = "HTTP/1.1" if stub.keep_alive else "HTTP/1.0"
            # headers and body are two writes: without TCP_NODELAY a kept-alive connection waits for the
            # client's delayed ACK (~40 ms) before the body goes out
            disable_nagle_algorithm = stub.keep_alive

        self._server = _Server(("127.0.0.1", self._port), Handler)
        self._server.daemon_threads = True
        self._server.block_on_close = False  # a held (delayed) request must not block stop()
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02},  # (stop()
                                        name="openai-stub", daemon=True)  # waits for the poll: 0.5 s by default)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> "OpenAIStub":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._server is not None, "stub not started"
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        """The OpenAI base URL, ``http://127.0.0.1:PORT/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def remaining(self) -> int:
        """Scripted replies not used yet."""
        return len(self.replies)

    def add(self, *replies: Any) -> None:
        """Append replies to the queue."""
        with self._lock:
            self.replies.extend(_as_reply(r) for r in replies)

    def script(self, replies: Any = (), responder: Any = None) -> "OpenAIStub":
        """Answer afresh: ``replies`` queued (or ``responder``), no reply or request of an earlier script left (one
        stub for several tests instead of a server started and stopped per test)."""
        with self._lock:
            self.replies = [_as_reply(r) for r in replies]
            self.responder = responder
            self.requests.clear()
        return self

    # -- answering -------------------------------------------------------------------------------
    def _next(self, rec: RecordedRequest) -> Any:
        with self._lock:
            self.requests.append(rec)
            if self.responder is not None:
                return _as_reply(self.responder(rec))
            return self.replies.pop(0) if self.replies else None

    def _completion(self, body: dict[str, Any], reply: Any) -> tuple[dict[str, Any], dict[str, int]]:
        """The chat.completion object for ``reply`` (a ToolReply or text) and the usage it reports."""
        offers_tools = bool(body.get("tools"))
        message: dict[str, Any] = {"role": "assistant", "content": None}
        if isinstance(reply, ToolReply) and offers_tools:
            args = reply.raw if reply.raw is not None else json.dumps(reply.args)
            message["tool_calls"] = [{"id": f"call_{next(self._ids)}", "type": "function",
                                      "function": {"name": reply.name, "arguments": args}}]
            finish, out = "tool_calls", args
        else:
            out = (reply.raw if reply.raw is not None else json.dumps(reply.args)) if isinstance(reply, ToolReply) else str(reply)
            message["content"], finish = out, "stop"
        prompt = sum(len(_content_text(m.get("content"))) for m in body.get("messages") or [])
        usage = {"prompt_tokens": max(1, prompt // 4), "completion_tokens": max(1, len(out) // 4)}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        completion = {
            "id": f"chatcmpl-stub-{next(self._ids)}", "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model") or self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
            "usage": usage,
        }
        return completion, usage


def _chunks(completion: dict[str, Any], include_usage: bool) -> list[dict[str, Any]]:
    """The ``chat.completion.chunk`` objects that stream ``completion``."""
    base = {k: completion[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
    choice, msg = completion["choices"][0], completion["choices"][0]["message"]

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return base | {"choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]}

    out = [chunk({"role": "assistant", "content": "" if msg.get("tool_calls") else None})]
    for i, call in enumerate(msg.get("tool_calls") or []):
        head = {"index": i, "id": call["id"], "type": "function", "function": {"name": call["function"]["name"], "arguments": ""}}
        out.append(chunk({"tool_calls": [head]}))
        args = call["function"]["arguments"]
        for j in range(0, len(args), 40):  # arguments arrive in pieces, as from a real endpoint
            out.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": args[j:j + 40]}}]}))
    if msg.get("content"):
        text = msg["content"]
        for j in range(0, len(text), 40):
            out.append(chunk({"content": text[j:j + 40]}))
    out.append(chunk({}, choice["finish_reason"]))
    if include_usage:
        out.append(base | {"choices": [], "usage": completion["usage"]})
    return out


class _Server(ThreadingHTTPServer):
    """The stub's HTTP server: a listen backlog deep enough for a batch run's concurrency (the default 5
    drops connection attempts past it, which the client sees as a one-second stall)."""

    request_queue_size = 256


class _Handler(BaseHTTPRequestHandler):
    owner: OpenAIStub
    protocol_version = "HTTP/1.0"  # one request per connection: simple and robust for tests

    def log_message(self, fmt: str, *args: Any) -> None:  # quiet
        pass

    def _json(self, status: int, obj: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        kind = "rate_limit_error" if status == 429 else "server_error" if status >= 500 else "invalid_request_error"
        self._json(status, {"error": {"message": message, "type": kind, "param": None, "code": None}}, headers)

    def do_GET(self) -> None:  # noqa: N802
        path = self.path.rstrip("/")
        if path.endswith("/models"):
            self._json(200, {"object": "list", "data": [
                {"id": self.owner.model, "object": "model", "created": 0, "owned_by": "openai-stub"}]})
        elif path == "/_stub/requests":
            self._json(200, [asdict(r) for r in self.owner.requests])
        else:
            self._error(404, f"no route GET {self.path}")

    def do_POST(self) -> None:  # noqa: N802
        try:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        except json.JSONDecodeError as exc:
            return self._error(400, f"request body is not JSON: {exc}")
        if not self.path.rstrip("/").endswith("/chat/completions"):
            return self._error(404, f"no route POST {self.path}")
        rec = RecordedRequest(self.path, body, {k.lower(): v for k, v in self.headers.items()})
        reply = self.owner._next(rec)
        try:
            self._answer(body, reply, rec)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout): nothing to do
            rec.answered += " (client gone)"

    def _answer(self, body: dict[str, Any], reply: Any, rec: RecordedRequest) -> None:
        if reply is None:
            rec.answered = "exhausted"
            return self._error(500, "openai stub: no scripted reply left for this request", {"x-should-retry": "false"})
        if isinstance(reply, Fault):
            if reply.delay_s and self.owner._stop.wait(reply.delay_s):
                return
            if reply.body is not None:
                rec.answered = f"malformed {reply.status or 200}"
                data = reply.body if isinstance(reply.body, bytes) else reply.body.encode()
                self.send_response(reply.status or 200)
                self.send_header("Content-Type", reply.content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                return None
            if reply.reply is None:
                status = reply.status or 504
                rec.answered = f"fault {status}"
                if reply.retry_after_s is not None:
                    headers = {"retry-after": f"{reply.retry_after_s:g}"}
                else:
                    headers = {"retry-after-ms": str(reply.retry_after_ms)} if reply.retry_after_ms is not None else {}
                return self._error(status, f"{reply.message} ({status})", headers)
            reply = reply.reply
        completion, rec.usage = self.owner._completion(body, reply)
        rec.answered = "tool_calls" if completion["choices"][0]["message"].get("tool_calls") else "text"
        if not body.get("stream"):
            return self._json(200, completion)
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        rec.answered += " (stream)"
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        if self.protocol_version != "HTTP/1.0":  # no length: the end of the stream is the end of the connection
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        for c in _chunks(completion, include_usage):
            self.wfile.write(f"data: {json.dumps(c)}\n\n".encode())
            self.wfile.flush()
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()


def main(argv: list[str] | None = None) -> None:
    """Serve a JSON script until interrupted (for tests that run the client in another process)."""
    ap = argparse.ArgumentParser(prog="python -m tests.openai_server", description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0 = any free port)")
    ap.add_argument("--script", required=True, help="JSON list of {tool,args} / {text} / {fault} replies")
    ap.add_argument("--model", default="stub-model", help="model id listed by GET /v1/models")
    a = ap.parse_args(argv)
    stub = OpenAIStub(load_script(a.script), port=a.port, model=a.model).start()
    print(f"READY {stub.base_url}", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        stub.stop()


if __name__ == "__main__":
    main()
