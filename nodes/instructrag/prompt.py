"""The planning prompt of InstructRAG (paper Table 9), in our own words with our own worked examples: the task,
demonstrations, the selected path as the plan (not for ``react``), the question and the steps so far."""

from __future__ import annotations

from ragplan.state.instructrag import PlannedPath, TAOStep
from ragplan.state.trace_sections import excerpt

__all__ = ["TASK_DESCRIPTION", "DEMONSTRATIONS", "planning_prompt", "scratchpad"]

TASK_DESCRIPTION = """Answer a question by alternating Thought, Action and Observation steps. In a Thought you reason about
what you know so far and what to do next. An Action is one of three kinds:
(1) Search[entity]: opens the page of that entity and shows its first sentences; when there is no page with that
exact name, the closest page is shown and other similar titles are named.
(2) Lookup[keyword]: shows the next sentence of the page you opened last that contains the keyword.
(3) Finish[answer]: gives the answer and ends the task. Keep the answer short: a name, a date, a number, yes or no."""

DEMONSTRATIONS = [
    """Question: Which of the two painters, Anna Berglund or Tomas Reyes, was born first?
Thought 1: I need the birth dates of both painters. I start with Anna Berglund.
Action 1: Search[Anna Berglund]
Observation 1: Anna Berglund (born 4 May 1931) is a Swedish painter known for coastal landscapes.
Thought 2: Anna Berglund was born in 1931. Now Tomas Reyes.
Action 2: Search[Tomas Reyes]
Observation 2: Tomas Reyes is a Chilean painter and printmaker. He taught at the academy in Valparaíso for twenty years.
Thought 3: The first sentences do not give his birth date. I look for it on his page.
Action 3: Lookup[born]
Observation 3: (Result 1 / 1) Reyes was born on 12 August 1928 in Santiago.
Thought 4: Tomas Reyes was born in 1928, before Anna Berglund (1931).
Action 4: Finish[Tomas Reyes]""",
    """Question: The lighthouse on Skarv Island was designed by an engineer from which country?
Thought 1: I need the engineer who designed the lighthouse, then that engineer's country.
Action 1: Search[Skarv Island lighthouse]
Observation 1: (No page named Skarv Island lighthouse; closest: Skarv Island.) Skarv Island is a small island in the
outer archipelago. Its lighthouse, built in 1887, was designed by Henrik Lund.
Thought 2: The designer is Henrik Lund. I search for him to find his country.
Action 2: Search[Henrik Lund]
Observation 2: Henrik Lund (1841-1910) was a Norwegian civil engineer who built harbours and lighthouses.
Thought 3: Henrik Lund was Norwegian, so the country is Norway.
Action 3: Finish[Norway]""",
]
"""Worked examples (invented people and places) in the ReAct trajectory format."""


def scratchpad(steps: list[TAOStep]) -> str:
    """The steps so far as ``Thought i / Action i / Observation i`` lines (a thought or argument over 600 characters
    cut: a long reply does not go whole into every later prompt)."""
    return "\n".join(f"Thought {s.index}: {excerpt(s.thought, 600)}\n"
                     f"Action {s.index}: {s.action}[{excerpt(s.argument, 600)}]"
                     + (f"\nObservation {s.index}: {s.observation}" if s.observation else "") for s in steps)


def planning_prompt(question: str, path: PlannedPath | None, steps: list[TAOStep], demonstrations: int = 2) -> str:
    """The whole prompt for the next step (Table 9's structure)."""
    demos = DEMONSTRATIONS[: max(0, demonstrations)]
    parts = [TASK_DESCRIPTION, "Here are some examples.\n\n" + "\n\n".join(demos) if demos else ""]
    if path is not None and path.instructions:
        parts.append("Here is an action sequence that solved similar questions before; use it as a plan, with the "
                     "entities and keywords of your own question in place of its own:\n" + path.text)
        parts.append("Check your first understanding of the task and change the approach when new facts or needs come up "
                     "on the way. If an action brings nothing useful or leads to a dead end, go back to an earlier step "
                     "or switch between Search and Lookup.")
    parts += [f"Now solve this task.\nQuestion: {question}", scratchpad(steps),
              f"Give Thought {len(steps) + 1} and Action {len(steps) + 1}."]
    return "\n\n".join(p for p in parts if p)
