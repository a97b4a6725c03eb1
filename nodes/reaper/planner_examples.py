"""The planner's default in-context examples, in the shapes of the paper's Figure 2 (made-up product ids).

Their arguments follow the argument rule of :mod:`ragplan.methods.reaper.metrics`."""

from __future__ import annotations

from typing import Any

from ragplan.methods.reaper.plan import parse_plan

__all__ = ["DEFAULT_EXAMPLES", "examples_for"]

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


def examples_for(registry: Any, examples: list[dict] | None = None) -> list[dict]:
    """The examples (default :data:`DEFAULT_EXAMPLES`) whose plans use only tools of ``registry``: a tool taken
    out of the registry (``removed_tools``, ``include_new_tool=False``) is not shown in an example either."""
    pool = DEFAULT_EXAMPLES if examples is None else examples
    return [e for e in pool if all(t in registry for t in parse_plan(str(e["plan"])).plan.tools())]
