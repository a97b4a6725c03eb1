"""Typed run settings (LangGraph ``context_schema``) shared by the method graphs.

Each field has a default and a description, so LangGraph Studio renders the settings as a form and
the CLI maps its flags onto the same fields. Settings are layered: every method needs the LLM
settings (:class:`LLMContext`); methods over a property graph add the store settings
(:class:`GraphDBContext`); PlanRAG and its baselines add their bounds (:class:`PlanRAGContext`).

Python callers may also put live objects into a context: ``chat_model`` (any LangChain chat model,
used instead of the ``model`` name) and ``graph_store`` (a :class:`~ragplan.tools.graphdb.GraphStore`,
used instead of ``graph_path`` / ``neo4j_uri``). They are left empty in Studio.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["LLMContext", "GraphDBContext", "PlanRAGContext"]


def _env(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


@dataclass(kw_only=True)
class LLMContext:
    """LLM settings every method shares."""

    model: str = field(
        default_factory=lambda: _env("RAGPLAN_MODEL", "openai:gpt-4o-mini"),
        metadata={
            "description": "Chat model as provider:name (e.g. openai:gpt-4o-mini, or openai:<served name> with "
            "base_url for vLLM / Ollama / llama.cpp / LM Studio). Default from RAGPLAN_MODEL."
        },
    )
    base_url: str = field(
        default_factory=lambda: _env("RAGPLAN_BASE_URL", _env("OPENAI_BASE_URL")),
        metadata={
            "description": "Base URL of an OpenAI-compatible endpoint (e.g. http://localhost:11434/v1 for Ollama, "
            "http://localhost:8000/v1 for vLLM). Empty = api.openai.com. Default from RAGPLAN_BASE_URL / OPENAI_BASE_URL."
        },
    )
    temperature: float = field(
        default=0.0, metadata={"description": "Sampling temperature (the papers use 0 for reproducibility)."}
    )
    llm_timeout_s: float = field(
        default=120.0, metadata={"description": "Timeout of one LLM request in seconds."}
    )
    llm_max_retries: int = field(
        default=3,
        metadata={"description": "Client retries of one LLM request on rate limits (429), 5xx and timeouts, with backoff."},
    )
    structured_output: Literal["function_calling", "json_schema", "text"] = field(
        default="function_calling",
        metadata={
            "description": "How LLM decisions are obtained as typed objects: tool/function calling, the "
            "endpoint's JSON-schema mode, or a JSON object in plain text (for endpoints without tool calling)."
        },
    )
    max_repairs: int = field(
        default=2,
        metadata={"description": "Extra attempts when the LLM's output does not parse, with the parse error shown to it."},
    )
    chat_model: Any = field(
        default=None,
        metadata={"description": "Python only: a LangChain chat model object used instead of `model`."},
    )


@dataclass(kw_only=True)
class GraphDBContext(LLMContext):
    """Settings of methods that query a property graph with Cypher."""

    graph_path: str = field(
        default="",
        metadata={"description": "Neo4j-dialect Cypher script (.cql) loaded into the embedded engine (or into Neo4j with neo4j_uri)."},
    )
    neo4j_uri: str = field(
        default_factory=lambda: _env("NEO4J_URI"),
        metadata={"description": "bolt://host:7687 to use a Neo4j server instead of the embedded engine (password from NEO4J_PASSWORD)."},
    )
    neo4j_user: str = field(default_factory=lambda: _env("NEO4J_USER"), metadata={"description": "Neo4j user name."})
    neo4j_database: str = field(
        default_factory=lambda: _env("NEO4J_DATABASE"), metadata={"description": "Neo4j database (empty = server default)."}
    )
    row_cap: int = field(
        default=100, metadata={"description": "Most rows of one query result shown to the LLM (the rest is counted, not shown)."}
    )
    query_timeout_s: float = field(
        default=10.0, metadata={"description": "Time budget of one Cypher query in seconds."}
    )
    graph_store: Any = field(
        default=None,
        metadata={"description": "Python only: a GraphStore object used instead of graph_path / neo4j_uri."},
    )
    dqa_scenario: str = field(
        default="",
        metadata={"description": "When graph_path is a DQA script: locating or building, so the answer is checked by "
                  "simulation (the verdict goes to decision_check). Empty = no check."},
    )
    dqa_country: str = field(default="", metadata={"description": "DQA locating: the deciding country (e.g. SWE)."})
    dqa_home: str = field(default="", metadata={"description": "DQA locating: the country's home trade node."})
    dqa_goods: str = field(default="", metadata={"description": "DQA building: the goods whose price should fall."})


@dataclass(kw_only=True)
class PlanRAGContext(GraphDBContext):
    """Settings of PlanRAG and its baselines (single_rag, iter_rag, planrag_no_replan)."""

    max_steps: int = field(
        default=12,
        metadata={"description": "Most retrieval steps (LLM-written queries, including repairs) before answering with what is known."},
    )
    max_replans: int = field(
        default=3, metadata={"description": "Most plan revisions; after that the plan is kept to the end."}
    )
    max_query_repairs: int = field(
        default=2,
        metadata={"description": "Most re-tries of one step after its query failed (the error is shown to the LLM)."},
    )
