"""How InstructRAG's plan is reviewed by a person (the family part of :mod:`ragplan.nodes.common.review_plan`).

The plan under review is the instruction path chosen for the planning prompt (by the ML-Agent, the
RL-Agent's first path, the RAP-style stored path, or given), shown with the other candidates. An edit is
a path written like the instruction graph's, ``Search[A] → Lookup[b] → Finish[c]`` (or one instruction
per line), read with the path parser (:func:`~ragplan.methods.instructrag.paths.parse_instruction`:
Search, Lookup or Finish with an argument in brackets) and at most ``max_path_len`` instructions. It
becomes the selected path (``source`` and ``selection`` = ``edited``).
"""

from __future__ import annotations

import re
from typing import Any

from ragplan.nodes.common.review_plan import PlanEdit, PlanEditError, PlanReviewer, PlanView
from ragplan.state.instructrag import InstructRAGContext, InstructRAGState, PlannedPath
from ragplan.methods.instructrag.paths import ACTIONS, parse_instruction

__all__ = ["InstructRAGReviewer"]

_SPLIT = re.compile(r"\s*(?:→|->|\n)\s*")


def _path(value: Any) -> PlannedPath | None:
    return value if value is None or isinstance(value, PlannedPath) else PlannedPath.model_validate(value)


class InstructRAGReviewer(PlanReviewer[InstructRAGState, InstructRAGContext]):
    """The instruction path that goes into the planning prompt."""

    def pending(self, state: InstructRAGState, ctx: InstructRAGContext) -> PlanView | None:
        """The selected path and the candidates it was chosen from."""
        path = _path(state.get("selected_path"))
        lines = [f"Path ({state.get('selection') or '-'}): {path.text if path else '(none: plan without a path)'}"]
        for i, c in enumerate(_path(p) for p in state.get("candidate_paths") or []):
            if c is not None:
                score = f" ({c.score:.3f})" if c.score is not None else ""
                lines.append(f"  Candidate {i + 1}{score}: {c.text}")
        return PlanView(kind="plan", plan="\n".join(lines), steps=list(path.instructions) if path else [],
                        format=f"instructions {', '.join(a + '[…]' for a in ACTIONS)}, separated by → or one per line")

    def apply_edit(self, state: InstructRAGState, ctx: InstructRAGContext, text: str) -> PlanEdit:
        """The edited path, each instruction read by the path parser."""
        items = [s for s in _SPLIT.split((text or "").strip()) if s.strip()]
        parsed = []
        for n, item in enumerate(items, 1):
            ins = parse_instruction(item)
            if ins is None or not ins.argument:
                raise PlanEditError(f"instruction {n} {item!r} is not {', '.join(a + '[…]' for a in ACTIONS)}")
            parsed.append(ins)
        if not parsed:
            raise PlanEditError("the path needs at least one instruction")
        limit = int(getattr(ctx, "max_path_len", len(parsed)) or len(parsed))
        if len(parsed) > limit:
            raise PlanEditError(f"the path has {len(parsed)} instructions; at most {limit} (max_path_len)")
        path = PlannedPath(instructions=[i.text for i in parsed], source="edited")
        return PlanEdit(update={"selected_path": path, "selection": "edited"}, text=path.text)
