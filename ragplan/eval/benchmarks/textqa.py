"""Open-domain QA benchmarks of the runner: HotpotQA, 2WikiMultihopQA, StrategyQA, FEVER, FlashRAG files.

Registered as ``hotpotqa``, ``2wikimultihopqa``, ``strategyqa``, ``fever`` and ``flashrag``
(Think-then-Act §4.1). Each reads its file with :func:`ragplan.datasets.load_qa` and grades an
answer by the official HotpotQA EM and F1 (:mod:`ragplan.eval.metrics`); yes/no and FEVER answers
are first read as a label, so "Yes, because …" scores as *yes* (the paper extracts the final
answer before matching). ``correct`` is the label match for yes/no and FEVER questions and EM = 1
for span answers; ``retrieval_ratio`` is the share of (sub-)queries that retrieved (Think-then-Act
reports it beside EM).

Options (``RunSettings.benchmark_options``): ``context_only`` builds a local FAISS index from the
loaded questions' own context paragraphs (HotpotQA distractor/fullwiki, 2Wiki, StrategyQA facts)
and points every question's retriever at it, so a run needs no Wikipedia; ``fmt`` names the file
format when detection should not decide; ``embedding_model`` is the Sentence-BERT model path used
for that index (it must be the one the retriever embeds queries with).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Mapping
from typing import Any, Callable

from ragplan.datasets import DatasetError, QAExample, load_qa
from ragplan.datasets.qa import detect_format, normalize_format, resolve_data_file
from ragplan.eval.benchmark import Item
from ragplan.eval.runfolder import atomic_write
from ragplan.eval.metrics import (
    exact_match, extract_label, f1_score, normalize_answer, retrieval_count, retrieval_ratio,
)

__all__ = ["TextQABenchmark", "SPECS", "BENCHMARKS", "context_passages", "question_text"]


@dataclass(frozen=True)
class _Spec:
    formats: tuple[str, ...]
    """File formats the benchmark reads (its own plus the generic FlashRAG/KILT containers)."""
    kinds: tuple[str, ...]
    """Answer kinds its questions may have."""
    group_by: tuple[str, ...]
    """Meta keys with a table each (only those the loaded questions have are used)."""


SPECS: dict[str, _Spec] = {
    "hotpotqa": _Spec(("hotpotqa", "flashrag", "kilt"), ("span", "yesno"), ("type", "level")),
    "2wikimultihopqa": _Spec(("2wikimultihopqa", "flashrag", "kilt"), ("span", "yesno"), ("type",)),
    "strategyqa": _Spec(("strategyqa", "flashrag", "kilt"), ("yesno",), ("label",)),
    "fever": _Spec(("fever", "flashrag", "kilt"), ("fever",), ("label",)),
    "flashrag": _Spec(("flashrag", "kilt"), ("span", "yesno", "fever"), ("dataset", "type", "level", "label")),
}
"""Benchmark name → what it reads and how its tables are grouped."""

_OPTIONS = ("limit", "year", "context_only", "fmt", "embedding_model")


def question_text(ex: QAExample) -> str:
    """The text given to a method: the question; for FEVER the claim with the three labels to choose from."""
    if ex.kind != "fever":
        return ex.question
    claim = ex.question.rstrip()
    if claim[-1:] not in ".!?":
        claim += "."
    return f"Claim: {claim} Is it SUPPORTS, REFUTES or NOT ENOUGH INFO?"


def context_passages(examples: list[QAExample]) -> list[dict[str, str]]:
    """One ``{id, title, contents}`` passage per distinct (title, paragraph) of the examples' contexts.

    ``contents`` is the paragraph's sentences joined by single spaces; ids are a hash of title and
    contents, so the same paragraph has the same id whichever questions are loaded.
    """
    out: list[dict[str, str]] = []
    seen: set[str] = set()
    for ex in examples:
        for title, sentences in ex.contexts:
            contents = " ".join(s.strip() for s in sentences if s.strip())
            if not contents:
                continue
            pid = hashlib.sha1(f"{title}\n{contents}".encode()).hexdigest()[:16]
            if pid not in seen:
                seen.add(pid)
                out.append({"id": pid, "title": title, "contents": contents})
    return out


@dataclass
class TextQABenchmark:
    """One of the QA benchmarks over a downloaded dataset file (see the module docstring)."""

    name: str
    data: str
    limit: int | None = None
    year: int | None = None
    """Ignored (the runner passes it to every benchmark)."""
    context_only: bool = False
    fmt: str | None = None
    embedding_model: str = ""
    metrics: tuple[str, ...] = ("em", "f1", "retrieval_ratio")
    _cache: list[QAExample] | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.name not in SPECS:
            raise KeyError(f"unknown QA benchmark {self.name!r}; known: {', '.join(SPECS)}")
        self.fmt = normalize_format(self.fmt)

    @property
    def spec(self) -> _Spec:
        """What this benchmark reads and groups by."""
        return SPECS[self.name]

    @property
    def group_by(self) -> tuple[str, ...]:
        """The spec's group keys that the loaded questions actually carry."""
        exs = self.examples()
        return tuple(k for k in self.spec.group_by if any(k in ex.meta for ex in exs))

    def examples(self) -> list[QAExample]:
        """The loaded examples (read once), after ``limit``; checks the file is this benchmark's kind."""
        if self._cache is None:
            path = resolve_data_file(self.data, self.fmt or self.spec.formats[0])
            fmt = self.fmt or detect_format(path)
            if fmt not in self.spec.formats:
                raise DatasetError(f"{path} looks like {fmt} data, not {self.name} "
                                   f"(use --benchmark {fmt if fmt in SPECS else 'flashrag'}, or fmt= to override)")
            exs = load_qa(path, fmt, limit=self.limit or None)
            for ex in exs:
                if ex.kind not in self.spec.kinds:
                    raise DatasetError(f"{path}: question {ex.id!r} has {ex.kind} answers ({ex.gold!r}); "
                                       f"{self.name} expects {' or '.join(self.spec.kinds)} answers")
            self._cache = exs
        return self._cache

    def items(self) -> list[Item]:
        """One item per question, in file order; ``meta`` carries dataset, kind and type/level/label."""
        out = []
        for ex in self.examples():
            meta: dict[str, Any] = {k: v for k, v in ex.meta.items() if isinstance(v, (str, int, float, bool))}
            meta.update({"dataset": ex.dataset, "kind": ex.kind, "_answers": list(ex.answers)})
            out.append(Item(ex.id, question_text(ex), ex.gold, {}, meta))
        return out

    def grade(self, item: Item, output: dict[str, Any]) -> dict[str, Any]:
        """EM, F1, ``correct``, the chosen (normalised) answer and the retrieval ratio and count.

        For yes/no and FEVER questions the label read from the answer is scored (the raw text when
        no label can be read, which then scores 0 against a label); ``raw_em``/``raw_f1`` keep the
        scores of the answer text as given. Missing output keys count as empty / zero.
        """
        prediction = str(output.get("answer") or "")
        golds = list(item.meta.get("_answers") or [item.gold])
        kind = item.meta.get("kind", "span")
        raw_em, raw_f1 = exact_match(prediction, golds), f1_score(prediction, golds)
        if kind in ("yesno", "fever"):
            label = extract_label(prediction, kind)
            scored = label if label is not None else prediction
            em, f1 = exact_match(scored, golds), f1_score(scored, golds)
            chosen = label if label is not None else normalize_answer(prediction)
            correct = label is not None and em == 1.0
        else:
            em, f1, chosen, correct = raw_em, raw_f1, normalize_answer(prediction), raw_em == 1.0
        return {"correct": bool(correct), "chosen": chosen, "em": em, "f1": round(f1, 4),
                "raw_em": raw_em, "raw_f1": round(raw_f1, 4),
                "retrieval_ratio": round(retrieval_ratio(output), 4), "retrieval_count": retrieval_count(output)}

    def prepare(self, run_dir: str | Path, context: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """With ``context_only``: a local index of the questions' own paragraphs, built once per run folder.

        Writes ``RUN_DIR/context_index/passages.jsonl`` and builds the index into
        ``RUN_DIR/context_index/index``; ``manifest.json`` is written only after the build finished,
        so a resumed run reuses a complete index of the same passages and model at once, and hands
        an interrupted or outdated one back to ``build_index`` (which resumes or rebuilds it).
        The embedding model is the ``embedding_model`` option, else the run's context setting of
        that name (``context``, when the runner passes it), else the packaged default — the
        retriever must embed queries with the same model. Returns the context settings
        ``retriever`` = ``local`` and ``index_dir`` (and ``embedding_model`` when one is named);
        without ``context_only``, nothing.
        """
        if not self.context_only:
            return {}
        model = self.embedding_model or str((context or {}).get("embedding_model") or "")
        passages = context_passages(self.examples())
        if not passages:
            raise DatasetError(f"{self.data}: context_only needs the questions' own context paragraphs, and these "
                               f"{self.name} questions have none (FEVER and KILT files ship none, nor do most FlashRAG "
                               "files); retrieve from Wikipedia or a corpus index instead")
        root = Path(run_dir) / "context_index"
        passages_path, index_dir, manifest_path = root / "passages.jsonl", root / "index", root / "manifest.json"
        text = "".join(json.dumps(p, ensure_ascii=False) + "\n" for p in passages)
        manifest = {"passages_sha256": hashlib.sha256(text.encode()).hexdigest(), "passages": len(passages),
                    "questions": len(self.examples()), "embedding_model": model}
        if not (_read_json(manifest_path) == manifest and index_dir.is_dir() and passages_path.is_file()):
            root.mkdir(parents=True, exist_ok=True)
            manifest_path.unlink(missing_ok=True)
            atomic_write(passages_path, text)
            # build_index resumes an interrupted build of the same passages (its embedded shards are
            # kept) and replaces an index of other passages, so the folder is left to it
            from ragplan.tools.textindex import build_index

            build_index(passages_path, index_dir, model_path=model)
            atomic_write(manifest_path, json.dumps(manifest, indent=2))
        ctx: dict[str, Any] = {"retriever": "local", "index_dir": str(index_dir)}
        if model:
            ctx["embedding_model"] = model
        return ctx


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _factory(name: str) -> Callable[..., TextQABenchmark]:
    def make(data: str, **options: Any) -> TextQABenchmark:
        unknown = sorted(set(options) - set(_OPTIONS))
        if unknown:
            raise ValueError(f"benchmark {name!r} has no option {', '.join(unknown)}; options: {', '.join(_OPTIONS)}")
        return TextQABenchmark(name, data, **options)

    return make


#: Benchmark name -> factory, for :mod:`ragplan.eval.registry`.
BENCHMARKS = {_name: _factory(_name) for _name in SPECS}
