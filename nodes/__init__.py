"""ragplan nodes."""
