"""InstructRAG's steps (Wang et al., SIGIR 2025): retrieve candidate paths, select one, then plan in TAO steps."""
