"""The plan assessor's query scorer: scikit-learn's gradient-boosted trees over the features of features.py (MiniLM
embeddings of context and query), kept as numpy arrays (``meta.json`` + ``trees.npz``): loading needs neither pickle nor
scikit-learn; :func:`load_assessor` caches per folder."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ragplan.methods.furepa.features import SCALAR_FEATURES, group_features

__all__ = ["TreeEnsemble", "PlanAssessor", "AssessorError", "fit_trees", "save_assessor", "load_assessor",
           "META_FILE", "TREES_FILE"]

META_FILE, TREES_FILE = "meta.json", "trees.npz"


class AssessorError(ValueError):
    """A folder that does not hold a usable plan assessor."""


@dataclass
class TreeEnsemble:
    """Regression trees as flat arrays over global node ids (``left``/``right`` -1 at a leaf; ``x[feature] <=
    threshold`` goes left), predicting ``init + rate * sum(leaf values)``."""

    left: np.ndarray
    right: np.ndarray
    feature: np.ndarray
    threshold: np.ndarray
    value: np.ndarray
    roots: np.ndarray
    init: float
    rate: float

    def predict(self, x: np.ndarray) -> np.ndarray:
        """The ensemble's prediction for each row of ``x`` (compared in float32, as scikit-learn's trees do)."""
        x = np.asarray(x, dtype=np.float32).astype(np.float64)
        out = np.full(len(x), self.init, dtype=np.float64)
        rows = np.arange(len(x))
        for root in self.roots:
            node = np.full(len(x), root, dtype=np.int64)
            for _ in range(64):  # deeper than any tree we fit
                inner = self.left[node] >= 0
                if not inner.any():
                    break
                n, r = node[inner], rows[inner]
                go_left = x[r, self.feature[n]] <= self.threshold[n]
                node[inner] = np.where(go_left, self.left[n], self.right[n])
            out += self.rate * self.value[node]
        return out

    def arrays(self) -> dict[str, Any]:
        """The arrays to save."""
        return {"left": self.left, "right": self.right, "feature": self.feature, "threshold": self.threshold,
                "value": self.value, "roots": self.roots, "init_rate": np.array([self.init, self.rate])}

    @classmethod
    def from_arrays(cls, z: Any) -> "TreeEnsemble":
        """Read back what :meth:`arrays` saved."""
        init, rate = (float(v) for v in z["init_rate"])
        return cls(z["left"].astype(np.int64), z["right"].astype(np.int64), z["feature"].astype(np.int64),
                   z["threshold"].astype(np.float64), z["value"].astype(np.float64), z["roots"].astype(np.int64), init, rate)


def fit_trees(x: np.ndarray, y: np.ndarray, *, seed: int = 0, n_trees: int = 300, depth: int = 3, rate: float = 0.05,
              subsample: float = 0.8, min_leaf: int = 5, progress: bool = True) -> TreeEnsemble:
    """Gradient-boosted regression trees on ``(x, y)``, with a progress bar per tree; deterministic for ``seed``."""
    from sklearn.ensemble import GradientBoostingRegressor
    from tqdm import tqdm

    gbr = GradientBoostingRegressor(loss="squared_error", learning_rate=rate, max_depth=depth, subsample=subsample,
                                    min_samples_leaf=min_leaf, random_state=seed, n_estimators=n_trees)
    with tqdm(total=n_trees, desc="fitting the query scorer", unit="tree", disable=not progress) as bar:
        def tick(*_: Any) -> bool:
            """The fit's monitor: one tree more, never stop early."""
            bar.update(1)
            return False

        gbr.fit(x, y, monitor=tick)
    left, right, feat, thr, val, roots = [], [], [], [], [], []
    offset = 0
    for est in gbr.estimators_[:, 0]:
        t = est.tree_
        kids_l, kids_r = t.children_left.astype(np.int64), t.children_right.astype(np.int64)
        left.append(np.where(kids_l >= 0, kids_l + offset, -1))
        right.append(np.where(kids_r >= 0, kids_r + offset, -1))
        feat.append(np.maximum(t.feature.astype(np.int64), 0))
        thr.append(t.threshold.astype(np.float64))
        val.append(t.value[:, 0, 0].astype(np.float64))
        roots.append(offset)
        offset += t.node_count
    init = float(np.asarray(gbr.init_.predict(x[:1])).reshape(-1)[0]) if len(x) else 0.0
    ens = TreeEnsemble(np.concatenate(left), np.concatenate(right), np.concatenate(feat), np.concatenate(thr),
                       np.concatenate(val), np.array(roots, dtype=np.int64), init, rate)
    check = x[: min(len(x), 256)]
    if len(check) and not np.allclose(ens.predict(check), gbr.predict(check), atol=1e-8):
        raise RuntimeError("the exported trees do not reproduce scikit-learn's predictions")
    return ens


class PlanAssessor:
    """A trained query scorer: ``score(question, evidence, queries)`` predicts each query's reciprocal rank."""

    def __init__(self, meta: dict[str, Any], trees: TreeEnsemble) -> None:
        if list(meta.get("features") or [])[:len(SCALAR_FEATURES)] != list(SCALAR_FEATURES):
            raise AssessorError("the assessor was trained on other features than this version computes; retrain it")
        self.meta = meta
        self.trees = trees

    def score(self, question: str, evidence: Sequence[tuple[str, str]], queries: Sequence[str]) -> list[float]:
        """Predicted reciprocal rank of each candidate query, given the question and the evidence ``(title, text)``."""
        if not queries:
            return []
        from ragplan.tools.embeddings import get_embedder

        embedder = get_embedder(self.meta.get("model_path", ""))  # the model the features were trained with
        return [float(v) for v in self.trees.predict(group_features(embedder, question, evidence, queries))]


def save_assessor(out_dir: str | Path, trees: TreeEnsemble, meta: dict[str, Any]) -> Path:
    """Write ``meta.json`` and ``trees.npz`` to ``out_dir`` (the meta last, so a folder with it is complete)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    np.savez(out / TREES_FILE, **trees.arrays())
    (out / META_FILE).write_text(json.dumps(meta, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return out


_loaded: dict[tuple[str, float], PlanAssessor] = {}
_lock = threading.Lock()


def load_assessor(directory: str | Path) -> PlanAssessor:
    """The assessor saved in ``directory`` (read once per process per folder version); :class:`AssessorError` if none."""
    d = Path(directory).expanduser()
    meta_path = d / META_FILE
    try:
        key = (str(d.resolve()), meta_path.stat().st_mtime)
    except OSError:
        raise AssessorError(f"{d} holds no trained plan assessor (no {META_FILE}); train one with "
                            "`ragplan furepa train-assessor`") from None
    with _lock:
        if key in _loaded:
            return _loaded[key]
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
            with np.load(d / TREES_FILE) as z:
                trees = TreeEnsemble.from_arrays(z)
        except json.JSONDecodeError as exc:
            raise AssessorError(f"{meta_path}: line {exc.lineno} column {exc.colno}: not valid JSON ({exc.msg}; a "
                                "truncated file?)") from exc
        except (OSError, ValueError, KeyError) as exc:
            raise AssessorError(f"{d} is not a saved plan assessor ({TREES_FILE}): {type(exc).__name__}: {exc}") from exc
        _loaded[key] = PlanAssessor(meta, trees)
        return _loaded[key]
