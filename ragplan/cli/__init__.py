"""The ``ragplan`` command line; the commands that run graphs take every setting of the method's context as a flag
generated from it (:mod:`ragplan.cli.settings`). Exit codes: 0 success; 1 the run or query failed (the reason is
printed); 2 bad input or configuration."""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import os
import shutil
import sys

from ragplan import __version__
from ragplan.cli.errors import BadInput, TerminalSafe, fail
from ragplan.jsonl import FileFormatError, atomic_write

__all__ = ["main", "build_parser", "COMMAND_MODULES", "SETTINGS_COMMANDS"]

#: Sub-commands: name -> module with ``add_parser(sub)`` and ``run(args)``; a method family's commands are one module.
COMMAND_MODULES = {
    "cypher": "ragplan.cli.cypher",
    "ask": "ragplan.cli.ask",
    "dqa": "ragplan.methods.planrag.cli",
    "eval": "ragplan.cli.eval",
    "compare": "ragplan.cli.compare",
    "index": "ragplan.cli.index",
    "reaper": "ragplan.methods.reaper.cli",
    "furepa": "ragplan.methods.furepa.cli",
    "instructrag": "ragplan.methods.instructrag.cli",
    "resume": "ragplan.cli.resume",
}

#: The commands that run graphs: their ``add_parser(sub, settings)`` takes the generated setting flags.
SETTINGS_COMMANDS = ("ask", "eval", "compare", "resume")


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The argument parser of every ``ragplan`` command (of the one ``argv`` names, when it names one); the commands
    that run graphs get every family's setting flags, their ``--help`` the settings of the methods ``argv`` names."""
    settings = None
    if argv is None or argv[:1] and argv[0] in SETTINGS_COMMANDS:
        from ragplan.cli.settings import add_setting_flags, methods_in
        from ragplan.registry import families

        fams, names = families(), methods_in(argv or [])
        shown = [f for f in fams if any(g.name in names for g in f.graphs)]
        settings = lambda p: add_setting_flags(p, fams, shown)  # noqa: E731
    parser = argparse.ArgumentParser(
        prog="ragplan", description="Planning-based retrieval-augmented generation methods as LangGraph graphs.")
    parser.add_argument("--version", action="version", version=f"ragplan {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    graphs = sub.add_parser("graphs", help="list every method graph with a one-line summary",
                            description="Every graph of every method family, with a one-line summary.")
    graphs.add_argument("--families", action="store_true", help="group the graphs by family, with each family's "
                        "paper, data flags and settings (--set KEY=VALUE / --sweep KEY=… take these)")
    graphs.add_argument("--langgraph-json", action="store_true",
                        help="print the langgraph.json that serves every graph (for `langgraph dev` / Studio)")
    graphs.add_argument("--settings-md", action="store_true",
                        help="print docs/settings.md: every family's settings, their flags, types and defaults")
    studio = sub.add_parser("studio", help="serve every graph for LangGraph Studio / the SDK (`langgraph dev`, set "
                            "up for ragplan)", description="In the project folder, checks that langgraph.json serves "
                            "every registered graph; in any other folder, serves the installed package's graphs. Then "
                            "runs `langgraph dev`; extra arguments go to it, e.g. --port 2024 --no-browser.")
    studio.add_argument("langgraph_args", nargs=argparse.REMAINDER, help="arguments for `langgraph dev`")
    if argv and argv[0] in COMMAND_MODULES:
        named = [argv[0]]  # a command's run needs its own parser only
    elif argv and argv[0] in sub.choices:
        named = []  # `graphs` or `studio`, defined here: none of the others
    else:
        named = list(COMMAND_MODULES)
    for name in named:
        add = importlib.import_module(COMMAND_MODULES[name]).add_parser
        add(sub, settings) if name in SETTINGS_COMMANDS else add(sub)
    return parser


def _graphs(args: argparse.Namespace) -> int:
    """``ragplan graphs``: the graphs of every family (or the langgraph.json that serves them, or docs/settings.md)."""
    from ragplan.cli.settings import settings_markdown
    from ragplan.registry import families, langgraph_graphs

    if args.langgraph_json:
        print(langgraph_json(langgraph_graphs()), end="")
        return 0
    fams = families()
    if args.settings_md:
        print(settings_markdown(fams), end="")
        return 0
    width = max(len(g.name) for f in fams for g in f.graphs)
    for fam in fams:
        if args.families:
            print(f"{fam.title}  [{fam.name}]  data: {fam.data_help or '-'}")
        for g in fam.graphs:
            print(f"{'  ' if args.families else ''}{g.name:<{width}}  {g.summary}")
        if args.families:  # what --set / --sweep / Studio's form take (Python-only object fields left out)
            print(f"  settings: {', '.join(f'{k}={d!r}' for k, (_, d, _) in sorted(fam.settable().items()))}")
    return 0


