"""The benchmarks ``ragplan eval`` runs, one module each (registered by name in :mod:`ragplan.eval.registry`)."""
