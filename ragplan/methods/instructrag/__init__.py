"""InstructRAG's learned and built parts (Wang et al., SIGIR 2025): instruction paths and tasks, the instruction
graph, the RL-Agent and ML-Agent with their rewards, meta-training and adaptation, run-time selection, the
synthetic world, the LLM-free figures and the ``ragplan instructrag`` commands (docs/methods/instructrag.md).
"""