def _studio(langgraph_args: list[str]) -> int:
    """``ragplan studio``: run `langgraph dev` on ./langgraph.json when it serves ragplan's graphs (checked against
    the registry), else anywhere on the installed package's graphs, from ragplan's state folder."""
    from ragplan.checkpoints import default_checkpoint_db
    from ragplan.registry import langgraph_graphs

    exe = shutil.which("langgraph") or os.path.join(os.path.dirname(sys.executable), "langgraph")
    if not os.path.exists(exe):
        return fail("`langgraph` is not installed (pip install 'langgraph-cli[inmem]')")
    want = langgraph_graphs()
    try:
        served = json.loads(open("langgraph.json", encoding="utf-8").read()).get("graphs") or {}
    except FileNotFoundError:
        served = {}
    except (OSError, ValueError) as exc:
        return fail(f"langgraph.json cannot be read: {exc}")
    if not any(str(v).startswith("ragplan.graphs.") for v in served.values()):  # not ragplan's project folder
        home = default_checkpoint_db().parent / "studio"  # langgraph dev keeps its .langgraph_api there too
        home.mkdir(parents=True, exist_ok=True)
        atomic_write(home / "langgraph.json", langgraph_json(want))  # (two studios starting at once: each file whole)
        print(f"serving the installed ragplan's graphs from {home}", file=sys.stderr)
        os.chdir(home)
        os.execv(exe, [exe, "dev", "--config", "langgraph.json", *langgraph_args])
    problems = [f"{what} {', '.join(names)}" for what, names in (
        ("missing", sorted(set(want) - set(served))), ("unknown", sorted(set(served) - set(want))),
        ("wrong path for", sorted(n for n in set(want) & set(served) if want[n] != served[n]))) if names]
    if problems:
        return fail(f"langgraph.json does not match the registered graphs ({'; '.join(problems)}); "
                    "regenerate it with `ragplan graphs --langgraph-json > langgraph.json`")
    os.execv(exe, [exe, "dev", *langgraph_args])


def langgraph_json(graphs: dict[str, str]) -> str:
    """The langgraph.json that serves ``graphs`` (``ragplan graphs --langgraph-json``)."""
    return json.dumps({"$schema": "https://langgra.ph/schema.json", "python_version": "3.11", "dependencies": ["."],
                       "graphs": graphs}, indent=2) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``ragplan`` command."""
    # Start-up (imports, parsers, the graphs' registry) makes ~10^5 objects that live as long as the process and no
    # garbage: the collections it would trigger walk them all in vain (about 0.1 s of `ragplan graphs`, whose whole
    # work that is). Collection is on again once a command's own work starts, and when main returns.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _main(list(sys.argv[1:] if argv is None else argv), collecting)
    finally:
        if collecting:
            gc.enable()


def _main(raw: list[str], collecting: bool) -> int:
    parser = build_parser(raw)
    if raw[:1] == ["studio"] and not ({"-h", "--help"} & set(raw[1:2])):
        return _studio(raw[1:])  # everything after goes to langgraph dev
    args = parser.parse_args(raw)
    if args.command is None:
        parser.print_help()
        return 0
    streams = sys.stdout, sys.stderr
    sys.stdout = TerminalSafe(sys.stdout)  # type: ignore[assignment]
    # credentials redacted from both; standard error unescaped where progress bars redraw with control characters
    sys.stderr = TerminalSafe(sys.stderr, escape=args.command in ("ask", "resume", "cypher"))  # type: ignore[assignment]
    try:
        if args.command == "graphs":
            return _graphs(args)
        command = importlib.import_module(COMMAND_MODULES[args.command])
        if collecting:
            gc.enable()
        return command.run(args)
    except (BadInput, FileFormatError) as exc:  # (a user's file that is not what it should be: named, exit 2)
        return fail(str(exc))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into `head` and closed: not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    finally:
        sys.stdout, sys.stderr = streams
