"""The one shape every QA dataset is read into, and a checked view of one raw record (:class:`RawRecord` reports
a malformed record the same way for every format: ``FILE: record N (line L): problem``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, NoReturn

from pydantic import StrictInt, StrictStr, TypeAdapter, ValidationError

from ragplan.state.trace_sections import excerpt

__all__ = ["QAExample", "DatasetError", "RawRecord", "Kind", "infer_kind", "DecompositionStep"]

Kind = Literal["span", "yesno", "fever"]

_YESNO = {"yes", "no"}
_FEVER = {"SUPPORTS", "REFUTES", "NOT ENOUGH INFO"}


class DatasetError(ValueError):
    """A dataset file that cannot be read: says which file, which record and what is wrong."""


@dataclass(frozen=True)
class DecompositionStep:
    """One annotated single-hop step of a multi-hop question (MuSiQue's ``question_decomposition``)."""

    id: str
    """The step's id in the source single-hop dataset."""
    question: str
    """The step's question; ``#1``, ``#2`` … refer to earlier steps' answers (``"#1 >> spouse"``)."""
    answer: str
    paragraph_support_idx: int | None
    """The answering paragraph's own ``idx`` as the file writes it (not necessarily its place in the list)."""
    paragraph_position: int | None = None
    """That paragraph's position in :attr:`QAExample.contexts`."""


@dataclass
class QAExample:
    """One question with its gold answers and whatever evidence the dataset ships."""

    id: str
    """The dataset's id (``_id``, ``qid``, ``id``) as a string; unique within a file."""
    question: str
    """The question, or for FEVER the claim."""
    answers: list[str]
    """Gold answers, the dataset's own first (aliases after it); FEVER: ``[label]``."""
    kind: Kind
    """``span`` (free text, EM/F1), ``yesno`` (answers are "yes"/"no") or ``fever`` (a FEVER label)."""
    contexts: list[tuple[str, list[str]]] = field(default_factory=list)
    """Paragraphs shipped with the question: ``(title, sentences)``; MuSiQue's as ``(title, [paragraph_text])``."""
    sentence_segmented: bool = True
    """Whether each context holds the dataset's own sentences (False: one unsegmented paragraph, MuSiQue)."""
    supporting_facts: list[tuple[str, int]] = field(default_factory=list)
    """Gold evidence sentences as ``(title, sentence index)`` (FEVER: every set's sentences, united)."""
    evidence_sets: list[list[tuple[str, int]]] = field(default_factory=list)
    """FEVER's evidence sets, each verifying the claim *together*; any one complete set suffices."""
    supporting_paragraphs: list[int] = field(default_factory=list)
    """Positions in :attr:`contexts` of the gold supporting paragraphs (MuSiQue's ``is_supporting``)."""
    decomposition: list[str] = field(default_factory=list)
    """Annotated sub-questions (StrategyQA's ``decomposition``; MuSiQue's step questions)."""
    decomposition_steps: list[DecompositionStep] = field(default_factory=list)
    """MuSiQue's full ``question_decomposition``: each step's question, answer and supporting paragraph."""
    meta: dict[str, Any] = field(default_factory=dict)
    """``dataset`` always; ``type``/``level``/``label`` and other dataset fields where present."""

    @property
    def gold(self) -> str:
        """The dataset's own answer (the first of :attr:`answers`)."""
        return self.answers[0]

    @property
    def dataset(self) -> str:
        """The dataset's name (``hotpotqa``, ``fever`` …)."""
        return str(self.meta.get("dataset", ""))


def infer_kind(answers: list[str]) -> Kind:
    """``yesno`` when every answer is yes/no, ``fever`` when every answer is a FEVER label, else ``span``."""
    if answers and all(a.strip().lower() in _YESNO for a in answers):
        return "yesno"
    if answers and all(a.strip().upper().replace("_", " ") in _FEVER for a in answers):
        return "fever"
    return "span"


class RawRecord:
    """A raw record of a dataset file with typed, located accessors."""

    def __init__(self, data: Any, path: Path, index: int, line: int | None = None) -> None:
        self.path, self.index, self.line = path, index, line
        self.where = f"{path}: record {index}" + (f" (line {line})" if line is not None else "")
        if not isinstance(data, dict):
            self.fail(f"expected a JSON object, got {type(data).__name__}")
        self.data: dict[str, Any] = data

    def fail(self, problem: str) -> NoReturn:
        """Raise :class:`DatasetError` naming this record."""
        raise DatasetError(f"{self.where}: {problem}")

    def has(self, key: str) -> bool:
        """Whether the record has ``key`` with a non-null value."""
        return self.data.get(key) is not None

    def get(self, key: str, default: Any = None) -> Any:
        """The raw value of ``key`` (``default`` when absent or null)."""
        value = self.data.get(key)
        return default if value is None else value

    def ident(self, *keys: str, fallback: bool = False) -> str:
        """The record's id from the first present key; with ``fallback`` the record index when none is."""
        for k in keys:
            v = self.data.get(k)
            if isinstance(v, (str, int)) and not isinstance(v, bool) and str(v).strip():
                return str(v).strip()
        if fallback:
            return str(self.index)
        self.fail(f"no id (expected {' or '.join(repr(k) for k in keys)})")

    def text(self, key: str, *, what: str = "") -> str:
        """A required non-empty string (numbers are accepted and turned into text)."""
        v = self.data.get(key)
        if v is None:
            self.fail(f"missing {key!r}{what}")
        if isinstance(v, bool) or not isinstance(v, (str, int, float)):
            self.fail(f"{key!r} should be a string, got {type(v).__name__}")
        s = str(v).strip()
        if not s:
            self.fail(f"{key!r} is empty")
        return s

    def str_list(self, key: str, *, required: bool = False) -> list[str]:
        """A list of strings (a single string counts as a list of one); ``[]`` when absent."""
        v = self.data.get(key)
        if v is None:
            if required:
                self.fail(f"missing {key!r}")
            return []
        if isinstance(v, str):
            v = [v]
        if not isinstance(v, list) or not all(isinstance(x, (str, int, float)) and not isinstance(x, bool) for x in v):
            self.fail(f"{key!r} should be a list of strings")
        return [str(x) for x in v]

    def listed(self, key: str, adapter: TypeAdapter[Any], shape: str, value: Any = None, column: str = "") -> Any:
        """``value`` (default: the record's ``key``; ``[]`` when absent) validated by ``adapter``, with ``column`` also
        in the column form ``{"title": [...], column: […]}``; else the record's error naming the first bad item."""
        value = self.get(key, []) if value is None else value
        if column and isinstance(value, dict):
            titles, xs = value.get("title"), value.get(column)
            if not isinstance(titles, list) or not isinstance(xs, list) or len(titles) != len(xs):
                self.fail(f"{key!r} in column form needs lists 'title' and {column!r} of equal length")
            value = [list(p) for p in zip(titles, xs)]
        try:
            return adapter.validate_python(value)
        except ValidationError as exc:
            err = max(exc.errors(), key=lambda e: len(e["loc"]))  # the deepest: a union tries each member
            at = err["loc"][0] if err["loc"] else None
            if not (isinstance(at, int) and isinstance(value, list)):
                self.fail(f"{key!r} should be a list of {shape}")
            path, leaf = "", value[at]
            for x in err["loc"][1:]:  # the bad value's place in the item
                try:
                    path, leaf = f"{path}[{x!r}]", leaf[x]
                except (KeyError, IndexError, TypeError):  # a union's member tag, not a place
                    continue
            why = f": {path} is {excerpt(repr(leaf), 80)} ({err['msg'][0].lower()}{err['msg'][1:]})" if path else ""
            self.fail(f"{key!r}[{at}] should be {shape}, got {excerpt(repr(value[at]), 200)}{why}")

    def contexts(self, value: Any = None, key: str = "context") -> list[tuple[str, list[str]]]:
        """``[[title, [sentence, …]], …]`` (HotpotQA; one string is one sentence) or ``{"title": [...], "sentences":
        [[...]]}`` (HF columns)."""
        pairs = self.listed(key, _CONTEXTS, "[title, [sentences]]", value, column="sentences")
        return [(title, [x] if isinstance(x, str) else x) for title, x in pairs]

    def facts(self, value: Any = None, key: str = "supporting_facts") -> list[tuple[str, int]]:
        """``[[title, sentence index], …]`` or ``{"title": [...], "sent_id": [...]}``."""
        return self.listed(key, _FACTS, "[title, sentence index]", value, column="sent_id")


_CONTEXTS = TypeAdapter(list[tuple[StrictStr, StrictStr | list[StrictStr]]])
_FACTS = TypeAdapter(list[tuple[StrictStr, StrictInt]])
