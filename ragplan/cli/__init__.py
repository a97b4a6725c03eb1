"""The ``ragplan`` command line.

    ragplan graphs                               list every method graph
    ragplan studio [--port P --no-browser]       serve the graphs for LangGraph Studio (langgraph dev)
    ragplan cypher --graph FILE.cql "QUERY"      run a read-only Cypher query on a script's graph
    ragplan ask --method planrag --graph FILE.cql --question "…"   answer a question with a method
    ragplan dqa verify|solve|generate …        the DQA benchmark's simulators (no LLM)
    ragplan eval --method M --benchmark B --data PATH   run a method over a benchmark (resumable)
    ragplan eval report RUN_DIR…                compare runs in one table
    ragplan index build|search …                a local FAISS passage index (Sentence-BERT embeddings)
    ragplan reaper validate PLAN_FILE --tools retail   parse and validate a REAPER plan
    ragplan reaper make-shop --out DIR          generate the retail shop the REAPER tools read
    ragplan reaper datagen --seed-plans F --out DIR   instruction-tuning data for a planner (TEvo, TTG, DQS)
    ragplan reaper train-classifier --shop DIR --out DIR   the classifier_planner baseline's route classifier

Exit codes: 0 success; 1 the run or query failed (the reason is printed); 2 bad input or
configuration (a refused write query, a script line that does not load, no LLM endpoint, …).
"""

from __future__ import annotations

import argparse
import sys

from ragplan import __version__

__all__ = ["main", "build_parser"]


