"""Shared tools and the stores behind them (graph DB; later vector store, Wikipedia, retail tools)."""
