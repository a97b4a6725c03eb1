"""The statement check that keeps LLM-written Cypher read-only.

Engines have read-only modes, but they are not enough on their own: kglite's read-only graph still
runs ``LOAD CSV FROM "file:///etc/passwd"`` and any ``CALL`` procedure. So every query the graph-DB
tool runs passes this check first, whatever the backend, and the backend's own read-only mode
(kglite's frozen snapshot, Neo4j's read transaction) is the second wall.

The check works on the query's tokens after string literals, backtick-quoted names and comments are
removed, so a keyword inside a string (``WHERE n.name = "CREATE"``) or a property called ``set``
(``n.set``, ``{set: 1}``) does not trip it. It refuses:

* several statements (a ``;`` followed by more text);
* any write clause: CREATE, MERGE, SET, DELETE, DETACH, REMOVE, DROP, FOREACH, INSERT, TERMINATE,
  LOAD (``LOAD CSV``), ``IN [n] [CONCURRENT] TRANSACTIONS``, ``PERIODIC COMMIT``;
* a statement that does not start with a read clause (MATCH, OPTIONAL MATCH, WITH, UNWIND, RETURN,
  CALL, SHOW, optionally after CYPHER / EXPLAIN / PROFILE) — which also refuses the administration
  commands (ALTER, RENAME, GRANT, DENY, REVOKE, START, STOP, ENABLE, …): they can only start a
  statement, so later in a query such words are names (``MATCH (start)-->(end)``) and pass;
* a ``CALL`` of any procedure outside a small allow-list of schema procedures (``CALL { … }``
  subqueries are allowed, their bodies are checked like the rest);
* a call of an APOC function (``apoc.cypher.runFirstColumnSingle("LOAD CSV …")`` runs Cypher text
  the check cannot see) or of a function whose name is backtick-quoted;
* ``SHOW`` commands other than indexes, constraints, procedures and functions (users, roles,
  privileges, settings, transactions, servers and databases describe the server, not the graph).

Line breaks are normalised to ``\n`` first, and the normalised text is what runs: Neo4j ends a
``//`` comment at a lone ``\r`` while kglite does not, so without this a comment could hide a
clause from the check that the server then runs.
"""

from __future__ import annotations

import re

__all__ = ["QueryRefused", "check_read_only", "normalize_newlines", "strip_literals"]


class QueryRefused(ValueError):
    """A query was refused before it reached the store because it could write or escape."""


#: Clause keywords that write, load files or stop work, wherever they stand in a query.
WRITE_KEYWORDS = frozenset(
    {"CREATE", "MERGE", "SET", "DELETE", "DETACH", "REMOVE", "DROP", "FOREACH", "LOAD", "TERMINATE", "INSERT"}
)
#: Administration commands: refused because a statement must start with a read clause; they cannot
#: appear later in a statement, so there the same words are names and pass.
ADMIN_KEYWORDS = frozenset(
    {"ALTER", "RENAME", "GRANT", "DENY", "REVOKE", "START", "STOP", "ENABLE", "DEALLOCATE", "REALLOCATE"}
)
#: Keywords a read statement may start with (after an optional CYPHER / EXPLAIN / PROFILE prefix).
READ_STARTS = frozenset({"MATCH", "OPTIONAL", "WITH", "UNWIND", "RETURN", "CALL", "SHOW"})
#: What a SHOW command may list; it must name one of these and none of SHOW_REFUSED.
SHOW_ALLOWED = frozenset(
    {"INDEX", "INDEXES", "CONSTRAINT", "CONSTRAINTS", "PROCEDURE", "PROCEDURES", "FUNCTION", "FUNCTIONS"}
)
SHOW_REFUSED = frozenset(
    {
        "USERS", "ROLE", "ROLES", "PRIVILEGE", "PRIVILEGES", "SETTING", "SETTINGS", "TRANSACTION",
        "TRANSACTIONS", "SERVER", "SERVERS", "DATABASE", "DATABASES", "ALIAS", "ALIASES",
    }
)
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
_NEWLINES = re.compile(r"\r\n?|[\u2028\u2029\x85]")
#: A namespaced function call (``apoc.cypher.run(``), with the spacing Cypher allows around dots.
_QUALIFIED_CALL = re.compile(r"(?<![\w.$])([A-Za-z_]\w*(?:\s*\.\s*[A-Za-z_]\w*)+)\s*\(")


def normalize_newlines(query: str) -> str:
    """Turn ``\r\n``, a lone ``\r`` and Unicode line separators into ``\n``.

    Engines disagree on where a ``//`` comment ends (Neo4j stops at ``\r``, kglite does not); with
    one kind of line break they agree, so the check sees the comments the engine will see.
    """
    return _NEWLINES.sub("\n", query)


