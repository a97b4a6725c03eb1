"""What is trained (or generated for training) and loaded by path: one package per method family.

* :mod:`ragplan.training.reaper` — REAPER's instruction-tuning data (TEvo, TTG, DQS) and the
  classifier baseline's route classifier.
"""
