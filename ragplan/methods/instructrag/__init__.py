"""InstructRAG's learned and built parts (Wang et al., SIGIR 2025): paths, the instruction graph, the RL-/ML-Agent,
meta-training, run-time selection, the synthetic world and ``ragplan instructrag`` (docs/methods/instructrag.md)."""
