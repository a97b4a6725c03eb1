"""FuRePA's plan assessor, trained here: training groups from published data or the LLM, features, the scorer (saved
and loaded by path), training with a held-out report beside one-line baselines, and a synthetic demo corpus."""
