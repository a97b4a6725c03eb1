"""A local index of the questions' own context paragraphs (``--context-only``), built once per folder; the
dataset's own sentences are kept so the sentence ranker does not re-split them."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from ragplan.datasets import DatasetError, QAExample
from ragplan.eval.runfolder import atomic_write

__all__ = ["context_passages", "build_context_index"]


def context_passages(examples: list[QAExample]) -> list[dict[str, Any]]:
    """One ``{id, title, contents[, sentences]}`` passage per distinct (title, paragraph), ids hashed."""
    out: dict[str, dict[str, Any]] = {}
    for ex in examples:
        for title, sentences in ex.contexts:
            kept = [s.strip() for s in sentences if s.strip()]
            contents = " ".join(kept)
            pid = hashlib.sha1(f"{title}\n{contents}".encode()).hexdigest()[:16]
            if contents and pid not in out:
                out[pid] = {"id": pid, "title": title, "contents": contents,
                            **({"sentences": kept} if ex.sentence_segmented else {})}
    return list(out.values())


def build_context_index(examples: list[QAExample], root: str | Path, *, model: str = "", what: str = "") -> Path:
    """Build ``root/index`` (returned) from ``root/passages.jsonl``; reused when ``root/manifest.json`` (written
    last) matches. :class:`DatasetError` when the examples ship no paragraphs (``what`` names the data)."""
    passages = context_passages(examples)
    if not passages:
        raise DatasetError(f"{what or 'these questions'}: context_only needs the questions' own context paragraphs, "
                           "and these questions have none (FEVER and KILT files ship none, nor do most FlashRAG "
                           "files); retrieve from Wikipedia or a corpus index instead")
    root = Path(root)
    passages_path, index_dir, manifest_path = root / "passages.jsonl", root / "index", root / "manifest.json"
    text = "".join(json.dumps(p, ensure_ascii=False) + "\n" for p in passages)
    manifest = {"passages_sha256": hashlib.sha256(text.encode()).hexdigest(), "passages": len(passages),
                "questions": len(examples), "embedding_model": model}
    try:
        fresh = json.loads(manifest_path.read_text()) == manifest and index_dir.is_dir() and passages_path.is_file()
    except (OSError, ValueError):
        fresh = False
    if not fresh:
        root.mkdir(parents=True, exist_ok=True)
        manifest_path.unlink(missing_ok=True)
        atomic_write(passages_path, text)
        # build_index resumes an interrupted build of the same passages and replaces an index of others
        from ragplan.tools.textindex import build_index

        build_index(passages_path, index_dir, model_path=model)
        atomic_write(manifest_path, json.dumps(manifest, indent=2))
    return index_dir
