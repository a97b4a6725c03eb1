"""Product code uses other packages through their public APIs only (issue 19, part 3).

Every ``.py`` outside tests/ and benchmarks/ is read as an AST; a use of another package's private part
fails the test with its file, line and what it touched:

* ``import a._b`` and ``from a._b import c`` — a private module;
* ``from a import _c`` — a private name;
* ``x._y`` where ``x`` is a name bound by an import from another package — a private attribute of its
  module or class (``openai._base_client``, ``SomeClass._helper``);
* a method ``_y`` defined in a class whose base comes from another package, when the base has a
  concrete ``_y`` — an override of a private method. Abstract methods (``BaseChatModel._generate``,
  ``BaseTool._run``) are the published way to extend a class and are not flagged.

Dunder names (``__version__``) are public. The standard library is left out (``os._exit`` is documented);
the packages of this project (``ragplan``) too.
"""

from __future__ import annotations

import ast
import importlib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OURS = {"ragplan", "graphs", "nodes", "state", "tools", "tests", "benchmarks"}
SKIP_DIRS = {"tests", "benchmarks", ".venv", "build", "dist", "node_modules"}

# Uses of another package's private API that are accepted, each with its reason: none. A new use anywhere fails.
ALLOWED: set[tuple[str, str]] = set()


def product_files() -> list[Path]:
    """Every product ``.py`` file, each once (ragplan/graphs … are symlinks to the top-level folders)."""
    out: list[Path] = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT)
        if rel.parts[0] in SKIP_DIRS or any(p.startswith(".") for p in rel.parts):
            continue
        if rel.parts[0] == "ragplan" and len(rel.parts) > 1 and (ROOT / "ragplan" / rel.parts[1]).is_symlink():
            continue
        out.append(path)
    return out


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _foreign(module: str) -> bool:
    top = module.split(".")[0]
    return bool(top) and top not in OURS and top not in sys.stdlib_module_names and top != "__future__"


def _abstract(base: type, name: str) -> bool:
    return name in getattr(base, "__abstractmethods__", ()) or getattr(getattr(base, name, None), "__isabstractmethod__", False)


def private_uses(tree: ast.AST) -> list[tuple[int, str]]:
    """``(line, what)`` for each use of another package's private part in a module's AST."""
    found: list[tuple[int, str]] = []
    imported: dict[str, str] = {}  # local name -> the foreign dotted path it is bound to
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if not _foreign(a.name):
                    continue
                if any(_private(p) for p in a.name.split(".")):
                    found.append((node.lineno, f"import {a.name}"))
                imported[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and _foreign(node.module):
            names = ", ".join(a.name for a in node.names)
            if any(_private(p) for p in node.module.split(".")):
                found.append((node.lineno, f"from {node.module} import {names}"))
            for a in node.names:
                if _private(a.name):
                    found.append((node.lineno, f"from {node.module} import {a.name}"))
                imported[a.asname or a.name] = f"{node.module}.{a.name}"
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in imported
                and _private(node.attr)):
            found.append((node.lineno, f"{node.value.id}.{node.attr}"))
        elif isinstance(node, ast.ClassDef):
            for b in node.bases:
                dotted = ast.unparse(b)
                head, _, rest = dotted.partition(".")
                if head not in imported:
                    continue
                target = imported[head] + (f".{rest}" if rest else "")
                base = _resolve(target)
                if not isinstance(base, type):
                    continue
                for item in node.body:
                    if (isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and _private(item.name)
                            and hasattr(base, item.name) and not _abstract(base, item.name)):
                        found.append((item.lineno, f"override {target}.{item.name}"))
    return found


def _resolve(dotted: str) -> object:
    """The object at ``dotted`` (``pkg.mod.Class``), importing the longest module prefix; None when it fails."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for p in parts[i:]:
            obj = getattr(obj, p, None)
        return obj
    return None


def test_product_code_uses_no_private_api_of_another_package():
    """A private import or attribute of another package in product code fails (beyond the listed, known ones)."""
    uses: set[tuple[str, str]] = set()
    where: list[str] = []
    for path in product_files():
        rel = path.relative_to(ROOT).as_posix()
        for line, what in private_uses(ast.parse(path.read_text(), filename=rel)):
            uses.add((rel, what))
            if (rel, what) not in ALLOWED:
                where.append(f"{rel}:{line}: {what}")
    assert not where, "private API of another package:\n" + "\n".join(where)
    stale = ALLOWED - uses
    assert not stale, f"remove these from ALLOWED, they are gone: {sorted(stale)}"


def test_the_checker_finds_each_kind_of_private_use():
    """The checker itself: each form is caught, public and dunder names and our own modules are not."""
    src = '''
import openai._base_client
from openai._base_client import make_request_options
from langchain_core.messages import _private_helper
import langchain_openai.chat_models.base as lc
from langchain_core.language_models import BaseChatModel
from pydantic import BaseModel
import os
from ragplan.llm import _models

x = lc._create_usage_metadata(1)
y = os._exit
z = lc.__name__
w = BaseModel.model_fields

class Chat(BaseChatModel):
    def _generate(self): ...
    def _stream(self): ...
    def _mine_only(self): ...
'''
    got = {what for _, what in private_uses(ast.parse(src))}
    assert got == {"import openai._base_client", "from openai._base_client import make_request_options",
                   "from langchain_core.messages import _private_helper", "lc._create_usage_metadata",
                   "override langchain_core.language_models.BaseChatModel._stream"}
