"""Checkpointed runs: where their SQLite checkpoints live, how they are read back, what is kept to continue them.

``ragplan ask`` keeps a LangGraph checkpoint after every node in one SQLite file (:class:`SqliteSaver`), one
thread per run, beside a table of ours, ``ragplan_runs``: per thread the method, question, graph input and the
JSON-able, non-secret context settings that ``ragplan resume ID`` needs. The file is ``--checkpoint-db``,
``$RAGPLAN_CHECKPOINT_DB`` or ``${XDG_STATE_HOME:-~/.local/state}/ragplan/checkpoints.sqlite``; a
``postgresql://`` URL there keeps both in PostgreSQL instead (:class:`PostgresSaver`, docs/deploy.md). Checkpoints
are read back allowing exactly the registered graphs' state classes (:func:`checkpoint_serde`).
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import time
import uuid
from contextlib import AbstractContextManager, closing, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, get_args, get_origin, get_type_hints

from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver
from pydantic import BaseModel, Field

from ragplan.family import context_settings
from ragplan.redact import REDACTED, configured_keys, redact
from ragplan.registry import families

if TYPE_CHECKING:  # (psycopg is imported only when a PostgreSQL URL is used)
    from langgraph.checkpoint.postgres import PostgresSaver

__all__ = ["DB_ENV", "default_checkpoint_db", "checkpoint_db", "state_classes", "StateSerializer", "checkpoint_serde",
           "open_saver", "RunInfo", "RunStore", "UnknownThread", "context_settings", "new_thread_id", "redact", "REDACTED",
           "POSTGRES_SCHEMES", "connect_postgres", "connect_sqlite", "saver_on"]

_SECRET_BYTES = re.compile(rb"://[^/\s@]*:[^/\s@]+@|[?&][\w.-]*(?:key|token|password|secret)=", re.I)

DB_ENV = "RAGPLAN_CHECKPOINT_DB"
"""Environment variable naming the checkpoint file of ``ragplan ask`` / ``ragplan resume``."""


def _redacted(value: Any) -> Any:
    """``value`` with :func:`redact` applied to every string in it (dicts, lists, tuples, pydantic models)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: _redacted(v) for k, v in value.items()}
    if type(value) in (list, tuple):
        return type(value)(_redacted(v) for v in value)
    if isinstance(value, BaseModel):
        return value.model_copy(update={k: _redacted(getattr(value, k)) for k in type(value).model_fields})
    return value


class UnknownThread(KeyError):
    """No run with this thread id in the checkpoint file."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown thread"


def default_checkpoint_db() -> Path:
    """``${XDG_STATE_HOME:-~/.local/state}/ragplan/checkpoints.sqlite``."""
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(state) / "ragplan" / "checkpoints.sqlite"


POSTGRES_SCHEMES = ("postgresql://", "postgres://")
"""The URLs that name a PostgreSQL database instead of a checkpoint file."""
CONNECT_TIMEOUT_S = 10
"""Seconds to reach PostgreSQL unless the URL (``connect_timeout=``) or ``$PGCONNECT_TIMEOUT`` says otherwise."""


def checkpoint_db(path: str | os.PathLike[str] | None = None) -> Path | str:
    """The checkpoint file (a Path) or PostgreSQL URL (a str): ``path`` if given, else ``$RAGPLAN_CHECKPOINT_DB``,
    else :func:`default_checkpoint_db`; ValueError for any other URL, or a PostgreSQL URL libpq cannot read."""
    chosen = str(path or os.environ.get(DB_ENV) or default_checkpoint_db())
    if chosen.lower().startswith(POSTGRES_SCHEMES):
        from psycopg import ProgrammingError
        from psycopg.conninfo import conninfo_to_dict

        try:
            conninfo_to_dict(chosen)
        except ProgrammingError as exc:
            raise ValueError(f"--checkpoint-db {redact(chosen)}: not a valid PostgreSQL URL: {redact(str(exc))}") from None
        return chosen
    if re.match(r"[A-Za-z][\w+.-]*://", chosen):
        raise ValueError(f"--checkpoint-db {redact(chosen)}: neither a file path nor a PostgreSQL URL "
                         f"({' or '.join(s + '…' for s in POSTGRES_SCHEMES)})")
    return Path(chosen).expanduser()


def connect_postgres(url: str) -> Any:
    """A connection to PostgreSQL as LangGraph's savers want it (autocommit, dict rows); a bounded connect timeout,
    and ConnectionError naming the server when it cannot be reached."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict, make_conninfo
    from psycopg.rows import dict_row

    timed = "connect_timeout" in conninfo_to_dict(url) or os.environ.get("PGCONNECT_TIMEOUT")
    info = make_conninfo(url, **({} if timed else {"connect_timeout": CONNECT_TIMEOUT_S}))
    try:
        return psycopg.Connection.connect(info, autocommit=True, prepare_threshold=0, row_factory=dict_row)
    except psycopg.OperationalError as exc:
        raise ConnectionError(f"cannot connect to the checkpoint database {redact(url)}: "
                              + redact(" ".join(str(exc).split()))) from None


