"""Meta-training (InstructRAG Algorithm 2: an inner step on the support set, REINFORCE + fine-tuning on the query set,
outer Adam step) and few-shot adaptation (Algorithm 3: G → G′, then per-task steps with α plain and β an Adam step).
Ablations (Table 5): ``ws`` / ``pg`` / ``pt`` / ``ft`` switch a loss off. Deterministic for a seed (CPU)."""

from __future__ import annotations

import json
import random
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch.func import functional_call
from tqdm import tqdm

from ragplan.jsonl import atomic_write, saved_bytes
from ragplan.methods.instructrag.graph import START, InstructionGraph
from ragplan.methods.instructrag.ml_agent import MLAgent, ft_loss, path_backbone_vectors, qpa_loss
from ragplan.methods.instructrag.paths import Instruction, InstructionPath
from ragplan.methods.instructrag.reward import PathMatchReward, PathReward, QueryExample
from ragplan.methods.instructrag.rl_agent import RLAgent, StateBuilder, TraversalResult, policy_decider, traverse
from ragplan.methods.instructrag.selection import AGENTS_FILE, load_agents, task_slug

__all__ = ["MetaSettings", "MetaReport", "AdaptReport", "NothingLearned", "meta_train", "adapt_agents", "query_examples"]

Params = dict[str, torch.Tensor]


class NothingLearned(RuntimeError):
    """Training ended with agents that learned nothing (the reward never varied, or the weights did not move)."""


@dataclass
class MetaSettings:
    """Hyper-parameters of training and adaptation (paper values where it gives them)."""

    epochs: int = 10
    tasks_per_batch: int = 3
    questions_per_task: int = 8  # ℬ: questions sampled per task for each loss
    inner_lr: float = 0.05  # α
    outer_lr: float = 1e-3  # β (Adam, as in the paper)
    gamma: float = 0.99  # reward discount
    k: int = 3  # candidate paths per walk
    tau: float = 0.1  # ML-Agent temperature
    ws_negatives: int = 3  # random off-path nodes per warm-start question
    pool_extra: int = 3  # paths of other questions added to a fine-tuning pool
    max_len: int = 8
    start_nodes: int = 5
    ws: bool = True
    pg: bool = True
    pt: bool = True
    ft: bool = True
    first_order: bool = False
    adapt_steps: int = 5
    seed: int = 0


@dataclass
class MetaReport:
    """What training did: per-epoch losses and rewards, sizes, time."""

    curves: dict[str, list[float]] = field(default_factory=dict)
    seconds: float = 0.0
    support: int = 0
    query: int = 0
    tasks: list[str] = field(default_factory=list)
    reward: str = ""
    reward_failures: int = 0
    """Reward runs that failed and scored 0 (the LLM reward's endpoint or graph errors)."""
    reward_error: str = ""  # the last such failure
    out_dir: str = ""


@dataclass
class AdaptReport:
    """What few-shot adaptation did, per task."""

    tasks: dict[str, dict[str, float]] = field(default_factory=dict)
    """task -> {shots, seconds, ws, pg, pt, ft}."""
    insert_seconds: float = 0.0
    seconds: float = 0.0
    out_dir: str = ""


FT_UNUSED = ("match.weight", "match.bias")
"""ML-Agent parameters the fine-tuning loss never reaches (the QPM matching head is pre-training's only)."""


def _grads(loss: torch.Tensor, params: Params, *, create_graph: bool = False, unused: tuple[str, ...] = ()) -> Params:
    """∇loss for ``params`` (zeros for a constant loss and ``unused``; a loss of other tensors raises)."""
    if not loss.requires_grad:
        return {n: torch.zeros_like(p) for n, p in params.items()}
    names = [n for n in params if n not in unused]
    got = dict(zip(names, torch.autograd.grad(loss, [params[n] for n in names], create_graph=create_graph)))
    return {n: got[n] if n in got else torch.zeros_like(p) for n, p in params.items()}


def _step(params: Params, loss: torch.Tensor, lr: float, create_graph: bool) -> Params:
    """One plain gradient step ``params − lr ∇loss`` (differentiable when ``create_graph``)."""
    g = _grads(loss, params, create_graph=create_graph)
    return {n: p - lr * g[n] for n, p in params.items()}


