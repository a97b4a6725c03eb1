"""The statement check that keeps LLM-written Cypher read-only and small enough to parse safely (rules and caps:
docs/reliability.md); it works on tokens after literals and comments are removed, in time linear in the length."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from itertools import takewhile

__all__ = ["DEFAULT_CAPS", "QueryCaps", "QueryRefused", "check_read_only"]


class QueryRefused(ValueError):
    """A query was refused before it reached the store: it could write or escape, or is too big to parse safely."""


@dataclass(frozen=True)
class QueryCaps:
    """How big a query may be before the engine sees it (see the module docstring for why)."""

    max_chars: int = 50_000
    """Longest query text, in characters."""
    max_depth: int = 40
    """Deepest nesting of ``()``, ``[]`` and ``{}`` together."""
    max_subquery_depth: int = 8
    """Deepest nesting of ``CALL { … }`` / ``EXISTS { … }`` / ``COUNT { … }`` / ``COLLECT { … }``."""
    max_union_arms: int = 32
    """Most parts joined by ``UNION`` / ``INTERSECT`` / ``EXCEPT`` in one query."""


#: The caps every store applies unless given others.
DEFAULT_CAPS = QueryCaps()

#: Clause keywords that write, load files or stop work, wherever they stand in a query.
WRITE_KEYWORDS = frozenset({"CREATE", "MERGE", "SET", "DELETE", "DETACH", "REMOVE", "DROP", "FOREACH", "LOAD",
                            "TERMINATE", "INSERT"})
#: Administration commands: refused because a statement must start with a read clause; they cannot
#: appear later in a statement, so there the same words are names and pass.
ADMIN_KEYWORDS = frozenset({"ALTER", "RENAME", "GRANT", "DENY", "REVOKE", "START", "STOP", "ENABLE", "DEALLOCATE",
                            "REALLOCATE"})
#: Keywords a read statement may start with (after an optional CYPHER / EXPLAIN / PROFILE prefix).
READ_STARTS = frozenset({"MATCH", "OPTIONAL", "WITH", "UNWIND", "RETURN", "CALL", "SHOW"})
#: What a SHOW command may list; it must name one of these and none of SHOW_REFUSED.
SHOW_ALLOWED = frozenset({"INDEX", "INDEXES", "CONSTRAINT", "CONSTRAINTS", "PROCEDURE", "PROCEDURES", "FUNCTION",
                          "FUNCTIONS"})
SHOW_REFUSED = frozenset({"USERS", "ROLE", "ROLES", "PRIVILEGE", "PRIVILEGES", "SETTING", "SETTINGS", "TRANSACTION",
                          "TRANSACTIONS", "SERVER", "SERVERS", "DATABASE", "DATABASES", "ALIAS", "ALIASES"})
#: Procedures that only describe the schema; every other ``CALL proc()`` is refused.
ALLOWED_PROCEDURES = frozenset({"db.labels", "db.relationshiptypes", "db.propertykeys", "db.schema.visualization",
                                "db.schema.nodetypeproperties", "db.schema.reltypeproperties"})
#: Words before ``{`` that open a subquery (``CALL (x) {`` is recognised by its parentheses).
SUBQUERY_OPENERS = frozenset({"CALL", "EXISTS", "COUNT", "COLLECT"})
#: Set operations; each joins one more part to the query.
SET_OPERATIONS = frozenset({"UNION", "INTERSECT", "EXCEPT"})

#: A comment, string or quoted name read to its end; an opener that the others cannot end (group 1) is unterminated.
_SPAN = re.compile(r"""(?=[/'"`])(?://[^\n]*|/\*.*?\*/|'[^'\\]*(?:\\.[^'\\]*)*'|"[^"\\]*(?:\\.[^"\\]*)*"|`[^`]*(?:``[^`]*)*`"""
                   r"""|(/\*|['"`]))""", re.S)  # (the lookahead: a position that opens nothing is passed at once)
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_IDENT_RUN = re.compile(r"\w+")
_SPACE = re.compile(r"\s*")
_BRACKET = re.compile(r"[()\[\]{}]")
_NEWLINES = re.compile(r"\r\n?|[\u2028\u2029\x85]")
_PROCEDURE_NAME = re.compile(r"([A-Za-z_]\w*(?:\s*\.\s*[A-Za-z_]\w*)*)(?=\s|\(|$)")


