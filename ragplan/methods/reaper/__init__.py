"""REAPER (Joshi et al., CIKM 2024): retrieval plans made in one LLM call, checked, then executed."""
