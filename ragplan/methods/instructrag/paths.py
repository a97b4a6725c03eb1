"""Instruction paths (InstructRAG §4.2) in: JSONL ``{question, task, answer, path: [{action, argument}], success}``
records and ReAct-format trajectory logs (ReAct's and Reflexion's published logs). Only successful paths enter the
graph; failed ones are kept for the noise test."""

from __future__ import annotations

import ast
import hashlib
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable

from ragplan.jsonl import FileFormatError, atomic_write, jsonl_text, read_jsonl_objects, read_text
from ragplan.methods.instructrag.tasks import answer_type

__all__ = ["ACTIONS", "Instruction", "InstructionPath", "PathReadReport", "read_paths", "read_paths_jsonl",
           "parse_trajectory_log", "write_paths_jsonl", "parse_instruction"]

ACTIONS = ("Search", "Lookup", "Finish")
"""The HotpotQA action space of ReAct and InstructRAG (Table 9)."""

_INSTR = re.compile(r"^\s*([A-Za-z]+)\s*\[(.*)\]\s*$", re.S)


@dataclass(frozen=True)
class Instruction:
    """One action with its argument, e.g. ``Search[Ed Wood]``."""

    action: str  # Search, Lookup or Finish
    argument: str  # the entity, keyword or answer inside the brackets

    @property
    def text(self) -> str:
        """The instruction as written in a plan: ``Action[argument]``."""
        return f"{self.action}[{self.argument}]"


def parse_instruction(text: str) -> Instruction | None:
    """``"search[Ed Wood]"`` -> ``Instruction("Search", "Ed Wood")``; None for other actions or bad text."""
    m = _INSTR.match(text or "")
    if not m or m.group(1).capitalize() not in ACTIONS:
        return None
    return Instruction(m.group(1).capitalize(), " ".join(m.group(2).split()))


@dataclass
class InstructionPath:
    """The instructions that solved (or did not solve) one question of one task."""

    question: str
    answer: str
    instructions: list[Instruction]
    success: bool
    task: str = ""
    """The task (for HotpotQA one of the 12 answer types); derived when the source has none."""
    id: str = ""
    source: str = ""
    """Where the path came from (a file name and block number, or ``jsonl``)."""
    supporting_titles: list[str] = field(default_factory=list)
    """Gold supporting page titles when known (HotpotQA's supporting facts); the proxy reward uses them."""

    def __post_init__(self) -> None:
        if not self.id:
            self.id = hashlib.sha1(f"{self.question}\n{self.text}".encode()).hexdigest()[:12]

    @property
    def text(self) -> str:
        """The path as one line: ``Search[A] → Lookup[b] → Finish[c]``."""
        return " → ".join(i.text for i in self.instructions)

    def to_dict(self) -> dict[str, Any]:
        """The JSONL record of this path."""
        return {"id": self.id, "question": self.question, "task": self.task, "answer": self.answer,
                "path": [asdict(i) for i in self.instructions], "success": self.success,
                **({"supporting_titles": self.supporting_titles} if self.supporting_titles else {}),
                **({"source": self.source} if self.source else {})}


@dataclass
class PathReadReport:
    """What reading a set of files found."""

    successful: list[InstructionPath] = field(default_factory=list)
    failed: list[InstructionPath] = field(default_factory=list)
    skipped: int = 0
    """Log blocks without a usable path or label."""
    problems: list[str] = field(default_factory=list)
    """The first few reasons for skips (file:line: why)."""

    def add(self, p: InstructionPath) -> None:
        """File ``p`` under successful or failed, deriving its task when it has none."""
        p.task = p.task or answer_type(p.answer, p.question)
        (self.successful if p.success else self.failed).append(p)

    def skip(self, why: str) -> None:
        """Count a skipped block, keeping the first reasons."""
        self.skipped += 1
        if len(self.problems) < 20:
            self.problems.append(why)


