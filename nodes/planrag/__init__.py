"""PlanRAG's steps (read_schema, plan, retrieve, replan/advance, answer, check_decision) with their prompts."""
