"""The classification baseline planner (REAPER §3.1, §5.2): route a question to a tool, ``no_retrieval`` or a
``workflow:a>b`` class, from its Sentence-BERT embedding and a product-page flag, by a logistic regression and a
cosine kNN mixed 0.75 / 0.25, saved as plain arrays (no pickles)."""

from __future__ import annotations

import hashlib
import io
import json
import math
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable

import numpy as np
from scipy.special import softmax
from sklearn.metrics import precision_recall_fscore_support
from sklearn.preprocessing import normalize

from ragplan.jsonl import atomic_write, saved_bytes
from ragplan.methods.reaper.validate import bind_args
from ragplan.tools.retail.tools import build_retail_registry

__all__ = ["NO_RETRIEVAL", "WORKFLOW_PREFIX", "DEFAULT_CHAINS", "route_class", "class_tools", "ClassifierReport",
           "RouteClassifier", "train_classifier", "load_classifier", "features", "workflow_chains"]

NO_RETRIEVAL = "no_retrieval"
WORKFLOW_PREFIX = "workflow:"
CONTEXT_WEIGHT = 1.0
"""Value of the product-page feature (embedding rows have norm 1, so one extra unit is a strong cue)."""
KNN_K = 7
KNN_WEIGHT = 0.25
"""Share of the kNN head in the ensemble (an even split lost ~9 points of test accuracy on the generated gold set)."""
META_FILE, WEIGHTS_FILE = "meta.json", "weights.npz"

DEFAULT_CHAINS: dict[tuple[str, str], str] = {
    ("date_math", "shipment_status"): "date_range",
    ("prod_search", "prod_qna"): "product_id",
    ("shipment_status", "prod_qna"): "product_id",
    ("shipment_status", "compatible_products"): "base_product_id",
    ("prod_search", "review_summary"): "product_id",
    ("prod_search", "compatible_products"): "base_product_id",
}
"""Which argument of the second tool takes the first tool's output, for workflows the training plans did not show."""


def route_class(tool_sequence: Iterable[str]) -> str:
    """The route class of a tool sequence: ``no_retrieval``, a tool's name, or ``workflow:a>b``."""
    tools = list(tool_sequence)
    return NO_RETRIEVAL if not tools else tools[0] if len(tools) == 1 else WORKFLOW_PREFIX + ">".join(tools)


def class_tools(cls: str) -> list[str]:
    """The fixed tool sequence of a route class (inverse of :func:`route_class`)."""
    if cls == NO_RETRIEVAL:
        return []
    return cls.removeprefix(WORKFLOW_PREFIX).split(">") if cls.startswith(WORKFLOW_PREFIX) else [cls]


def features(embedder: Any, questions: list[str], contexts: list[dict[str, Any] | None]) -> np.ndarray:
    """``[embedding(question), product-page flag]`` rows (float64)."""
    emb = np.asarray(embedder.encode(list(questions)), dtype=np.float64)
    flag = np.array([[CONTEXT_WEIGHT if (c or {}).get("product_title") else 0.0] for c in contexts],
                    dtype=np.float64).reshape(len(questions), 1)
    return np.hstack([emb, flag])


def workflow_chains(examples: list[Any]) -> dict[str, list[dict[str, int]]]:
    """Per workflow class in ``examples``, per step ``{argument name: referenced step}`` (most common pattern)."""
    registry = build_retail_registry()
    seen: dict[str, Counter] = {}
    for ex in examples:
        cls = route_class(ex.tool_sequence)
        if not cls.startswith(WORKFLOW_PREFIX):
            continue
        pattern = tuple(tuple(sorted((k, a.refs[0]) for k, a in bind_args(step, registry)[0].items()
                                     if a.kind == "ref" and a.refs)) for step in ex.plan.steps)
        seen.setdefault(cls, Counter())[pattern] += 1
    return {cls: [dict(p) for p in c.most_common(1)[0][0]] for cls, c in sorted(seen.items())}


