"""The retail suite's errors: a tool call that cannot be answered, a shop directory that cannot be read."""

from __future__ import annotations

from langchain_core.tools import ToolException

__all__ = ["ToolError", "ShopError"]


class ToolError(ToolException):
    """A retail tool call that cannot be answered (unknown product id, no matching order, bad date)."""

    def __init__(self, message: str, *, tool: str = "") -> None:
        super().__init__(message)
        self.tool = tool
        """The tool that raised it ("" when raised outside a tool)."""


class ShopError(ValueError):
    """A shop directory that is missing, incomplete or not made by ``generate_shop``."""
