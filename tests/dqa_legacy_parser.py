"""A frozen copy of the DQA script parser as it was before the fast path (commit 8153d6f).

The oracle of tests/test_dqa_parser.py: the statement splitter of ``tools/graphdb/script.py`` and the
statement parser of ``ragplan/methods/planrag/cql.py``, verbatim, so that the faster parser and splitter can be
compared with what they replaced on any text. Not used by the package.
"""

from __future__ import annotations

import re
from typing import Any

from ragplan.methods.planrag.cql import GraphData, NodeRec, RelRec
from ragplan.tools.graphdb.script import ScriptError, Statement

_LITERAL_OR_COMMENT = re.compile(r"""'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|`(?:[^`]|``)*`|(//[^\n]*)""", re.S)
#: A statement whose code ends like this is not finished.
_OPEN_END = re.compile(r"(?:[,=<>+/|.:-]|\b(?:AND|OR|XOR|NOT|WHERE|AS|IN|ON|WITH|MATCH|OPTIONAL))$", re.I)
#: No statement starts like this, so such a line continues the one before.
_CONTINUATION = re.compile(r"^(?:[-<>.,:=+*/|)\]}]|(?:WHERE|AND|OR|XOR|RETURN|YIELD|ON|ORDER|SKIP|LIMIT|AS)\b)", re.I)
_READING = re.compile(r"^(?:MATCH|OPTIONAL|WITH|UNWIND)\b", re.I)
#: A clause that can end a statement (a property ``n.set`` or map key ``{set: 1}`` is no clause).
_FINISHING = re.compile(r"(?<![\w.:$])(?:CREATE|MERGE|SET|DELETE|REMOVE|RETURN|FOREACH|CALL|LOAD)\b(?!\s*:)", re.I)


_SCAN_STOP = re.compile(r"""//|['"`()\[\]{};]""")
_QUOTE_STOP = {"'": re.compile(r"\\.|'", re.S), '"': re.compile(r'\\.|"', re.S), "`": re.compile("`")}


def _scan(text: str, depth: int, quote: str) -> tuple[int, str, list[int]]:
    """Track bracket depth and open quote across ``text``; return also the offsets of top-level ``;``.

    Jumps from one significant character to the next (a 400 KB script is scanned in milliseconds).
    """
    semis: list[int] = []
    i, n = 0, len(text)
    while i < n:
        if quote:  # inside a string (backslash escapes) or a quoted name (no escapes; `` reopens it)
            m = _QUOTE_STOP[quote].search(text, i)
            if m is None:
                break
            i = m.end()
            if m.group() == quote:
                quote = ""
            continue
        m = _SCAN_STOP.search(text, i)
        if m is None:
            break
        tok, i = m.group(), m.end()
        if tok == "//":
            nl = text.find("\n", i)
            i = n if nl < 0 else nl
        elif tok in "'\"`":
            quote = tok
        elif tok in "([{":
            depth += 1
        elif tok in ")]}":
            depth -= 1
        elif depth <= 0:  # ';'
            semis.append(m.start())
    return depth, quote, semis


_STRINGS = re.compile(r"""'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|`[^`]*`""", re.S)


def _line_state(line: str, depth: int, quote: str) -> tuple[int, str]:
    """Bracket depth and open quote after ``line``: C-speed counting when the line has no open quote or comment."""
    if not quote:
        bare = _STRINGS.sub("", line)
        if "//" not in bare and not any(q in bare for q in "'\"`"):
            opened = bare.count("(") + bare.count("[") + bare.count("{")
            return depth + opened - bare.count(")") - bare.count("]") - bare.count("}"), ""
    depth, quote, _ = _scan(line, depth, quote)
    return depth, quote


def _code(text: str) -> str:
    """``text`` with comments removed and strings / quoted names emptied: what the keywords are."""
    return _LITERAL_OR_COMMENT.sub(lambda m: "" if m.group(1) else '""', text)


