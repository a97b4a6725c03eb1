"""The terminal side of plan review (``ask --review``, ``resume``): show a paused plan, ask ``approve / edit / reject``;
``e`` opens ``$EDITOR`` (or reads lines up to an empty one); when standard input ends the run stays paused."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tempfile
from typing import Any, TextIO

from ragplan.runs import ReviewDeferred

__all__ = ["TerminalReview", "PROMPT"]

PROMPT = "approve / edit / reject [a/e/r]: "
"""The question asked for each review."""

_TRIES = 5


class TerminalReview:
    """A ``review`` callback (:mod:`ragplan.runs`) that asks a person at the terminal."""

    def __init__(self, out: TextIO = sys.stdout, inp: TextIO | None = None) -> None:
        """Write to ``out``, read answers from ``inp`` (standard input by default)."""
        self.out = out
        self.inp = inp

    def _say(self, text: str = "", end: str = "\n") -> None:
        print(text, end=end, file=self.out, flush=True)

    def _line(self) -> str | None:
        line = (self.inp or sys.stdin).readline()
        return None if line == "" else line.rstrip("\n")

    def __call__(self, payload: dict[str, Any]) -> Any:
        """Show the plan in ``payload`` and return the person's decision (ReviewDeferred when input ended)."""
        kind = "re-plan" if payload.get("kind") == "replan" else "plan"
        rnd, most = payload.get("round", 1), payload.get("max_rounds", 1)
        self._say(f"\nReview the {kind} ({payload.get('method', '-')}){f', answer {rnd} of {most}' if rnd > 1 else ''}:")
        if payload.get("error"):
            self._say(f"  refused: {payload['error']}")
        for line in str(payload.get("plan", "")).splitlines() or ["(empty)"]:
            self._say(f"  {line}")
        for _ in range(_TRIES):
            self._say(PROMPT, end="")
            answer = self._line()
            if answer is None:
                self._say()
                raise ReviewDeferred("no answer: standard input ended")
            word = answer.strip().lower()
            if word in ("a", "approve"):
                return {"action": "approve"}
            if word in ("r", "reject"):
                self._say("reason (optional): ", end="")
                return {"action": "reject", "reason": (self._line() or "").strip()}
            if word in ("e", "edit"):
                text = self._edit(payload)
                if text:
                    return {"action": "edit", "plan": text}
                self._say("no plan written; the plan is unchanged")
                continue
            self._say("answer a (approve), e (edit) or r (reject)")
        raise ReviewDeferred(f"no answer after {_TRIES} prompts")

    def _edit(self, payload: dict[str, Any]) -> str:
        """The new plan from ``$EDITOR`` (or from standard input until an empty line)."""
        steps = "\n".join(str(s) for s in payload.get("steps") or [])
        fmt = payload.get("format") or "the plan"
        editor = os.environ.get("EDITOR", "").strip()
        if not editor:
            self._say(f"Write the new plan ({fmt}); end with an empty line:")
            lines: list[str] = []
            while True:
                line = self._line()
                if line is None or not line.strip():
                    break
                lines.append(line)
            return "\n".join(lines).strip()
        header = (f"# Edit the plan below: {fmt}.\n# Lines starting with "# " are ignored. Save and quit to continue; "
                  "an empty plan keeps the one shown.\n")
        fd, path = tempfile.mkstemp(prefix="ragplan-plan-", suffix=".txt")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(header + steps + "\n")
            try:
                code = subprocess.run([*shlex.split(editor), path]).returncode
            except OSError as exc:
                self._say(f"cannot run EDITOR={editor!r}: {exc}")
                return ""
            if code != 0:
                self._say(f"the editor exited with {code}; the plan is unchanged")
                return ""
            with open(path, encoding="utf-8") as fh:
                kept = [ln for ln in fh.read().splitlines() if not (ln.lstrip().startswith("# ") or ln.strip() == "#")]
            return "\n".join(kept).strip()
        finally:
            os.unlink(path)
