"""The terminal side of plan review (``ask --review``, ``resume``): show a paused plan, ask ``approve / edit / reject``;
``e`` opens ``$EDITOR`` (or reads lines up to an empty one); when standard input ends the run stays paused."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tempfile
from typing import Any, Callable, TextIO

from ragplan.runs import ReviewDeferred

__all__ = ["terminal_review", "PROMPT"]

PROMPT = "approve / edit / reject [a/e/r]: "
"""The question asked for each review."""

_TRIES = 5


def terminal_review(out: TextIO) -> Callable[[dict[str, Any]], Any]:
    """A ``review`` callback (:mod:`ragplan.runs`) that shows the plan on ``out`` and reads the decision from standard
    input (ReviewDeferred when input ends)."""
    def say(text: str = "", end: str = "\n") -> None:
        print(text, end=end, file=out, flush=True)

    def line() -> str | None:
        got = sys.stdin.readline()
        return None if got == "" else got.rstrip("\n")

    def edit(payload: dict[str, Any]) -> str:
        """The new plan from ``$EDITOR`` (or from standard input until an empty line)."""
        fmt = payload.get("format") or "the plan"
        editor = os.environ.get("EDITOR", "").strip()
        if not editor:
            say(f"Write the new plan ({fmt}); end with an empty line:")
            lines: list[str] = []
            while (text := line()) is not None and text.strip():
                lines.append(text)
            return "\n".join(lines).strip()
        steps = "\n".join(str(s) for s in payload.get("steps") or [])
        fd, path = tempfile.mkstemp(prefix="ragplan-plan-", suffix=".txt")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(f"# Edit the plan below: {fmt}.\n# Lines starting with \"# \" are ignored. Save and quit to "
                         f"continue; an empty plan keeps the one shown.\n{steps}\n")
            try:
                code = subprocess.run([*shlex.split(editor), path]).returncode
            except OSError as exc:
                say(f"cannot run EDITOR={editor!r}: {exc}")
                return ""
            if code != 0:
                say(f"the editor exited with {code}; the plan is unchanged")
                return ""
            with open(path, encoding="utf-8") as fh:
                kept = [ln for ln in fh.read().splitlines() if not (ln.lstrip().startswith("# ") or ln.strip() == "#")]
            return "\n".join(kept).strip()
        finally:
            os.unlink(path)

    def review(payload: dict[str, Any]) -> Any:
        kind = "re-plan" if payload.get("kind") == "replan" else "plan"
        rnd, most = payload.get("round", 1), payload.get("max_rounds", 1)
        say(f"\nReview the {kind} ({payload.get('method', '-')}){f', answer {rnd} of {most}' if rnd > 1 else ''}:")
        if payload.get("error"):
            say(f"  refused: {payload['error']}")
        for text in str(payload.get("plan", "")).splitlines() or ["(empty)"]:
            say(f"  {text}")
        for _ in range(_TRIES):
            say(PROMPT, end="")
            answer = line()
            if answer is None:
                say()
                raise ReviewDeferred("no answer: standard input ended")
            word = answer.strip().lower()
            if word in ("a", "approve"):
                return {"action": "approve"}
            if word in ("r", "reject"):
                say("reason (optional): ", end="")
                return {"action": "reject", "reason": (line() or "").strip()}
            if word in ("e", "edit"):
                text = edit(payload)
                if text:
                    return {"action": "edit", "plan": text}
                say("no plan written; the plan is unchanged")
                continue
            say("answer a (approve), e (edit) or r (reject)")
        raise ReviewDeferred(f"no answer after {_TRIES} prompts")

    return review
