"""Loaders for the QA datasets users download: JSON (a list of records, or an object whose ``data`` is one) or JSON
Lines, gzipped too; a file that cannot be read raises :class:`DatasetError` naming the file, record and problem.
:func:`build_context_index` indexes the questions' own paragraphs (``--context-only``), keeping their sentences."""

from __future__ import annotations

import gzip
import hashlib
import itertools
import json
import re
import zlib
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

from ragplan.datasets.example import DatasetError, QAExample, RawRecord, infer_kind
from ragplan.datasets.formats import PARSERS, ParseOptions, looks_like, unsupported_format
from ragplan.jsonl import atomic_write, jsonl_text, read_text

__all__ = ["FORMATS", "QAExample", "DatasetError", "infer_kind", "load_qa", "detect_format", "read_records",
           "resolve_data_file", "normalize_format", "context_passages", "build_context_index"]

FORMATS = tuple(PARSERS)
"""Format names ``fmt=`` accepts."""

_FORMAT_ALIASES = {"hotpot": "hotpotqa", "2wiki": "2wikimultihopqa", "2wikimqa": "2wikimultihopqa",
                   "2wikimultihop": "2wikimultihopqa", "twowiki": "2wikimultihopqa", "strategy": "strategyqa",
                   "musique_ans": "musique", "musique_full": "musique"}

# the files each dataset's release holds, in the order a folder is searched for one
_DEFAULT_FILES = {
    "hotpotqa": ["hotpot_dev_distractor_v1.json", "hotpot_dev_fullwiki_v1.json", "dev.jsonl", "dev.json"],
    "2wikimultihopqa": ["dev.json", "dev.jsonl"],
    "musique": ["musique_ans_v1.0_dev.jsonl", "musique_full_v1.0_dev.jsonl", "dev.jsonl", "dev.json"],
    "strategyqa": ["strategyqa_train.json", "dev.jsonl", "dev.json", "train.json"],
    "fever": ["shared_task_dev.jsonl", "paper_dev.jsonl", "fever-dev-kilt.jsonl", "dev.jsonl"],
    "flashrag": ["dev.jsonl", "test.jsonl", "val.jsonl", "train.jsonl"],
    "kilt": [],
}
_SPLIT = re.compile(r"[-_.]?(dev|test|train|val|validation)$")


def normalize_format(fmt: str | None) -> str | None:
    """A format name in its canonical spelling (``2wiki`` → ``2wikimultihopqa``); ``None`` stays ``None``."""
    if fmt is None or not str(fmt).strip():
        return None
    f = str(fmt).strip().lower()
    f = _FORMAT_ALIASES.get(f, f)
    if f not in PARSERS:
        raise ValueError(f"unknown dataset format {fmt!r}; known: {', '.join(FORMATS)}")
    return f


def resolve_data_file(path: str | Path, dataset: str | None = None) -> Path:
    """``path`` itself when it is a file; in a folder, the dataset's usual file (e.g. ``dev.json``)."""
    p = Path(path).expanduser()
    if p.is_file():
        return p
    if not p.exists():
        raise FileNotFoundError(f"{p}: no such file or folder")
    names = _DEFAULT_FILES.get(dataset or "", []) if dataset else [n for ns in _DEFAULT_FILES.values() for n in ns]
    if found := next((c for name in names for c in (p / name, p / (name + ".gz")) if c.is_file()), None):
        return found
    present = sorted(x.name for x in p.iterdir() if x.suffix in (".json", ".jsonl", ".gz"))
    raise FileNotFoundError(f"{p} is a folder without a {dataset or 'dataset'} file "
                            f"(looked for {', '.join(names) or 'any known name'}; found {', '.join(present) or 'none'}); "
                            "give the file's path")


def _json_error(path: Path, exc: json.JSONDecodeError, line: int | None = None) -> DatasetError:
    where = f"line {line}" if line is not None else f"line {exc.lineno} column {exc.colno}"
    return DatasetError(f"{path}: {where}: not valid JSON ({exc.msg})")


