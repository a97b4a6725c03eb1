"""REAPER's retail tool suite: a generated shop with real local stores, and LangChain tools over it
(the ``retail`` suite of :mod:`ragplan.tools.suites`)."""

from ragplan.tools.retail.dates import ToolError
from ragplan.tools.retail.shop import Shop, ShopError, generate_shop, load_shop
from ragplan.tools.retail.tools import NEW_TOOLS, TOOL_NAMES, RetailTools, build_retail_registry

__all__ = ["ToolError", "ShopError", "Shop", "generate_shop", "load_shop", "RetailTools", "build_retail_registry",
           "TOOL_NAMES", "NEW_TOOLS"]
