"""The query worker (``python -P sandbox_worker.py GRAPH_FD BUDGET_BYTES``): one frozen kglite graph, untrusted
queries; standard library and kglite only. Frames both ways: an 8-byte big-endian length, then a pickle."""

from __future__ import annotations

import datetime
import json
import os
import pickle
import resource
import signal
import struct
import sys
from typing import Any, BinaryIO

__all__ = ["HEADER", "encode_frame", "main", "proc_status", "read_frame"]

HEADER = struct.Struct(">Q")
_PLAIN_DATES = (datetime.date, datetime.time, datetime.timedelta)  # datetime.datetime is a date


def encode_frame(obj: Any) -> bytes:
    """One frame: length header and pickle."""
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return HEADER.pack(len(data)) + data


def read_frame(stream: BinaryIO) -> Any:
    """Read one frame (blocking); ``None`` at end of input."""
    head = stream.read(HEADER.size)
    size = HEADER.unpack(head)[0] if len(head) == HEADER.size else -1
    data = stream.read(size) if size >= 0 else b""
    return pickle.loads(data) if size >= 0 and len(data) == size else None


class _OverBudget(Exception):
    """The result is ``too_big``, has ``too_many`` values or is ``too_deep`` to send back."""


class _Budget:
    """Turns engine values into plain data while counting their size, number and depth; hides kglite's structural
    keys in nodes (``title``, ``type``, and ``id`` unless the label is in ``keep_id``) and relationships (``type``)."""

    def __init__(self, max_bytes: int, max_values: int, max_depth: int, keep_id: list[str]) -> None:
        self.left, self.values_left, self.max_depth, self.keep_id = max_bytes, max_values, max_depth, set(keep_id)

    def _spend(self, n: int) -> None:
        self.left -= n
        self.values_left -= 1
        if self.left < 0 or self.values_left < 0:
            raise _OverBudget("too_big" if self.left < 0 else "too_many")

    def plain(self, value: Any, depth: int = 1) -> Any:
        if depth > self.max_depth:
            raise _OverBudget("too_deep")
        if value is None or isinstance(value, (bool, int, float)):
            self._spend(9)
            return value
        if isinstance(value, (str, bytes)):
            self._spend(len(value) + 8)
            return value
        if isinstance(value, dict):
            self._spend(8)
            if isinstance(value.get("properties"), dict) and ("labels" in value or "type" in value):  # node or relationship
                node = "labels" in value
                drop = ("title", "type") + (() if (value.get("labels") or [""])[0] in self.keep_id else ("id",))
                props = {k: v for k, v in value["properties"].items() if k not in (drop if node else ("type",))}
                value = {"labels": value["labels"], "properties": props} if node else {**value, "properties": props}
            return {str(k): self.plain(v, depth + 1) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            self._spend(8)
            items = [self.plain(v, depth + 1) for v in value]
            return tuple(items) if isinstance(value, tuple) else items
        if isinstance(value, _PLAIN_DATES):
            self._spend(32)
            fixed = (datetime.timezone, type(None))  # only fixed offsets travel
            if isinstance(value, (datetime.datetime, datetime.time)) and not isinstance(value.tzinfo, fixed):
                offset = value.utcoffset()
                return value.replace(tzinfo=datetime.timezone(offset) if offset is not None else None)
            return value
        text = str(value)
        self._spend(len(text) + 8)
        return text


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:2000]


