"""REAPER retrieval plans (``Step k: purpose - #Ek = tool(args)`` per line, paper §3–4): the typed model, a parser
that never raises (unreadable steps become :class:`PlanError` with their line, other text a note), the printer."""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

from ragplan.state.trace_sections import excerpt

__all__ = ["PlanArg", "PlanStep", "RetrievalPlan", "PlanError", "ParseResult", "PlanCall", "parse_plan", "format_plan",
           "format_arg", "as_steps", "EVIDENCE_REF"]


class PlanArg(BaseModel):
    """One argument of a step: a literal, a whole reference ``#Ej`` or a string with references in it."""

    kind: Literal["literal", "ref", "template"]
    value: Any = None
    """literal: the Python value; ref: ``"#Ej"``; template: the string with its ``#Ej`` placeholders."""
    refs: list[int] = Field(default_factory=list)
    """Evidence numbers referred to (``[1]`` for ``#E1``), in order of first appearance."""

    @classmethod
    def of(cls, v: Any) -> "PlanArg":
        """A literal; a string is a reference when it is exactly ``#Ej`` and a template when it contains one."""
        m = _REF_ONLY.fullmatch(v) if isinstance(v, str) else None
        if m:
            return cls(kind="ref", value=f"#E{int(m.group(1))}", refs=[int(m.group(1))])
        refs = list(dict.fromkeys(int(x) for x in EVIDENCE_REF.findall(v))) if isinstance(v, str) else []
        return cls(kind="template", value=v, refs=refs) if refs else cls(kind="literal", value=v)

    @model_validator(mode="before")
    @classmethod
    def _raw(cls, v: Any) -> Any:
        """A raw value (a hand-written step's argument) is read as :meth:`of` reads it."""
        return v if isinstance(v, PlanArg) or isinstance(v, dict) and v.get("kind") in _KINDS else dict(cls.of(v))


class PlanStep(BaseModel):
    """One plan step: ``Step {index}: {purpose} - #{evidence_var} = {tool}({args}, {kwargs})``."""

    index: int
    """The step number as written (``Step k``), or the step's position (1-based) when unnumbered."""
    purpose: str = ""
    evidence_var: str
    """The evidence variable the step assigns, without ``#``: ``"E1"``."""
    tool: str
    args: list[PlanArg] = Field(default_factory=list)
    """Positional arguments, in order."""
    kwargs: dict[str, PlanArg] = Field(default_factory=dict)
    """Keyword arguments, in the order written."""
    raw: str = ""
    """The step's source text (wrapped lines joined with one space)."""
    line: int = 0
    """The 1-based line where the step starts in the parsed text (0: not from text)."""

    @property
    def var_number(self) -> int:
        """The number of the evidence variable (``E3`` -> 3)."""
        return int(self.evidence_var.lstrip("#E") or 0)

    @property
    def refs(self) -> list[int]:
        """Every evidence number the step's arguments refer to, in order of first appearance."""
        return list(dict.fromkeys(r for a in [*self.args, *self.kwargs.values()] for r in a.refs))

    def call_text(self) -> str:
        """The call in canonical form: ``tool("x", key=#E1)``."""
        parts = [format_arg(a) for a in self.args] + [f"{k}={format_arg(a)}" for k, a in self.kwargs.items()]
        return f"{self.tool}({', '.join(parts)})"


class RetrievalPlan(BaseModel):
    """A REAPER retrieval plan: steps in the order written (possibly none)."""

    steps: list[PlanStep] = Field(default_factory=list)

    def tools(self) -> list[str]:
        """The tool of each step, in order (the paper's tool-sequence view of a plan)."""
        return [s.tool for s in self.steps]


class PlanError(BaseModel):
    """A problem found in a plan, tied to a line of its text (0 when not tied to one)."""

    line: int
    message: str
    kind: str = "syntax"
    """syntax, note, numbering, duplicate_var, unknown_tool, unknown_arg, duplicate_arg, missing_arg,
    too_many_args, arg_type, missing_ref, self_ref, forward_ref, cycle."""
    step: int | None = None
    """The step number the problem belongs to, when it belongs to one."""

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}" if self.line else self.message


