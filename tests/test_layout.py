"""The layout stays walkable: no import cycles, steps in two hops, one name per thing, a clean type check."""

from __future__ import annotations

import ast
import inspect
import os
import subprocess
import sys
from pathlib import Path
from types import UnionType
from typing import Any, TypeVar, Union, get_args, get_origin, get_type_hints

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "ragplan"


def _modules() -> dict[str, Path]:
    """Every module of the ``ragplan`` package (through its symlinked folders) by dotted name."""
    out: dict[str, Path] = {}
    for dirpath, _, files in os.walk(PKG, followlinks=True):
        for f in files:
            if not f.endswith(".py"):
                continue
            rel = (Path(dirpath) / f).relative_to(PKG).with_suffix("")
            parts = list(rel.parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(["ragplan", *parts])] = Path(dirpath) / f
    return out


def _imports(path: Path, modules: set[str]) -> set[str]:
    """The ragplan modules ``path`` imports anywhere (function-level imports included)."""
    deps: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("ragplan"):
            deps.add(node.module)
            deps.update(f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in modules)
        elif isinstance(node, ast.Import):
            deps.update(a.name for a in node.names if a.name.startswith("ragplan"))
    return {d for d in deps if d in modules}


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in edges:
        if v not in index:
            visit(v)
    return found


def test_no_import_cycles():
    """Registries and factories live in modules of their own, so no two modules import each other (even lazily)."""
    mods = _modules()
    edges = {m: _imports(p, set(mods)) - {m} for m, p in mods.items()}
    assert _cycles(edges) == []


def test_every_step_is_two_hops_away():
    """nodes/ holds one folder per family plus common/, and each module there is a step (or its prompt/examples)."""
    folders = sorted(p.name for p in (ROOT / "nodes").iterdir() if p.is_dir() and p.name != "__pycache__")
    from ragplan.registry import families

    assert set(folders) <= {"common"} | {f.name for f in families()}, folders
    assert not [p.name for p in (ROOT / "nodes").glob("*.py") if p.name != "__init__.py"], "steps belong in a family folder"


def test_no_two_public_classes_or_functions_share_a_name():
    """``validate_plan`` the function and the node, two unrelated ``Plan`` classes: one name, one thing."""
    seen: dict[str, list[str]] = {}
    for name, path in _modules().items():
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and not node.name.startswith("_"):
                seen.setdefault(node.name, []).append(name)
    allowed = {"main", "run", "add_parser", "scenario_from_data"}  # per-module entry points; one reader per DQA scenario
    twice = {n: ms for n, ms in seen.items() if len(ms) > 1 and n not in allowed}
    assert twice == {}


@pytest.mark.skipif(not (ROOT / ".venv" / "bin" / "mypy").exists() and not os.environ.get("RAGPLAN_FORCE_MYPY"),
                    reason="mypy is installed by scripts/install.sh (the dev extra)")
def test_type_check_is_clean():
    """mypy over the product code (settings in pyproject.toml) finds nothing; tools, tests and langgraph dev
    resolve ``ragplan.*`` the same way (the top-level folders are symlinked into the package)."""
    proc = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]


#: What a family's folder under ragplan/methods/ holds that a node must not reach: the benchmark adapter, grading
#: tables and command-line modules (nodes stay usable in any graph, with any data).
_NOT_FOR_NODES = ("benchmark", "tables", "goldset", "cli", "commands")


def test_nodes_import_only_nodes_state_tools_the_core_and_their_family_folder():
    """The import contract of the design card: a node imports nodes/, state/, tools/, the core (chat models, the
    family interface) and its own family's folder under ragplan/methods/; never a benchmark, the evaluation
    runner, the CLI, the graphs or another family's folder."""
    mods = _modules()
    bad: list[str] = []
    for name, path in mods.items():
        if not name.startswith("ragplan.nodes."):
            continue
        family = name.split(".")[2]
        for dep in _imports(path, set(mods)):
            parts = dep.split(".")
            if parts[1] in ("nodes", "state", "tools"):
                continue
            if parts[1] == "methods" and len(parts) > 2 and parts[2] == family and not any(
                    p.startswith(_NOT_FOR_NODES) for p in parts[3:]):
                continue
            if parts[1] in ("llm", "llm_cache", "family") and len(parts) == 2:
                continue
            bad.append(f"{name} imports {dep}")
    assert bad == []


