"""ragplan: planning-based retrieval-augmented generation methods as LangGraph graphs."""

__version__ = "0.1.0"
