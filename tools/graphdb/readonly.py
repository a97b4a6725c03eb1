"""The statement check that keeps LLM-written Cypher read-only.

Engines have read-only modes, but they are not enough on their own: kglite's read-only graph still
runs ``LOAD CSV FROM "file:///etc/passwd"`` and any ``CALL`` procedure. So every query the graph-DB
tool runs passes this check first, whatever the backend, and the backend's own read-only mode
(kglite's frozen snapshot, Neo4j's read transaction) is the second wall.

The check works on the query's tokens after string literals, backtick-quoted names and comments are
removed, so a keyword inside a string (``WHERE n.name = "CREATE"``) or a property called ``set``
(``n.set``, ``{set: 1}``) does not trip it. It refuses:

* several statements (a ``;`` followed by more text);
* any write clause: CREATE, MERGE, SET, DELETE, DETACH, REMOVE, DROP, FOREACH, ALTER, RENAME,
  GRANT, DENY, REVOKE, LOAD (``LOAD CSV``), ``IN TRANSACTIONS``, ``PERIODIC COMMIT``,
  and administration commands (START, STOP, TERMINATE, ENABLE);
* a statement that does not start with a read clause (MATCH, OPTIONAL MATCH, WITH, UNWIND, RETURN,
  CALL, EXPLAIN, PROFILE, SHOW);
* a ``CALL`` of any procedure outside a small allow-list of schema procedures (``CALL { … }``
  subqueries are allowed, their bodies are checked like the rest).
"""

from __future__ import annotations

import re

__all__ = ["QueryRefused", "check_read_only", "strip_literals"]


class QueryRefused(ValueError):
    """A query was refused before it reached the store because it could write or escape."""


#: Clause keywords that write, load files or administer the server.
WRITE_KEYWORDS = frozenset(
    {
        "CREATE", "MERGE", "SET", "DELETE", "DETACH", "REMOVE", "DROP", "FOREACH", "ALTER",
        "RENAME", "GRANT", "DENY", "REVOKE", "LOAD", "START", "STOP", "TERMINATE", "ENABLE",
        "INSERT", "DEALLOCATE", "REALLOCATE",
    }
)
#: Keywords a read statement may start with.
READ_STARTS = frozenset({"MATCH", "OPTIONAL", "WITH", "UNWIND", "RETURN", "CALL", "EXPLAIN", "PROFILE", "SHOW"})
#: Procedures that only describe the schema; every other ``CALL proc()`` is refused.
ALLOWED_PROCEDURES = frozenset(
    {
        "db.labels", "db.relationshiptypes", "db.propertykeys", "db.schema.visualization",
        "db.schema.nodetypeproperties", "db.schema.reltypeproperties",
    }
)

_TOKEN = re.compile(
    r"""
      (?P<comment>//[^\n]*|/\*.*?\*/)
    | (?P<string>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")
    | (?P<backtick>`(?:[^`]|``)*`)
    """,
    re.VERBOSE | re.DOTALL,
)
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def strip_literals(query: str) -> str:
    """Return ``query`` with comments removed and strings / quoted names replaced by placeholders.

    Unterminated strings or comments make the rest of the query one literal, which the caller refuses.
    """

    def repl(m: re.Match[str]) -> str:
        if m.group("comment"):
            return " "
        return " __lit__ "

    out = _TOKEN.sub(repl, query)
    if re.search(r"['\"`]|/\*", out):
        raise QueryRefused("the query has an unterminated string, quoted name or comment")
    return out


def check_read_only(query: str) -> str:
    """Refuse ``query`` with :class:`QueryRefused` unless it is one read-only Cypher statement.

    Returns the query with surrounding whitespace and one trailing ``;`` removed, ready to run.
    """
    text = query.strip()
    if not text:
        raise QueryRefused("the query is empty")
    bare = strip_literals(text).strip()
    if bare.endswith(";"):
        bare = bare[:-1].rstrip()
        text = text.rstrip()[:-1].rstrip()
    if ";" in bare:
        raise QueryRefused("several statements in one query are not allowed: send one read-only statement")
    words = [(m.group(0), m.start(), m.end()) for m in _WORD.finditer(bare)]
    if not words:
        raise QueryRefused("the query has no Cypher clause")
    first = words[0][0].upper()
    if first == "CYPHER":  # version / planner prefix such as "CYPHER 5"
        words = [w for w in words[1:] if not w[0].isdigit()]
        first = words[0][0].upper() if words else ""
    if first not in READ_STARTS:
        raise QueryRefused(
            f"only read queries are allowed (MATCH … RETURN …); a statement starting with {first or '?'} is refused"
        )
    for i, (word, start, end) in enumerate(words):
        upper = word.upper()
        before = bare[:start].rstrip()
        after = bare[end:].lstrip()
        # property access (n.set), labels/types (:Set), map keys ({set: 1}) and parameters ($set)
        # are names, not clauses
        is_name = before.endswith((".", ":", "$")) or after.startswith(":") and not after.startswith("::")
        if is_name:
            continue
        if upper in WRITE_KEYWORDS:
            raise QueryRefused(f"the query would write or load data ({upper}); only read queries are allowed")
        if upper == "IN" and after.upper().startswith("TRANSACTIONS"):
            raise QueryRefused("CALL … IN TRANSACTIONS is a write form; only read queries are allowed")
        if upper == "PERIODIC" and after.upper().startswith("COMMIT"):
            raise QueryRefused("USING PERIODIC COMMIT is a write form; only read queries are allowed")
        if upper == "CALL" and not after.startswith(("{", "(")):
            m = re.match(r"([A-Za-z_][\w]*(?:\s*\.\s*[A-Za-z_][\w]*)*)", after)
            name = re.sub(r"\s+", "", m.group(1)).lower() if m else ""
            if name not in ALLOWED_PROCEDURES:
                raise QueryRefused(
                    f"procedure {name or '?'} is not allowed; only schema procedures "
                    f"({', '.join(sorted(ALLOWED_PROCEDURES))}) may be called"
                )
    return text
