"""Tool registries (REAPER §4.1): name, signature, description and one example per tool, bound or not."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator

__all__ = ["ArgSpec", "ToolSpec", "ToolRegistry"]


@dataclass(frozen=True)
class ArgSpec:
    """One argument of a tool."""

    name: str
    type: str = "str"
    """A short type name for prompts and checks: str, int, float, bool, date_range, any."""
    required: bool = True
    description: str = ""


@dataclass
class ToolSpec:
    """A tool as a planner sees it, and (when bound) the LangChain tool that runs it."""

    name: str
    description: str
    args: list[ArgSpec]
    """Arguments in positional order (a plan may pass them by position or by name)."""
    example: str
    """One example use in the plan format, e.g. ``#E1 = prod_search("nut free chocolate coins")``."""
    tool: Any = None
    """The bound LangChain ``BaseTool`` (None: the spec is for planning and validation only)."""
    aliases: list[str] = field(default_factory=list)
    """Other names of the same tool (TEvo's name variants), accepted by nothing but data generation."""

    @property
    def signature(self) -> str:
        """``prod_qna(product_id, question)``; optional arguments shown as ``name=…``."""
        parts = [a.name if a.required else f"{a.name}=…" for a in self.args]
        return f"{self.name}({', '.join(parts)})"

    @classmethod
    def from_tool(cls, tool: Any, example: str) -> "ToolSpec":
        """A spec from a LangChain tool: arguments (order, required, type) from its ``args_schema``."""
        fields_ = getattr(getattr(tool, "args_schema", None), "model_fields", {})
        types = {"str", "int", "float", "bool"}
        args = [ArgSpec(name, t if (t := getattr(f.annotation, "__name__", "any")) in types else "any", f.is_required(),
                        f.description or "") for name, f in fields_.items()]
        return cls(tool.name, tool.description, args, example, tool)


class ToolRegistry:
    """An ordered set of tool specs with the prompt block that lists them."""

    def __init__(self, specs: list[ToolSpec] | None = None, name: str = "") -> None:
        self.name = name
        self._specs: dict[str, ToolSpec] = {s.name: s for s in specs or []}

    def add(self, tool: Any, example: str) -> ToolSpec:
        """Add (or replace) a LangChain tool with one example use (signature and description from the tool)."""
        spec = self._specs[tool.name] = ToolSpec.from_tool(tool, example)
        return spec

    def get(self, name: str) -> ToolSpec | None:
        """The spec called ``name``."""
        return self._specs.get(name)

    def names(self) -> list[str]:
        """Tool names in registration order."""
        return list(self._specs)

    def __iter__(self) -> Iterator[ToolSpec]:
        return iter(self._specs.values())

    def __len__(self) -> int:
        return len(self._specs)

    def __contains__(self, name: object) -> bool:
        return name in self._specs

    def subset(self, names: list[str]) -> "ToolRegistry":
        """A registry with only ``names`` (in the given order)."""
        return ToolRegistry([self._specs[n] for n in names if n in self._specs], name=self.name)

    def prompt_block(self) -> str:
        """The numbered tool list for a planner prompt: signature, description, example."""
        return "\n".join(f"{i}. {s.signature} - {s.description}\n   Example: {s.example}"
                         for i, s in enumerate(self, 1))