def _is_content(line: str) -> bool:
    s = line.strip()
    return bool(s) and not s.startswith("//")


def _ends_with_semicolon(stmt: str) -> bool:
    if stmt.endswith(";") and "//" not in stmt[stmt.rfind("\n") + 1 :]:
        return True  # the common case, without the slower literal / comment strip
    return _code(stmt).rstrip().endswith(";")


def _unfinished(stmt: str, following: str | None) -> bool:
    """Whether a line-mode statement with balanced brackets goes on over ``following`` (next code line)."""
    if following is None or _ends_with_semicolon(stmt):
        return False
    code = _code(stmt).strip()
    return bool(
        _OPEN_END.search(code)
        or following[:1].isspace()
        or _CONTINUATION.match(following.strip())
        or (_READING.match(code) and not _FINISHING.search(code))
    )


def split_statements(text: str, path: str = "<script>") -> list[Statement]:
    """Split a Cypher script into statements (see the module docstring for the two modes)."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")  # lines as editors count them (not str.splitlines)
    lines = text.split("\n")
    content = [ln.strip() for ln in lines if _is_content(ln)]
    if not content:
        return []
    with_semi = sum(1 for ln in content if _ends_with_semicolon(ln))
    out: list[Statement] = []
    if with_semi == 0 or with_semi * 2 >= len(content):  # line mode
        following: list[str | None] = [None] * len(lines)  # the next code line after each line
        for i in range(len(lines) - 2, -1, -1):
            following[i] = lines[i + 1] if _is_content(lines[i + 1]) else following[i + 1]
        buf: list[str] = []
        start = 0
        depth, quote = 0, ""
        for no, raw in enumerate(lines, 1):
            if not buf and not _is_content(raw):
                continue
            if not buf:
                start = no
            buf.append(raw)
            depth, quote = _line_state(raw + "\n", depth, quote)
            if depth > 0 or quote:
                continue
            stmt = "\n".join(buf).strip()
            if _unfinished(stmt, following[no - 1]):
                continue
            for part in _split_semis(stmt):
                out.append(Statement(part, start))
            buf, depth, quote = [], 0, ""
        if buf:
            raise ScriptError(path, start, "unterminated statement (unbalanced brackets or quote)", "\n".join(buf))
        return out
    # semicolon mode
    depth, quote, semis = _scan(text, 0, "")
    prev, first = 0, 1
    for pos in [*semis, len(text)]:
        chunk = text[prev:pos]
        chunk_lines = chunk.split("\n")
        skip = next((i for i, ln in enumerate(chunk_lines) if _is_content(ln)), None)
        if skip is not None:
            stmt = "\n".join(chunk_lines[skip:]).strip()
            if quote and pos == len(text):
                raise ScriptError(path, first + skip, "unterminated string or quoted name", stmt)
            out.append(Statement(stmt, first + skip))
        first += chunk.count("\n")
        prev = pos + 1
    return out


def _split_semis(stmt: str) -> list[str]:
    """Split one logical line at top-level ``;`` (a line may hold ``A; B;``); drop empty and comment-only parts."""
    if ";" not in stmt:
        return [stmt]
    if stmt.count(";") == 1 and _ends_with_semicolon(stmt) and stmt.endswith(";"):
        return [stmt[:-1].rstrip()] if stmt[:-1].strip() else []
    _, _, semis = _scan(stmt, 0, "")
    parts, prev = [], 0
    for pos in [*semis, len(stmt)]:
        part = stmt[prev:pos].strip()
        if part and ("//" not in part or _code(part).strip()):  # a trailing "; // comment" is no statement
            parts.append(part)
        prev = pos + 1
    return parts



_VALUE = re.compile(
    r"""\s*(?:
        "(?P<dq>(?:[^"\\]|\\.)*)"
      | '(?P<sq>(?:[^'\\]|\\.)*)'
      | (?P<num>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)
      | (?P<word>true|false|null|TRUE|FALSE|NULL|True|False)
    )\s*""",
    re.VERBOSE,
)
_KEY = re.compile(r"\s*(`[^`]+`|[A-Za-z_][\w]*)\s*:")


def _unescape(s: str) -> str:
    if "\\" not in s:
        return s
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), s)


def parse_map(text: str) -> dict[str, Any]:
    """Parse a Cypher map literal body (``name:"a", x: 1.5, ok:true``) into a dict; ValueError if malformed."""
    out: dict[str, Any] = {}
    pos, n = 0, len(text)
    while pos < n and text[pos:].strip():
        km = _KEY.match(text, pos)
        if not km:
            raise ValueError(f"expected a property name at {text[pos:pos + 20]!r}")
        key = km.group(1).strip("`")
        vm = _VALUE.match(text, km.end())
        if not vm:
            raise ValueError(f"expected a value for {key!r} at {text[km.end():km.end() + 20]!r}")
        if vm.group("dq") is not None:
            val: Any = _unescape(vm.group("dq"))
        elif vm.group("sq") is not None:
            val = _unescape(vm.group("sq"))
        elif vm.group("num") is not None:
            t = vm.group("num")
            val = float(t) if any(c in t for c in ".eE") else int(t)
        else:
            val = {"true": True, "false": False, "null": None}[vm.group("word").lower()]
        out[key] = val
        pos = vm.end()
        if pos < n and text[pos] == ",":
            pos += 1
        elif text[pos:].strip():
            raise ValueError(f"expected ',' at {text[pos:pos + 20]!r}")
    return out


_NODE = r"\(\s*(?P<{v}>\w*)\s*:\s*(?P<{l}>\w+)\s*\{{(?P<{m}>[^{{}}]*)\}}\s*\)"
_CREATE_NODE = re.compile(r"^\s*CREATE\s*" + _NODE.format(v="v", l="label", m="map") + r"\s*;?\s*$", re.I | re.S)
_MATCH_CREATE_REL = re.compile(
    r"^\s*MATCH\s*" + _NODE.format(v="v1", l="l1", m="m1") + r"\s*,\s*" + _NODE.format(v="v2", l="l2", m="m2")
    + r"\s*CREATE\s*\(\s*(?P<a>\w+)\s*\)\s*-\s*\[\s*\w*\s*:\s*(?P<type>\w+)\s*(?:\{(?P<rm>[^{}]*)\})?\s*\]\s*->\s*"
    r"\(\s*(?P<b>\w+)\s*\)\s*;?\s*$",
    re.I | re.S,
)


def parse_statements(statements: list[Statement], source: str) -> GraphData:
    """Parse DQA-shaped statements; anything else raises :class:`ScriptError` with its line."""
    data = GraphData(source)
    for st in statements:
        try:
            m = _CREATE_NODE.match(st.text)
            if m:
                data.nodes.append(NodeRec(m.group("label"), parse_map(m.group("map")), st.line))
                continue
            m = _MATCH_CREATE_REL.match(st.text)
            if m:
                ends = {m.group("v1"): (m.group("l1"), parse_map(m.group("m1"))),
                        m.group("v2"): (m.group("l2"), parse_map(m.group("m2")))}
                if m.group("a") not in ends or m.group("b") not in ends:
                    raise ValueError("the relationship's endpoints are not the matched variables")
                (sl, sk), (dl, dk) = ends[m.group("a")], ends[m.group("b")]
                data.rels.append(RelRec(m.group("type"), sl, sk, dl, dk, parse_map(m.group("rm") or ""), st.line))
                continue
            raise ValueError("not a DQA statement (expected CREATE (v:Label {…}) or MATCH (…), (…) CREATE (…)-[…]->(…))")
        except ValueError as exc:
            raise ScriptError(source, st.line, str(exc), st.text) from exc
    return data


def legacy_graph_data(text: str, source: str = "<script>") -> GraphData:
    """What ``graph_data_from_text`` gave before the fast path."""
    return parse_statements(split_statements(text, source), source)