def read_paths_jsonl(path: str | Path, report: PathReadReport | None = None) -> PathReadReport:
    """Read ``{question, task, answer, path: [{action, argument}], success}`` lines (an empty ``task`` is derived); a
    line that is no such record is a :class:`~ragplan.jsonl.FileFormatError` naming the file and line."""
    report = report if report is not None else PathReadReport()
    src = Path(path)
    for n, rec in read_jsonl_objects(src):
        try:
            steps = []
            for s in rec["path"]:
                ins = parse_instruction(s if isinstance(s, str) else f"{s.get('action', '')}[{s.get('argument', '')}]")
                if ins is None:
                    raise ValueError(f"unknown action {s!r} (use {', '.join(ACTIONS)})")
                steps.append(ins)
            if not steps:
                raise ValueError("empty path")
            p = InstructionPath(question=str(rec["question"]).strip(), answer=str(rec.get("answer", "")),
                                instructions=steps, success=bool(rec.get("success", True)),
                                task=str(rec.get("task") or ""), id=str(rec.get("id") or ""),
                                source=str(rec.get("source") or f"{src.name}:{n}"),
                                supporting_titles=[str(t) for t in rec.get("supporting_titles") or []])
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise FileFormatError(f"{src}:{n}: {'no ' if isinstance(exc, KeyError) else ''}{exc}") from None
        report.add(p)
    return report


_SECTION = re.compile(r"BEGIN (CORRECT|INCORRECT|HALTED|NOT_FINISH) AGENTS")
_QUESTION = re.compile(r"^(?:\d+\s+)?Question:\s*(.*)$")
_ACTION = re.compile(r"^Act(?:ion)?\s*\d*\s*:\s*(.*)$")
_OBS = re.compile(r"^Obs(?:ervation)?\s*\d*\s*:\s*(.*)$")
_GOLD = re.compile(r"^Correct answer:\s*(.*)$")
_VERDICT = re.compile(r"Answer is (CORRECT|INCORRECT)")
_INFO = re.compile(r"^\{'steps'|^\{\"steps\"")
_EXAMPLES_START = re.compile(r"here are some examples\s*:?", re.I)
_EXAMPLES_END = "(END OF EXAMPLES)"
_PREVIOUS_START = re.compile(r"^previous trial\s*:|below is the last trial you attempted", re.I)
_PREVIOUS_END = re.compile(r"^\(END PREVIOUS TRIAL\)|^Reflection\s*:", re.I)


def _label_of_info(line: str) -> tuple[bool | None, str]:
    """(success, gold answer) from a ReAct notebook info dict line."""
    try:
        info = ast.literal_eval(line.strip())
        if isinstance(info, dict):
            ok = info.get("em", info.get("reward"))
            return (bool(ok) if ok is not None else None), str(info.get("gt_answer", "") or "")
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        pass
    m = re.search(r"'em':\s*(True|False|1|0)", line) or re.search(r"'reward':\s*(True|False|1|0)", line)
    g = re.search(r"'gt_answer':\s*'([^']*)'", line)
    return (m.group(1) in ("True", "1") if m else None), (g.group(1) if g else "")


