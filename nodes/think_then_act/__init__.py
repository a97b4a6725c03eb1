"""Think-then-Act's steps (assess_query, confidence_gate, answer_subquery, final_answer) and its baselines' (direct_answer, cot_answer, flare_draft)."""
