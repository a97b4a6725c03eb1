"""Build a FAISS text index from a passage file: ``index.faiss``, ``passages.sqlite`` and ``meta.json`` written last
(its presence means complete); the work in ``.build/`` (embedding shards) is reused by a rerun with the same inputs."""

from __future__ import annotations

import contextlib
import datetime as _dt
import fcntl
import hashlib
import io
import json
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import numpy as np
from tqdm.auto import tqdm

from ragplan.jsonl import FileFormatError, atomic_write, read_json
from ragplan.tools.embeddings import get_embedder, model_fingerprint, resolve_model_path
from ragplan.tools.textindex.reader import ReadStats, embed_text, read_passages
from ragplan.tools.textindex.store import PassageStore, write_store

__all__ = ["build_index", "BuildReport", "TextIndexError", "DEFAULT_SHARD_SIZE", "FORMAT", "make_index"]

FORMAT = "ragplan-textindex/1"
DEFAULT_SHARD_SIZE = 4096
WORK_DIR = ".build"
HNSW_M = 32  # neighbours per HNSW node
_RECIPE = "title\\ntext, L2-normalised"
_STORE_VERSION = "store/2 (given sentences kept)"  # a store written by an older version is not resumed into this one


class TextIndexError(ValueError):
    """A text index that cannot be built or opened (the message says why and what to do)."""


@dataclass
class BuildReport:
    """What :func:`build_index` did."""

    out_dir: str
    count: int
    index_type: str
    dim: int
    seconds: float
    shards: int = 0
    shards_reused: int = 0
    skipped_lines: int = 0
    up_to_date: bool = False
    """True when a finished index with the same inputs was already there (nothing was done)."""
    skipped_errors: list[str] = field(default_factory=list)
    model_seconds: float = 0.0
    """Time spent loading the embedding model (0 when it was already loaded)."""
    embed_seconds: float = 0.0
    """Time spent embedding the passages of this run (not of reused shards)."""
    embedded: int = 0  # passages embedded by this run


def _read_json(path: Path) -> dict[str, Any] | None:
    with contextlib.suppress(FileFormatError):
        return read_json(path, object_only=True)
    return None


@contextlib.contextmanager
def _build_lock(out: Path, created: bool) -> Iterator[None]:
    """One build per directory at a time (an advisory lock on ``out/.build.lock``, removed when the build ends; a
    build that wrote nothing removes its empty work folder, and ``out`` when it ``created`` it)."""
    lock = out / ".build.lock"
    with open(lock, "w") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if os.stat(lock).st_ino != os.fstat(fh.fileno()).st_ino:  # removed by a build that just ended
                raise BlockingIOError
        except (BlockingIOError, FileNotFoundError):
            raise TextIndexError(f"another build is writing {out} (its .build.lock is held)") from None
        try:
            yield
        finally:
            lock.unlink(missing_ok=True)  # while still held, then closing the file releases the lock
            for folder in (out / WORK_DIR, *([out] if created else [])):
                with contextlib.suppress(OSError):  # (not empty: kept, to resume from)
                    folder.rmdir()


def _shard_path(work: Path, s: int) -> Path:
    return work / f"emb_{s:05d}.npy"


def _shard_ok(path: Path, rows: int, dim: int) -> bool:
    try:
        arr = np.load(path, mmap_mode="r")
    except (OSError, ValueError):
        return False
    return arr.shape == (rows, dim) and arr.dtype == np.float32