class PlanCall(BaseModel):
    """One plan as a planner call wrote it and as validation judged it (REAPER keeps every one, in order)."""

    attempt: int = 1
    raw: str = ""
    """The planner's output as printed (classifier_planner: its filled arguments as JSON)."""
    steps: list[PlanStep] = Field(default_factory=list)
    """The steps read from ``raw`` — for an invalid plan, those that could be read."""
    valid: bool = False
    """Parsed without syntax errors and passed :func:`~ragplan.methods.reaper.validate.check_plan` (and the step bound)."""
    errors: list[PlanError] = Field(default_factory=list)
    """Why the plan is invalid (empty when valid)."""
    latency_s: float = 0.0
    """The planning time of this call (classifier_planner: routing plus argument filling)."""

    @property
    def plan(self) -> RetrievalPlan:
        """The steps as a :class:`RetrievalPlan`."""
        return RetrievalPlan(steps=self.steps)


def as_steps(value: Any) -> list[PlanStep]:
    """Typed steps from :class:`PlanStep` objects or their dumps (a server's or a record's), a :class:`RetrievalPlan`
    or None; anything else is a ``pydantic.ValidationError``."""
    if value is None:
        return []
    if isinstance(value, RetrievalPlan):
        return list(value.steps)
    return RetrievalPlan.model_validate({"steps": list(value)}).steps


class ParseResult(BaseModel):
    """What :func:`parse_plan` read: the steps it could read, errors for those it could not."""

    plan: RetrievalPlan
    errors: list[PlanError] = Field(default_factory=list)
    notes: list[PlanError] = Field(default_factory=list)
    """Text that is not part of any step (explanations, echoed prompt sections): ignored, not errors."""


_KINDS = ("literal", "ref", "template")
_REF_ONLY = re.compile(r"\s*#E(\d+)\s*")
EVIDENCE_REF = re.compile(r"#E(\d+)(?!\d)")
"""A reference to an earlier step's output (``#E2``) inside an argument's text."""
_STEP_HEADER = re.compile(r"^(?:[-*•]\s*)?(?:\*\*)?\s*step\s*(\d+)\s*(?:\*\*)?\s*[:.)\-–—]\s*(?:\*\*)?\s*", re.I)
_BARE_STEP = re.compile(r"^(?:[-*•]\s*)?#E\d+\s*=(?!=)")
_ASSIGN = re.compile(r"#E(\d+)\s*=\s*([A-Za-z_][\w.]*)\s*\(")
_ANSWER = re.compile(r"^\s*#+\s*answer\s*:\s*", re.I)
_SECTION = re.compile(r"^\s*#+\s*(?:input|output|answer|question|context)\s*:", re.I)
_FENCE = re.compile(r"^\s*```")
_KEYWORD = re.compile(r"([A-Za-z_]\w*)\s*=(?!=)\s*")
#: A bare argument: a reference (group 1), a JSON or Python word (2) or a number (3).
_TOKEN = re.compile(r"#E(\d+)(?![\w.])|(true|false|null|True|False|None)(?!\w)"
                    r"|(-?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?)(?![\w.])")
_WORDS = {"true": True, "false": False, "null": None, "True": True, "False": False, "None": None}
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "0": "\0", "\\": "\\", '"': '"', "'": "'", "/": "/"}
_STRING = {q: re.compile(f"{q}((?:[^{c}\\\\]|\\\\.)*){c}", re.S) for q, c in (('"', '"'), ("'", "'"), ("“", "”"))}
_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|.)", re.S)
_PUNCT_AFTER_CALL = re.compile(r"[\s,;.]*")
_MAX_STEP_LINES = 200


class _Unreadable(Exception):
    """Why a call cannot be read, at ``pos``; without one the text ends inside the call (more lines may complete it)."""

    def __init__(self, pos: int | None = None, message: str = "") -> None:
        super().__init__(message)
        self.pos, self.message = pos, message


def _scan_string(text: str, i: int) -> tuple[str, int]:
    m = _STRING[text[i]].match(text, i)
    if m is None:
        raise _Unreadable()
    return _ESCAPE.sub(lambda e: chr(int(e[1][1:], 16)) if len(e[1]) == 5 else _ESCAPES.get(e[1], "\\" + e[1]),
                       m[1]), m.end()


