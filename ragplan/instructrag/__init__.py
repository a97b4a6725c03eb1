"""InstructRAG's run-time code too big for a node: loading the graph and agents once, selecting a path."""
