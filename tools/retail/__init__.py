"""REAPER's retail tool suite: a generated shop with real local stores, and LangChain tools over it.

* :func:`generate_shop` / :func:`load_shop` — the shop (catalogue JSONL, orders SQLite, help-centre
  JSONL, FAISS indexes built on first search), see :mod:`ragplan.tools.retail.shop`.
* :func:`build_retail_registry` — the ``retail`` :class:`~ragplan.tools.registry.ToolRegistry`
  (``prod_search``, ``prod_qna``, ``review_summary``, ``shipment_status``, ``customer_support``,
  ``date_math``, ``compatible_products``), bound to a shop or specs only; the suite
  ``retail`` of :mod:`ragplan.tools.suites` (``get_suite("retail", shop_dir=…)``).
* :class:`ToolError` — what a tool raises when a call cannot be answered.
"""

from ragplan.tools.retail.errors import ShopError, ToolError
from ragplan.tools.retail.shop import Shop, generate_shop, load_shop
from ragplan.tools.retail.tools import NEW_TOOLS, TOOL_NAMES, RetailTools, build_retail_registry, retail_specs

__all__ = ["ToolError", "ShopError", "Shop", "generate_shop", "load_shop", "RetailTools", "build_retail_registry",
           "retail_specs", "TOOL_NAMES", "NEW_TOOLS"]
