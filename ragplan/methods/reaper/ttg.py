"""Tool-Task Generator (TTG, paper §4.2.2): the primary ``plan`` task and seven secondary tasks, in order; each maps
an example to (system, user, target) on a fresh TEvo tool view, or None when it does not apply; and the planner's
supervised fine-tuning set made of them (``per_example`` TEvo variants each, chat records, byte-identical for a seed)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any, Callable, Sequence

from ragplan.nodes.reaper.planner_prompt import (NO_RETRIEVAL, ROLE, build_planner_messages, format_input, plan_text,
                                                tool_block)
from ragplan.methods.reaper.datagen import SeedExample, ToolView, evolve_tools, rename_plan, sample_examples
from ragplan.methods.reaper.plan import RetrievalPlan, format_arg, format_plan
from ragplan.jsonl import atomic_write, jsonl_text
from ragplan.tools.registry import ToolRegistry

__all__ = ["TASKS", "NO_PLAN_POSSIBLE", "SECONDARY_TASKS", "parse_ttg_tasks", "generate_dataset", "write_dataset"]

Made = tuple[str, str, str] | None
NO_PLAN_POSSIBLE = "No plan is possible with the provided tools"
_SYSTEM = f"### Role:\n{ROLE}"
_FORMAT = "Plans use one line per step: Step k: <what the step does> - #Ek = tool_name(arguments)."


def _view(ex: SeedExample, registry: ToolRegistry, rng: random.Random, shots: Sequence[SeedExample] = ()
          ) -> tuple[ToolView, RetrievalPlan]:
    """A fresh TEvo view offering the tools of ``ex`` and ``shots``, and the plan of ``ex`` renamed to it."""
    view = evolve_tools(registry, ex.tools() + [t for e in shots for t in e.tools()], rng)
    return view, rename_plan(ex.plan, view.mapping)


def _user(instruction: str, view: ToolView, ex: SeedExample, *extra: str) -> str:
    parts = ["### Task:", instruction, _FORMAT, "", "### Tools:", tool_block(view.specs), "", "### Input:",
             format_input(ex.query, ex.context)]
    return "\n\n".join(["\n".join(parts), *extra])


def primary_plan(ex: SeedExample, pool: Sequence[SeedExample], registry: ToolRegistry, rng: random.Random) -> Made:
    """The primary task: the full planner prompt (TEvo view, resampled examples) -> the plan."""
    shots = sample_examples(pool, ex.source_id, rng)
    view, plan = _view(ex, registry, rng, shots)
    shots = [SeedExample(s.source_id, s.query, s.context, rename_plan(s.plan, view.mapping)) for s in shots]
    system, user = build_planner_messages(view.specs, shots, ex.query, ex.context)
    return system, user, plan_text(plan)


def query_from_plan(ex: SeedExample, pool: Sequence[SeedExample], registry: ToolRegistry, rng: random.Random) -> Made:
    """(1) Given the page context and a plan, write the customer question it answers."""
    if not ex.plan.steps:
        return None
    view, plan = _view(ex, registry, rng)
    user = "\n".join(["### Task:", "Below is a retrieval plan made with the listed tools for a customer question "
                      "asked on a page with the given context. Write the customer's question that this plan was made "
                      "for. Answer with the question only.", "", "### Tools:", tool_block(view.specs), "",
                      "### Context:", json.dumps(ex.context, ensure_ascii=False), "", "### Plan:", format_plan(plan)])
    return _SYSTEM, user, ex.query


def complete_partial_plan(ex: SeedExample, pool: Sequence[SeedExample], registry: ToolRegistry,
                          rng: random.Random) -> Made:
    """(2) Given the first steps of a plan, write the whole plan."""
    if len(ex.plan.steps) < 2:
        return None
    view, plan = _view(ex, registry, rng)
    k = rng.randint(1, len(plan.steps) - 1)
    partial = format_plan(RetrievalPlan(steps=plan.steps[:k]))
    user = _user("A retrieval plan for the customer question below was started but not finished. Write the complete "
                 "plan: the given steps unchanged, followed by the missing ones.", view, ex,
                 "### Partial plan:\n" + partial)
    return _SYSTEM, user, format_plan(plan)


def identify_tools(ex: SeedExample, pool: Sequence[SeedExample], registry: ToolRegistry, rng: random.Random) -> Made:
    """(3) Name the tools needed for the question, in the order a plan would use them."""
    view, plan = _view(ex, registry, rng)
    user = _user("Which of the listed tools are needed to gather the evidence for the customer question below? List "
                 "their names, comma-separated, in the order a plan would call them, or answer \"none\" when no "
                 "retrieval is needed. Do not write the plan.", view, ex)
    tools = list(dict.fromkeys(plan.tools()))
    return _SYSTEM, user, ", ".join(tools) if tools else "none"


def masked_step(ex: SeedExample, pool: Sequence[SeedExample], registry: ToolRegistry, rng: random.Random) -> Made:
    """(4) One step's call is replaced by [MASK]; write that step in full."""
    if not ex.plan.steps:
        return None
    view, plan = _view(ex, registry, rng)
    k = rng.randrange(len(plan.steps))
    lines = format_plan(plan).splitlines()
    target, var = lines[k], f"#{plan.steps[k].evidence_var}"
    lines[k] = f"{target.partition(var + ' = ')[0]}{var} = [MASK]"
    user = _user("In the retrieval plan below one step's tool call was replaced by [MASK]. Write the masked step as "
                 "one complete plan line (Step k: ... - #Ek = tool_name(arguments)).", view, ex,
                 "### Plan with a masked step:\n" + "\n".join(lines))
    return _SYSTEM, user, target