def test_one_home_per_method():
    """Besides the LangGraph parts (graphs/, nodes/, state/, tools/), everything a family owns is in
    ragplan/methods/<family>/: no other package under ragplan/ is named after a family or holds training code."""
    from ragplan.registry import families

    names = {f.name for f in families()}
    homes = {p.name for p in (PKG / "methods").iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert homes <= names, homes - names
    strays = [p.relative_to(PKG).as_posix() for p in PKG.rglob("*")
              if not {"graphs", "nodes", "state", "tools", "methods"} & set(p.relative_to(PKG).parts[:1])
              and (p.stem in names or p.stem.split("_")[0] in names | {"dqa", "training"})]
    assert strays == []


def _builders() -> list[tuple[str, Any]]:
    """Every (graph name, uncompiled builder) of the registry, compiled sub-graphs (Think-then-Act's sub-query
    branch) included."""
    from ragplan.registry import graph_registry

    out: list[tuple[str, Any]] = []
    todo = [(name, build()) for name, (build, _) in graph_registry().items()]
    while todo:
        name, builder = todo.pop()
        out.append((name, builder))
        todo += [(f"{name}/{n}", spec.runnable.builder) for n, spec in builder.nodes.items()
                 if getattr(spec.runnable, "builder", None) is not None]
    return out


def _members(hint: Any) -> set[Any]:
    """The types a state annotation admits: the union's members, a type variable's bound's."""
    if isinstance(hint, TypeVar):
        hint = hint.__bound__
    return set(get_args(hint)) if get_origin(hint) in (Union, UnionType) else {hint}


def test_every_node_names_its_family_state():
    """Each node's first parameter is annotated with its graph's state type (alone, in a union of the states the node
    serves, or as the bound of a type variable): never ``Any``. LangGraph reads that annotation as the node's input
    schema, so a node must still get the graph's whole state."""
    bad: list[str] = []
    for graph, builder in _builders():
        for node, spec in builder.nodes.items():
            fn = getattr(spec.runnable, "func", None)
            if fn is None or getattr(spec.runnable, "builder", None) is not None:
                continue
            first = next(iter(inspect.signature(fn).parameters))
            hint = get_type_hints(fn).get(first, Any)
            if builder.state_schema not in _members(hint):
                bad.append(f"{graph}.{node}: {first}: {hint} (graph state {builder.state_schema.__name__})")
            if spec.input_schema is not builder.state_schema:
                bad.append(f"{graph}.{node} reads {spec.input_schema.__name__}, not the graph's state")
    assert bad == []
    assert sum(1 for _, b in _builders() for _ in b.nodes) >= 42


def test_mypy_checks_the_node_bodies():
    """pyproject.toml's mypy settings check every function body of ragplan.nodes and ragplan.state and refuse an
    unannotated one there; there and in the graphs' routers a comparison with a value the type cannot hold (a
    misspelt ``stop_reason``) is an error."""
    import tomllib

    conf = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]

    def setting(module: str, key: str) -> Any:
        return next((o[key] for o in conf.get("overrides", []) if module in o["module"] and key in o), conf.get(key))

    for key in ("check_untyped_defs", "disallow_untyped_defs", "strict_equality"):
        assert setting("ragplan.nodes.*", key) is True and setting("ragplan.state.*", key) is True, key
    assert setting("ragplan.graphs.*", "strict_equality") is True
    assert "ragplan" in conf["packages"]
    # third-party code skipped for speed never covers our own code or the libraries our types are built on
    skipped = [p for o in conf.get("overrides", []) if o.get("follow_imports") == "skip" for p in o["module"]]
    for lib in ("ragplan", "langgraph", "langchain_core", "pydantic", "numpy", "torch", "torch.nn", "torch.optim"):
        assert not any(lib == p.removesuffix(".*") or lib.startswith(p.removesuffix("*")) for p in skipped), lib


