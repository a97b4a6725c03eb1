"""The README stays short and true, and docs/ holds the depth without dead links.

- README.md is at most 250 lines; its first two shell commands are the install + main job and the
  test suite, and `.ci/run` runs that same test script;
- every relative link of README.md and docs/**.md resolves to a file (docs/settings.md is generated
  by `ragplan` and may be absent in a fresh clone);
- no issue numbers in README.md or docs/;
- every `ragplan <command>` (and `ragplan <command> <subcommand>`) the README names is a command of
  the CLI's parser;
- every method family of the registry has its page docs/methods/<family>.md naming each of its graphs;
- the README's picture of the `planrag` graph is the compiled graph's own Mermaid drawing;
- every `benchmarks/<script>.py` the pages name exists and starts (its ``--help``).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
GENERATED = {DOCS / "settings.md"}

INSTALL_AND_MAIN_JOB = (
    "bash scripts/install.sh && .venv/bin/ragplan ask --method planrag --graph examples/trade_network.cql "
    "--question-file examples/trade_question.txt"
)
TEST_COMMAND = "bash scripts/test.sh"

FENCE = re.compile(r"^```([\w-]*)\n(.*?)^```", re.MULTILINE | re.DOTALL)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
INLINE_CODE = re.compile(r"`([^`\n]+)`")
RAGPLAN_COMMAND = re.compile(r"(?:^|[\s/(])ragplan ([a-z][a-z-]*)(?: ([a-z][a-z-]*))?")


def _pages() -> list[Path]:
    return [README, *sorted(DOCS.rglob("*.md"))]


def _fenced(text: str, languages: tuple[str, ...]) -> list[str]:
    return [body for lang, body in FENCE.findall(text) if lang in languages]


def _shell_commands(text: str) -> list[str]:
    """The commands of the ```bash blocks in order: non-empty lines without the comments (continuations joined)."""
    commands: list[str] = []
    for body in _fenced(text, ("bash", "sh", "shell")):
        pending = ""
        for raw in body.splitlines():
            line = raw.split(" #", 1)[0].strip() if not raw.lstrip().startswith("#") else ""
            if not line:
                continue
            if line.endswith("\\"):
                pending += line[:-1].strip() + " "
                continue
            commands.append(pending + line)
            pending = ""
    return commands


def _code_text(text: str) -> str:
    """What the page shows as code: the fenced blocks and the inline code spans."""
    prose = FENCE.sub("", text)
    return "\n".join(_fenced(text, ("bash", "sh", "shell", "python", "text", "")) + INLINE_CODE.findall(prose))


def test_readme_is_short():
    lines = README.read_text().splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines; move depth to docs/"


def test_readme_opens_with_the_two_commands_and_ci_runs_the_second():
    commands = _shell_commands(README.read_text())
    assert commands[:2] == [INSTALL_AND_MAIN_JOB, TEST_COMMAND]
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert TEST_COMMAND in ci, ".ci/run must run exactly the README's test command"


def _anchors(page: Path) -> set[str]:
    """The heading anchors GitHub gives a Markdown page (lower case, punctuation dropped, spaces to '-')."""
    seen: dict[str, int] = {}
    out = set()
    for heading in re.findall(r"^#{1,6} +(.+?) *$", FENCE.sub("", page.read_text()), re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def test_relative_links_resolve():
    broken = []
    for page in _pages():
        for target in LINK.findall(page.read_text()):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                continue  # a URL or mailto:
            file_part, _, anchor = target.partition("#")
            path = (page.parent / file_part).resolve() if file_part else page
            if path in GENERATED and not path.exists():
                continue
            if not path.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such file)")
            elif anchor and path.suffix == ".md" and anchor not in _anchors(path):
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such heading)")
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_anchor_slugs_follow_github():
    page = DOCS / "evaluation.md"
    assert "resume-rerun-and-replay" in _anchors(page)  # "## Resume, rerun and replay"
    assert "faults-benchmarksfaultspy" in _anchors(DOCS / "performance.md")  # "## Faults: `benchmarks/faults.py`"


def test_link_checker_sees_a_broken_link(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("see [the methods](docs/methods/nope.md) and [web](https://example.org)\n")
    targets = LINK.findall(page.read_text())
    assert targets == ["docs/methods/nope.md", "https://example.org"]
    assert not (page.parent / targets[0]).exists()


def test_no_issue_numbers():
    found = []
    for page in _pages():
        for n, line in enumerate(page.read_text().splitlines(), 1):
            if re.search(r"\bissues?\s*#?\d+", line, re.IGNORECASE):
                found.append(f"{page.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not found, "\n".join(found)


def _exit_code(parser, argv: list[str]) -> int:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            parser.parse_args(argv)
        except SystemExit as exc:
            return int(exc.code or 0)
    return 0


def test_every_ragplan_command_in_the_readme_exists():
    from ragplan.cli import build_parser

    parser = build_parser()
    named = set(RAGPLAN_COMMAND.findall(_code_text(README.read_text())))
    assert {c for c, _ in named} >= {"ask", "eval", "compare", "studio", "index"}
    wrong = []
    for command, sub in sorted(named):
        if _exit_code(parser, [command, "--help"]) != 0:
            wrong.append(f"ragplan {command}")
            continue
        # a second word is checked when the command validates its second word (it has subcommands)
        if sub and _exit_code(parser, [command, "no-such-subcommand", "--help"]) != 0:
            if _exit_code(parser, [command, sub, "--help"]) != 0:
                wrong.append(f"ragplan {command} {sub}")
    assert not wrong, "the README names commands the CLI does not have: " + ", ".join(wrong)
    assert _exit_code(parser, ["no-such-command", "--help"]) != 0
    assert _exit_code(parser, ["index", "no-such-subcommand", "--help"]) != 0


def test_one_page_per_family_naming_its_graphs():
    from ragplan.registry import families

    missing = []
    for fam in families():
        page = DOCS / "methods" / f"{fam.name}.md"
        if not page.exists():
            missing.append(str(page.relative_to(ROOT)))
            continue
        text = page.read_text()
        missing += [f"{page.relative_to(ROOT)}: `{g.name}`" for g in fam.graphs if f"`{g.name}`" not in text]
    assert not missing, "\n".join(missing)


def test_readme_draws_the_compiled_planrag_graph():
    from ragplan.graphs.planrag import planrag

    drawn = [body for body in _fenced(README.read_text(), ("mermaid",))]
    assert drawn, "README.md has no ```mermaid picture of a graph"
    assert drawn[0].strip() == planrag.get_graph().draw_mermaid().strip(), (
        "README's mermaid block is not the compiled planrag graph; paste the output of "
        "planrag.get_graph().draw_mermaid()"
    )


