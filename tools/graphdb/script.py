"""Reading Neo4j-dialect Cypher scripts (DQA's ``.cql``) into statements that keep their 1-based line: per file,
*line mode* (most or no non-blank lines end with ``;``: a line is a statement unless visibly unfinished) or
*semicolon mode* (statements end at ``;`` outside strings and comments)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Statement", "ScriptError", "split_statements", "read_script", "read_script_bytes", "decode_script"]

_LITERAL_OR_COMMENT = re.compile(r"""'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|`(?:[^`]|``)*`|(//[^\n]*)""", re.S)
#: A statement whose code ends like this is not finished (its longest word, OPTIONAL, and the
#: character before it fit in the last 10 characters, which is all :func:`_unfinished` searches).
_OPEN_END = re.compile(r"(?:[,=<>+/|.:-]|\b(?:AND|OR|XOR|NOT|WHERE|AS|IN|ON|WITH|MATCH|OPTIONAL))$", re.I)
#: No statement starts like this, so such a line continues the one before.
_CONTINUATION = re.compile(r"^(?:[-<>.,:=+*/|)\]}]|(?:WHERE|AND|OR|XOR|RETURN|YIELD|ON|ORDER|SKIP|LIMIT|AS)\b)", re.I)
_READING = re.compile(r"^(?:MATCH|OPTIONAL|WITH|UNWIND)\b", re.I)
#: A clause that can end a statement (a property ``n.set`` or map key ``{set: 1}`` is no clause).
_FINISHING = re.compile(r"(?<![\w.:$])(?:CREATE|MERGE|SET|DELETE|REMOVE|RETURN|FOREACH|CALL|LOAD)\b(?!\s*:)", re.I)


@dataclass(frozen=True)
class Statement:
    """One statement of a script and where it starts."""

    text: str
    """The statement without its trailing ``;``."""
    line: int
    """1-based line number where the statement starts."""


def _clip(text: str, limit: int = 300) -> str:
    """``text`` cut to ``limit`` characters, with an ellipsis and its full length: for messages quoting input."""
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text):,} characters)"


class ScriptError(ValueError):
    """A script statement could not be read or loaded; names the file and line (quoted text clipped)."""

    def __init__(self, path: str, line: int, reason: str, statement: str = "") -> None:
        self.path, self.line, self.reason, self.statement = path, line, reason, statement
        shown = _clip(statement, 200)
        super().__init__(f"{path}:{line}: {_clip(reason)}" + (f"\n    {shown}" if shown else ""))


_SCAN_STOP = re.compile(r"""//|['"`()\[\]{};]""")
_QUOTE_STOP = {"'": re.compile(r"\\.|'", re.S), '"': re.compile(r'\\.|"', re.S), "`": re.compile("`")}


def _scan(text: str, depth: int, quote: str) -> tuple[int, str, list[int]]:
    """Bracket depth and open quote after ``text``, and the offsets of its top-level ``;`` (jumps between stops)."""
    semis: list[int] = []
    i, n = 0, len(text)
    while i < n:
        if quote:  # inside a string (backslash escapes) or a quoted name (no escapes; `` reopens it)
            if (m := _QUOTE_STOP[quote].search(text, i)) is None:
                break
            i = m.end()
            if m.group() == quote:
                quote = ""
            continue
        if (m := _SCAN_STOP.search(text, i)) is None:
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


def _code(text: str) -> str:
    """``text`` with comments removed and strings / quoted names emptied: what the keywords are."""
    return _LITERAL_OR_COMMENT.sub(lambda m: "" if m.group(1) else '""', text)


def _ends_with_semicolon(stmt: str) -> bool:
    if stmt.endswith(";") and "//" not in stmt[stmt.rfind("\n") + 1 :]:
        return True  # the common case, without the slower literal / comment strip
    if ";" not in stmt:
        return False  # stripping literals and comments never adds one
    return _code(stmt).rstrip().endswith(";")


def _unfinished(stmt: str, following: str | None) -> bool:
    """Whether a line-mode statement with balanced brackets goes on over ``following`` (next code line)."""
    if following is None or _ends_with_semicolon(stmt):
        return False
    code = _code(stmt).strip()
    return bool(
        _OPEN_END.search(code[-10:])  # an end-anchored search tries every position: the tail holds any match
        or following[:1].isspace()
        or _CONTINUATION.match(following.strip())
        or (_READING.match(code) and not _FINISHING.search(code))
    )


def split_statements(text: str, path: str = "<script>") -> list[Statement]:
    """Split a Cypher script into statements (see the module docstring for the two modes)."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")  # lines as editors count them (not str.splitlines)
    lines = text.split("\n")
    stripped = [ln.strip() for ln in lines]
    is_code = [bool(s) and not s.startswith("//") for s in stripped]
    content = [s for s, code in zip(stripped, is_code) if code]
    if not content:
        return []
    with_semi = sum(1 for ln in content if _ends_with_semicolon(ln))
    out: list[Statement] = []
    if with_semi == 0 or with_semi * 2 >= len(content):  # line mode
        following: list[str | None] = [None] * len(lines)  # the next code line after each line
        for i in range(len(lines) - 2, -1, -1):
            following[i] = lines[i + 1] if is_code[i + 1] else following[i + 1]
        buf: list[str] = []
        start = 0
        depth, quote = 0, ""
        for i, raw in enumerate(lines):
            if not buf:
                if not is_code[i]:
                    continue
                start = i + 1
            buf.append(raw)
            depth, quote, _ = _scan(raw + "\n", depth, quote)
            if depth > 0 or quote:
                continue
            stmt = "\n".join(buf).strip()
            if _unfinished(stmt, following[i]):
                continue
            out.extend(Statement(part, start) for part in _split_semis(stmt))
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
        skip = next((i for i, ln in enumerate(chunk_lines) if ln.strip() and not ln.strip().startswith("//")), None)
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


def read_script_bytes(path: str | Path) -> bytes:
    """The bytes of the script at ``path``; a file that cannot be read raises :class:`ScriptError`."""
    p = Path(path)
    try:
        return p.read_bytes()
    except OSError as exc:
        raise ScriptError(str(p), 0, f"cannot read the file: {exc.strerror or exc}") from exc


def decode_script(data: bytes, path: str = "<script>") -> str:
    """A script's bytes as text (UTF-8, a BOM dropped); bytes that are not UTF-8 raise :class:`ScriptError`."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ScriptError(path, line, "the file is not UTF-8 text") from exc


def read_script(path: str | Path) -> list[Statement]:
    """Read and split the script at ``path``; a file that is not UTF-8 text or holds no statement raises :class:`ScriptError`."""
    p = Path(path)
    if not (statements := split_statements(decode_script(read_script_bytes(p), str(p)), str(p))):
        raise ScriptError(str(p), 1, "the script holds no statements (an empty file?)")
    return statements
