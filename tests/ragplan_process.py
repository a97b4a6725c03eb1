"""``ragplan ARGS`` as a process of its own that a test can SIGKILL, started without paying the imports each time.

A kill test needs a real process (its own memory, killed with SIGKILL mid-write), not a fresh interpreter: the
``python -m ragplan`` it stands for spends ~3 s of CPU importing before it does anything. Here a multiprocessing
fork server, started once per test process, imports ragplan's command and what ``ask`` and ``eval`` load; each
:func:`start` forks a child of it that becomes the leader of a session of its own (as ``start_new_session``), takes
the working folder, environment and standard streams it is given, and runs ``ragplan.cli.main(ARGS)``. The
interface is the part of :class:`subprocess.Popen` the kill tests use (``pid``, ``poll``, ``wait``, ``returncode``,
``stdout``/``stderr`` read back from files, SIGKILL to its process group); :func:`run` is ``subprocess.run``'s.

Nothing in ragplan reads the environment or the working folder at import, so a child given them behaves as a process
started with them. Unlike an interpreter's exit, a child's runs no ``atexit`` hooks (ragplan registers none).
"""

from __future__ import annotations

import importlib
import io
import multiprocessing
import os
import shutil
import subprocess
import sys
import tempfile
import weakref
from pathlib import Path
from typing import IO, Any

PRELOAD = ["ragplan.cli", "ragplan.cli.ask", "ragplan.cli.eval", "ragplan.cli.settings", "ragplan.registry",
           "ragplan.checkpoints", "ragplan.runs", "ragplan.llm", "ragplan.eval.runner", "ragplan.eval.question_runner",
           "ragplan.eval.item_checkpoints", "ragplan.eval.registry", "ragplan.graphs.planrag",
           "ragplan.graphs.think_then_act", "ragplan.graphs.reaper", "ragplan.graphs.furepa", "ragplan.graphs.instructrag",
           "ragplan.methods.planrag.benchmark", "ragplan.methods.planrag.grade", "langchain_openai",
           "langgraph.checkpoint.sqlite", "langgraph.checkpoint.sqlite.aio", "psycopg", "langgraph.checkpoint.postgres",
           "langgraph.checkpoint.postgres.aio"]
"""What the children import before a kill, imported once in the fork server (a module missing here, such as
matplotlib, is imported by the child that needs it: it only costs time)."""


def _warm() -> None:
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:
            pass


if os.environ.get("RAGPLAN_TEST_FORKSERVER") == "1":  # (in the fork server only)
    _warm()


def _child(argv: list[str], cwd: str, env: dict[str, str], stdin: str | None, out: str, err: str) -> None:
    """In the forked child: its own session, folder, environment and streams; then the command."""
    os.setsid()
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    fd_in = os.open(stdin or os.devnull, os.O_RDONLY)
    for fd, path in ((1, out), (2, err)):
        f = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        os.dup2(f, fd)
        os.close(f)
    os.dup2(fd_in, 0)
    os.close(fd_in)
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
    # unbuffered, as PYTHONUNBUFFERED=1 makes `python -m ragplan`: what was printed before a kill is in the file
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), write_through=True, line_buffering=True)
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), write_through=True, line_buffering=True)
    from ragplan.cli import main

    sys.exit(main(argv))


class RagplanProcess:
    """A started ``ragplan ARGS`` process (see the module's docstring)."""

    def __init__(self, proc: Any, folder: Path) -> None:
        self._proc = proc
        self.pid: int = proc.pid
        self.stdout: IO[str] = open(folder / "stdout")
        self.stderr: IO[str] = open(folder / "stderr")
        """What it wrote so far, read from the start of its output files."""
        weakref.finalize(self, _clean, folder, self.stdout, self.stderr)

    @property
    def returncode(self) -> int | None:
        return self._proc.exitcode

    def poll(self) -> int | None:
        return self._proc.exitcode

    def wait(self, timeout: float | None = None) -> int | None:
        self._proc.join(timeout)
        if self._proc.exitcode is None:
            raise TimeoutError(f"ragplan process {self.pid} still runs after {timeout} s")
        return self._proc.exitcode


_context: Any = None


def _fork_server() -> Any:
    global _context
    if _context is None:
        from multiprocessing import forkserver

        _context = multiprocessing.get_context("forkserver")
        # the fork server is a fresh interpreter: it imports this module (which warms it) before forking anything
        _context.set_forkserver_preload([__name__])
        os.environ["RAGPLAN_TEST_FORKSERVER"] = "1"  # read by this module as the fork server imports it
        try:
            forkserver.ensure_running()  # the server starts now, with that variable set
        finally:
            os.environ.pop("RAGPLAN_TEST_FORKSERVER", None)
    return _context


def start(args: list[str], cwd: Path | str, env: dict[str, str], stdin: str | None = None) -> RagplanProcess:
    """``ragplan ARGS`` running in ``cwd`` with exactly ``env``; ``stdin`` is the text it reads (none by default)."""
    ctx = _fork_server()
    folder = Path(tempfile.mkdtemp(prefix="ragplan-process-"))
    out, err, inp = folder / "stdout", folder / "stderr", None
    out.touch()
    err.touch()
    if stdin is not None:
        inp = folder / "stdin"
        inp.write_text(stdin)
    # (daemon: one a failed test left running is ended when the test process exits, instead of being waited for)
    proc = ctx.Process(target=_child, args=(list(args), str(cwd), dict(env), str(inp) if inp else None, str(out), str(err)),
                       daemon=True)
    proc.start()
    return RagplanProcess(proc, folder)


def _clean(folder: Path, *files: IO[str]) -> None:
    for f in files:
        f.close()
    shutil.rmtree(folder, ignore_errors=True)


def run(args: list[str], cwd: Path | str, env: dict[str, str], stdin: str = "", timeout: float = 300) -> subprocess.CompletedProcess:
    """``ragplan ARGS`` to its end, as :func:`subprocess.run` with ``capture_output=True, text=True``."""
    proc = start(args, cwd, env, stdin=stdin)
    try:
        code = proc.wait(timeout)
    except TimeoutError:
        os.killpg(proc.pid, 9)
        raise
    return subprocess.CompletedProcess(args, code, proc.stdout.read(), proc.stderr.read())
