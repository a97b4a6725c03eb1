"""Open-domain QA benchmarks: HotpotQA, 2WikiMultihopQA, MuSiQue, StrategyQA, FEVER, FlashRAG (docs/evaluation.md,
"Benchmarks and their files"). A FEVER claim is the question; its label instructions the input ``instructions``."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from collections.abc import Mapping
from typing import Any

from ragplan.datasets import DatasetError, QAExample, load_qa
from ragplan.datasets.qa import (
    build_context_index, context_passages, detect_format, normalize_format, resolve_data_file,
)
from ragplan.eval.benchmark import Item
from ragplan.eval.figures import format_table
from ragplan.eval.metrics import (
    ScoreRule, exact_match, f1_score, label_accuracy, normalize_answer, read_label, retrieval_stats,
)
from ragplan.eval.retrieval import GoldSupport, SupportScorer, gold_support, support_metric_names
from ragplan.state.trace_sections import excerpt

__all__ = ["TextQABenchmark", "SPECS", "BENCHMARKS", "context_passages", "FEVER_INSTRUCTIONS", "text_report"]

FEVER_INSTRUCTIONS = ("This is a claim to verify. Answer SUPPORTS if the evidence supports it, REFUTES if the "
                      "evidence refutes it, or NOT ENOUGH INFO if there is not enough information to decide.")
"""The label instructions a FEVER item gives the graph beside its claim (the ``instructions`` input)."""

_LABEL_KINDS = ("yesno", "fever")


@dataclass(frozen=True)
class _Spec:
    formats: tuple[str, ...]  # file formats it reads (its own plus the generic FlashRAG/KILT containers)
    kinds: tuple[str, ...]  # answer kinds its questions may have
    group_by: tuple[str, ...]  # meta keys with a table each (those the loaded questions have)
    rule: ScoreRule = "hotpotqa"  # whose official EM/F1 rules grade it


SPECS: dict[str, _Spec] = {
    "hotpotqa": _Spec(("hotpotqa", "flashrag", "kilt"), ("span", "yesno"), ("type", "level", "kind")),
    "2wikimultihopqa": _Spec(("2wikimultihopqa", "flashrag", "kilt"), ("span", "yesno"), ("type", "kind")),
    "musique": _Spec(("musique",), ("span", "yesno"), ("hops", "answerable", "kind"), "musique"),
    "strategyqa": _Spec(("strategyqa", "flashrag", "kilt"), ("yesno",), ("label",)),
    "fever": _Spec(("fever", "flashrag", "kilt"), ("fever",), ("label",)),
    "flashrag": _Spec(("flashrag", "kilt"), ("span", "yesno", "fever"), ("dataset", "type", "level", "label", "kind")),
}
"""Benchmark name → what it reads, how its tables are grouped and whose EM/F1 rules grade it."""

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
    _cache: list[QAExample] | None = field(default=None, init=False, repr=False, compare=False)
    _support: SupportScorer | None = field(default=None, init=False, repr=False, compare=False)
    """Scores the executed queries against gold support when the run retrieves from a local index (set by prepare)."""

    def __post_init__(self) -> None:
        if self.name not in SPECS:
            raise KeyError(f"unknown QA benchmark {self.name!r}; known: {', '.join(SPECS)}")
        self.fmt = normalize_format(self.fmt)

    @property
    def spec(self) -> _Spec:
        """What this benchmark reads and groups by."""
        return SPECS[self.name]

    @cached_property
    def label_only(self) -> bool:
        """Whether every loaded question is a yes/no or FEVER question (``correct`` is then the label match)."""
        exs = self.examples()
        return bool(exs) and all(ex.kind in _LABEL_KINDS for ex in exs)

    @property
    def metrics(self) -> tuple[str, ...]:
        """The record fields every summary table averages (``label_acc`` only when some question has a label)."""
        labels = any(ex.kind in _LABEL_KINDS for ex in self.examples())
        return ("em", "f1", *(("label_acc",) if labels else ()), "retrieval_ratio", "subquery_retrieval_ratio",
                "retrieval_errors", *(support_metric_names(self._support.ks) if self._support is not None else ()))

    @property
    def plot_metrics(self) -> tuple[str, ...]:
        """What plot.png and a sweep's figure draw: EM and F1 (and label accuracy when some question has a label)."""
        return tuple(m for m in self.metrics if m in ("em", "f1", "label_acc"))

    @property
    def group_by(self) -> tuple[str, ...]:
        """The spec's group keys that the loaded questions carry (``kind`` only when they have several)."""
        exs = self.examples()
        return tuple(k for k in self.spec.group_by
                     if (len({ex.kind for ex in exs}) > 1 if k == "kind" else any(k in ex.meta for ex in exs)))

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

    @cached_property
    def _by_id(self) -> dict[str, QAExample]:
        """The loaded examples by id."""
        return {ex.id: ex for ex in self.examples()}

    def items(self) -> list[Item]:
        """One item per question, in file order; ``meta`` carries dataset, kind and type/level/label/hops; a FEVER
        item's graph inputs carry the label ``instructions``."""
        return [Item(ex.id, ex.question, ex.gold, {},
                     {**{k: v for k, v in ex.meta.items() if isinstance(v, (str, int, float, bool))},
                      "dataset": ex.dataset, "kind": ex.kind, "_answers": list(ex.answers)},
                     {"instructions": FEVER_INSTRUCTIONS} if ex.kind == "fever" else {})
                for ex in self.examples()]

    def grade(self, item: Item, output: dict[str, Any]) -> dict[str, Any]:
        """Official ``em``/``f1``, ``label_acc``, ``correct``, ``chosen`` (the normalised answer, a display copy cut at
        200 characters), ``predicted_label`` (the label read from the answer; the item's ``label`` stays the gold one)
        and the retrieval counts."""
        prediction = str(output.get("answer") or "")
        golds = list(item.meta.get("_answers") or [item.gold])
        kind = item.meta.get("kind", "span")
        rule = self.spec.rule
        answerable = item.meta.get("answerable") is not False
        em = exact_match(prediction, golds, rule) if answerable else None
        f1 = round(f1_score(prediction, golds, rule), 4) if answerable else None
        labelled = kind in _LABEL_KINDS
        label = read_label(prediction, kind) if labelled else None
        label_acc = label_accuracy(prediction, golds, kind) if labelled else None
        correct = label_acc == 1.0 if self.label_only else em == 1.0
        return {"correct": bool(correct), "chosen": excerpt(normalize_answer(prediction)), "predicted_label": label,
                "em": em, "f1": f1, "label_acc": label_acc, **retrieval_stats(output),
                **self._support_figures(item, output)}

    def _support_figures(self, item: Item, output: dict[str, Any]) -> dict[str, Any]:
        """The support figures of the output's ``executed_queries`` (a failure to search: ``support_error``)."""
        if self._support is None:
            return {}
        ex = self._by_id.get(item.id)
        queries = output.get("executed_queries")
        try:
            return dict(self._support.score(gold_support(ex) if ex is not None else GoldSupport(),
                                            queries if isinstance(queries, list) else None))
        except Exception as exc:
            return {**dict.fromkeys(support_metric_names(self._support.ks)),
                    "support_error": f"{type(exc).__name__}: {str(exc)[:300]}"}

    def report(self, records: list[dict[str, Any]]) -> str:
        """What the columns mean for this run, the label reading and the retrieval counts (Markdown)."""
        return text_report(records, self.spec.rule, self.label_only)

    def prepare(self, run_dir: str | Path, context: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """With ``context_only``: index the questions' own paragraphs in ``RUN_DIR/context_index`` and return
        the context settings that retrieve from it; without it, nothing."""
        given = dict(context or {})
        if not self.context_only:
            if given.get("retriever") == "local" and given.get("index_dir"):  # the run's own index: score against it
                self._score_support(str(given["index_dir"]), str(given.get("embedding_model") or ""))
            return {}
        model = self.embedding_model or str(given.get("embedding_model") or "")
        index_dir = build_context_index(self.examples(), Path(run_dir) / "context_index", model=model,
                                        what=f"{self.data} ({self.name})")
        self._score_support(str(index_dir), model)
        return {"retriever": "local", "index_dir": str(index_dir), **({"embedding_model": model} if model else {})}

    def _score_support(self, index_dir: str, model: str) -> None:
        """Grade the executed queries' retrieval against gold support in ``index_dir`` (when any question has gold)."""
        if any(gold_support(ex) for ex in self.examples()):
            self._support = SupportScorer(index_dir, model)


def text_report(records: list[dict[str, Any]], rule: str, label_only: bool) -> str:
    """The text benchmarks' extra summary section: column definitions, label reading and retrieval counts."""
    n = len(records)
    labelled = [r for r in records if r.get("kind") in _LABEL_KINDS]
    unreadable = sum(1 for r in labelled if r.get("predicted_label", r.get("label")) is None)  # (older runs: label)
    script = "MuSiQue's metrics/answer.py" if rule == "musique" else "HotpotQA's hotpot_evaluate_v1.py"
    lines = ["## what the columns mean", "",
             f"- `em`, `f1`: {script} over the raw answer, best over the gold answers and aliases.",
             "- `accuracy`: " + ("the label read from the answer is the gold label (`label_acc` = 1)." if label_only
                                 else "`em` = 1 (yes/no questions included; their label reading is `label_acc` only).")]
    if labelled:
        lines.append(f"- `label_acc`: over the {len(labelled)} yes/no or FEVER questions only; "
                     f"{unreadable} answer(s) gave no readable label and count as wrong.")
    if any("support_mrr" in r for r in records):
        lines.append("- `support_recall@k`, `support_mrr`: retrieval-only figures of the question's executed queries, "
                     "searched again in the run's index and scored against the gold supporting passages (share of the "
                     "gold titles in the union of the queries' top k; 1/rank of the first gold passage), as `ragplan "
                     "eval retrieval --queries RUN_DIR` computes them; questions without gold support are left out.")
    if unans := sum(1 for r in records if r.get("answerable") is False):
        lines.append(f"- {unans} unanswerable question(s) (MuSiQue full) have no `em`/`f1`.")
    stats = [retrieval_stats({"retrievals": r.get("retrievals", r.get("retrieval_count")),
                              "retrieval_errors": r.get("retrieval_errors")}) for r in records]
    retrieved = sum(1 for st in stats if st["retrieval_ratio"])  # (retrievals run and failed: the summary's own line)
    subs = sum(int(r.get("subqueries") or 0) for r in records)
    sub_ok = sum(st["retrieval_count"] - st["retrieval_errors"] for r, st in zip(records, stats) if r.get("subqueries"))
    lines += ["- `retrieval_ratio`: share of questions that retrieved successfully at least once (the paper's "
              "Figure 3); `subquery_retrieval_ratio`: per question, the share of its (sub-)queries that retrieved "
              "successfully, averaged over questions; `retrieval_errors`: failed retrievals per question.",
              "", "## retrieval", "",
              format_table(["questions", "retrieved (≥ 1 success)", "sub-queries", "sub-queries retrieved",
                            "pooled sub-query ratio"], [[n, f"{retrieved} ({retrieved / n if n else 0:.1%})", subs,
                                                         sub_ok, f"{(sub_ok / subs if subs else 0):.3f}"]], style="md")]
    return "\n".join(lines)


#: Benchmark name -> factory, for :mod:`ragplan.eval.registry` (which checks the options against the signature).
BENCHMARKS = {_name: functools.partial(TextQABenchmark, _name) for _name in SPECS}