def _scan_value(text: str, i: int) -> tuple[PlanArg, int]:
    c = text[i]
    if c in _STRING:
        s, j = _scan_string(text, i)
        return PlanArg.of(s), j
    m = _TOKEN.match(text, i)
    if m and m.group(1):
        return PlanArg.of(m.group(0)), m.end()
    if m:
        num = m.group(3)
        val = _WORDS[m.group(2)] if m.group(2) else float(num) if any(ch in num for ch in ".eE") else int(num)
        return PlanArg(kind="literal", value=val), m.end()
    if c in "[{":
        try:
            val, j = json.JSONDecoder().raw_decode(text, i)
        except json.JSONDecodeError as exc:
            if exc.pos >= len(text):
                raise _Unreadable() from None
            raise _Unreadable(i, f"malformed JSON argument {excerpt(text[i:], 30)!r}: {exc.msg}") from None
        except RecursionError:
            raise _Unreadable(i, "JSON argument nested too deeply") from None
        return PlanArg(kind="literal", value=val), j
    raise _Unreadable(i, f"cannot read the argument starting at {excerpt(text[i:], 30)!r} "
                         "(expected a quoted string, a number, true/false/null or a reference #Ej)")


def _next(text: str, i: int) -> int:
    """The position of the next non-space character; :class:`_Unreadable` (no position) at the end of the text."""
    while i < len(text) and text[i].isspace():
        i += 1
    if i >= len(text):
        raise _Unreadable()
    return i


def _scan_call(text: str, i: int) -> tuple[list[PlanArg], dict[str, PlanArg], int]:
    """Arguments from just after ``tool(`` to the closing parenthesis; returns the position after it."""
    args: list[PlanArg] = []
    kwargs: dict[str, PlanArg] = {}
    while True:
        start = i = _next(text, i)
        if text[i] == ")":
            return args, kwargs, i + 1
        m = _KEYWORD.match(text, i)
        arg, i = _scan_value(text, _next(text, m.end()) if m else i)
        if m is None:
            if kwargs:
                raise _Unreadable(start, "a positional argument follows a keyword argument")
            args.append(arg)
        elif m.group(1) in kwargs:
            raise _Unreadable(start, f"argument {m.group(1)!r} is given twice")
        else:
            kwargs[m.group(1)] = arg
        i = _next(text, i)
        if text[i] == ",":
            i += 1
        elif text[i] != ")":
            raise _Unreadable(i, f"expected ',' or ')' after an argument, found {excerpt(text[i:], 30)!r}")


class _Block:
    """The lines of one step being read, reparsed as wrapped lines are added; ``done`` is its step or its error."""

    def __init__(self, index: int, lineno: int, text: str) -> None:
        self.index, self.text, self.starts = index, text, [(0, lineno)]  # starts: (offset in text, line number)
        self.state = "need_call"  # need_call | incomplete | complete | error
        self.done: PlanStep | PlanError | None = None
        self.call_pos = 0
        self._parse()

    def line_at(self, pos: int) -> int:
        return next(no for start, no in reversed(self.starts) if start <= pos)

    def add(self, lineno: int, text: str) -> None:
        self.starts.append((len(self.text) + 1, lineno))
        self.text += " " + text
        if len(self.starts) > _MAX_STEP_LINES:
            if self.state == "need_call":
                self.finish()
            else:
                self._fail(self.starts[0][1], f"the step runs over more than {_MAX_STEP_LINES} lines")
        elif self.state != "incomplete" or ")" in text:  # only a ')' can complete an open call
            self._parse()

    def _parse(self) -> None:
        text = self.text
        m = _ASSIGN.search(text)
        if not m:
            self.state = "need_call"
            return
        self.call_pos = m.start()
        try:
            args, kwargs, end = _scan_call(text, m.end())
            rest = text[end:]
            if _PUNCT_AFTER_CALL.fullmatch(rest) is None:
                pos = end + len(rest) - len(rest.lstrip())
                raise _Unreadable(pos, f"unexpected text after the call: {excerpt(text[pos:], 30)!r}")
        except _Unreadable as exc:
            if exc.pos is None:
                self.state = "incomplete"
            else:
                self._fail(self.line_at(exc.pos), exc.message)
            return
        except Exception as exc:  # noqa: BLE001  (the parser never raises on bad input)
            self._fail(self.line_at(m.start()), f"cannot read the call: {type(exc).__name__}")
            return
        purpose = text[:m.start()].strip().rstrip("-–—:").strip()
        self.state = "complete"
        self.done = PlanStep(index=self.index, purpose=purpose, evidence_var=f"E{int(m.group(1))}", tool=m.group(2),
                             args=args, kwargs=kwargs, raw=text.strip(), line=self.starts[0][1])

    def _fail(self, line: int, message: str) -> PlanError:
        self.state = "error"
        self.done = PlanError(line=line, message=f"step {self.index}: {message}", kind="syntax", step=self.index)
        return self.done

    def finish(self) -> PlanStep | PlanError | None:
        if self.state == "incomplete":
            self._parse()  # lines without ')' were not parsed: one last look for a precise error
        if self.state == "need_call":
            return self._fail(self.starts[0][1], f"no tool call (expected `#E{self.index} = tool(…)`): "
                                                 f"{excerpt(self.text, 60)!r}")
        if self.state == "incomplete":
            return self._fail(self.line_at(self.call_pos), "the call is not closed (a missing quote or ')'): "
                                                           f"{excerpt(self.text[self.call_pos:], 60)!r}")
        return self.done


