"""How InstructRAG's plan (the path for the planning prompt) is reviewed by a person: an edit is a path
``Search[A] → Lookup[b] → Finish[c]`` (or one instruction per line), at most ``max_path_len`` long."""

from __future__ import annotations

import re

from ragplan.nodes.common.review_plan import PlanEdit, PlanEditError, PlanReviewer, PlanView
from ragplan.state.instructrag import InstructRAGContext, InstructRAGState, PlannedPath
from ragplan.methods.instructrag.paths import ACTIONS, parse_instruction

__all__ = ["InstructRAGReviewer"]

_SPLIT = re.compile(r"\s*(?:→|->|\n)\s*")
_FORMS = ", ".join(a + "[…]" for a in ACTIONS)


class InstructRAGReviewer(PlanReviewer[InstructRAGState, InstructRAGContext]):
    """The instruction path that goes into the planning prompt."""

    def pending(self, state: InstructRAGState, ctx: InstructRAGContext) -> PlanView | None:
        """The selected path and the candidates it was chosen from."""
        path = PlannedPath.model_validate(state["selected_path"]) if state.get("selected_path") is not None else None
        lines = [f"Path ({state.get('selection') or '-'}): {path.text if path else '(none: plan without a path)'}"]
        lines += [PlannedPath.model_validate(c).line(i) for i, c in enumerate(state.get("candidate_paths") or [], 1)]
        return PlanView(kind="plan", plan="\n".join(lines), steps=list(path.instructions) if path else [],
                        format=f"instructions {_FORMS}, separated by → or one per line")

    def apply_edit(self, state: InstructRAGState, ctx: InstructRAGContext, text: str) -> PlanEdit:
        """The edited path, each instruction read by the path parser."""
        items = [s for s in _SPLIT.split((text or "").strip()) if s.strip()]
        parsed = []
        for n, item in enumerate(items, 1):
            ins = parse_instruction(item)
            if ins is None or not ins.argument:
                raise PlanEditError(f"instruction {n} {item!r} is not {_FORMS}")
            parsed.append(ins)
        if not parsed:
            raise PlanEditError("the path needs at least one instruction")
        limit = int(getattr(ctx, "max_path_len", len(parsed)) or len(parsed))
        if len(parsed) > limit:
            raise PlanEditError(f"the path has {len(parsed)} instructions; at most {limit} (max_path_len)")
        path = PlannedPath(instructions=[i.text for i in parsed], source="edited")
        return PlanEdit(update={"selected_path": path, "selection": "edited"}, text=path.text)