@dataclass
class ClassifierReport:
    """What :func:`train_classifier` measured on the held-out split, and where it saved the model."""

    classes: list[str]
    accuracy: float
    majority_class: str
    majority_rate: float
    """Accuracy of always answering the training set's most frequent class, on the test split."""
    macro_f1: float
    per_class: dict[str, dict[str, float]]
    """class → precision, recall, f1, support (test split)."""
    head_accuracy: dict[str, float]
    """Test accuracy of each head alone (logreg, knn) next to the ensemble's."""
    n_train: int
    n_test: int
    seed: int
    model_path: str
    out_dir: str
    predictions: list[str] = field(default_factory=list)
    """The predicted class of each test example, in gold-set order."""


class RouteClassifier:
    """A trained route classifier: ``predict(question, context) -> (class, probability)``."""

    def __init__(self, meta: dict[str, Any], weights: dict[str, np.ndarray], embedder: Any = None) -> None:
        self.meta = meta
        self.classes: list[str] = list(meta["classes"])
        self.chains: dict[str, list[dict[str, int]]] = meta.get("chains", {})
        self.coef, self.intercept = weights["coef"], weights["intercept"]
        self.train_x, self.train_y = normalize(weights["train_x"]), weights["train_y"].astype(int)
        self._embedder = embedder

    @property
    def embedder(self) -> Any:
        """The Sentence-BERT model the classifier was trained with (loaded on first use)."""
        if self._embedder is None:
            from ragplan.tools.embeddings import get_embedder
            self._embedder = get_embedder(self.meta.get("model_path", ""))
        return self._embedder

    def _logreg(self, x: np.ndarray) -> np.ndarray:
        z = x @ self.coef.T + self.intercept
        if z.shape[1] == 1:  # a binary logistic regression stores one row: sigmoid(z) = softmax([0, z])
            z = np.hstack([np.zeros_like(z), z])
        return softmax(z, axis=1)

    def _knn(self, x: np.ndarray) -> np.ndarray:
        sims = normalize(x) @ self.train_x.T
        k = min(KNN_K, sims.shape[1])
        out = np.zeros((len(x), len(self.classes)))
        for i, near in enumerate(np.argsort(-sims, axis=1, kind="stable")[:, :k]):
            np.add.at(out[i], self.train_y[near], np.maximum(sims[i, near], 0.0) + 1e-6)
        return out / out.sum(axis=1, keepdims=True)

    def proba(self, x: np.ndarray, head: str = "ensemble") -> np.ndarray:
        """Class probabilities of feature rows (``head``: ensemble, logreg or knn)."""
        if head in ("logreg", "knn"):  # one head alone: the other is not computed
            return self._logreg(x) if head == "logreg" else self._knn(x)
        w = float(self.meta.get("knn_weight", KNN_WEIGHT))
        return (1.0 - w) * self._logreg(x) + w * self._knn(x)

    def predict_many(self, questions: list[str], contexts: list[dict[str, Any] | None]) -> list[tuple[str, float]]:
        """``(class, probability)`` for each question."""
        if not questions:
            return []
        p = self.proba(features(self.embedder, questions, contexts))
        best = p.argmax(axis=1)
        return [(self.classes[b], float(p[i, b])) for i, b in enumerate(best)]

    def predict(self, question: str, context: dict[str, Any] | None = None) -> tuple[str, float]:
        """The route class of one question on its page and the ensemble's probability for it."""
        return self.predict_many([question], [context])[0]


def _metrics(gold: list[str], pred: list[str], classes: list[str]) -> tuple[dict[str, dict[str, float]], float]:
    p, r, f, n = precision_recall_fscore_support(gold, pred, labels=classes, zero_division=0)
    per = {c: {"precision": round(float(p[i]), 4), "recall": round(float(r[i]), 4), "f1": round(float(f[i]), 4),
               "support": int(n[i])} for i, c in enumerate(classes)}
    present = [c for c in classes if per[c]["support"]]
    return per, round(sum(per[c]["f1"] for c in present) / len(present) if present else 0.0, 4)


