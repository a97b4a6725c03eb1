"""The REAPER planner's prompt (paper §4.1): role, instruction, tool list, examples, input; the training data is built
from the same functions, so a fine-tuned planner sees at run time the form it was trained on. The default examples
have the shapes of the paper's Figure 2 (made-up product ids), their arguments the metrics module's argument rule."""

from __future__ import annotations

import json
from typing import Any, Iterable, Sequence

from ragplan.methods.reaper.plan import RetrievalPlan, format_plan, parse_plan
from ragplan.tools.registry import ToolRegistry, ToolSpec

__all__ = ["ROLE", "SYSTEM_INSTRUCTION", "NO_RETRIEVAL", "DEFAULT_EXAMPLES", "examples_for", "build_planner_messages",
           "format_input", "format_example", "plan_text", "tool_block"]

ROLE = ("You help a sales associate in a large online shop. For every customer question you work out which "
        "information the associate needs and how to fetch it, so that the answer rests on evidence rather than "
        "guesswork.")

SYSTEM_INSTRUCTION = (
    "Write a numbered, step-by-step retrieval plan that gathers the evidence needed to answer the customer's "
    "question, using only the tools listed below. Each step calls exactly one tool and stores its result as "
    "#Ek (k is the step number); a later step may pass an earlier result on by writing #Ej as an argument, or "
    "inside a string. Write every step on its own line as\n"
    "Step k: <what the step does> - #Ek = tool_name(arguments)\n"
    "Use the page context to resolve words such as 'this' or 'it'. If the question needs no retrieval (small "
    "talk, or nothing a tool could add), answer with \"No retrieval needed.\" and no steps.")

NO_RETRIEVAL = "No retrieval needed."
"""The target of a plan without steps (``parse_plan`` reads it as an empty plan)."""


def format_input(query: str, context: dict[str, Any] | None) -> str:
    """The input block: ``Context: {...}`` and ``Question: "..."``."""
    return f"Context: {json.dumps(context or {}, ensure_ascii=False)}\nQuestion: {json.dumps(query, ensure_ascii=False)}"


def plan_text(plan: RetrievalPlan) -> str:
    """The canonical plan, or :data:`NO_RETRIEVAL` for a plan without steps."""
    return format_plan(plan) if plan.steps else NO_RETRIEVAL


def format_example(ex: Any) -> str:
    """One in-context example (a dict or a training ``SeedExample``): ``# Input:`` and ``# Answer:`` with the plan."""
    q, c, p = ((ex["query"], ex.get("context"), ex.get("plan", "")) if isinstance(ex, dict)
               else (ex.query, ex.context, ex.plan))
    return f"# Input:\n{format_input(q, c)}\n# Answer:\n{plan_text(p) if isinstance(p, RetrievalPlan) else p}"


def tool_block(tools: ToolRegistry | Sequence[ToolSpec]) -> str:
    """The numbered tool list of a registry or of specs."""
    return (tools if isinstance(tools, ToolRegistry) else ToolRegistry(list(tools))).prompt_block()


def build_planner_messages(tools: ToolRegistry | Sequence[ToolSpec], examples: Iterable[Any], query: str,
                           context: dict[str, Any] | None, *, role: str = ROLE,
                           instructions: str = SYSTEM_INSTRUCTION) -> tuple[str, str]:
    """The planner prompt as (system, user): the role; then instruction, tools, examples and input."""
    parts = ["### System Instruction:", instructions, "",
             "The candidate tools, with their signatures, descriptions and an example use each:",
             tool_block(tools)]
    shown = [format_example(e) for e in examples]
    if shown:
        parts += ["", "### Examples:", "\n\n".join(shown)]
    parts += ["", "### Input:", format_input(query, context)]
    return f"### Role:\n{role}", "\n".join(parts)


DEFAULT_EXAMPLES: list[dict] = [
    {"query": "hi there, how are you today?", "context": {"product_id": "", "product_title": ""},
     "plan": "No retrieval needed."},
    {"query": "how do I stop my subscribe and save deliveries", "context": {"product_id": "", "product_title": ""},
     "plan": 'Step 1: Ask the help centre - #E1 = customer_support("how do I stop my subscribe and save deliveries")'},
    {"query": "does it work with a 12 cup carafe?",
     "context": {"product_id": "Q7R2KD81MX", "product_title": "Brewline Classic 12-Cup Programmable Coffee Maker"},
     "plan": 'Step 1: Look up that attribute of the product on the page - #E1 = prod_qna("Q7R2KD81MX", '
             '"Does the Brewline Classic 12-Cup Programmable Coffee Maker work with a 12 cup carafe?")'},
    {"query": "show me some waterproof hiking backpacks", "context": {"product_id": "", "product_title": ""},
     "plan": 'Step 1: Search the catalogue - #E1 = prod_search("waterproof hiking backpacks")'},
    {"query": "when will the charger I ordered last week get here?", "context": {"product_id": "", "product_title": ""},
     "plan": 'Step 1: Work out the date range - #E1 = date_math("last week")\n'
             'Step 2: Find the order and its delivery estimate - #E2 = shipment_status(date_range=#E1, keywords="charger")'},
]


def examples_for(registry: Any) -> list[dict]:
    """The :data:`DEFAULT_EXAMPLES` whose plans use only tools of ``registry``: a tool taken
    out of the registry (``removed_tools``, ``include_new_tool=False``) is not shown in an example either."""
    return [e for e in DEFAULT_EXAMPLES if all(t in registry for t in parse_plan(str(e["plan"])).plan.tools())]