def _apply(params: Params, g_alpha: Params, g_beta: Params, alpha: float, opt: torch.optim.Optimizer) -> None:
    """In place: ``params − α g_alpha``, then an Adam step (rate β) on ``g_beta``, both taken at ``params``."""
    with torch.no_grad():
        for n, p in params.items():
            p.sub_(alpha * g_alpha[n])
            p.grad = g_beta[n].detach().clone()
    opt.step()
    for p in params.values():
        p.grad = None


def _detached(params: Params) -> Params:
    return {k: v.detach() for k, v in params.items()}


def query_examples(paths: list[InstructionPath], embedder: Any) -> list[QueryExample]:
    """Query examples (question, gold answer, own path, vector) of ``paths``."""
    vecs = embedder.encode([p.question for p in paths]) if paths else np.zeros((0, 0), dtype=np.float32)
    return [QueryExample(p.question, p.task, p.answer, list(p.instructions), np.asarray(v, dtype=np.float32),
                         list(p.supporting_titles)) for p, v in zip(paths, vecs)]


class _Trainer:
    """The losses of Algorithms 2 and 3 over one graph, on functional parameters of the agents' modules."""

    def __init__(self, graph: InstructionGraph, embedder: Any, reward: PathReward, s: MetaSettings,
                 rl: RLAgent, ml: MLAgent) -> None:
        self.g, self.emb, self.reward, self.s, self.rl, self.ml = graph, embedder, reward, s, rl, ml
        self.rng = random.Random(s.seed)
        self.gen = torch.Generator().manual_seed(s.seed)
        self.baseline = 0.0
        self.rewards: list[float] = []  # every reward computed, for the refusal to save a model that learned nothing
        self.known = graph.instruction_vectors  # by text

    def prime(self, examples: list[QueryExample]) -> None:
        """Give a path-match reward the graph's vectors and embed the examples' own paths in one batch."""
        if isinstance(self.reward, PathMatchReward):
            self.reward.known.update(self.known)
            self.reward.vectors([i for ex in examples for i in ex.own_path])

    def score(self, ex: QueryExample, path: list[Instruction]) -> float:
        r = float(self.reward(ex, path))
        self.rewards.append(r)
        return r

    def sample(self, items: Sequence[Any], n: int) -> list[Any]:
        return self.rng.sample(items, min(len(items), n))

    def policy(self, params: Params, states: list[np.ndarray]) -> torch.Tensor:
        return functional_call(self.rl.net, params, (torch.as_tensor(np.stack(states)),))

    def encode(self, params: Params, x: Any, side: str) -> torch.Tensor:
        return functional_call(self.ml.heads, params, (torch.as_tensor(x), side))

    def path_vectors(self, paths: list[list[Instruction]]) -> torch.Tensor:
        return torch.as_tensor(path_backbone_vectors([[i.text for i in p] for p in paths], self.emb, self.known))

    # -- RL-Agent losses
    def ws_loss(self, params: Params, path_ids: list[int]) -> torch.Tensor:
        states, labels = [], []
        for pid in path_ids:
            p = self.g.paths[pid]
            sb = StateBuilder(self.g, self.g.qvectors[p["question"]])
            states += [sb.state(n, (prev, n)) for prev, n in zip([START] + p["nodes"], p["nodes"])]
            labels += [1] * len(p["nodes"])
            on = set(p["nodes"])
            for n in self.sample([n for n in range(len(self.g.nodes)) if n not in on], self.s.ws_negatives):
                ins = self.g.in_edges(n)
                states.append(sb.state(n, self.rng.choice(ins) if ins else None))
                labels.append(0)
        if not states:
            return torch.zeros(())
        return F.cross_entropy(self.policy(params, states), torch.as_tensor(labels))

    def walk(self, params: Params, ex: QueryExample,
             greedy: bool = False) -> tuple[TraversalResult, list[list[Instruction]]]:
        draw = None if greedy else lambda: torch.rand((), generator=self.gen).item()
        res = traverse(self.g, ex.qvec, policy_decider(params, draw), k=self.s.k, start_nodes=self.s.start_nodes,
                       max_len=self.s.max_len)
        return res, [[self.g.instruction(i) for i in p] for p in res.paths]

    def pick(self, ml_params: Params, ex: QueryExample, paths: list[list[Instruction]]) -> int:
        if not paths:
            return -1
        with torch.no_grad():
            q = self.encode(ml_params, ex.qvec.reshape(1, -1), "question")
            return int(torch.argmax(self.encode(ml_params, self.path_vectors(paths), "path") @ q[0]))

    def pg_loss(self, params: Params, examples: list[QueryExample], ml_params: Params) -> tuple[torch.Tensor, list[float]]:
        terms, rewards = [], []
        for ex in examples:
            res, paths = self.walk(params, ex)
            i = self.pick(ml_params, ex, paths)
            r = self.score(ex, paths[i]) if i >= 0 else 0.0
            rewards.append(r)
            if not res.states:
                continue
            adv = r - self.baseline
            self.baseline = 0.9 * self.baseline + 0.1 * r
            t = len(res.actions)
            returns = torch.tensor([adv * self.s.gamma ** (t - 1 - j) for j in range(t)], dtype=torch.float32)
            logp = torch.log_softmax(self.policy(params, res.states), -1)
            terms.append(-(returns * logp.gather(1, torch.as_tensor(res.actions).reshape(-1, 1)).squeeze(1)).mean())
        loss = torch.stack(terms).mean() if terms else torch.zeros(())
        return loss, rewards

    # -- ML-Agent losses
    def pt_loss(self, params: Params, path_ids: list[int]) -> torch.Tensor:
        if len(path_ids) < 2:
            return torch.zeros(())
        q = self.encode(params, self.g.qvectors[[self.g.paths[i]["question"] for i in path_ids]], "question")
        texts = [self.g.path_instructions(i) for i in path_ids]
        p = self.encode(params, self.path_vectors(texts), "path")
        keys = [" → ".join(x.text for x in t) for t in texts]
        same = torch.tensor([[a == b for b in keys] for a in keys])
        shift = torch.roll(torch.arange(len(path_ids)), 1)
        qq, pp = torch.cat([q, q]), torch.cat([p, p[shift]])
        labels = torch.cat([torch.ones(len(path_ids)), same[torch.arange(len(path_ids)), shift].float()])
        match = F.linear(torch.cat([qq * pp, (qq - pp).abs()], dim=-1), params["match.weight"], params["match.bias"])
        return qpa_loss(q, p, self.s.tau, same) + F.binary_cross_entropy_with_logits(match.squeeze(-1), labels)

    def ft_loss(self, params: Params, examples: list[QueryExample], rl_params: Params) -> torch.Tensor:
        qs, pools, best = [], [], []
        for ex in examples:
            _, cands = self.walk(rl_params, ex, greedy=True)
            others = [self.g.path_instructions(i) for i in self.sample(range(len(self.g.paths)), self.s.pool_extra)]
            pool: dict[str, list[Instruction]] = {}  # distinct paths: the walk's, then other questions'
            for c in cands + others:
                if c:
                    pool.setdefault(" → ".join(i.text for i in c), c)
            if len(pool) < 2:
                continue
            rewards = [self.score(ex, c) for c in pool.values()]
            if max(rewards) == min(rewards):
                continue  # no signal: every path scores the same
            qs.append(ex.qvec)
            pools.append(list(pool.values()))
            best.append(int(np.argmax(rewards)))
        if not qs:
            return torch.zeros(())
        q = self.encode(params, np.stack(qs), "question")
        return ft_loss(q, [self.encode(params, self.path_vectors(pool), "path") for pool in pools], best, self.s.tau)