def _strip_answer_header(lines: list[str]) -> list[str]:
    """Blank everything up to a ``# Answer:`` header (an echoed prompt) and the header itself."""
    for k, line in enumerate(lines):
        m = _ANSWER.match(line)
        if m:
            return [""] * k + [line[m.end():]] + lines[k + 1:]
    first = next((k for k, ln in enumerate(lines) if ln.strip() and not _FENCE.match(ln)), None)
    if first is not None:
        lines[first] = re.sub(r"^\s*answer\s*:\s*", "", lines[first], flags=re.I)
    return lines


def parse_plan(text: str | None) -> ParseResult:
    """Parse a REAPER plan; never raises. Unreadable steps become errors with their line numbers."""
    lines = _strip_answer_header(("" if text is None else str(text)).splitlines())
    blocks: list[_Block] = []  # each gives one step or one error
    notes: list[PlanError] = []
    cur: _Block | None = None  # the last block, while lines may still belong to it
    for lineno, line in enumerate(lines, 1):
        s = line.strip()
        if _FENCE.match(s):
            continue
        if not s:
            if cur is not None and cur.state in ("complete", "error"):
                cur = None
            continue
        if _SECTION.match(s) and blocks:
            rest = [n for n, ln in enumerate(lines[lineno - 1:], lineno) if ln.strip() and not _FENCE.match(ln)]
            notes.append(PlanError(line=lineno, kind="note",
                                   message=f"text after the plan ignored (lines {rest[0]}–{rest[-1]}): {s[:60]!r}"))
            break
        header = _STEP_HEADER.match(s)
        if header is None and cur is not None and cur.state != "complete":
            if not (_BARE_STEP.match(s) and cur.state != "need_call" or cur.state == "error" and _ASSIGN.search(s)):
                if cur.state != "error":  # (the rest of a step that could not be read is already reported)
                    cur.add(lineno, s)
                continue
        elif header is None and not (_ASSIGN.search(s) or _BARE_STEP.match(s)):
            cur = None
            notes.append(PlanError(line=lineno, kind="note", message=f"text outside any step ignored: {s[:80]!r}"))
            continue
        cur = _Block(int(header.group(1)) if header else len(blocks) + 1, lineno, s[header.end():] if header else s)
        blocks.append(cur)
    done = [b.finish() for b in blocks]
    return ParseResult(plan=RetrievalPlan(steps=[d for d in done if isinstance(d, PlanStep)]),
                       errors=[d for d in done if isinstance(d, PlanError)], notes=notes)


def format_arg(arg: PlanArg) -> str:
    """An argument in canonical form: a reference bare (``#E1``), everything else as JSON."""
    if arg.kind == "ref":
        return f"#E{arg.refs[0]}" if arg.refs else str(arg.value)
    return json.dumps(arg.value, ensure_ascii=False, default=str)


def format_plan(plan: RetrievalPlan) -> str:
    """The plan in the paper's canonical format, one ``Step k: purpose - #Ek = tool(…)`` line per step."""
    out = []
    for s in plan.steps:
        purpose = " ".join(s.purpose.split())
        head = f"Step {s.index}: {purpose} - " if purpose else f"Step {s.index}: "
        out.append(f"{head}#{s.evidence_var} = {s.call_text()}")
    return "\n".join(out)
