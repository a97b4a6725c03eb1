"""Checking a REAPER plan against a tool registry (paper §3: no invented tools, right signatures, sensible
order), and the repair request given back to the planner for one repair round."""

from __future__ import annotations

import difflib
import json
import re
from typing import Any

from ragplan.methods.reaper.plan import RetrievalPlan, PlanArg, PlanError, PlanStep

__all__ = ["check_plan", "repair_prompt", "bind_args", "is_date_range_literal", "find_cycles",
           "reference_problems"]

_DATE = r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?"
_DATE_RANGE = re.compile(rf"\s*{_DATE}\s*(?:(?:\.\.|to)\s*{_DATE}\s*)?", re.I)
# scalar argument type -> (the Python types a literal may have, the text form it may take, what the error calls it)
_SCALARS: dict[str, tuple[tuple[type, ...], str, str]] = {
    "int": ((int,), r"\s*-?\d+\s*", "a whole number"),
    "float": ((int, float), r"\s*-?(\d+\.?\d*|\.\d+)\s*", "a number"),
    "bool": ((bool,), r"(?i)true|false", "true or false"),
}


def bind_args(step: PlanStep, registry: Any, default: list[str] | tuple[str, ...] = ()
              ) -> tuple[dict[str, PlanArg], list[PlanArg], list[str]]:
    """``(bound, surplus, duplicates)``: name -> argument (keywords win), positional arguments beyond the tool's
    (its names in ``registry``, else ``default``), and names given both by position and by keyword."""
    spec = registry.get(step.tool) if registry is not None else None
    names = [a.name for a in spec.args] if spec is not None else list(default)
    bound: dict[str, PlanArg] = dict(zip(names, step.args))
    duplicates = [k for k in step.kwargs if k in bound]
    return {**bound, **step.kwargs}, list(step.args[len(names):]), duplicates


def is_date_range_literal(value: Any) -> bool:
    """True for a literal date or date range: ``"2024-05-01"``, ``"A..B"``, ``"A to B"``, ISO date-times, ``[A, B]``
    or ``{"start": …, "end": …}`` (other keys, such as those of ``date_math``'s output, are ignored)."""
    if isinstance(value, str):
        return bool(_DATE_RANGE.fullmatch(value))
    if isinstance(value, (list, tuple)):
        return len(value) == 2 and all(isinstance(v, str) and _DATE_RANGE.fullmatch(v) for v in value)
    if isinstance(value, dict):  # date_math's own output (start, end, expression, today) included, as the tool reads it
        ends = [value[k] for k in ("start", "end") if k in value]
        return bool(ends) and all(isinstance(v, str) and _DATE_RANGE.fullmatch(v) for v in ends)
    return False


def _suggest(name: str, choices: list[str]) -> str | None:
    low = {c.lower(): c for c in choices}  # (an exact match, in any case, is the closest)
    hit = difflib.get_close_matches(name.lower(), list(low), n=1, cutoff=0.5)
    if hit:
        return low[hit[0]]
    return next((c for c in choices if name.lower() in c.lower() or c.lower() in name.lower()), None)


def _err(step: PlanStep, kind: str, message: str) -> PlanError:
    return PlanError(line=step.line, message=f"step {step.index}: {message}", kind=kind, step=step.index)


def _check_type(step: PlanStep, name: str, typ: str, arg: PlanArg, registry: Any) -> PlanError | None:
    if arg.kind != "literal":
        return None  # a reference or template: its value is known only when the plan runs
    v = arg.value
    if typ == "date_range" and not is_date_range_literal(v):
        hint = (f'; compute it first with a date_math("{v}") step and pass its result (#Ej)'
                if isinstance(v, str) and "date_math" in registry else "")
        return _err(step, "arg_type", f'{step.tool} argument "{name}" expects a date range such as '
                                      f'"2024-05-01..2024-05-07", not {_show(v)}{hint}')
    if typ in _SCALARS:
        types, text, what = _SCALARS[typ]
        if not (isinstance(v, types) and isinstance(v, bool) == (typ == "bool")
                or isinstance(v, str) and re.fullmatch(text, v)):
            return _err(step, "arg_type", f'{step.tool} argument "{name}" expects {what}, not {_show(v)}')
    return None


def _show(v: Any) -> str:
    s = json.dumps(v, ensure_ascii=False, default=str)
    return s if len(s) <= 60 else s[:57] + "…"


def _check_call(step: PlanStep, registry: Any) -> list[PlanError]:
    spec = registry.get(step.tool)
    if spec is None:
        aliases = {a: s.name for s in registry for a in getattr(s, "aliases", [])}
        if step.tool in aliases:
            hint = f"; it is another name for {aliases[step.tool]}, use {aliases[step.tool]}"
        else:
            best = _suggest(step.tool, registry.names() + list(aliases))
            hint = f"; did you mean {aliases.get(best, best)}?" if best else ""
        return [_err(step, "unknown_tool", f'unknown tool "{step.tool}"{hint} '
                                           f"(available: {', '.join(registry.names()) or 'none'})")]
    names = [a.name for a in spec.args]
    bound, surplus, duplicates = bind_args(step, registry)
    out: list[PlanError] = []
    if surplus:
        out.append(_err(step, "too_many_args", f"{spec.signature} takes at most {len(names)} argument"
                                               f"{'s' if len(names) != 1 else ''} but {len(step.args)} were given "
                                               "by position"))
    for k in duplicates:
        out.append(_err(step, "duplicate_arg", f'argument "{k}" of {step.tool} is given both by position and by name'))
    for k in step.kwargs:
        if k not in names:
            best = _suggest(k, names)
            hint = f" (did you mean {best}?)" if best else ""
            out.append(_err(step, "unknown_arg", f'{step.tool} has no argument "{k}"{hint}; '
                                                 f"its signature is {spec.signature}"))
    for a in spec.args:
        if a.required and a.name not in bound:
            out.append(_err(step, "missing_arg", f'{step.tool} needs the argument "{a.name}" ({spec.signature})'))
        elif a.name in bound:
            if not a.required and bound[a.name].kind == "literal" and bound[a.name].value is None:
                continue  # an optional argument given as null is absent
            e = _check_type(step, a.name, a.type, bound[a.name], registry)
            if e is not None:
                out.append(e)
    return out


