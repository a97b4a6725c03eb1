"""FuRePA's plan assessor, trained here: training groups, features, the scorer (saved and loaded by path), training
with a held-out report, and a synthetic multi-hop corpus to train and measure it on."""
