"""``ragplan index build | search``: the local FAISS passage index (Sentence-BERT embeddings) from the command line.
Exit codes: 0 success; 2 bad input (a malformed passage file, no model, a missing or incomplete index, a bad option)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ragplan.cli.errors import fail

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> None:
    """Register ``ragplan index …`` on the top-level subparsers."""
    ix = sub.add_parser("index", help="build or search a local FAISS text index (the 'local' retriever)",
                        description="Embed a passage file with a local Sentence-BERT model into a FAISS index, "
                                    "or search one. Builds resume after an interruption.")
    isub = ix.add_subparsers(dest="index_command", metavar="SUBCOMMAND", required=True)
    b = isub.add_parser("build", help="embed a passage file into an index directory (resumable)",
                        description="Read passages (JSONL {id, title, contents}, FlashRAG {id, contents}, or a TSV "
                                    "with a header: DPR's id/text/title), embed them and write a FAISS index. "
                                    "Rerun the same command to resume an interrupted build.")
    b.add_argument("--passages", required=True, metavar="FILE", help="passage file: .jsonl or .tsv (optionally .gz)")
    b.add_argument("--out", required=True, metavar="DIR", help="index directory (created)")
    b.add_argument("--model-path", default="", metavar="DIR",
                   help="local sentence-transformers model directory (default: the packaged all-MiniLM-L6-v2)")
    b.add_argument("--batch-size", type=int, default=128, metavar="N", help="texts per model batch (default 128)")
    b.add_argument("--flat-threshold", type=int, default=50_000, metavar="N",
                   help="exact flat index below N passages, HNSW at N or more (default 50000)")
    b.add_argument("--shard-size", type=int, default=None, metavar="N",
                   help="passages per saved embedding shard, the unit of resumption (default 4096)")
    b.add_argument("--ef-search", type=int, default=128, metavar="N",
                   help="HNSW search breadth stored in the index (default 128)")
    b.add_argument("--skip-malformed", action="store_true",
                   help="skip malformed passage lines (counted) instead of stopping at the first one")
    b.add_argument("--force", action="store_true", help="rebuild even when the index is up to date")
    b.add_argument("--no-progress", action="store_true", help="no progress bars")
    s = isub.add_parser("search", help="print the passages an index returns for a query")
    s.add_argument("--index", required=True, metavar="DIR", help="an index directory made by `index build`")
    s.add_argument("query", help="the query text")
    s.add_argument("-k", type=int, default=5, help="passages to return (default 5)")
    s.add_argument("--json", action="store_true", help="one JSON object per passage")
    s.add_argument("--model-path", default="", metavar="DIR",
                   help="query model (default: the one the index was built with)")
    s.add_argument("--ef-search", type=int, default=None, metavar="N", help="HNSW search breadth for this search")
    s.add_argument("--width", type=int, default=100, metavar="CHARS", help="text snippet length (default 100)")


def run(args: argparse.Namespace) -> int:
    """Run ``ragplan index build`` or ``ragplan index search``; returns the exit code."""
    from ragplan.tools.embeddings import EmbeddingModelError
    from ragplan.tools.textindex import PassageFormatError, TextIndexError

    try:
        return _build(args) if args.index_command == "build" else _search(args)
    except (PassageFormatError, TextIndexError, EmbeddingModelError, FileNotFoundError) as exc:
        return fail(str(exc))


def _build(args: argparse.Namespace) -> int:
    from ragplan.tools.textindex import build_index
    from ragplan.tools.textindex.build import DEFAULT_SHARD_SIZE

    shard = DEFAULT_SHARD_SIZE if args.shard_size is None else args.shard_size  # (build_index checks the numbers)
    r = build_index(args.passages, args.out, model_path=args.model_path, batch_size=args.batch_size,
                    flat_threshold=args.flat_threshold, progress=not args.no_progress, shard_size=shard,
                    skip_malformed=args.skip_malformed, ef_search=args.ef_search, force=args.force)
    if r.up_to_date:
        print(f"up to date: {r.out_dir} already indexes {r.count} passages ({r.index_type}); --force rebuilds")
        return 0
    rate = f", {r.embedded / r.embed_seconds:.1f} passages/s" if r.embed_seconds > 0 else ""
    print(f"indexed {r.count} passages ({r.index_type}, dim {r.dim}) in {r.seconds:.1f} s "
          f"(model load {r.model_seconds:.1f} s, embedding {r.embed_seconds:.1f} s{rate}) -> {r.out_dir}")
    if r.shards_reused:
        print(f"resumed: {r.shards_reused} of {r.shards} embedding shards were already done")
    if r.skipped_lines:
        print(f"skipped {r.skipped_lines} malformed line(s), e.g.:", file=sys.stderr)
        for e in r.skipped_errors[:5]:
            print(f"  {e}", file=sys.stderr)
    return 0


def _snippet(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: max(1, width - 1)].rstrip() + "…"


def _search(args: argparse.Namespace) -> int:
    from ragplan.eval.figures import format_table
    from ragplan.tools.textindex import TextIndex

    if args.k < 1:
        return fail("-k must be at least 1")
    if args.ef_search is not None and args.ef_search < 1:
        return fail("--ef-search must be at least 1")
    with TextIndex.open(args.index, model_path=args.model_path, ef_search=args.ef_search) as index:
        hits = index.search(args.query, args.k)
    if args.json:
        for rank, p in enumerate(hits, 1):
            print(json.dumps({"rank": rank, "score": round(p.score, 4), "id": p.id, "title": p.title, "text": p.text},
                             ensure_ascii=False))
        return 0
    if not hits:
        print("no passages")
        return 0
    rows = [[rank, f"{p.score:.3f}", p.id[:24], _snippet(p.title, 32), _snippet(p.text, args.width)]
            for rank, p in enumerate(hits, 1)]
    print(format_table(["#", "score", "id", "title", "text"], rows, style="plain"))
    return 0
