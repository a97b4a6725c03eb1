"""Everything a method family owns that is not a LangGraph part: one folder per family.

A family's graph is in ``graphs/<family>.py``, its steps in ``nodes/<family>/``, its state and settings in
``state/<family>.py``; its learned models and their training, data generators, benchmark adapter and grading,
CLI subcommands and run-time helpers are in ``ragplan/methods/<family>/``.
"""