def meta_train(graph: InstructionGraph, query: list[InstructionPath], embedder: Any, reward: PathReward,
               settings: MetaSettings | None = None, out_dir: str | Path | None = None, *,
               progress: bool = False) -> tuple[RLAgent, MLAgent, MetaReport]:
    """Algorithm 2 (see the module docstring); saves the agents to ``out_dir`` when given."""
    s = settings or MetaSettings()
    random.seed(s.seed)
    np.random.seed(s.seed)
    torch.manual_seed(s.seed)
    rl = RLAgent(k=s.k, max_len=s.max_len, start_nodes=s.start_nodes)
    ml = MLAgent(tau=s.tau, dim=int(graph.vectors.shape[1]))
    tr = _Trainer(graph, embedder, reward, s, rl, ml)
    # every stored path by task, noisy ones included (the method cannot tell them apart)
    support = {t: [i for i, p in enumerate(graph.paths) if p["task"] == t] for t in {p["task"] for p in graph.paths}}
    qexs = query_examples(query, embedder)
    tr.prime(qexs)
    qby = {t: [ex for ex in qexs if ex.task == t] for t in {ex.task for ex in qexs}}
    tasks = sorted(t for t in support if t in qby) or sorted(support)
    start = _snapshot((rl, ml))
    opt_rl = torch.optim.Adam(rl.net.parameters(), lr=s.outer_lr)
    opt_ml = torch.optim.Adam(ml.heads.parameters(), lr=s.outer_lr)
    report = MetaReport(curves={k: [] for k in ("ws", "pg", "pt", "ft", "reward", "reward_sd")}, support=len(graph.paths),
                        query=len(qexs), tasks=tasks, reward=getattr(reward, "name", type(reward).__name__))
    t0 = time.perf_counter()
    bar = tqdm(range(s.epochs), desc="meta-training", unit="epoch", disable=not progress)
    for _ in bar:
        order = tasks[:]
        tr.rng.shuffle(order)
        sums: dict[str, list[float]] = {k: [] for k in report.curves}
        for b in range(0, len(order), max(1, s.tasks_per_batch)):
            total_rl: list[torch.Tensor] = []
            total_ml: list[torch.Tensor] = []
            for task in order[b:b + s.tasks_per_batch]:
                sup = tr.sample(support[task], s.questions_per_task)
                qry = tr.sample(qby.get(task, []), s.questions_per_task)
                theta: Params = dict(rl.net.named_parameters())
                eta: Params = dict(ml.heads.named_parameters())
                l_ws = tr.ws_loss(theta, sup) if s.ws else torch.zeros(())
                l_pt = tr.pt_loss(eta, sup) if s.pt else torch.zeros(())
                theta_i = _step(theta, l_ws, s.inner_lr, not s.first_order) if (s.ws and s.pg) else theta
                eta_i = _step(eta, l_pt, s.inner_lr, not s.first_order) if (s.pt and s.ft) else eta
                l_pg, rewards = tr.pg_loss(theta_i, qry, _detached(eta_i)) if s.pg and qry else (None, [])
                l_ft = tr.ft_loss(eta_i, qry, _detached(theta_i)) if s.ft and qry else None
                sums["reward"] += rewards
                # per agent: the query-set loss when it ran, else the support-set loss when that one is on
                for terms, (warm, on, w), (outer, o) in ((total_rl, (l_ws, s.ws, "ws"), (l_pg, "pg")),
                                                         (total_ml, (l_pt, s.pt, "pt"), (l_ft, "ft"))):
                    sums[w].append(float(warm.detach()))
                    if outer is not None:
                        sums[o].append(float(outer.detach()))
                    if outer is not None or on:
                        terms.append(warm if outer is None else outer)
            for opt, terms in ((opt_rl, total_rl), (opt_ml, total_ml)):
                if live := [t for t in terms if t.requires_grad]:
                    opt.zero_grad()
                    torch.stack(live).sum().backward()
                    opt.step()
        sums["reward_sd"] = [float(np.std(sums["reward"]))] if sums["reward"] else []
        for k, v in sums.items():
            report.curves[k].append(round(float(np.mean(v)), 5) if v else float("nan"))
        bar.set_postfix(reward=f"{report.curves['reward'][-1]:.3f}")
    report.curves = {k: v for k, v in report.curves.items() if any(x == x for x in v)}
    report.seconds = round(time.perf_counter() - t0, 3)
    report.reward_failures = int(getattr(reward, "failures", 0))
    report.reward_error = str(getattr(reward, "last_error", ""))
    rl.net.eval()
    ml.heads.eval()
    if out_dir is not None:
        if problem := _nothing_learned(tr.rewards, start, (rl, ml)):
            raise NothingLearned(f"not saved to {out_dir}: {problem}")
        out = Path(out_dir)
        rl.save(out)
        ml.save(out)
        report.out_dir = str(out)
        atomic_write(out / AGENTS_FILE, json.dumps({"format": "ragplan-instructrag-agents-1", "settings": asdict(s),
                                                    "report": asdict(report), "graph_stats": asdict(graph.stats()),
                                                    "model_fingerprint": graph.model_fingerprint}, indent=2))
        from matplotlib.figure import Figure

        keys = [k for k, v in report.curves.items() if v]
        fig = Figure(figsize=(3.2 * max(1, len(keys)), 2.8))
        for ax, k in zip(fig.subplots(1, len(keys), squeeze=False)[0], keys):
            ax.plot(range(1, len(report.curves[k]) + 1), report.curves[k], marker="o", ms=3)
            ax.set_title(k)
            ax.set_xlabel("epoch")
        fig.tight_layout()
        atomic_write(out / "curves.png", saved_bytes(lambda f: fig.savefig(f, format="png", dpi=110)))
    return rl, ml, report