def reorder_steps(ex: SeedExample, pool: Sequence[SeedExample], registry: ToolRegistry, rng: random.Random) -> Made:
    """(5) The steps are given out of order (without their numbers); write the plan in the right order."""
    if len(ex.plan.steps) < 2:
        return None
    view, plan = _view(ex, registry, rng)
    order = list(range(len(plan.steps)))
    rng.shuffle(order)
    if order == sorted(order):
        order = order[1:] + order[:1]
    shuffled = "\n".join("- " + format_plan(RetrievalPlan(steps=[plan.steps[i]])).split(": ", 1)[1] for i in order)
    user = _user("The steps of a retrieval plan for the customer question below are listed out of order and without "
                 "their step numbers. Put them in an order in which each step runs after the steps whose results it "
                 "uses, and write the numbered plan.", view, ex, "### Shuffled steps:\n" + shuffled)
    return _SYSTEM, user, format_plan(plan)


def masked_params(ex: SeedExample, pool: Sequence[SeedExample], registry: ToolRegistry, rng: random.Random) -> Made:
    """(6) Some arguments of one step are replaced by [MASK1], [MASK2], ...; give each masked value."""
    with_args = [i for i, s in enumerate(ex.plan.steps) if s.args or s.kwargs]
    if not with_args:
        return None
    view, plan = _view(ex, registry, rng)
    k = rng.choice(with_args)
    s = plan.steps[k]
    slots = [("", a) for a in s.args] + [(f"{n}=", a) for n, a in s.kwargs.items()]
    masked = set(rng.sample(range(len(slots)), rng.randint(1, len(slots))))
    parts: list[str] = []
    answers: list[str] = []
    for j, (name, arg) in enumerate(slots):
        text = format_arg(arg)
        if j in masked:
            answers.append(f"[MASK{len(answers) + 1}] = {text}")
            text = f"[MASK{len(answers)}]"
        parts.append(name + text)
    lines = format_plan(plan).splitlines()
    lines[k] = f"{lines[k].partition(f'#{s.evidence_var} = ')[0]}#{s.evidence_var} = {s.tool}({', '.join(parts)})"
    user = _user("In the retrieval plan below some arguments of one step were replaced by [MASK1], [MASK2], .... Give "
                 "the value of each masked argument, one per line, as [MASKn] = value (strings in double quotes, "
                 "earlier results as #Ej).", view, ex, "### Plan with masked arguments:\n" + "\n".join(lines))
    return _SYSTEM, user, "\n".join(answers)


def use_provided_tools(ex: SeedExample, pool: Sequence[SeedExample], registry: ToolRegistry,
                       rng: random.Random) -> Made:
    """(7) Plan with only a restricted tool list; when a needed tool is missing, say no plan is possible."""
    needed = ex.tools()
    feasible = not needed or rng.random() < 0.5
    view, plan = _view(ex, registry, rng)
    if feasible:
        target, specs = plan_text(plan), view.specs
    else:
        missing = rng.choice(needed)
        gone = view.mapping[missing]
        specs = [s for s in view.specs if s.name != gone]
        step = next(s for s in ex.plan.steps if s.tool == missing)
        what = " ".join(step.purpose.split()).rstrip(".")
        why = f" ({what[:1].lower() + what[1:]})" if what else ""
        target = f"{NO_PLAN_POSSIBLE}: none of them can do step {step.index}{why}."
    user = "\n".join(["### Task:", "Write a retrieval plan for the customer question below using ONLY the tools "
                      "listed here; do not call any other tool. If the question cannot be answered with these tools, "
                      f"answer \"{NO_PLAN_POSSIBLE}: <the reason>.\" instead. If it needs no retrieval, answer "
                      f"\"{NO_RETRIEVAL}\"", _FORMAT, "", "### Provided tools:", tool_block(specs) or "(none)", "",
                      "### Input:", format_input(ex.query, ex.context)])
    return _SYSTEM, user, target


