"""Search a text index built by :func:`build_index`: the ``local`` retriever."""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import replace
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ragplan.jsonl import read_json
from ragplan.tools.embeddings import get_embedder
from ragplan.tools.retrieval import Passage
from ragplan.tools.textindex.build import FORMAT, WORK_DIR, TextIndexError
from ragplan.tools.textindex.store import PassageStore

__all__ = ["TextIndex"]


def _check_dir(root: Path) -> dict[str, Any]:
    """The meta of a complete index directory, or a TextIndexError saying what is wrong and what to do."""
    build_hint = f"build one with `ragplan index build --passages FILE --out {root}`"
    if not root.is_dir():
        raise TextIndexError(f"no text index at {root}: the directory does not exist ({build_hint})")
    meta_path = root / "meta.json"
    if not meta_path.is_file():
        manifest = root / WORK_DIR / "manifest.json"
        if manifest.is_file():
            shards = len(list((root / WORK_DIR).glob("emb_*.npy")))
            raise TextIndexError(f"incomplete text index at {root}: a build started but did not finish "
                                 f"({shards} embedding shard(s) done); rerun `ragplan index build` with the same "
                                 "--passages and --out to resume it")
        raise TextIndexError(f"no text index at {root} (no meta.json; {build_hint})")
    try:
        meta = read_json(meta_path, TextIndexError, object_only=True)
    except TextIndexError as exc:
        raise TextIndexError(f"damaged text index at {root}: {exc}; rebuild it") from None
    if meta.get("format") != FORMAT:
        raise TextIndexError(f"{root}/meta.json is not a {FORMAT} index description; rebuild the index")
    for name in ("index.faiss", "passages.sqlite"):
        if not (root / name).is_file():
            raise TextIndexError(f"incomplete text index at {root}: {name} is missing; rebuild it")
    return meta


class TextIndex(AbstractContextManager["TextIndex"]):
    """A FAISS index over passages with their texts; cosine scores; thread-safe searches. The ``local``
    :class:`~ragplan.tools.retrieval.Retriever`."""

    name = "local"

    def __init__(self, root: Path, meta: dict[str, Any], index: Any, store: PassageStore, embedder: Any) -> None:
        """Use :meth:`open`."""
        self.root, self.meta, self.index, self.store, self.embedder = root, meta, index, store, embedder
        self.count = int(meta["count"])

    @classmethod
    def open(cls, index_dir: str | Path, model_path: str = "", *, ef_search: int | None = None,
             embedder: Any = None) -> "TextIndex":
        """Open a finished index directory (:class:`TextIndexError` if missing, incomplete or mismatched); the query
        model (``model_path``, else the build model) must match the build model's fingerprint."""
        root = Path(index_dir)
        meta = _check_dir(root)
        if embedder is None:
            built_with = str(meta.get("model_path") or "")
            chosen = model_path or (built_with if built_with and Path(built_with).is_dir() else "")
            embedder = get_embedder(chosen)
            fp = meta.get("model_fingerprint")
            if fp and getattr(embedder, "fingerprint", fp) != fp:
                raise TextIndexError(
                    f"the index at {root} was built with the model at {built_with} but the query model "
                    f"{embedder.model_path} is a different model; vectors of two models are not comparable — "
                    "query with the build model (--model-path) or rebuild the index")
        if int(getattr(embedder, "dim", -1)) != int(meta["dim"]):
            raise TextIndexError(f"the index at {root} has {meta['dim']}-dimensional vectors but the query model "
                                 f"gives {getattr(embedder, 'dim', '?')}")
        import faiss

        try:
            index = faiss.read_index(str(root / "index.faiss"))
            store = PassageStore(root / "passages.sqlite")
        except Exception as exc:  # a truncated or foreign file
            raise TextIndexError(f"damaged text index at {root}: {type(exc).__name__}: {exc}; rebuild it") from exc
        if index.ntotal != int(meta["count"]) or len(store) != int(meta["count"]):
            store.close()
            raise TextIndexError(f"damaged text index at {root}: meta.json says {meta['count']} passages, "
                                 f"index.faiss holds {index.ntotal} and passages.sqlite {len(store)}; rebuild it")
        if hasattr(index, "hnsw"):
            index.hnsw.efSearch = int(ef_search or (meta.get("hnsw") or {}).get("efSearch") or 128)
        return cls(root, meta, index, store, embedder)

    def search(self, query: str, k: int = 5) -> list[Passage]:
        """The ``k`` passages most similar to ``query``, best first (``score`` = cosine, ``source`` = local)."""
        return self.search_many([query], k)[0]

    def search_many(self, queries: Sequence[str], k: int = 5) -> list[list[Passage]]:
        """:meth:`search` for many queries at once (one embedding batch, one FAISS call)."""
        if k <= 0 or not queries:
            return [[] for _ in queries]
        return self.search_vectors(self.embedder.encode(list(queries)), k)

    def search_vectors(self, vectors: np.ndarray, k: int = 5) -> list[list[Passage]]:
        """Search with query vectors (unit rows of the index's dimension) instead of texts."""
        vecs = np.ascontiguousarray(np.atleast_2d(vectors), dtype=np.float32)
        k = min(int(k), self.count)
        if k <= 0 or not len(vecs):
            return [[] for _ in range(len(vecs))]
        scores, labels = self.index.search(vecs, k)
        found = self.store.get(int(x) for x in labels.ravel() if x >= 0)
        return [[replace(found[lab], score=float(s), meta=dict(found[lab].meta), sentences=list(found[lab].sentences))
                 for s, lab in zip(srow, lrow.tolist()) if lab in found] for srow, lrow in zip(scores, labels)]

    def close(self) -> None:
        """Release the passage store (the FAISS index is freed with the object)."""
        self.store.close()

    def __exit__(self, *exc: object) -> None:
        self.close()