def build_index(passages_path: str | Path, out_dir: str | Path, *, model_path: str = "", batch_size: int = 128,
                flat_threshold: int = 50_000, progress: bool = True, shard_size: int = DEFAULT_SHARD_SIZE,
                skip_malformed: bool = False, ef_construction: int = 200, ef_search: int = 128,
                embedder: Any = None, force: bool = False) -> BuildReport:
    """Embed a passage file (JSONL or TSV) into a FAISS index at ``out_dir`` with the model at ``model_path`` (""
    = the packaged MiniLM) or ``embedder`` (``dim`` and ``encode`` giving unit rows); ``force`` rebuilds."""
    t0 = time.perf_counter()
    src = Path(passages_path)
    if not src.is_file():
        raise FileNotFoundError(f"passage file {str(src)!r} does not exist")
    if shard_size < 1 or batch_size < 1 or flat_threshold < 0 or ef_search < 1 or ef_construction < 1:
        raise TextIndexError("shard_size, batch_size, ef_search and ef_construction must be positive "
                             "and flat_threshold not negative")
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise TextIndexError(f"index output {str(out)!r} exists and is not a directory")
    if embedder is None:  # (the model is loaded only when there is something to embed)
        model_dir = resolve_model_path(model_path)
        model_fp = model_fingerprint(model_dir)
    else:
        model_dir, model_fp = (str(getattr(embedder, name, type(embedder).__name__))
                               for name in ("model_path", "fingerprint"))
    with open(src, "rb") as fh:
        input_sha = hashlib.file_digest(fh, "sha256").hexdigest()
    recipe = [FORMAT, input_sha, model_fp, shard_size, bool(skip_malformed), _RECIPE, _STORE_VERSION]
    fingerprint = hashlib.sha256(json.dumps(recipe).encode()).hexdigest()[:24]
    settings = {"flat_threshold": flat_threshold, "hnsw_m": HNSW_M, "ef_construction": ef_construction}

    created = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    with _build_lock(out, created):
        meta = _read_json(out / "meta.json")
        if (not force and meta and meta.get("fingerprint") == fingerprint and meta.get("settings") == settings
                and (out / "index.faiss").is_file() and (out / "passages.sqlite").is_file()):
            return BuildReport(str(out), int(meta["count"]), meta["index_type"], int(meta["dim"]),
                               time.perf_counter() - t0, int(meta.get("shards", 0)), int(meta.get("shards", 0)),
                               int(meta.get("skipped_lines", 0)), up_to_date=True)
        work = out / WORK_DIR
        manifest = _read_json(work / "manifest.json")
        if work.exists() and (manifest is None or manifest.get("fingerprint") != fingerprint):
            shutil.rmtree(work)  # another input, model or shard size: its shards must not be reused
            manifest = None
        work.mkdir(exist_ok=True)
        store_path = work / "passages.sqlite"
        if manifest is None or not store_path.is_file():
            stats = ReadStats()
            passages = read_passages(src, skip_malformed=skip_malformed, stats=stats)
            count = write_store(tqdm(passages, desc="reading passages", unit=" passages", disable=not progress,
                                     mininterval=0.5), store_path)
            manifest = {"count": count, "skipped": stats.skipped, "errors": stats.errors, "fingerprint": fingerprint,
                        "passages_file": str(src.resolve()), "input_sha256": input_sha, "model_path": model_dir,
                        "model_fingerprint": model_fp, "shard_size": shard_size}
            atomic_write(work / "manifest.json", json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
        count = int(manifest["count"])
        if count == 0:
            shutil.rmtree(work)  # nothing to resume from
            raise TextIndexError(f"no passages in {src}" + (f" ({manifest['skipped']} malformed lines skipped)"
                                                            if manifest.get("skipped") else ""))
        t_model = time.perf_counter()
        embedder = embedder if embedder is not None else get_embedder(model_dir)
        model_seconds = time.perf_counter() - t_model
        dim = int(embedder.dim)
        index_type = "flat" if count < flat_threshold else "hnsw"
        index = make_index(index_type, dim, ef_construction, ef_search)
        n_shards, reused, embed_seconds, embedded = _embed_shards(work, store_path, count, shard_size, embedder, index,
                                                                  batch_size, progress)
        import faiss  # imported on first use: it costs a second

        faiss.write_index(index, str(work / "index.faiss.tmp"))
        with open(work / "index.faiss.tmp", "rb") as fh:
            os.fsync(fh.fileno())
        seconds = time.perf_counter() - t0
        (out / "meta.json").unlink(missing_ok=True)  # from here until the new meta.json: incomplete
        os.replace(work / "index.faiss.tmp", out / "index.faiss")
        os.replace(store_path, out / "passages.sqlite")
        hnsw = {"M": HNSW_M, "efConstruction": ef_construction, "efSearch": ef_search}
        meta = {
            "format": FORMAT, "count": count, "dim": dim, "index_type": index_type, "metric": "cosine",
            "hnsw": hnsw if index_type == "hnsw" else None,
            "model_path": model_dir, "model_fingerprint": model_fp, "embed_text": _RECIPE,
            "passages_file": manifest["passages_file"], "input_sha256": input_sha, "fingerprint": fingerprint,
            "skipped_lines": int(manifest.get("skipped", 0)), "settings": settings,
            "build_seconds": round(seconds, 3), "shards": n_shards, "shards_reused": reused,
            "built_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        }
        atomic_write(out / "meta.json", json.dumps(meta, indent=2, ensure_ascii=False) + "\n")
        shutil.rmtree(work, ignore_errors=True)
    return BuildReport(str(out), count, index_type, dim, seconds, n_shards, reused, int(manifest.get("skipped", 0)),
                       skipped_errors=list(manifest.get("errors", [])), model_seconds=model_seconds,
                       embed_seconds=embed_seconds, embedded=embedded)


def _embed_shards(work: Path, store_path: Path, count: int, shard_size: int, embedder: Any, index: Any,
                  batch_size: int, progress: bool) -> tuple[int, int, float, int]:
    """Embed every shard not already on disk (kept there, so a killed build resumes) and add every shard to ``index``;
    returns (shards, shards reused, seconds embedding, passages embedded)."""
    n_shards, dim = (count + shard_size - 1) // shard_size, index.d
    rows = [min(shard_size, count - s * shard_size) for s in range(n_shards)]
    done = [s for s in range(n_shards) if _shard_ok(_shard_path(work, s), rows[s], dim)]
    seconds, embedded = 0.0, 0
    with contextlib.closing(PassageStore(store_path)) as store, tqdm(
            total=count, desc="embedding and indexing", unit=" passages", disable=not progress, smoothing=0.1) as bar:
        for s in range(n_shards):
            if s not in done:
                texts = [embed_text(p) for p in store.range(s * shard_size, s * shard_size + rows[s])]
                t0 = time.perf_counter()
                vecs = np.asarray(embedder.encode(texts, batch_size=batch_size, cache=False), dtype=np.float32)
                seconds += time.perf_counter() - t0
                embedded += len(texts)
                if vecs.shape != (rows[s], dim):
                    raise TextIndexError(f"the embedder returned shape {vecs.shape} for {rows[s]} texts of dim {dim}")
                buf = io.BytesIO()
                np.save(buf, vecs)
                atomic_write(_shard_path(work, s), buf.getvalue())
            index.add(np.load(_shard_path(work, s)))
            bar.update(rows[s])
    return n_shards, len(done), seconds, embedded


def make_index(index_type: str, dim: int, ef_construction: int, ef_search: int) -> Any:
    """An empty FAISS index of unit vectors: exact inner product (``flat``) or HNSW (``hnsw``) with these breadths."""
    import faiss

    if index_type == "flat":
        return faiss.IndexFlatIP(dim)
    index = faiss.IndexHNSWFlat(dim, HNSW_M, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = ef_construction
    index.hnsw.efSearch = ef_search
    return index
