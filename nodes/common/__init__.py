"""Steps that several method families share (text retrieval: Think-then-Act and its baselines, FuRePA, InstructRAG)."""