@pytest.mark.parametrize("page", ["evaluation.md", "reliability.md", "performance.md", "development.md"])
def test_docs_pages_exist(page):
    assert (DOCS / page).exists()


#: Third-party libraries the benchmark scripts import, loaded once by :data:`_LAUNCHER` before it forks a process per
#: script (the project's own modules are left for each script to import).
_PRELOAD = ("numpy", "torch", "pydantic", "langchain_core.language_models", "langchain_core.runnables", "langgraph.graph",
            "openai", "langchain_openai", "matplotlib.pyplot", "tqdm")

_LAUNCHER = r"""
import json, os, runpy, sys, traceback
for lib in json.loads(sys.argv[1]):
    try:
        __import__(lib)
    except Exception:  # not installed: the script that needs it fails on its own import
        pass
path = sys.path[1:]
children = {}
for script, err in json.loads(sys.argv[2]):
    pid = os.fork()
    if pid:
        children[pid] = script
        continue
    # the child: `python SCRIPT --help` (its folder first on sys.path, run as __main__, stderr to its file)
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    os.dup2(os.open(err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), 2)
    sys.argv, sys.path[:] = [script, "--help"], [os.path.dirname(script), *path]
    code = 0
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else (print(exc.code, file=sys.stderr), 1)[1]
    except BaseException:
        traceback.print_exc()
        code = 1
    sys.stdout.flush(), sys.stderr.flush()
    os._exit(code)
codes = {}
while children:
    pid, status = os.wait()
    codes[children.pop(pid)] = os.waitstatus_to_exitcode(status)
print(json.dumps(codes))
"""


def test_every_benchmark_the_docs_name_starts(tmp_path):
    """A figure the docs quote can be measured again: each benchmark script they name runs its ``--help``, each in a
    process of its own as ``python benchmarks/<script>.py --help`` (forked from one launcher that has imported the
    heavy third-party libraries once, rather than a fresh interpreter importing them per script)."""
    named = sorted({n for page in _pages() for n in re.findall(r"benchmarks/(\w+)\.py", page.read_text())} - {"common"})
    assert "faults" in named and "graphdb" in named
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    scripts = {str(ROOT / "benchmarks" / f"{n}.py"): tmp_path / f"{n}.err" for n in named}
    proc = subprocess.run([sys.executable, "-c", _LAUNCHER, json.dumps(_PRELOAD),
                           json.dumps([[s, str(e)] for s, e in scripts.items()])],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    codes = json.loads(proc.stdout.strip().splitlines()[-1])
    assert sorted(codes) == sorted(scripts)
    failed = {Path(s).stem: scripts[s].read_text()[-1500:] for s, code in codes.items() if code != 0}
    assert not failed, failed