TASKS: dict[str, Callable[[SeedExample, Sequence[SeedExample], ToolRegistry, random.Random], Made]] = {
    "plan": primary_plan,
    "query_from_plan": query_from_plan,
    "complete_partial_plan": complete_partial_plan,
    "identify_tools": identify_tools,
    "masked_step": masked_step,
    "reorder_steps": reorder_steps,
    "masked_params": masked_params,
    "use_provided_tools": use_provided_tools,
}
"""Task name -> transformation ``f(example, seed_pool, registry, rng) -> (system, user, target) | None``."""

SECONDARY_TASKS: tuple[str, ...] = tuple(t for t in TASKS if t != "plan")
"""TTG's seven secondary tasks in the paper's order (§4.2.2: task 1 is ``query_from_plan`` … task 7
``use_provided_tools``); the primary ``plan`` task is always generated."""


def parse_ttg_tasks(spec: str | None) -> list[str]:
    """The secondary tasks a ``--ttg-tasks`` value names (names or numbers 1–7, comma-separated; ``all`` or None,
    ``none`` or ``0`` for Table 3's "TTG (0-task)"), in the paper's order; ValueError for an unknown one."""
    if spec is None or spec.strip().lower() == "all":
        return list(SECONDARY_TASKS)
    if spec.strip().lower() in ("none", "0", ""):
        return []
    chosen: set[str] = set()
    for part in (p.strip() for p in spec.split(",")):
        if part.isdigit() and 1 <= int(part) <= len(SECONDARY_TASKS):
            chosen.add(SECONDARY_TASKS[int(part) - 1])
        elif part in SECONDARY_TASKS:
            chosen.add(part)
        else:
            known = ", ".join(f"{k} {t}" for k, t in enumerate(SECONDARY_TASKS, 1))
            raise ValueError(f"unknown TTG task {part!r}; the tasks (name or number): {known}, or all / none")
    return [t for t in SECONDARY_TASKS if t in chosen]


def generate_dataset(seeds: Sequence[SeedExample], registry: ToolRegistry, *, seed: int = 0, per_example: int = 2,
                     extra: Sequence[SeedExample] = (), ttg_tasks: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Chat-format records (what common trainers read) of the plan task and ``ttg_tasks`` (default all seven) for the
    seeds then ``extra`` (DQS picks), ``per_example`` variants each; every task draws from its own seeded stream."""
    chosen = {"plan", *(SECONDARY_TASKS if ttg_tasks is None else ttg_tasks)}
    unknown = sorted(chosen - set(TASKS))
    if unknown:
        raise ValueError(f"unknown TTG task(s) {', '.join(unknown)}; tasks: {', '.join(SECONDARY_TASKS)}")
    records = []
    for ex in [*seeds, *extra]:
        for k in range(per_example):
            for task in [t for t in TASKS if t in chosen]:
                made = TASKS[task](ex, seeds, registry, random.Random(f"{seed}|{ex.source_id}|{task}|{k}"))
                if made is not None:
                    system, user, target = made
                    records.append({"messages": [{"role": "system", "content": system}, {"role": "user", "content": user},
                                                 {"role": "assistant", "content": target}],
                                    "task": task, "source_id": ex.source_id, "variant": k})
    return records


def write_dataset(records: Sequence[dict[str, Any]], out_dir: str | Path, *, seed: int = 0,
                  extra_stats: dict[str, Any] | None = None, ttg_tasks: Sequence[str] | None = None) -> dict[str, Any]:
    """``{task}.jsonl`` per generated task (the primary ``plan`` and ``ttg_tasks``, default all seven),
    ``train.jsonl`` (all, shuffled by ``seed``) and ``stats.json``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    chosen = {"plan", *(SECONDARY_TASKS if ttg_tasks is None else ttg_tasks)}
    by_task = {t: [r for r in records if r["task"] == t] for t in TASKS if t in chosen}
    for t, rows in by_task.items():
        atomic_write(out / f"{t}.jsonl", jsonl_text(rows))
    train = list(records)
    random.Random(f"{seed}|train").shuffle(train)
    atomic_write(out / "train.jsonl", jsonl_text(train))
    stats = {"seed": seed, "total": len(train), "tasks": {t: len(rows) for t, rows in by_task.items()},
             "sources": len(dict.fromkeys(r["source_id"] for r in records)), **(extra_stats or {})}
    atomic_write(out / "stats.json", json.dumps(stats, indent=2, ensure_ascii=False) + "\n")
    return stats
