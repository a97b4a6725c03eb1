"""The plan assessor's query scorer, as ``meta.json`` names it: scikit-learn's gradient-boosted trees over the features
of features.py (MiniLM embeddings of context and query) kept as numpy arrays (``trees.npz``: loading needs neither
pickle nor scikit-learn), or a sentence-transformers cross-encoder reading (context, query) (``cross_encoder/``);
:func:`load_assessor` caches per folder."""

from __future__ import annotations

import functools
import json
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ragplan.jsonl import atomic_write, read_json, saved_bytes
from ragplan.methods.furepa.features import SCALAR_FEATURES, context_text, group_features

__all__ = ["TreeEnsemble", "PlanAssessor", "AssessorError", "fit_trees", "fit_cross_encoder", "save_assessor",
           "load_assessor", "META_FILE", "TREES_FILE", "CROSS_DIR"]

META_FILE, TREES_FILE, CROSS_DIR = "meta.json", "trees.npz", "cross_encoder"


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


def fit_cross_encoder(pairs: Sequence[tuple[str, str]], labels: Sequence[float], *, model_path: str = "", seed: int = 0,
                      epochs: int = 2, lr: float = 2e-5, batch: int = 16, progress: bool = True) -> Any:
    """A sentence-transformers ``CrossEncoder`` (one output) started from the Sentence-BERT model at ``model_path`` and
    fit to ``(context, query) -> label`` by binary cross-entropy on the logit (the library's loss for one label);
    deterministic for ``seed``; ``epochs=0`` gives the untrained model."""
    import torch
    from sentence_transformers import CrossEncoder
    from tqdm import tqdm

    from ragplan.tools.embeddings import resolve_model_path

    torch.manual_seed(seed)
    ce = CrossEncoder(resolve_model_path(model_path), num_labels=1, max_length=256, device="cpu", local_files_only=True)
    net, y = ce.transformers_model, torch.tensor(list(labels), dtype=torch.float32)
    opt, rng = torch.optim.AdamW(net.parameters(), lr=lr), torch.Generator().manual_seed(seed)
    net.train()
    for epoch in range(epochs):
        order = torch.randperm(len(pairs), generator=rng).tolist()
        for start in tqdm(range(0, len(order), batch), desc=f"fitting the cross-encoder (epoch {epoch + 1}/{epochs})",
                          unit="batch", disable=not progress):
            idx = order[start:start + batch]
            enc = ce.tokenizer([pairs[i][0] for i in idx], [pairs[i][1] for i in idx], padding=True,
                               truncation="longest_first", max_length=256, return_tensors="pt")
            loss = torch.nn.functional.binary_cross_entropy_with_logits(net(**enc).logits.view(-1), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
    net.eval()
    return ce


class PlanAssessor:
    """A trained query scorer: ``score(question, evidence, queries)`` predicts each query's reciprocal rank."""

    def __init__(self, meta: dict[str, Any], trees: TreeEnsemble | None = None, cross: Any = None) -> None:
        if cross is None and list(meta.get("features") or [])[:len(SCALAR_FEATURES)] != list(SCALAR_FEATURES):
            raise AssessorError("the assessor was trained on other features than this version computes; retrain it")
        self.meta, self.trees, self.cross = meta, trees, cross

    def score(self, question: str, evidence: Sequence[tuple[str, str]], queries: Sequence[str]) -> list[float]:
        """Predicted reciprocal rank of each candidate query, given the question and the evidence ``(title, text)``."""
        if not queries:
            return []
        if self.cross is not None:
            context = context_text(question, evidence)
            return [float(v) for v in self.cross.predict([(context, q) for q in queries], show_progress_bar=False)]
        assert self.trees is not None
        from ragplan.tools.embeddings import get_embedder

        embedder = get_embedder(self.meta.get("model_path", ""))  # the model the features were trained with
        return [float(v) for v in self.trees.predict(group_features(embedder, question, evidence, queries))]


def save_assessor(out_dir: str | Path, scorer: Any, meta: dict[str, Any]) -> Path:
    """Write the scorer (``trees.npz``, or a ``cross_encoder-<id>/`` folder of its own, named in the meta) and
    ``meta.json`` to ``out_dir``. The meta is written last and what it no longer names is removed only then, so a save
    that stops midway leaves the earlier assessor whole."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if isinstance(scorer, TreeEnsemble):
        atomic_write(out / TREES_FILE, saved_bytes(lambda f: np.savez(f, **scorer.arrays())))
        meta = {**meta, "scorer": "trees"}
    else:  # (sentence-transformers writes a folder file by file: a new folder, never the one the meta names)
        folder = f"{CROSS_DIR}-{uuid.uuid4().hex[:12]}"
        scorer.save(str(out / folder))
        meta = {**meta, "scorer": "cross-encoder", "cross_encoder_dir": folder}
    atomic_write(out / META_FILE, json.dumps(meta, indent=2, ensure_ascii=False) + "\n")
    for old in out.glob(f"{CROSS_DIR}*"):
        if old.name != meta.get("cross_encoder_dir"):
            shutil.rmtree(old, ignore_errors=True)
    if meta["scorer"] != "trees":
        (out / TREES_FILE).unlink(missing_ok=True)
    return out


def load_assessor(directory: str | Path) -> PlanAssessor:
    """The assessor saved in ``directory`` (read once per process per folder version); :class:`AssessorError` if none."""
    d = Path(directory).expanduser()
    try:
        return _load(d.resolve(), (d / META_FILE).stat().st_mtime)
    except OSError:
        raise AssessorError(f"{d} holds no trained plan assessor (no {META_FILE}); train one with "
                            "`ragplan furepa train-assessor`") from None


@functools.cache
def _load(d: Path, mtime: float) -> PlanAssessor:
    """The assessor in ``d`` as its ``meta.json`` of ``mtime`` names it."""
    meta = read_json(d / META_FILE, AssessorError, object_only=True)
    try:
        if meta.get("scorer") == "cross-encoder":
            from sentence_transformers import CrossEncoder

            folder = d / str(meta.get("cross_encoder_dir") or CROSS_DIR)  # (a folder saved before it was versioned)
            if not folder.is_dir():
                raise OSError(f"no {folder.name} folder")
            return PlanAssessor(meta, cross=CrossEncoder(str(folder), device="cpu", local_files_only=True))
        with np.load(d / TREES_FILE) as z:
            return PlanAssessor(meta, trees=TreeEnsemble.from_arrays(z))
    except (OSError, ValueError, KeyError) as exc:
        what = (meta.get("cross_encoder_dir") or CROSS_DIR) if meta.get("scorer") == "cross-encoder" else TREES_FILE
        raise AssessorError(f"{d} is not a saved plan assessor ({what}): {type(exc).__name__}: {exc}") from exc