def _holds_records(data: Any) -> bool:
    """A published file that is one object holding its records: SQuAD's ``{version, data}``, TriviaQA's
    ``{Data, Version, …}`` (written on one line, as they are published)."""
    return (isinstance(data, dict) and bool({"version", "Version"} & set(data))
            and any(isinstance(data.get(k), list) for k in ("data", "Data")))


def _lines(p: Path) -> Generator[tuple[int, str], None, None]:
    """The non-blank lines of ``p`` (``.gz`` decompressed, a BOM dropped) with their numbers, read one at a time."""
    try:
        with gzip.open(p) if p.suffix == ".gz" else open(p, "rb") as fh:
            for n, raw in enumerate(fh, 1):
                if (text := raw.decode("utf-8-sig" if n == 1 else "utf-8")).strip():
                    yield n, text
    except UnicodeDecodeError:
        raise DatasetError(f"{p}:{n}: not UTF-8 text (a binary file?)") from None
    except (OSError, EOFError, zlib.error) as exc:
        raise DatasetError(f"{p}: cannot read: {exc}") from None


def read_records(path: str | Path) -> Iterator[RawRecord]:
    """The raw records of a JSON or JSON Lines file (blank lines skipped), each with its location; JSON Lines are
    read and parsed one line at a time."""
    p = Path(path)
    lines = _lines(p)
    head = next(lines, None)
    if head is None:
        raise DatasetError(f"{p}: the file is empty")
    if (start := head[1].lstrip()[0]) not in "[{":
        raise DatasetError(f"{p}: neither JSON nor JSON Lines (starts with {start!r})")
    first_error: DatasetError | None = None
    try:
        first = json.loads(head[1]) if start == "{" else None
    except json.JSONDecodeError as exc:
        first, first_error = None, _json_error(p, exc, head[0])  # maybe one pretty-printed object ({"data": [...]})
    if first is not None and not _holds_records(first):  # JSON Lines
        for index, (lineno, line) in enumerate(itertools.chain([head], lines)):  # (the first parsed again)
            try:
                data = json.loads(line)
            except json.JSONDecodeError as exc:
                raise _json_error(p, exc, lineno) from None
            yield RawRecord(data, p, index, lineno)
        return
    lines.close()
    try:  # one JSON document: read whole, as its reader needs
        whole = json.loads(read_text(p, DatasetError))
    except json.JSONDecodeError as exc:
        raise (first_error or _json_error(p, exc)) from None
    if isinstance(whole, dict):
        whole = next((whole[k] for k in ("data", "Data", "examples", "questions") if isinstance(whole.get(k), list)),
                     [whole])
    if not isinstance(whole, list):
        raise DatasetError(f"{p}: expected a list of records, got {type(whole).__name__}")
    for i, data in enumerate(whole):
        yield RawRecord(data, p, i)


def detect_format(path: str | Path) -> str:
    """The format of a dataset file, read from its first record's keys."""
    p = resolve_data_file(path)
    rec = next(read_records(p), None)
    if rec is None:
        raise DatasetError(f"{p}: no records")
    return _detect(rec)


def _detect(rec: RawRecord) -> str:
    fmt = looks_like(rec.data)
    if fmt is None:
        keys = ", ".join(sorted(map(str, rec.data))[:12])
        known = unsupported_format(rec.data)
        what = f"this is {known}, a format ragplan does not read" if known else "cannot tell the dataset format"
        raise DatasetError(f"{rec.where}: {what} (its keys: {keys}); ragplan reads {', '.join(FORMATS)} "
                           "(pass fmt= to name one of them)")
    return fmt


def _dataset_name(path: Path, fmt: str) -> str:
    """What a FlashRAG/KILT file is: ``hotpotqa/dev.jsonl`` → hotpotqa, ``fever-dev-kilt.jsonl`` → fever."""
    stem = path.name.split(".")[0].lower()
    if fmt == "kilt":
        return stem.split("-")[0] or "kilt"
    if stem in ("dev", "test", "train", "val", "validation") and path.parent.name:
        return path.parent.name.lower()
    return _SPLIT.sub("", stem) or fmt


