"""Reading Neo4j-dialect Cypher scripts (such as DQA's ``.cql`` files) into statements.

DQA scripts hold one statement per line, but real files are messy: some lines lack the trailing
``;``, spacing varies, and a few lines are blank. Scripts written by hand may instead spread one
statement over several lines and end it with ``;``. The splitter decides per file:

* **line mode** (most non-blank lines end with ``;``, or no line does and every line starts a
  statement): each line is a statement, with or without its ``;``. A line whose brackets or string
  are still open continues on the next line, so a wrapped statement is not cut.
* **semicolon mode** (otherwise): statements end at ``;`` outside strings and comments.

Each statement keeps the 1-based line where it starts, so a loader can say which line failed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Statement", "ScriptError", "split_statements", "read_script"]

_STARTS = re.compile(r"^\s*(CREATE|MATCH|MERGE|UNWIND|WITH|OPTIONAL|CALL|RETURN|SET|DELETE|DETACH)\b", re.I)


@dataclass(frozen=True)
class Statement:
    """One statement of a script and where it starts."""

    text: str
    """The statement without its trailing ``;``."""
    line: int
    """1-based line number where the statement starts."""


class ScriptError(ValueError):
    """A script statement could not be read or loaded; names the file and line."""

    def __init__(self, path: str, line: int, reason: str, statement: str = "") -> None:
        self.path, self.line, self.reason, self.statement = path, line, reason, statement
        shown = statement if len(statement) <= 200 else statement[:200] + "…"
        super().__init__(f"{path}:{line}: {reason}" + (f"\n    {shown}" if shown else ""))


def _scan(text: str, depth: int, quote: str) -> tuple[int, str, list[int]]:
    """Track bracket depth and open quote across ``text``; return also the offsets of top-level ``;``."""
    semis: list[int] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if quote:
            if ch == "\\" and quote != "`":
                i += 2
                continue
            if ch == quote:
                quote = ""
        elif ch in "'\"`":
            quote = ch
        elif ch == "/" and text.startswith("//", i):
            nl = text.find("\n", i)
            i = n if nl < 0 else nl
            continue
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == ";" and depth <= 0:
            semis.append(i)
        i += 1
    return depth, quote, semis


def split_statements(text: str, path: str = "<script>") -> list[Statement]:
    """Split a Cypher script into statements (see the module docstring for the two modes)."""
    lines = text.splitlines()
    content = [ln.strip() for ln in lines if ln.strip() and not ln.strip().startswith("//")]
    if not content:
        return []
    with_semi = sum(1 for ln in content if ln.endswith(";"))
    line_mode = with_semi * 2 >= len(content) or (
        with_semi == 0 and all(_STARTS.match(ln) for ln in content)
    )
    out: list[Statement] = []
    if line_mode:
        buf: list[str] = []
        start = 0
        depth, quote = 0, ""
        for no, raw in enumerate(lines, 1):
            s = raw.strip()
            if not buf and (not s or s.startswith("//")):
                continue
            if not buf:
                start = no
            buf.append(raw)
            depth, quote, _ = _scan(raw + "\n", depth, quote)
            if depth <= 0 and not quote:
                stmt = "\n".join(buf).strip()
                for part in _split_semis(stmt):
                    out.append(Statement(part, start))
                buf, depth, quote = [], 0, ""
        if buf:
            raise ScriptError(path, start, "unterminated statement (unbalanced brackets or quote)", "\n".join(buf))
        return out
    # semicolon mode
    depth, quote, semis = _scan(text, 0, "")
    if quote:
        raise ScriptError(path, text.count("\n", 0, len(text)) + 1, "unterminated string or quoted name")
    prev = 0
    for pos in [*semis, len(text)]:
        chunk = text[prev:pos]
        stripped = chunk.strip()
        if stripped and not all(ln.strip().startswith("//") or not ln.strip() for ln in stripped.splitlines()):
            lead = len(chunk) - len(chunk.lstrip())
            out.append(Statement(stripped, text.count("\n", 0, prev + lead) + 1))
        prev = pos + 1
    return out


def _split_semis(stmt: str) -> list[str]:
    """Split one logical line at top-level ``;`` (a line may hold ``A; B;``) and drop empty parts."""
    _, _, semis = _scan(stmt, 0, "")
    parts, prev = [], 0
    for pos in [*semis, len(stmt)]:
        part = stmt[prev:pos].strip()
        if part:
            parts.append(part)
        prev = pos + 1
    return parts


def read_script(path: str | Path) -> list[Statement]:
    """Read and split the script at ``path``; a file that is not UTF-8 text raises :class:`ScriptError`."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise ScriptError(str(p), 0, f"cannot read the file: {exc.strerror or exc}") from exc
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ScriptError(str(p), line, "the file is not UTF-8 text") from exc
    return split_statements(text, str(p))