def parse_trajectory_log(text: str, source: str = "log", report: PathReadReport | None = None) -> PathReadReport:
    """ReAct-format trajectories of a log (Reflexion trial logs, ReAct notebook output, plain blocks): a block per
    ``Question:``, labelled by the Reflexion section, the notebook's info dict or ``Answer is CORRECT``; few-shot
    examples, quoted earlier trials and all but the last block before a label line are left out (counted)."""
    report = report if report is not None else PathReadReport()
    section: str | None = None
    blocks: list[dict[str, Any]] = []
    cur: dict[str, Any] | None = None
    pending: list[dict[str, Any]] = []  # blocks opened since the last boundary (section, label line, end of examples)
    in_examples = in_previous = previous_question_seen = gold_lines = False

    def supersede(mark: str | bool, label: dict[str, Any] | None = None) -> None:
        """End the pending blocks: the last takes ``label`` when given, the others are marked ``mark``."""
        nonlocal cur
        if pending and label is not None:
            pending.pop().update(label, closed=True)
        for b in pending:
            b["superseded"] = mark
        pending.clear()
        cur = None

    for n, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if in_examples or _EXAMPLES_END in line or _EXAMPLES_START.search(line):  # few-shot examples, to their end
            in_examples = _EXAMPLES_END not in line
            supersede("example")
            continue
        q, sec = _QUESTION.match(line), _SECTION.search(line)
        boundary = sec or line.startswith("BEGIN TRIAL")
        if in_previous:
            if not (_PREVIOUS_END.match(line) or (q and previous_question_seen) or boundary):
                previous_question_seen = previous_question_seen or bool(q)
                continue
            in_previous = False
            if not (q or boundary):
                continue
        if _PREVIOUS_START.search(line):
            in_previous, previous_question_seen, cur = True, False, None
        elif boundary:
            section, cur = sec.group(1) if sec else None, None
            pending.clear()
        elif q:
            cur = {"question": q.group(1).strip(), "actions": [], "section": section, "verdict": None,
                   "gold": "", "line": n, "info": None, "closed": False, "superseded": False}
            blocks.append(cur)
            pending.append(cur)
        elif g := _GOLD.match(line):
            gold_lines = True
            supersede(True, {"gold": g.group(1).strip()})
        elif _INFO.match(line):
            supersede(True, {"info": _label_of_info(line)})
        elif cur is not None and (a := _ACTION.match(line)):
            cur["actions"].append(a.group(1).strip())
        elif cur is not None and (o := _OBS.match(line)) and (v := _VERDICT.search(o.group(1))):
            cur["verdict"] = v.group(1) == "CORRECT"
    for b in blocks:
        where = f"{source}:{b['line']}"
        steps = [ins for ins in map(parse_instruction, b["actions"]) if ins is not None]
        success: bool | None = b["verdict"]
        gold = b["gold"]
        if b["section"] is not None and (b["closed"] or not gold_lines):
            success = b["section"] == "CORRECT"
        elif b["info"] is not None and b["info"][0] is not None:
            success, gold = b["info"][0], gold or b["info"][1]
        if b["superseded"]:
            report.skip(f"{where}: a few-shot example, not a trial" if b["superseded"] == "example"
                        else f"{where}: an earlier block before the label line (the label is the last trial's)")
        elif not b["question"] or not steps:
            report.skip(f"{where}: no question or no Search/Lookup/Finish action")
        elif success is None:
            report.skip(f"{where}: no correct/incorrect label")
        else:
            finish = [s.argument for s in steps if s.action == "Finish"]
            report.add(InstructionPath(question=b["question"], answer=gold or (finish[-1] if finish else ""),
                                       instructions=steps, success=success, source=where))
    return report


def read_paths(files: Iterable[str | Path]) -> PathReadReport:
    """Read every file: ``.jsonl`` / ``.json`` as JSONL records, anything else as a trajectory log; a (question,
    path) read twice is kept once. A JSONL line that is no path, or a file that yields no path at all, is a
    :class:`~ragplan.jsonl.FileFormatError` naming it; log blocks without a labelled path are skipped and counted."""
    report = PathReadReport()
    for f in files:
        p = Path(f)
        if not p.is_file():
            raise FileNotFoundError(f"no paths file at {p}")
        before, problems = len(report.successful) + len(report.failed), len(report.problems)
        if p.suffix.lower() in (".jsonl", ".json"):
            read_paths_jsonl(p, report)
        else:
            parse_trajectory_log(read_text(p), p.name, report)
        if len(report.successful) + len(report.failed) == before:  # an empty file, one of another kind, a truncated one
            if not read_text(p).strip():  # read again only to say why
                raise FileFormatError(f"{p}: the file is empty")
            why = report.problems[problems] if len(report.problems) > problems else "no Question/Action blocks with a label"
            raise FileFormatError(f"{p}: no instruction path could be read (first problem: {why}); expected JSONL lines "
                             "{question, answer, path: [{action, argument}], success} or a ReAct/Reflexion trajectory log")
    for name in ("successful", "failed"):  # a (question, path) read twice is kept once: its first copy
        first = {p.id: p for p in reversed(getattr(report, name))}
        setattr(report, name, [first[i] for i in dict.fromkeys(p.id for p in getattr(report, name))])
    return report


def write_paths_jsonl(paths: Iterable[InstructionPath], out: str | Path) -> int:
    """Write paths as JSONL (the format :func:`read_paths_jsonl` reads); returns the count."""
    rows = [p.to_dict() for p in paths]
    atomic_write(out, jsonl_text(rows))
    return len(rows)