def load_qa(path: str | Path, fmt: str | None = None, *, limit: int | None = None) -> list[QAExample]:
    """Read a QA dataset file (or a release folder) into examples, in file order: ``fmt`` one of :data:`FORMATS`
    (else detected), ``limit`` the first N records; 2Wiki's aliases from the ``id_aliases.json`` beside it."""
    fmt = normalize_format(fmt)
    p = resolve_data_file(path, fmt)
    records = read_records(p)
    first = next(records, None)
    if first is None:
        raise DatasetError(f"{p}: no records")
    fmt = fmt or _detect(first)
    opts = ParseOptions(dataset=_dataset_name(p, fmt) if fmt in ("flashrag", "kilt") else fmt)
    if fmt == "2wikimultihopqa" and (alias_file := p.parent / "id_aliases.json").is_file():
        opts.aliases = {rec.ident("Q_id"): rec.str_list("aliases") + rec.str_list("demonyms")
                        for rec in read_records(alias_file)}
    parse = PARSERS[fmt]
    out: list[QAExample] = []
    seen: dict[str, int] = {}
    for rec in itertools.islice(itertools.chain([first], records), None if limit is None else max(0, limit)):
        ex = parse(rec, opts)
        if ex.id in seen:
            rec.fail(f"id {ex.id!r} already used by record {seen[ex.id]} (ids must be unique)")
        seen[ex.id] = rec.index
        out.append(ex)
    return out


def context_passages(examples: list[QAExample]) -> list[dict[str, Any]]:
    """One ``{id, title, contents[, sentences]}`` passage per distinct (title, paragraph), ids hashed."""
    out: dict[str, dict[str, Any]] = {}
    for ex in examples:
        for title, sentences in ex.contexts:
            kept = [s.strip() for s in sentences if s.strip()]
            contents = " ".join(kept)
            pid = hashlib.sha1(f"{title}\n{contents}".encode()).hexdigest()[:16]
            if contents and pid not in out:
                out[pid] = {"id": pid, "title": title, "contents": contents,
                            **({"sentences": kept} if ex.sentence_segmented else {})}
    return list(out.values())


def build_context_index(examples: list[QAExample], root: str | Path, *, model: str = "", what: str = "") -> Path:
    """Build ``root/index`` (returned) from ``root/passages.jsonl``; reused when ``root/manifest.json`` (written
    last) matches. :class:`DatasetError` when the examples ship no paragraphs (``what`` names the data)."""
    passages = context_passages(examples)
    if not passages:
        raise DatasetError(f"{what or 'these questions'}: context_only needs the questions' own context paragraphs, "
                           "and these questions have none (FEVER and KILT files ship none, nor do most FlashRAG "
                           "files); retrieve from Wikipedia or a corpus index instead")
    root = Path(root)
    passages_path, index_dir, manifest_path = root / "passages.jsonl", root / "index", root / "manifest.json"
    text = jsonl_text(passages)
    manifest = {"passages_sha256": hashlib.sha256(text.encode()).hexdigest(), "passages": len(passages),
                "questions": len(examples), "embedding_model": model}
    try:
        fresh = json.loads(manifest_path.read_text()) == manifest and index_dir.is_dir() and passages_path.is_file()
    except (OSError, ValueError):
        fresh = False
    if not fresh:
        root.mkdir(parents=True, exist_ok=True)
        manifest_path.unlink(missing_ok=True)
        atomic_write(passages_path, text)
        # build_index resumes an interrupted build of the same passages and replaces an index of others
        from ragplan.tools.textindex import build_index

        build_index(passages_path, index_dir, model_path=model)
        atomic_write(manifest_path, json.dumps(manifest, indent=2))
    return index_dir