def _skip_space(text: str, at: int) -> int:
    """The first position at or after ``at`` that is not whitespace."""
    m = _SPACE.match(text, at)
    return m.end() if m else at


def _replace_spans(text: str, comment: Callable[[str], str], literal: Callable[[str], str]) -> str:
    """``text`` with each comment, string and quoted name replaced by what ``comment`` / ``literal`` make of it; an
    unterminated one is refused."""

    def replace(m: re.Match[str]) -> str:
        if m.group(1):
            raise QueryRefused("the query has an unterminated string, quoted name or comment")
        return (comment if m.group().startswith(("//", "/*")) else literal)(m.group())

    return _SPAN.sub(replace, text)


def check_read_only(query: str, caps: QueryCaps = DEFAULT_CAPS) -> str:
    """Refuse ``query`` unless it is one read-only statement within ``caps``; return it ready to run."""
    if len(query) > caps.max_chars:
        raise QueryRefused(f"the query is {len(query):,} characters long; at most {caps.max_chars:,} are allowed: "
                           "send one shorter query (filter with WHERE or IN [...] rather than spelling out every case)")
    text = _NEWLINES.sub("\n", query).strip()  # \r\n, \r and Unicode separators: engines then agree where // ends
    if not text:
        raise QueryRefused("the query is empty")
    bare = _replace_spans(text, lambda c: " ", lambda s: " __lit__ ").strip()  # comments, strings and names gone
    if bare.endswith(";"):
        bare = bare[:-1].rstrip()
        # cut at the statement's own ';' (a comment may follow it), not at the text's last character
        masked = _replace_spans(text, lambda c: re.sub(r"[^\n]", " ", c), lambda s: "_" * len(s))  # same offsets
        text = text[: masked.rstrip().rindex(";")].rstrip()
    if ";" in bare:
        raise QueryRefused("several statements in one query are not allowed: send one read-only statement")
    words = [(m.group(0), m.start(), m.end()) for m in _WORD.finditer(bare)]
    if not words:
        raise QueryRefused("the query has no Cypher clause")
    k = int(words[0][0].upper() == "CYPHER")  # version / planner prefix such as "CYPHER 5"
    while k < len(words) and words[k][0].upper() in ("EXPLAIN", "PROFILE"):
        k += 1
    first = words[k][0].upper() if k < len(words) else ""
    if first not in READ_STARTS:
        kind = " (an administration command)" if first in ADMIN_KEYWORDS else ""
        raise QueryRefused("only read queries are allowed (MATCH … RETURN …); a statement starting with "
                           f"{first or '?'}{kind} is refused")
    _check_nesting(bare, caps)
    if first == "SHOW":
        after_show = (word.upper() for word, _, _ in words[k + 1 :])
        head = set(takewhile(lambda w: w not in ("YIELD", "WHERE", "RETURN"), after_show))
        if not head & SHOW_ALLOWED or head & SHOW_REFUSED:
            raise QueryRefused("only SHOW INDEXES / CONSTRAINTS / PROCEDURES / FUNCTIONS are allowed")
    set_operations = 0
    prev_end = 0
    for word, start, end in words:
        upper = word.upper()
        # the last non-blank character before the word: from the gap since the previous word, else
        # that word's own last character (only the gap is sliced, so this stays linear)
        gap = bare[prev_end:start].rstrip()
        before = gap[-1:] if gap else bare[prev_end - 1 : prev_end]
        prev_end = end
        after_at = _skip_space(bare, end)
        after = bare[after_at : after_at + 6]
        # property access (n.set), labels/types (:Set), map keys ({set: 1}) and parameters ($set)
        # are names, not clauses. A parameter's '$' must touch the name: Neo4j reads "x$ CREATE" as
        # the variable x$ followed by a CREATE clause ('$' may end an identifier).
        if before in (".", ":") or bare[start - 1 : start] == "$" or after[:1] == ":" and after[:2] != "::":
            continue
        if upper in WRITE_KEYWORDS:
            raise QueryRefused(f"the query would write or load data ({upper}); only read queries are allowed")
        if upper in SET_OPERATIONS:
            set_operations += 1
            if set_operations + 1 > caps.max_union_arms:
                raise QueryRefused(f"the query joins more than {caps.max_union_arms} parts with UNION (or INTERSECT "
                                   f"/ EXCEPT); at most {caps.max_union_arms} are allowed: match once and filter with "
                                   "WHERE … IN [...], or UNWIND a list, instead of a UNION per case")
        if upper == "TRANSACTIONS" and first != "SHOW":  # CALL { … } IN [n] [CONCURRENT] TRANSACTIONS
            raise QueryRefused("CALL … IN TRANSACTIONS is a write form; only read queries are allowed")
        if upper == "PERIODIC" and after.upper().startswith("COMMIT"):
            raise QueryRefused("USING PERIODIC COMMIT is a write form; only read queries are allowed")
        if upper == "CALL" and not after.startswith(("{", "(")):
            # the name must end where Cypher's does: "db.labels$x" is a procedure named db.labels$x
            m = _PROCEDURE_NAME.match(bare, after_at)
            name = re.sub(r"\s+", "", m.group(1)).lower() if m else ""
            if name not in ALLOWED_PROCEDURES:
                shown = name or bare[after_at : after_at + 200].split("(")[0].strip()[:60] or "?"
                raise QueryRefused(f"procedure {shown} is not allowed; only schema procedures "
                                   f"({', '.join(sorted(ALLOWED_PROCEDURES))}) may be called")
    _check_function_names(bare)
    return text