def find_cycles(deps: dict[int, list[int]]) -> list[list[int]]:
    """The reference cycles: strongly connected components with more than one node, each sorted, in plan order."""
    reach: dict[int, set[int]] = {}
    for v in deps:  # plans are a few steps long: reachability by search is enough
        seen, todo = set(), list(deps[v])
        while todo:
            w = todo.pop()
            if w not in seen:
                seen.add(w)
                todo.extend(deps.get(w, []))
        reach[v] = seen
    comps = {tuple(sorted(w for w in reach[v] if v in reach.get(w, ()))) for v in deps if v in reach[v]}
    return sorted(list(c) for c in comps if len(c) > 1)


_REF_MESSAGES = {"self_ref": "refers to its own result #E{r}; a step can use only earlier steps' results",
                 "missing_ref": "refers to #E{r}, but no step assigns #E{r}",
                 "forward_ref": ("refers to #E{r}, which a later step (step {later}) assigns; a step can use only "
                                 "earlier steps' results")}


def reference_problems(plan: RetrievalPlan) -> tuple[dict[int, list[int]], list[tuple[int, str, str]]]:
    """``(deps, problems)``: position -> positions whose results it uses, and ``(position, kind, message)`` per
    duplicate_var, self_ref, missing_ref, forward_ref and reference cycle (on its first step)."""
    steps = plan.steps
    first: dict[int, int] = {}
    for pos, s in enumerate(steps):
        first.setdefault(s.var_number, pos)
    deps: dict[int, list[int]] = {pos: [] for pos in range(len(steps))}
    out: list[tuple[int, str, str]] = []
    for pos, s in enumerate(steps):
        if first[s.var_number] != pos:
            other = steps[first[s.var_number]]
            out.append((pos, "duplicate_var", (f"#{s.evidence_var} is already assigned by step {other.index} "
                                               f"(line {other.line}); each step assigns its own #Ek")))
        for r in s.refs:
            kind = "self_ref" if r == s.var_number else "missing_ref" if r not in first else \
                "forward_ref" if first[r] > pos else ""
            if kind in ("", "forward_ref"):
                deps[pos].append(first[r])
            if kind:
                out.append((pos, kind, _REF_MESSAGES[kind].format(r=r, later=steps[first.get(r, 0)].index)))
    out += [(comp[0], "cycle", (f"reference cycle between {', '.join(f'#{steps[p].evidence_var}' for p in comp)}: "
                                "none of these steps can run first")) for comp in find_cycles(deps)]
    return deps, out


def check_plan(plan: RetrievalPlan, registry: Any) -> list[PlanError]:
    """Every problem of ``plan`` against the tools of ``registry`` (empty: the plan is valid), by line."""
    errors: list[PlanError] = []
    steps = plan.steps
    numbers = [s.index for s in steps]
    if numbers != list(range(1, len(steps) + 1)):
        k = next(i for i, n in enumerate(numbers) if n != i + 1)
        errors.append(PlanError(line=steps[k].line, kind="numbering", step=steps[k].index,
                                message=f"steps are numbered {', '.join(map(str, numbers))}; number them "
                                        f"1 to {len(steps)} in order (found Step {numbers[k]} where Step {k + 1} "
                                        "belongs)"))
    _, problems = reference_problems(plan)
    dups = {pos for pos, kind, _ in problems if kind == "duplicate_var"}
    errors += [_err(s, "numbering", f"Step {s.index} assigns #{s.evidence_var}; step k must assign #E{s.index}")
               for pos, s in enumerate(steps) if pos not in dups and s.var_number != s.index]
    for s in steps:
        errors.extend(_check_call(s, registry))
    errors += [_err(steps[pos], kind, message) for pos, kind, message in problems]
    return sorted(errors, key=lambda e: (e.line, e.step or 0))


def repair_prompt(errors: list[PlanError], registry: Any = None, *, plan_text: str | None = None) -> str:
    """The text for one repair round: the faulty plan (``plan_text``), its problems, the tools (``registry``), the rules."""
    lines = ["Your retrieval plan cannot be run as written."]
    if plan_text is not None:
        lines += ["", "Your plan:", plan_text.strip() or "(empty)"]
    lines += ["", "Problems:"]
    lines += [f"- {e}" for e in errors] or ["- (none)"]
    if registry is not None:
        lines += ["", "The only tools you may use:"] + [f"- {s.signature}" for s in registry]
    lines += [
        "",
        "Write the whole plan again, fixed, in the same format and nothing else, one step per line:",
        "Step k: <purpose> - #Ek = tool_name(argument, name=value)",
        "Number the steps 1, 2, 3, …; step k assigns #Ek. Use only the tools listed, with their argument "
        "names; quote text arguments; use an earlier step's result as #Ej (j < k).",
    ]
    return "\n".join(lines)