def _run_query(kglite: Any, frozen: Any, request: dict[str, Any]) -> tuple:
    """One query -> ("rows", columns, rows, total, warnings) or ("error", kind, message)."""
    budget = _Budget(int(request["max_result_bytes"]), int(request["max_values"]), int(request["max_value_depth"]),
                     list(request["keep_id"]))
    try:
        rv = frozen.cypher(request["cypher"], timeout_ms=int(request["timeout_ms"]), row_limit=int(request["row_cap"]))
        if isinstance(rv, str):  # `… FORMAT CSV` makes kglite return text instead of rows
            return ("error", "format", "")
        columns = [str(c) for c in (getattr(rv, "columns", None) or [])]
        rows = [{str(k): budget.plain(v) for k, v in row.items()} for row in rv]
        diag = getattr(rv, "diagnostics", None) or {}
        total = diag.get("total_rows") if isinstance(diag, dict) else None
        warnings = [str(w)[:2000] for w in (getattr(rv, "warnings", None) or [])][:20]
        return ("rows", columns, rows, int(total) if total is not None else len(rows), warnings)
    except kglite.CypherTimeoutError as exc:
        return ("error", "timeout", _first_line(exc))
    except kglite.ReadOnlyError as exc:
        return ("error", "refused", _first_line(exc))
    except _OverBudget as exc:
        return ("error", exc.args[0], "")
    except RecursionError:
        return ("error", "too_deep", "")
    except MemoryError:
        return ("error", "memory", "")
    except Exception as exc:  # every engine failure is the query's error, reported as text
        return ("error", "error", (str(exc).strip() or type(exc).__name__)[:4000])


def proc_status(pid: int | str, *keys: str) -> list[int]:
    """The ``keys`` of ``/proc/<pid>/status`` (``VmRSS``, ``VmHWM``, …) in bytes; 0 where absent."""
    found = dict.fromkeys(keys, 0)
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            key, _, value = line.partition(":")
            if key in found:
                found[key] = int(value.split()[0]) * 1024
    return list(found.values())


def _send(replies: BinaryIO, frame: bytes) -> None:
    replies.write(frame)
    replies.flush()


def main(argv: list[str]) -> int:
    """Load the graph named in ``argv``, then serve queries until stdin closes."""
    graph_fd, memory_budget = int(argv[1]), int(argv[2])
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when this process ends
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a crash must not leave a gigabyte core file behind
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # whatever the engine prints goes to the stderr file, never into the replies
    sys.stdout = sys.stderr

    import kglite

    kglite.set_query_warning_policy("silent")
    with open(f"/proc/self/fd/{graph_fd}", "rb") as fh:  # an offset of its own (the fd's is shared with the parent)
        data = fh.read()
    if data[:1] == b"[":  # the script's statements: load them, then leave the graph for later workers
        source, statements = json.loads(data)
        graph = kglite.KnowledgeGraph()
        for line, text in statements:
            try:
                graph.cypher(text)
            except Exception as exc:  # kglite raises several classes; all mean "this statement failed"
                _send(replies, encode_frame(("script_error", source, line, _first_line(exc), text)))
                return 1
        os.ftruncate(graph_fd, 0)
        os.pwrite(graph_fd, graph.to_bytes(), 0)
    else:
        graph = kglite.from_bytes(data)
    os.close(graph_fd)
    graph.read_only(True)
    frozen = graph.freeze()
    if memory_budget > 0:
        limit = proc_status("self", "VmData")[0] + memory_budget
        _, hard = resource.getrlimit(resource.RLIMIT_DATA)
        if hard != resource.RLIM_INFINITY:
            limit = min(limit, hard)
        resource.setrlimit(resource.RLIMIT_DATA, (limit, hard))
    cpu_hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
    _send(replies, encode_frame(("ready", {"pid": os.getpid(), "nodes": int(frozen.node_count())})))
    while True:
        if (request := read_frame(sys.stdin.buffer)) is None:
            return 0
        used = resource.getrusage(resource.RUSAGE_SELF)
        cpu_cap = int(used.ru_utime + used.ru_stime + 3 * float(request["hard_timeout_s"]) + 10)
        if cpu_hard == resource.RLIM_INFINITY or cpu_cap <= cpu_hard:
            resource.setrlimit(resource.RLIMIT_CPU, (cpu_cap, cpu_hard))
        reply = _run_query(kglite, frozen, request)
        try:
            frame = encode_frame(reply)
        except (MemoryError, RecursionError):
            frame = encode_frame(("error", "too_big", ""))
        if len(frame) > int(request["max_result_bytes"]) + 65536:
            frame = encode_frame(("error", "too_big", ""))
        _send(replies, frame)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