def train_classifier(goldset_examples: list[Any], *, model_path: str = "", seed: int = 0, out_dir: str | Path,
                     c: float = 10.0, knn_weight: float = KNN_WEIGHT) -> ClassifierReport:
    """Train on the ``train`` split, evaluate on ``test``, save to ``out_dir`` (deterministic); ``ValueError``
    when a split is empty or training has fewer than two classes."""
    from sklearn.linear_model import LogisticRegression

    from ragplan.tools.embeddings import get_embedder, resolve_model_path

    train = [e for e in goldset_examples if e.split == "train"]
    test = [e for e in goldset_examples if e.split == "test"]
    if not train or not test:
        raise ValueError(f"the gold set needs both splits (train: {len(train)}, test: {len(test)} examples)")
    y_train_names = [route_class(e.tool_sequence) for e in train]
    classes = sorted(set(y_train_names))
    if len(classes) < 2:
        raise ValueError(f"the training split has only one route class ({classes[0]}); nothing to classify")
    resolved = resolve_model_path(model_path)
    embedder = get_embedder(model_path)
    x_train = features(embedder, [e.question for e in train], [e.context for e in train])
    y_train = np.array([classes.index(n) for n in y_train_names])
    head = LogisticRegression(C=c, max_iter=5000, random_state=seed).fit(x_train, y_train)
    meta: dict[str, Any] = {"classes": classes, "model_path": model_path, "resolved_model_path": resolved,
                            "seed": seed, "C": c, "knn_k": KNN_K, "knn_weight": knn_weight,
                            "context_weight": CONTEXT_WEIGHT,
                            "heads": ["logreg", "knn"], "chains": workflow_chains(train)}
    weights = {"coef": head.coef_.astype(np.float64), "intercept": head.intercept_.astype(np.float64),
               "train_x": x_train, "train_y": y_train}
    clf = RouteClassifier(meta, weights, embedder)

    x_test = features(embedder, [e.question for e in test], [e.context for e in test])
    gold = [route_class(e.tool_sequence) for e in test]
    heads: dict[str, float] = {}
    pred: list[str] = []
    for h in ("logreg", "knn", "ensemble"):  # the ensemble last: its predictions are the report's
        pred = [classes[i] for i in clf.proba(x_test, h).argmax(axis=1)]
        heads[h] = round(sum(g == p for g, p in zip(gold, pred)) / len(gold), 4)
    majority = Counter(y_train_names).most_common(1)[0][0]
    per, macro = _metrics(gold, pred, sorted(set(classes) | set(gold)))
    report = ClassifierReport(
        classes=classes, accuracy=heads["ensemble"], majority_class=majority,
        majority_rate=round(sum(g == majority for g in gold) / len(gold), 4), macro_f1=macro, per_class=per,
        head_accuracy={"logreg": heads["logreg"], "knn": heads["knn"]}, n_train=len(train), n_test=len(test),
        seed=seed, model_path=model_path, out_dir=str(out_dir), predictions=pred)
    meta["metrics"] = {k: v for k, v in asdict(report).items() if k not in ("predictions", "out_dir")}
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    saved = saved_bytes(lambda f: np.savez(f, **weights))
    meta["weights_sha256"] = hashlib.sha256(saved).hexdigest()  # (the pair a kill between the writes would split)
    atomic_write(out / WEIGHTS_FILE, saved)  # each file whole, the metadata last
    atomic_write(out / META_FILE, json.dumps(meta, indent=2, ensure_ascii=False) + "\n")
    return report


def load_classifier(directory: str | Path, embedder: Any = None) -> RouteClassifier:
    """Read a classifier saved by :func:`train_classifier` (``ValueError`` when the folder is not one)."""
    d = Path(directory)
    try:
        meta = json.loads((d / META_FILE).read_text(encoding="utf-8"))
        data = (d / WEIGHTS_FILE).read_bytes()
        with np.load(io.BytesIO(data)) as z:
            weights = {k: z[k] for k in ("coef", "intercept", "train_x", "train_y")}
    except (OSError, ValueError, KeyError) as exc:
        raise ValueError(f"{d} is not a saved route classifier: {exc}") from exc
    digest = hashlib.sha256(data).hexdigest()
    if meta.get("weights_sha256", digest) != digest:  # (a folder saved before the digest was kept has none)
        raise ValueError(f"{d} is not a saved route classifier: {WEIGHTS_FILE} is not the one {META_FILE} was "
                         "saved with")
    if not meta.get("classes") or math.prod(weights["coef"].shape) == 0:
        raise ValueError(f"{d} is not a saved route classifier: no classes")
    return RouteClassifier(meta, weights, embedder)
