"""REAPER's steps (plan_retrieval, validate_plan, execute_plan, respond), the agent baseline's agent_step and the
classifier baseline's classify_question / fill_arguments, with the planner's prompt and in-context examples."""
