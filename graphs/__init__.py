"""ragplan graphs."""