def _classes_in(tp: Any, seen: set[type]) -> None:
    """Add the pydantic classes reachable from the type ``tp`` (lists, dicts, unions, Annotated, fields)."""
    for arg in get_args(tp):
        _classes_in(arg, seen)
    if get_origin(tp) is None and isinstance(tp, type) and issubclass(tp, BaseModel) and tp not in seen:
        seen.add(tp)
        for f in tp.model_fields.values():
            _classes_in(f.annotation, seen)


def state_classes() -> set[type]:
    """Every pydantic class that can appear in the state of a registered graph (the checkpoint allowlist)."""
    seen: set[type] = set()
    for fam in families():
        for spec in fam.graphs:
            schema = spec.build().state_schema
            for hint in get_type_hints(schema, include_extras=True).values():
                _classes_in(hint, seen)
        _classes_in(fam.result, seen)
    return seen


class StateSerializer:
    """LangGraph's :class:`JsonPlusSerializer`, reading back only the registered graphs' state classes (an allowlist
    made at the first read, so a fresh run, which only writes, never builds every graph for it)."""

    def __init__(self) -> None:
        """A serializer; the credentials to mask are :func:`configured_keys` at each write (an eval run reads them once:
        :func:`ragplan.redact.keys_read_once`)."""
        self._writer = JsonPlusSerializer()
        self._reader: JsonPlusSerializer | None = None

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        """``obj`` as LangGraph's serializer writes it, its credentials redacted (:func:`redact`)."""
        kind, data = self._writer.dumps_typed(obj)
        keys = [k.encode() for k in configured_keys()]
        if any(k in data for k in keys) or _SECRET_BYTES.search(data):  # (rare: the walk only then)
            kind, data = self._writer.dumps_typed(_redacted(obj))
            for k in keys:  # a key in an object the walk does not open: masked in place (lengths kept)
                data = data.replace(k, b"*" * len(k))
        return kind, data

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        """The object back, rebuilding only the allowed state classes."""
        if self._reader is None:
            allowed = sorted((c.__module__, c.__name__) for c in state_classes())
            self._reader = JsonPlusSerializer(allowed_msgpack_modules=allowed)
        return self._reader.loads_typed(data)


_serde = StateSerializer()


def checkpoint_serde() -> StateSerializer:
    """The serializer of ragplan's checkpointers (one per process)."""
    return _serde