def _add_store_args(p: argparse.ArgumentParser, *, graph_required: bool = False) -> None:
    p.add_argument("--graph", metavar="FILE.cql", required=graph_required,
                   help="Neo4j-dialect Cypher script (e.g. a DQA .cql file) loaded into the embedded engine "
                        "(or into Neo4j with --neo4j-uri)")
    p.add_argument("--neo4j-uri", metavar="URI", default=None,
                   help="use a Neo4j server (bolt://host:7687) instead of the embedded engine [env NEO4J_URI]")
    p.add_argument("--neo4j-user", metavar="USER", default=None, help="Neo4j user [env NEO4J_USER, default neo4j]")
    p.add_argument("--neo4j-database", metavar="DB", default=None, help="Neo4j database [env NEO4J_DATABASE]")
    p.add_argument("--neo4j-replace", action="store_true",
                   help="with --graph and Neo4j: clear a non-empty database before loading the script")
    p.add_argument("--row-cap", type=int, default=None, metavar="N", help="most result rows shown")
    p.add_argument("--query-timeout", type=float, default=None, metavar="SEC", help="time budget of one query")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every ``ragplan`` command."""
    parser = argparse.ArgumentParser(
        prog="ragplan",
        description="Planning-based retrieval-augmented generation methods as LangGraph graphs.",
    )
    parser.add_argument("--version", action="version", version=f"ragplan {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    sub.add_parser("graphs", help="list every method graph with a one-line summary")
    studio = sub.add_parser("studio", help="serve every graph for LangGraph Studio / the SDK (`langgraph dev`, set up for ragplan)",
                            description="Runs `langgraph dev` with the environment ragplan's graphs need (a larger glibc "
                                        "static-TLS reserve so kglite, torch and faiss can share the server process). "
                                        "Extra arguments go to `langgraph dev`, e.g. --port 2024 --no-browser.")
    studio.add_argument("langgraph_args", nargs=argparse.REMAINDER, help="arguments for `langgraph dev`")

    cy = sub.add_parser("cypher", help="run one read-only Cypher query against a script's graph (or Neo4j)",
                        description="Load a Neo4j-dialect script into the embedded store and print the rows of a "
                                    "read-only query. Write queries are refused (exit 2) and change nothing.")
    _add_store_args(cy)
    cy.add_argument("--json", action="store_true", help="print one JSON object per row instead of a table")
    cy.add_argument("--schema", action="store_true", help="print the graph schema (labels, relationships, example values)")
    cy.add_argument("query", nargs="?", help="the Cypher query")

    ask = sub.add_parser("ask", help="answer a question with a method graph and print its trace",
                         description="Run a method over a graph and print the plan, every query and observation, "
                                     "every re-plan verdict, the answer, LLM calls, tokens and wall time.")
    ask.add_argument("--method", default="planrag", help="graph name (see `ragplan graphs`), default planrag")
    q = ask.add_mutually_exclusive_group(required=True)
    q.add_argument("--question", help="the question text")
    q.add_argument("--question-file", metavar="FILE", help="read the question from a text file")
    q.add_argument("--dqa", metavar="CLONE", help="ask a DQA question of a clone (with --scenario and --question-num): "
                   "its prompt and script are used and the answer is checked by simulation")
    ask.add_argument("--scenario", choices=["locating", "building"], help="with --dqa")
    ask.add_argument("--question-num", type=int, metavar="N", help="with --dqa")
    _add_store_args(ask)
    ask.add_argument("--model", default=None,
                     help="chat model provider:name, e.g. openai:gpt-4o-mini [env RAGPLAN_MODEL]")
    ask.add_argument("--base-url", default=None,
                     help="OpenAI-compatible endpoint (vLLM, Ollama, llama.cpp, LM Studio) [env RAGPLAN_BASE_URL]")
    ask.add_argument("--temperature", type=float, default=None)
    ask.add_argument("--max-steps", type=int, default=None, help="most retrieval steps")
    ask.add_argument("--max-replans", type=int, default=None, help="most plan revisions (planrag)")
    ask.add_argument("--max-query-repairs", type=int, default=None, help="most re-tries of a failed query")
    ask.add_argument("--structured-output", choices=["function_calling", "json_schema", "text"], default=None,
                     help="how LLM decisions are parsed (text for endpoints without tool calling)")
    ask.add_argument("--retriever", choices=["wiki", "local"], default=None,
                     help="text methods: live Wikipedia (cached) or a local FAISS index [env RAGPLAN_RETRIEVER, default wiki]")
    ask.add_argument("--index", metavar="DIR", default=None, help="text methods: the local index (ragplan index build)")
    ask.add_argument("--beta", type=float, default=None, metavar="B", help="think_then_act: β′, retrieve when confidence < B")
    ask.add_argument("--gate-mode", choices=["confidence", "direct"], default=None, help="think_then_act: how the gate decides")
    ask.add_argument("--top-sentences", type=int, default=None, metavar="N", help="text methods: evidence sentences per query")
    ask.add_argument("--wiki-cache", metavar="DIR", default=None, help="text methods: Wikipedia cache folder")
    ask.add_argument("--json", action="store_true", help="print the whole result as one JSON object")
    ask.add_argument("--quiet", action="store_true", help="print only the answer and the totals")
    from ragplan.cli.dqa import add_dqa_parser
    from ragplan.cli.eval import add_eval_parser
    from ragplan.cli.index import add_index_parser

    add_dqa_parser(sub)
    add_eval_parser(sub)
    add_index_parser(sub)
    reaper = sub.add_parser("reaper", help="REAPER: validate retrieval plans, make the retail shop",
                            description="REAPER (one-call retrieval plans over a tool registry): tools and data.")
    rsub = reaper.add_subparsers(dest="reaper_command", metavar="SUBCOMMAND", required=True)
    from ragplan.cli.reaper_classifier import add_classifier_parser
    from ragplan.cli.reaper_datagen import add_datagen_parser
    from ragplan.cli.reaper_shop import add_shop_parser
    from ragplan.cli.reaper_validate import add_validate_parser

    add_validate_parser(rsub)
    add_shop_parser(rsub)
    add_datagen_parser(rsub)
    add_classifier_parser(rsub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``ragplan`` command."""
    if argv is None:  # a real command line: make sure kglite, torch and faiss can share the process
        from ragplan.tools.embeddings import reexec_with_static_tls

        reexec_with_static_tls()
    parser = build_parser()
    raw = list(sys.argv[1:] if argv is None else argv)
    if raw[:1] == ["studio"] and not ({"-h", "--help"} & set(raw[1:2])):
        args = argparse.Namespace(command="studio", langgraph_args=raw[1:])  # everything after goes to langgraph dev
    else:
        args = parser.parse_args(raw)
    if args.command is None:
        parser.print_help()
        return 0
    try:
        if args.command == "graphs":
            from ragplan.registry import graph_registry

            reg = graph_registry()
            width = max(len(n) for n in reg)
            for name, (_, summary) in reg.items():
                print(f"{name:<{width}}  {summary}")
            return 0
        if args.command == "studio":
            import os
            import shutil

            exe = shutil.which("langgraph") or os.path.join(os.path.dirname(sys.executable), "langgraph")
            if not os.path.exists(exe):
                print("error: `langgraph` is not installed (pip install 'langgraph-cli[inmem]')", file=sys.stderr)
                return 2
            if not os.path.exists("langgraph.json"):
                print("error: run this in the ragplan project folder (where langgraph.json is)", file=sys.stderr)
                return 2
            os.execv(exe, [exe, "dev", *args.langgraph_args])
        if args.command == "cypher":
            from ragplan.cli.cypher import run_cypher

            return run_cypher(args)
        if args.command == "eval":
            from ragplan.cli.eval import run_eval

            return run_eval(args)
        if args.command == "reaper":
            if args.reaper_command == "validate":
                from ragplan.cli.reaper_validate import run_validate

                return run_validate(args)
            if args.reaper_command == "train-classifier":
                from ragplan.cli.reaper_classifier import run_classifier

                return run_classifier(args)
            if args.reaper_command == "datagen":
                from ragplan.cli.reaper_datagen import run_datagen

                return run_datagen(args)
            from ragplan.cli.reaper_shop import run_shop

            return run_shop(args)
        if args.command == "index":
            from ragplan.cli.index import run_index

            return run_index(args)
        if args.command == "dqa":
            from ragplan.cli.dqa import run_dqa

            return run_dqa(args)
        if args.command == "ask":
            from ragplan.cli.ask import run_ask

            return run_ask(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into `head` and closed: not an error
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    parser.error(f"unknown command {args.command}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
