"""ragplan state."""
