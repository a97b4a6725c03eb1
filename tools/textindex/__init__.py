"""The local text index (``ragplan index``): passages embedded with Sentence-BERT into FAISS, searched by cosine."""

from ragplan.tools.textindex.build import BuildReport, TextIndexError, build_index
from ragplan.tools.textindex.index import TextIndex
from ragplan.tools.textindex.reader import PassageFormatError, ReadStats, read_passages

__all__ = ["BuildReport", "PassageFormatError", "ReadStats", "TextIndex", "TextIndexError",
           "build_index", "read_passages"]