def _snapshot(agents: tuple[RLAgent, MLAgent]) -> list[dict[str, torch.Tensor]]:
    return [{k: v.detach().clone() for k, v in m.state_dict().items()} for m in (agents[0].net, agents[1].heads)]


def _nothing_learned(rewards: list[float], start: list[dict[str, torch.Tensor]], agents: tuple[RLAgent, MLAgent]) -> str:
    """Why the trained agents learned nothing ('' when they did): a reward that never varied, weights that did not move."""
    if rewards and max(rewards) == min(rewards):
        return (f"the reward was {rewards[0]:.3f} for all {len(rewards)} paths scored, so there was nothing to learn from "
                "(a reward that tells paths apart is needed: see --reward)")
    for name, before, now in zip(("RL-Agent", "ML-Agent"), start, _snapshot(agents)):
        if all(torch.equal(before[k], now[k]) for k in before):
            return f"the {name}'s weights did not change in training (its losses were zero or switched off)"
    return ""


def adapt_agents(graph: InstructionGraph, agents_dir: str | Path, support: list[InstructionPath], embedder: Any,
                 reward: PathReward, settings: MetaSettings | None = None, out_dir: str | Path | None = None, *,
                 shots: int = 0, progress: bool = False) -> AdaptReport:
    """Algorithm 3: insert ``support`` into the graph, adapt both agents per task; save under ``out_dir``."""
    s = settings or MetaSettings()
    torch.manual_seed(s.seed)
    by_task = {t: [p for p in support if p.task == t] for t in {p.task for p in support}}
    rng = random.Random(s.seed)
    if shots > 0:
        by_task = {t: rng.sample(v, min(len(v), shots)) for t, v in sorted(by_task.items())}
    report = AdaptReport()
    t0 = time.perf_counter()
    graph.insert([p for t in sorted(by_task) for p in by_task[t]], embedder)
    report.insert_seconds = round(time.perf_counter() - t0, 3)
    base = load_agents(agents_dir)
    out = Path(out_dir) if out_dir is not None else None
    if out is not None:
        graph.save(out / "graph")
        for agent in base:
            agent.save(out)
    for task in tqdm(sorted(by_task), desc="few-shot adaptation", unit="task", disable=not progress):
        t1 = time.perf_counter()
        rl, ml = load_agents(agents_dir)
        tr = _Trainer(graph, embedder, reward, s, rl, ml)
        paths = by_task[task]
        path_ids = [i for i, p in enumerate(graph.paths) if p["task"] == task and p["id"] in {x.id for x in paths}]
        exs = query_examples(paths, embedder)
        tr.prime(exs)
        theta: Params = dict(rl.net.named_parameters())  # this task's own copy, stepped in place
        eta: Params = dict(ml.heads.named_parameters())
        opt_theta = torch.optim.Adam(list(theta.values()), lr=s.outer_lr)  # the β-terms' Adam steps
        opt_eta = torch.optim.Adam(list(eta.values()), lr=s.outer_lr)
        for _ in range(max(1, s.adapt_steps)):  # every gradient at the current θ / η, as Algorithm 3 writes it
            l_ws = tr.ws_loss(theta, path_ids) if s.ws else torch.zeros(())
            l_pg = tr.pg_loss(theta, exs, _detached(eta))[0] if s.pg else torch.zeros(())
            l_pt = tr.pt_loss(eta, path_ids) if s.pt else torch.zeros(())
            l_ft = tr.ft_loss(eta, exs, _detached(theta)) if s.ft else torch.zeros(())
            _apply(theta, _grads(l_ws, theta), _grads(l_pg, theta), s.inner_lr, opt_theta)
            _apply(eta, _grads(l_pt, eta), _grads(l_ft, eta, unused=FT_UNUSED), s.inner_lr, opt_eta)
        if out is not None:
            rl.save(out / "tasks" / task_slug(task))
            ml.save(out / "tasks" / task_slug(task))
        losses = dict(zip(("ws", "pg", "pt", "ft"), (l_ws, l_pg, l_pt, l_ft)))  # of the last step
        report.tasks[task] = {"shots": len(paths), "seconds": round(time.perf_counter() - t1, 3),
                              **{k: round(float(v.detach()), 5) for k, v in losses.items()}}
    report.seconds = round(time.perf_counter() - t0, 3)
    if out is not None:
        report.out_dir = str(out)
        atomic_write(out / "adapt.json", json.dumps(asdict(report), indent=2))
        meta_src = Path(agents_dir) / AGENTS_FILE
        if meta_src.is_file():
            atomic_write(out / AGENTS_FILE, meta_src.read_bytes())
    return report