def _strings(expr: ast.expr | None) -> list[str]:
    """The string constants an expression can evaluate to (``"a"``, ``x or "a"``, ``"a" if c else "b"``, tuples)."""
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        return [expr.value]
    if isinstance(expr, ast.IfExp):
        return _strings(expr.body) + _strings(expr.orelse)
    if isinstance(expr, ast.BoolOp):
        return [s for v in expr.values for s in _strings(v)]
    if isinstance(expr, (ast.Tuple, ast.List, ast.Set)):
        return [s for e in expr.elts for s in _strings(e)]
    return []


def _is_stop_reason(expr: ast.expr) -> bool:
    """``state.get("stop_reason")``, ``x["stop_reason"]`` or ``x.stop_reason``."""
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr == "get" and expr.args:
        return _strings(expr.args[0]) == ["stop_reason"]
    if isinstance(expr, ast.Subscript):
        return _strings(expr.slice) == ["stop_reason"]
    return isinstance(expr, ast.Attribute) and expr.attr == "stop_reason"


def test_stop_reason_is_one_literal_every_family_uses():
    """``stop_reason`` is :data:`~ragplan.state.stop_reason.StopReason` in every graph's state, and every reason the
    nodes, routers and LLM layer set or test is one of its values (so a misspelt reason fails here)."""
    from ragplan.state.stop_reason import StopReason

    for graph, builder in _builders():
        if "stop_reason" in get_type_hints(builder.state_schema):
            assert get_type_hints(builder.state_schema)["stop_reason"] == StopReason, graph
    allowed = set(get_args(StopReason))
    used: dict[str, set[str]] = {}
    files = [*(ROOT / "nodes").rglob("*.py"), *(ROOT / "graphs").glob("*.py"), *PKG.glob("llm*.py")]
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            found: list[str] = []
            if isinstance(node, ast.Dict):
                found = [s for k, v in zip(node.keys, node.values) if k is not None and _strings(k) == ["stop_reason"]
                         for s in _strings(v)]
            elif isinstance(node, ast.keyword) and node.arg == "stop_reason":
                found = _strings(node.value)
            elif isinstance(node, ast.Assign) and any(_is_stop_reason(t) for t in node.targets):
                found = _strings(node.value)
            elif isinstance(node, ast.Compare) and _is_stop_reason(node.left):
                found = [s for c in node.comparators for s in _strings(c)]
            for s in found:
                used.setdefault(s, set()).add(path.relative_to(ROOT).as_posix())
    assert {"llm_error", "llm_unparseable", "max_steps", "plan_done", "answered"} <= set(used)
    assert {s: sorted(f) for s, f in used.items() if s not in allowed} == {}


def test_the_product_writes_its_files_whole():
    """Files the product writes (models, indexes, data, run folders) go through ``atomic_write`` (a temporary file
    and a rename): no ``write_text``/``write_bytes``; ``np.save``, ``np.savez``, ``torch.save`` and ``savefig`` only into
    memory."""
    import re

    direct = re.compile(r"\.write_(text|bytes)\(")
    into_file = re.compile(r"\b(np\.savez?|torch\.save|\w+\.savefig)\((?!f\b|f,|buf\b|buf,)(?!.*, f\))")
    found = [f"{p.relative_to(ROOT)}:{n}: {line.strip()}"
             for top in ("ragplan", "tools", "nodes", "graphs", "state") for p in sorted((ROOT / top).rglob("*.py"))
             for n, line in enumerate(p.read_text().splitlines(), 1) if direct.search(line) or into_file.search(line)]
    assert not found, "\n".join(found)
