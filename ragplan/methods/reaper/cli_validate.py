"""``ragplan reaper validate PLAN_FILE --tools retail [--json]``: parse a REAPER plan and check it.

Prints the parsed steps (step, evidence variable, tool, arguments by name) when the plan is valid,
or its problems (``line N: message``) when not. ``--json`` prints one object
``{"valid": bool, "steps": [...], "errors": [...], "notes": [...]}``. ``PLAN_FILE`` may be ``-``
for standard input. Only the tool suite's specs are used; no store is opened.

Exit codes: 0 the plan is valid; 1 it is not; 2 the file cannot be read or the suite is unknown.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

__all__ = ["add_validate_parser", "run_validate"]


def add_validate_parser(sub: Any) -> argparse.ArgumentParser:
    """Register ``validate`` on the subparsers of the ``reaper`` command (``ragplan reaper validate``)."""
    v = sub.add_parser("validate", help="parse a REAPER plan file and check it against a tool suite",
                       description="Parse a REAPER plan (`Step k: purpose - #Ek = tool(args)` lines) and check "
                                   "tools, arguments, evidence variables and references against a tool suite. "
                                   "Exit 0 valid, 1 invalid, 2 unreadable file or unknown suite.")
    v.add_argument("plan_file", metavar="PLAN_FILE", help="the plan text (- for standard input)")
    v.add_argument("--tools", default="retail", metavar="SUITE", help="tool suite to check against (default retail)")
    v.add_argument("--json", action="store_true", help='print {"valid", "steps", "errors", "notes"} as JSON')
    v.set_defaults(reaper_command="validate")
    return v


def _read(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    with open(path, encoding="utf-8") as fh:
        return fh.read()


def _arg_json(arg: Any) -> Any:
    return arg.value if arg.kind != "ref" else f"#E{arg.refs[0]}"


def _step_json(step: Any, registry: Any) -> dict[str, Any]:
    from ragplan.methods.reaper.validate import bind_args

    spec = registry.get(step.tool)
    names = [a.name for a in spec.args] if spec is not None else []
    bound, surplus, _ = bind_args(step, names)
    args = {k: _arg_json(a) for k, a in bound.items()}
    return {"step": step.index, "line": step.line, "evidence_var": f"#{step.evidence_var}", "tool": step.tool,
            "purpose": step.purpose, "args": args, "extra_positional": [_arg_json(a) for a in surplus],
            "refs": [f"#E{r}" for r in step.refs], "call": step.call_text()}


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)


def run_validate(args: argparse.Namespace) -> int:
    """Run ``ragplan reaper validate``; returns the exit code (0 valid, 1 invalid, 2 bad input)."""
    from ragplan.methods.reaper.plan import format_arg, parse_plan
    from ragplan.methods.reaper.validate import bind_args, check_plan
    from ragplan.tools import suites as tool_registry

    try:
        text = _read(args.plan_file)
    except (OSError, UnicodeDecodeError) as exc:
        print(f"error: cannot read the plan file {args.plan_file}: {exc}", file=sys.stderr)
        return 2
    try:
        registry = tool_registry.get_suite(args.tools)
    except KeyError as exc:
        print(f"error: {exc.args[0] if exc.args else exc}", file=sys.stderr)
        return 2
    except ImportError as exc:
        print(f"error: the tool suite {args.tools!r} cannot be loaded: {exc}", file=sys.stderr)
        return 2
    parsed = parse_plan(text)
    errors = sorted([*parsed.errors, *check_plan(parsed.plan, registry)], key=lambda e: (e.line, e.step or 0))
    valid = not errors
    if args.json:
        print(json.dumps({
            "valid": valid,
            "steps": [_step_json(s, registry) for s in parsed.plan.steps],
            "errors": [e.model_dump() for e in errors],
            "notes": [n.model_dump() for n in parsed.notes],
        }, ensure_ascii=False, indent=2))
        return 0 if valid else 1
    for n in parsed.notes:
        print(f"note: {n}", file=sys.stderr)
    if not valid:
        for e in errors:
            print(str(e))
        print(f"{args.plan_file}: invalid ({len(errors)} problem{'s' if len(errors) != 1 else ''}, "
              f"tools: {args.tools})")
        return 1
    steps = parsed.plan.steps
    if steps:
        rows = [["STEP", "VAR", "TOOL", "ARGUMENTS"]]
        for s in steps:
            spec = registry.get(s.tool)
            bound, _, _ = bind_args(s, [a.name for a in spec.args] if spec is not None else [])
            rows.append([str(s.index), f"#{s.evidence_var}", s.tool,
                         ", ".join(f"{k}={format_arg(a)}" for k, a in bound.items())])
        print(_table(rows))
    print(f"{args.plan_file}: valid, {len(steps)} step{'s' if len(steps) != 1 else ''} (tools: {args.tools})")
    return 0