def connect_sqlite(path: Path) -> sqlite3.Connection:
    """A connection to the SQLite file ``path`` for every thread (WAL); closed again when the file is no database."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(str(path), check_same_thread=False, timeout=30)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: a killed process loses nothing committed; no fsync per commit
    except BaseException:
        conn.close()
        raise
    return conn


@contextmanager
def open_saver(path: str | os.PathLike[str] | None = None) -> Iterator[SqliteSaver | PostgresSaver]:
    """A :class:`SqliteSaver` over the checkpoint file (created with its folder when missing), or a
    :class:`PostgresSaver` (its tables set up) for a PostgreSQL URL; closed on exit."""
    db = checkpoint_db(path)
    with closing(connect_postgres(db) if isinstance(db, str) else connect_sqlite(db)) as conn:
        yield saver_on(conn, checkpoint_serde())


def saver_on(conn: Any, serde: StateSerializer, schema: str = "") -> SqliteSaver | PostgresSaver:
    """A :class:`SqliteSaver` on a SQLite connection, else a :class:`PostgresSaver` (its tables in ``schema`` when
    given, created when missing); its tables set up."""
    saver: SqliteSaver | PostgresSaver
    if isinstance(conn, sqlite3.Connection):
        saver = SqliteSaver(conn, serde=serde)
    else:
        from langgraph.checkpoint.postgres import PostgresSaver

        if schema:
            conn.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
            conn.execute(f"SET search_path TO {schema}")  # (the saver's tables go there)
        saver = PostgresSaver(conn, serde=serde)
    saver.setup()
    return saver


def new_thread_id() -> str:
    """A fresh thread id (12 hex digits: short enough to type, unique enough for one user's runs)."""
    return uuid.uuid4().hex[:12]


class RunInfo(BaseModel):
    """What is kept beside a thread's checkpoints to continue it."""

    thread_id: str = Field(description="The LangGraph thread of the run.")
    method: str = Field(description="The graph that runs.")
    question: str = Field(description="The question asked.")
    inputs: dict[str, Any] = Field(default_factory=dict, description="The whole graph input (question and extra inputs).")
    settings: dict[str, Any] = Field(default_factory=dict, description="The context's JSON-able settings (model, base_url …).")
    status: str = Field(default="running", description="running, paused (waiting for a plan review) or finished.")
    created: float = Field(default=0.0, description="When the run started (Unix time).")
    updated: float = Field(default=0.0, description="When the run last ran (Unix time).")


class RunStore(AbstractContextManager["RunStore"]):
    """The ``ragplan_runs`` table in a checkpoint file or PostgreSQL database (use as a context manager, or
    :meth:`close`)."""

    def __init__(self, path: str | os.PathLike[str] | None = None, *,
                 conn: sqlite3.Connection | Any = None) -> None:
        """The table in the checkpoint file ``path`` (:func:`checkpoint_db`), or on ``conn``, a saver's connection."""
        db = checkpoint_db(path)
        self.path = redact(db) if isinstance(db, str) else db  # (what messages name)
        self._own = conn is None
        self.conn = conn if conn is not None else connect_postgres(db) if isinstance(db, str) else connect_sqlite(db)
        self._execute("CREATE TABLE IF NOT EXISTS ragplan_runs (thread_id TEXT PRIMARY KEY, method TEXT NOT NULL, "
                      "question TEXT NOT NULL, inputs TEXT NOT NULL, settings TEXT NOT NULL, status TEXT NOT NULL, "
                      "created DOUBLE PRECISION NOT NULL, updated DOUBLE PRECISION NOT NULL)")

    def _execute(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """Run one statement in a transaction of its own (``?`` placeholders, as SQLite writes them); its rows."""
        if isinstance(self.conn, sqlite3.Connection):
            with self.conn:
                return self.conn.execute(sql, params).fetchall()
        from psycopg.rows import tuple_row

        with self.conn.cursor(row_factory=tuple_row) as cur:  # (the saver's connection: autocommit)
            cur.execute(sql.replace("?", "%s"), params)  # type: ignore[arg-type]
            return cur.fetchall() if cur.description else []

    def close(self) -> None:
        """Close the connection when this store opened it."""
        if self._own:
            self.conn.close()

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def add(self, info: RunInfo) -> None:
        """Record a new run; a thread id already in the file is a ValueError (a thread holds one run)."""
        info.updated = time.time()
        info.created = info.created or info.updated
        row = (info.thread_id, info.method, redact(info.question), redact(json.dumps(info.inputs, default=str)),
               redact(json.dumps(info.settings)), info.status, info.created, info.updated)
        try:
            self._execute("INSERT INTO ragplan_runs VALUES (?, ?, ?, ?, ?, ?, ?, ?)", row)
        except self.conn.IntegrityError:  # (a thread id already recorded; DB-API: each connection names its class)
            raise ValueError(f"thread {info.thread_id} already exists in {self.path}; continue it with "
                             f"`ragplan resume {info.thread_id}` or choose another --thread") from None

    def get(self, thread_id: str) -> RunInfo:
        """The run of ``thread_id`` (:class:`UnknownThread` when the file has none)."""
        if not (rows := self._execute("SELECT * FROM ragplan_runs WHERE thread_id = ?", (thread_id,))):
            raise UnknownThread(f"no run with thread id {thread_id!r} in {self.path}")
        return self._info(rows[0])

    def set_status(self, thread_id: str, status: str) -> None:
        """Record where the run stands after an invocation (running, paused, finished)."""
        self._execute("UPDATE ragplan_runs SET status = ?, updated = ? WHERE thread_id = ?", (status, time.time(), thread_id))

    def recent(self, limit: int = 20) -> list[RunInfo]:
        """The runs last run, newest first."""
        rows = self._execute("SELECT * FROM ragplan_runs ORDER BY updated DESC LIMIT ?", (limit,))
        return [self._info(r) for r in rows]

    @staticmethod
    def _info(row: tuple[Any, ...]) -> RunInfo:
        info = dict(zip(RunInfo.model_fields, row))  # the table's columns are RunInfo's fields, in order
        return RunInfo(**{**info, "inputs": json.loads(info["inputs"]), "settings": json.loads(info["settings"])})
