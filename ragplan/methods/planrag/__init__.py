"""DQA (Decision QA, PlanRAG paper): clone loader, exact simulators, generator and grader."""
