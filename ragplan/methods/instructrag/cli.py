"""``ragplan instructrag …``: InstructRAG's data, instruction graph, agents and LLM-free figures.

    ragplan instructrag synth --out DIR [--questions N --seed S]          a synthetic world (passages, paths, hotpot.json)
    ragplan instructrag split --paths FILE… --out DIR                      support/query sets of seen and unseen tasks
    ragplan instructrag build-graph --paths FILE… --out DIR [--delta 0.4]  the instruction graph (Algorithm 1)
    ragplan instructrag stats --graph DIR                                  its statistics
    ragplan instructrag train --graph DIR --paths FILE… --out DIR          meta-train the RL-Agent and ML-Agent (Algorithm 2)
    ragplan instructrag adapt --graph DIR --agents DIR --paths FILE… --out DIR   few-shot adaptation (Algorithm 3)
    ragplan instructrag figures --graph DIR --agents DIR --paths FILE…     path-selection quality without an LLM
    ragplan instructrag report RUN_DIR…                                    F1 of eval runs by seen / unseen task

Exit codes: 0 done; 2 bad input (a missing file or folder, an unreadable paths file, no usable reward).
"""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["add_parser", "run"]


def _reward_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--reward", choices=("proxy", "path-match", "llm"), default=None,
                   help="proxy: retrieval-only over --index (default with --index); path-match: instruction F1 against the "
                        "question's own path (default without); llm: answer F1 of planning with the path (needs --model)")
    p.add_argument("--index", default="", metavar="DIR", help="the local passage index for the proxy or LLM reward")
    p.add_argument("--model", default="", help="llm reward: chat model provider:name [env RAGPLAN_MODEL]")
    p.add_argument("--base-url", default="", help="llm reward: OpenAI-compatible endpoint [env RAGPLAN_BASE_URL]")
    p.add_argument("--seed", type=int, default=0, help="seed (default 0)")
    p.add_argument("--epochs", type=int, default=10, help="meta-training epochs (default 10)")
    p.add_argument("--k", type=int, default=3, help="K candidate paths (default 3)")
    p.add_argument("--no-ws", action="store_true", help="ablation: no warm start (BCE) of the RL-Agent")
    p.add_argument("--no-pg", action="store_true", help="ablation: no policy gradient (REINFORCE) of the RL-Agent")
    p.add_argument("--no-pt", action="store_true", help="ablation: no pre-training (QPA + QPM) of the ML-Agent")
    p.add_argument("--no-ft", action="store_true", help="ablation: no fine-tuning of the ML-Agent")
    p.add_argument("--first-order", action="store_true", help="first-order MAML (drop second-order terms)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def add_parser(sub: Any) -> None:
    """The ``instructrag`` command and its sub-commands."""
    top = sub.add_parser("instructrag", help="InstructRAG: instruction graph, RL-/ML-Agent training, few-shot adaptation",
                         description="InstructRAG (Wang et al., SIGIR 2025): build the instruction graph, meta-train and "
                                     "adapt the agents, and measure path selection without an LLM.")
    s = top.add_subparsers(dest="instructrag_command", metavar="SUBCOMMAND", required=True)
    p = s.add_parser("synth", help="write a synthetic multi-hop world (passages, paths, hotpot.json)")
    p.add_argument("--out", required=True, metavar="DIR")
    p.add_argument("--questions", type=int, default=240, help="questions (default 240)")
    p.add_argument("--seed", type=int, default=0)
    p = s.add_parser("split", help="split paths into support/query sets of the seen and unseen tasks")
    p.add_argument("--paths", nargs="+", required=True, metavar="FILE")
    p.add_argument("--out", required=True, metavar="DIR")
    p.add_argument("--query-fraction", type=float, default=0.3, help="share of each task's paths in its query set (0.3)")
    p.add_argument("--seed", type=int, default=0)
    p = s.add_parser("build-graph", help="build (or extend) the instruction graph from successful paths (Algorithm 1)")
    p.add_argument("--paths", nargs="+", required=True, metavar="FILE", help="JSONL paths or ReAct/Reflexion trajectory logs")
    p.add_argument("--out", required=True, metavar="DIR")
    p.add_argument("--delta", type=float, default=None, help="δ: similarity to join a node (default and paper: 0.4)")
    p.add_argument("--insert", action="store_true", help="insert into the graph already in --out (incremental; keeps its δ "
                   "and embedding model: a different --delta or --model-path is refused, --noise-rate too)")
    p.add_argument("--noise-rate", type=float, default=0.0, help="share of the graph's paths that are failed paths of the "
                   "support questions, inserted as noise (robustness; pass the set's failed_*.jsonl too)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--model-path", default="", metavar="DIR", help="a local Sentence-BERT model (default all-MiniLM-L6-v2; "
                   "with --insert, the graph's own)")
    p.add_argument("--json", action="store_true", help="print the statistics as JSON")
    p.add_argument("--no-progress", action="store_true")
    p = s.add_parser("stats", help="print an instruction graph's statistics")
    p.add_argument("--graph", required=True, metavar="DIR")
    p.add_argument("--json", action="store_true")
    p = s.add_parser("train", help="meta-train the RL-Agent and ML-Agent (Algorithm 2)")
    p.add_argument("--graph", required=True, metavar="DIR", help="the instruction graph of the support set")
    p.add_argument("--paths", nargs="+", required=True, metavar="FILE", help="the query set's paths")
    p.add_argument("--out", required=True, metavar="DIR", help="folder for the agents")
    _reward_args(p)
    p = s.add_parser("adapt", help="few-shot adaptation to unseen tasks (Algorithm 3)")
    p.add_argument("--graph", required=True, metavar="DIR")
    p.add_argument("--agents", required=True, metavar="DIR")
    p.add_argument("--paths", nargs="+", required=True, metavar="FILE", help="the unseen tasks' support paths")
    p.add_argument("--out", required=True, metavar="DIR", help="folder for the extended graph (OUT/graph) and the agents")
    p.add_argument("--shots", type=int, default=0, help="paths per task (0 = all)")
    p.add_argument("--steps", type=int, default=5, help="adaptation gradient steps per task (default 5)")
    _reward_args(p)
    p = s.add_parser("figures", help="path-selection quality on held-out questions, without an LLM")
    p.add_argument("--graph", required=True, metavar="DIR")
    p.add_argument("--agents", default="", metavar="DIR")
    p.add_argument("--paths", nargs="+", required=True, metavar="FILE", help="held-out questions' own successful paths")
    p.add_argument("--index", default="", metavar="DIR", help="a local index: adds the proxy reward")
    p.add_argument("--k", type=int, default=3)
    p.add_argument("--threshold", type=float, default=0.4, help="the threshold walk's inclusion threshold")
    p.add_argument("--json", action="store_true")
    p = s.add_parser("report", help="F1 and EM of `ragplan eval` runs by seen / unseen task and by task")
    p.add_argument("runs", nargs="+", metavar="RUN_DIR")
    p.add_argument("--json", action="store_true")


def run(args: argparse.Namespace) -> int:
    """Run the chosen ``instructrag`` sub-command."""
    from ragplan.methods.instructrag import commands as c

    return {"synth": c.run_synth, "split": c.run_split, "build-graph": c.run_build_graph, "stats": c.run_stats,
            "train": c.run_train, "adapt": c.run_adapt, "figures": c.run_figures, "report": c.run_report}[args.instructrag_command](args)