def _check_function_names(bare: str) -> None:
    """Refuse APOC functions and backtick-quoted function names (one pass over dotted name chains)."""
    chain: list[str] = []  # the dotted name read so far (a.b.c), lower case
    suspect = False  # whether it has a part "apoc" or a quoted part
    prev_end = -1
    for m in _IDENT_RUN.finditer(bare):
        part = m.group(0).lower()
        if not (chain and bare[prev_end : m.start()].strip() == "."):
            chain, suspect = [], False
        chain.append(part)
        suspect = suspect or part in ("apoc", "__lit__")
        prev_end = m.end()
        if suspect and (len(chain) > 1 or part == "__lit__"):  # a.b.apoc(…), apoc.f(…), `quoted`(…)
            after_at = _skip_space(bare, m.end())
            if bare[after_at : after_at + 1] == "(":
                name = ".".join(chain).replace("__lit__", "`…`")[:200]
                raise QueryRefused(f"function {name} is not allowed: APOC functions and quoted function names are "
                                   "refused")


def _check_nesting(bare: str, caps: QueryCaps) -> None:
    """Refuse brackets or subqueries nested deeper than ``caps`` allow (one pass over the brackets)."""
    stack: list[bool] = []  # per open bracket: does it open a subquery?
    subqueries = 0
    call_scope_closed_at = -1  # where the ')' of the last "CALL (…)" scope ended
    call_scope_opened: list[int] = []  # stack depth of open "CALL (" parentheses
    for m in _BRACKET.finditer(bare):
        ch, at = m.group(), m.start()
        if ch in "([{":
            j = at - 1
            while j >= 0 and bare[j].isspace():
                j -= 1
            word_end = j + 1
            while j >= 0 and (bare[j].isalnum() or bare[j] == "_"):
                j -= 1
            prev_word = bare[j + 1 : word_end].upper()
            opens_subquery = ch == "{" and (prev_word in SUBQUERY_OPENERS or call_scope_closed_at == word_end)
            if ch == "(" and prev_word == "CALL":
                call_scope_opened.append(len(stack))
            stack.append(opens_subquery)
            if len(stack) > caps.max_depth:
                raise QueryRefused(f"the query nests brackets more than {caps.max_depth} levels deep; at most "
                                   f"{caps.max_depth} levels of (), [] and {{}} are allowed: flatten it, e.g. name "
                                   "intermediate results with WITH")
            if opens_subquery:
                subqueries += 1
                if subqueries > caps.max_subquery_depth:
                    raise QueryRefused("the query nests subqueries (CALL { … }, EXISTS { … }, COUNT { … }, COLLECT "
                                       f"{{ … }}) more than {caps.max_subquery_depth} levels deep; at most "
                                       f"{caps.max_subquery_depth} are allowed: chain the steps with WITH instead")
        elif stack:  # a stray closing bracket is the engine's syntax error to report
            subqueries -= stack.pop()
            if ch == ")" and call_scope_opened and call_scope_opened[-1] == len(stack):
                call_scope_opened.pop()
                call_scope_closed_at = at + 1
