"""Passage files: JSONL (``{id, title, contents}``, FlashRAG's ``{id, contents}``) and TSV with a header (DPR style),
told apart by name or first character; a malformed line is a :class:`PassageFormatError` naming ``file:line``."""

from __future__ import annotations

import csv
import gzip
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Iterator

from ragplan.tools.retrieval import Passage

__all__ = ["PassageFormatError", "ReadStats", "read_passages", "detect_passage_format", "embed_text"]

_ID_KEYS = ("id", "_id", "docid", "doc_id")
_TEXT_KEYS = ("contents", "text", "passage")
_NOT_UTF8 = "not UTF-8 text (a binary file?)"
_FORMAT_OF = {".jsonl": "jsonl", ".json": "jsonl", ".ndjson": "jsonl", ".tsv": "tsv"}


class PassageFormatError(ValueError):
    """A passage file line that cannot be read; the message starts with ``file:line:``."""

    def __init__(self, path: str | Path, line: int, message: str) -> None:
        super().__init__(f"{path}:{line}: {message}")


@dataclass
class ReadStats:
    """What a :func:`read_passages` pass saw: passages read, malformed lines skipped (first messages kept)."""

    read: int = 0
    skipped: int = 0
    errors: list[str] = field(default_factory=list)


def embed_text(p: Passage) -> str:
    """The text a passage is embedded as: its title and text on two lines (FlashRAG's ``contents`` form)."""
    return f"{p.title}\n{p.text}" if p.title else p.text


def _open(path: Path) -> IO[bytes]:
    return gzip.open(path, "rb") if path.suffix == ".gz" else path.open("rb")  # type: ignore[return-value]


def detect_passage_format(path: str | Path) -> str:
    """``"jsonl"`` or ``"tsv"`` for a passage file, from its name or else its first non-blank character."""
    p = Path(path)
    ext = next((s.lower() for s in reversed(p.suffixes) if s.lower() != ".gz"), "")
    if ext in _FORMAT_OF:
        return _FORMAT_OF[ext]
    with _open(p) as fh:
        first = next((raw for raw in fh if raw.strip()), b"{")
    return "jsonl" if first.lstrip().startswith(b"{") else "tsv"


def split_flashrag_title(contents: str) -> tuple[str, str]:
    """``('Title', 'text')`` for FlashRAG's ``"Title"\\ntext`` contents, else ``('', contents)``."""
    first, sep, rest = contents.partition("\n")
    first = first.strip()
    if sep and len(first) >= 2 and first[0] == '"' and first[-1] == '"':
        return first[1:-1].strip(), rest.strip()
    return "", contents.strip()


def read_passages(path: str | Path, *, skip_malformed: bool = False, stats: ReadStats | None = None) -> Iterator[Passage]:
    """The passages of a JSONL or TSV file in order; a malformed line raises, or is counted with ``skip_malformed``."""
    p = Path(path)  # (a missing file: FileNotFoundError from open, build_index names it first)
    stats = stats if stats is not None else ReadStats()
    reader = _read_jsonl if detect_passage_format(p) == "jsonl" else _read_tsv
    for item in reader(p):
        if isinstance(item, PassageFormatError):
            if not skip_malformed:
                raise item
            stats.skipped += 1
            if len(stats.errors) < 20:
                stats.errors.append(str(item))
            continue
        stats.read += 1
        yield item


def _passage(pid: object, title: object, text: object, sentences: object = None) -> Passage | str:
    """A Passage, or the reason the fields are not one."""
    if pid is None or isinstance(pid, (dict, list, bool)) or str(pid).strip() == "":
        return "no passage id"
    if not isinstance(text, str):
        return "text is not a string"
    if title is not None and not isinstance(title, str):
        return "title is not a string"
    if sentences is not None and not (isinstance(sentences, list) and all(isinstance(x, str) for x in sentences)):
        return "'sentences' is not a list of strings"
    title, text = (title or "").strip(), text.strip()
    if not title and not text:
        return "empty passage (no title and no text)"
    return Passage(id=str(pid).strip(), title=title, text=text, source="local", sentences=list(sentences or []))


def _read_jsonl(path: Path) -> Iterator[Passage | PassageFormatError]:
    with _open(path) as fh:
        for lineno, raw in enumerate(fh, 1):
            if raw.strip():
                res = _json_passage(raw)
                yield PassageFormatError(path, lineno, res) if isinstance(res, str) else res


def _json_passage(raw: bytes) -> Passage | str:
    """The passage of one JSONL line, or the reason it is not one."""
    try:
        obj = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        return _NOT_UTF8
    except json.JSONDecodeError as exc:
        return f"not a JSON object ({exc.msg}, column {exc.colno})"
    if not isinstance(obj, dict):
        return f"expected a JSON object, got {type(obj).__name__}"
    if (text_key := next((k for k in _TEXT_KEYS if k in obj), None)) is None:
        return "no 'contents' (or 'text') field"
    text, title = obj[text_key], obj.get("title")
    if title is None and isinstance(text, str):
        title, text = split_flashrag_title(text)
    return _passage(next((obj[k] for k in _ID_KEYS if k in obj), None), title, text, obj.get("sentences"))


def _header_columns(header: list[str]) -> dict[str, int] | None:
    names = [h.strip().lower().lstrip("\ufeff") for h in header]
    found = {role: next((i for i, n in enumerate(names) if n in keys), None)
             for role, keys in (("id", _ID_KEYS), ("text", _TEXT_KEYS), ("title", ("title",)))}
    cols = {role: i for role, i in found.items() if i is not None}
    return cols if "id" in cols and "text" in cols else None


def _read_tsv(path: Path) -> Iterator[Passage | PassageFormatError]:
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))
    with _open(path) as fh:  # (bytes that are not UTF-8 decode to surrogates, which UTF-8 cannot encode)
        rows = csv.reader((raw.decode("utf-8", "surrogateescape") for raw in fh), delimiter="\t", quotechar='"')
        cols: dict[str, int] | None = None
        last = 0
        try:
            for row in rows:
                start, last = last + 1, rows.line_num
                try:
                    "\t".join(row).encode("utf-8")
                except UnicodeEncodeError:
                    yield PassageFormatError(path, start, _NOT_UTF8)
                    continue
                if not row or all(not c.strip() for c in row):
                    continue
                if cols is None:
                    cols = _header_columns(row)
                    if cols is None:
                        raise PassageFormatError(path, start, "the first line of a TSV passage file must be a header "
                                                 "naming the columns, e.g. 'id<TAB>text<TAB>title' (DPR) or "
                                                 f"'id<TAB>title<TAB>text'; got {row[:4]!r}")
                    width = len(row)
                elif len(row) != width:
                    yield PassageFormatError(path, start, f"{len(row)} tab-separated fields, the header has {width}")
                else:
                    res = _passage(row[cols["id"]], row[cols["title"]] if "title" in cols else "", row[cols["text"]])
                    yield PassageFormatError(path, start, res) if isinstance(res, str) else res
        except csv.Error as exc:  # the csv reader cannot continue past a broken quoted field
            yield PassageFormatError(path, last + 1, f"unreadable TSV line ({exc})")
