"""InstructRAG's learned and built parts (Wang et al., SIGIR 2025), each saved and loaded by path.

* :mod:`.paths` — instruction paths in: JSONL records and ReAct / Reflexion trajectory logs;
* :mod:`.tasks` — the 12 HotpotQA answer types used as tasks, 6 seen and 6 unseen;
* :mod:`.graph` — the instruction graph (Algorithm 1), persisted, with incremental insertion;
* :mod:`.rl_agent` — the RL-Agent: state features, 2-layer policy, DFS for K candidate paths;
* :mod:`.ml_agent` — the ML-Agent: question and path encoders on a frozen Sentence-BERT backbone;
* :mod:`.reward` — rewards: end-to-end F1 with an LLM, or the retrieval-only proxy without one;
* :mod:`.agents` — the agents folder (base and per-task adapted agents);
* :mod:`.meta` — meta-training (Algorithm 2) and few-shot adaptation (Algorithm 3);
* :mod:`.synth` — a small synthetic multi-hop world (passages, questions, paths) for tests and figures;
* :mod:`.figures` — LLM-free figures: path-selection quality, proxy reward, graph statistics.
"""