def _mask(query: str) -> str:
    """``query`` with comments blanked and strings / quoted names filled, keeping every offset."""

    def repl(m: re.Match[str]) -> str:
        if m.group("comment"):
            return re.sub(r"[^\n]", " ", m.group(0))
        return "_" * len(m.group(0))

    return _TOKEN.sub(repl, query)


def strip_literals(query: str) -> str:
    """Return ``query`` with comments removed and strings / quoted names replaced by placeholders.

    Unterminated strings or comments make the rest of the query one literal, which the caller refuses.
    """

    def repl(m: re.Match[str]) -> str:
        if m.group("comment"):
            return " "
        return " __lit__ "

    out = _TOKEN.sub(repl, normalize_newlines(query))
    if re.search(r"['\"`]|/\*", out):
        raise QueryRefused("the query has an unterminated string, quoted name or comment")
    return out


def check_read_only(query: str) -> str:
    """Refuse ``query`` with :class:`QueryRefused` unless it is one read-only Cypher statement.

    Returns the query with surrounding whitespace and one trailing ``;`` removed, ready to run.
    """
    text = normalize_newlines(query).strip()
    if not text:
        raise QueryRefused("the query is empty")
    bare = strip_literals(text).strip()
    if bare.endswith(";"):
        bare = bare[:-1].rstrip()
        # cut at the statement's own ';' (a comment may follow it), not at the text's last character
        text = text[: _mask(text).rstrip().rindex(";")].rstrip()
    if ";" in bare:
        raise QueryRefused("several statements in one query are not allowed: send one read-only statement")
    words = [(m.group(0), m.start(), m.end()) for m in _WORD.finditer(bare)]
    if not words:
        raise QueryRefused("the query has no Cypher clause")
    k = 0
    if words[0][0].upper() == "CYPHER":  # version / planner prefix such as "CYPHER 5"
        k = 1
    while k < len(words) and words[k][0].upper() in ("EXPLAIN", "PROFILE"):
        k += 1
    first = words[k][0].upper() if k < len(words) else ""
    if first not in READ_STARTS:
        kind = " (an administration command)" if first in ADMIN_KEYWORDS else ""
        raise QueryRefused(
            f"only read queries are allowed (MATCH … RETURN …); a statement starting with {first or '?'}{kind} is refused"
        )
    if first == "SHOW":
        head = set()
        for word, _, _ in words[k + 1 :]:
            if word.upper() in ("YIELD", "WHERE", "RETURN"):
                break
            head.add(word.upper())
        if not head & SHOW_ALLOWED or head & SHOW_REFUSED:
            raise QueryRefused("only SHOW INDEXES / CONSTRAINTS / PROCEDURES / FUNCTIONS are allowed")
    for word, start, end in words:
        upper = word.upper()
        before = bare[:start].rstrip()
        after = bare[end:].lstrip()
        # property access (n.set), labels/types (:Set), map keys ({set: 1}) and parameters ($set)
        # are names, not clauses. A parameter's '$' must touch the name: Neo4j reads "x$ CREATE" as
        # the variable x$ followed by a CREATE clause ('$' may end an identifier).
        is_name = (
            before.endswith((".", ":"))
            or bare[start - 1 : start] == "$"
            or after.startswith(":") and not after.startswith("::")
        )
        if is_name:
            continue
        if upper in WRITE_KEYWORDS:
            raise QueryRefused(f"the query would write or load data ({upper}); only read queries are allowed")
        if upper == "TRANSACTIONS" and first != "SHOW":  # CALL { … } IN [n] [CONCURRENT] TRANSACTIONS
            raise QueryRefused("CALL … IN TRANSACTIONS is a write form; only read queries are allowed")
        if upper == "PERIODIC" and after.upper().startswith("COMMIT"):
            raise QueryRefused("USING PERIODIC COMMIT is a write form; only read queries are allowed")
        if upper == "CALL" and not after.startswith(("{", "(")):
            # the name must end where Cypher's does: "db.labels$x" is a procedure named db.labels$x
            m = re.match(r"([A-Za-z_]\w*(?:\s*\.\s*[A-Za-z_]\w*)*)(?=\s|\(|$)", after)
            name = re.sub(r"\s+", "", m.group(1)).lower() if m else ""
            if name not in ALLOWED_PROCEDURES:
                shown = name or after.split("(")[0].strip()[:60] or "?"
                raise QueryRefused(
                    f"procedure {shown} is not allowed; only schema procedures "
                    f"({', '.join(sorted(ALLOWED_PROCEDURES))}) may be called"
                )
    for m in _QUALIFIED_CALL.finditer(bare):
        parts = re.sub(r"\s+", "", m.group(1)).lower().split(".")
        if parts[0] == "apoc" or "__lit__" in parts:
            raise QueryRefused(
                f"function {'.'.join(parts)} is not allowed: APOC functions and quoted function names are refused"
            )
    if re.search(r"__lit__\s*\(", bare):
        raise QueryRefused("a backtick-quoted function name is not allowed")
    return text
