"""Meta-training (InstructRAG Algorithm 2) and few-shot adaptation (Algorithm 3) of the two agents.

**Training** over the seen tasks: the support set is the instruction graph's own paths, the query set
the held-out paths of the same tasks. Each outer step samples a batch of tasks; per task T_i the
agents take one inner gradient step on the support set — the RL-Agent on the warm-start loss
(θ′ᵢ = θ − α∇L_WS), the ML-Agent on the pre-training loss (η′ᵢ = η − α∇L_PT, QPA + QPM) — and the
adapted agents are then scored on T_i's query questions: REINFORCE (L_PG, rewards discounted by
0.99 over the walk's decisions) for the RL-Agent, the fine-tuning loss (L_FT) for the ML-Agent. The
outer update (Adam, β = 1e-3) goes through the inner step (second-order MAML; ``first_order`` drops
the second-order terms). The RL-Agent's sampled walk uses the ML-Agent's pick as the selected path,
and that path's reward is the walk's return — the two agents' loop of §4.3.

**Adaptation** to an unseen task: its support paths are inserted into the graph (G → G′), then
θ′ᵢ = θ − α∇L_WS − β∇L_PG and η′ᵢ = η − α∇L_PT − β∇L_FT on that task's few-shot questions, for
``adapt_steps`` steps; each task gets its own adapted agents (``tasks/<task>/``). Both gradients of a
step are taken at the same θ (η), the parameters their losses were computed on, as Algorithm 3 writes
it. The α-terms are plain gradient steps; the β-terms are Adam steps at β = 1e-3 — the paper's
optimiser and rate for the policy, the same as the outer update of training (a plain step of 1e-3 on
these losses moves a weight by about 1e-4 and changes no decision). α = 0.05 is ours (the paper gives
no value).

Gradients are taken with :func:`_grads`, which names the parameters a loss cannot reach (the matching
head for L_FT) instead of accepting any unused parameter: a loss computed on other tensors than the
ones differentiated raises, rather than silently giving no update.

Ablations (Table 5): ``ws`` / ``pg`` / ``pt`` / ``ft`` switch a loss off. With its inner loss off an
agent is trained by its outer loss alone; with its outer loss off, by its inner loss alone (the outer
Adam steps then descend L_WS / L_PT). A REINFORCE baseline (the running mean reward) reduces variance; it is
standard and leaves the gradient unbiased.

Everything is deterministic for a seed (Python, NumPy and torch generators are seeded; CPU only).
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch.func import functional_call

from ragplan.methods.instructrag.agents import AGENTS_FILE, load_agents, task_slug
from ragplan.methods.instructrag.graph import START, InstructionGraph
from ragplan.methods.instructrag.ml_agent import MLAgent, MLHeads, ft_loss, path_backbone_vectors, qpa_loss
from ragplan.methods.instructrag.paths import Instruction, InstructionPath
from ragplan.methods.instructrag.reward import PathReward, QueryExample
from ragplan.methods.instructrag.rl_agent import (
    PolicyNet, RLAgent, StateBuilder, include_probability_np, policy_weights, traverse,
)

__all__ = ["MetaSettings", "MetaReport", "AdaptReport", "meta_train", "adapt_agents", "query_examples"]

Params = dict[str, torch.Tensor]


@dataclass
class MetaSettings:
    """Hyper-parameters of training and adaptation (paper values where it gives them)."""

    epochs: int = 10
    tasks_per_batch: int = 3
    questions_per_task: int = 8
    """ℬ: questions sampled per task for each loss."""
    inner_lr: float = 0.05
    """α."""
    outer_lr: float = 1e-3
    """β (Adam, as in the paper)."""
    gamma: float = 0.99
    """Reward discount."""
    k: int = 3
    """Candidate paths per walk."""
    tau: float = 0.1
    """ML-Agent temperature."""
    ws_negatives: int = 3
    """Random off-path nodes per warm-start question."""
    pool_extra: int = 3
    """Paths of other questions added to a fine-tuning pool."""
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
    reward_error: str = ""
    """The last such failure."""
    out_dir: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return asdict(self)


@dataclass
class AdaptReport:
    """What few-shot adaptation did, per task."""

    tasks: dict[str, dict[str, float]] = field(default_factory=dict)
    """task -> {shots, seconds, ws, pg, pt, ft}."""
    insert_seconds: float = 0.0
    seconds: float = 0.0
    out_dir: str = ""


# ------------------------------------------------------------------------------------------- functional parts
def _policy_logits(params: Params, states: torch.Tensor) -> torch.Tensor:
    h = torch.tanh(F.linear(states, params["layer1.weight"], params["layer1.bias"]))
    return F.linear(h, params["layer2.weight"], params["layer2.bias"])


def _enc(params: Params, x: torch.Tensor, side: str) -> torch.Tensor:
    h = torch.tanh(F.linear(x, params["shared.weight"], params["shared.bias"]))
    return F.normalize(x + F.linear(h, params[f"{side}_out.weight"], params[f"{side}_out.bias"]), dim=-1)


def _match(params: Params, q: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
    return F.linear(torch.cat([q * p, (q - p).abs()], dim=-1), params["match.weight"], params["match.bias"]).squeeze(-1)


FT_UNUSED = ("match.weight", "match.bias")
"""ML-Agent parameters the fine-tuning loss never reaches (the QPM matching head is pre-training's only)."""


def _grads(loss: torch.Tensor, params: Params, *, create_graph: bool = False, unused: tuple[str, ...] = ()) -> Params:
    """∇loss with respect to ``params`` — the tensors ``loss`` was computed from.

    A loss with no data (a constant) has zero gradients. ``unused`` names parameters the loss is known not
    to reach (zeros); for every other parameter torch must find a path from the loss, so a loss computed
    on other tensors than ``params`` raises instead of silently giving no update.
    """
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
    """In place: ``params − α g_alpha``, then an Adam step (rate β) on ``g_beta`` — both gradients taken at ``params``."""
    with torch.no_grad():
        for n, p in params.items():
            p.sub_(alpha * g_alpha[n])
            p.grad = g_beta[n].detach().clone()
    opt.step()
    for p in params.values():
        p.grad = None


# ------------------------------------------------------------------------------------------- data
def query_examples(paths: list[InstructionPath], embedder: Any) -> list[QueryExample]:
    """Query examples (question, gold answer, own path, vector) of ``paths``."""
    vecs = embedder.encode([p.question for p in paths]) if paths else np.zeros((0, 0), dtype=np.float32)
    return [QueryExample(p.question, p.task, p.answer, list(p.instructions), np.asarray(v, dtype=np.float32),
                         list(p.supporting_titles)) for p, v in zip(paths, vecs)]


class _Trainer:
    """Shared pieces of Algorithms 2 and 3 over one graph."""

    def __init__(self, graph: InstructionGraph, embedder: Any, reward: PathReward, s: MetaSettings,
                 rl: RLAgent, ml: MLAgent) -> None:
        self.g, self.emb, self.reward, self.s, self.rl, self.ml = graph, embedder, reward, s, rl, ml
        self.rng = random.Random(s.seed)
        self.gen = torch.Generator().manual_seed(s.seed)
        self.baseline = 0.0
        self._known: dict[str, np.ndarray] = {}

    def path_vectors(self, paths: list[list[Instruction]]) -> torch.Tensor:
        if not paths:
            return torch.zeros((0, 1))
        if len(self._known) != len(self.g.instructions):
            self._known = self.g.instruction_vectors()
        return torch.as_tensor(path_backbone_vectors([[i.text for i in p] for p in paths], self.emb, self._known))

    def support_by_task(self) -> dict[str, list[int]]:
        # every stored path, noisy ones included: the method cannot tell them apart (``success`` is not read)
        out: dict[str, list[int]] = {}
        for i, p in enumerate(self.g.paths):
            out.setdefault(p["task"], []).append(i)
        return out

    # -- RL-Agent losses
    def ws_loss(self, params: Params, path_ids: list[int]) -> torch.Tensor:
        states, labels = [], []
        for pid in path_ids:
            p = self.g.paths[pid]
            sb = StateBuilder(self.g, self.g.qvectors[p["question"]])
            prev = START
            on = set(p["nodes"])
            for n in p["nodes"]:
                states.append(sb.state(n, (prev, n)))
                labels.append(1)
                prev = n
            off = [n for n in range(len(self.g.nodes)) if n not in on]
            for n in self.rng.sample(off, min(len(off), self.s.ws_negatives)):
                ins = self.g.in_edges(n)
                states.append(sb.state(n, self.rng.choice(ins) if ins else None))
                labels.append(0)
        if not states:
            return torch.zeros(())
        logits = _policy_logits(params, torch.as_tensor(np.stack(states)))
        return F.cross_entropy(logits, torch.as_tensor(labels))

    def walk(self, params: Params, ex: QueryExample, ml_params: Params | None, greedy: bool = False) -> tuple[Any, list[list[Instruction]]]:
        w = policy_weights(params)

        def decide(st: np.ndarray) -> int:
            p1 = include_probability_np(w, np.asarray(st, dtype=np.float64))
            if greedy:
                return int(p1 >= 0.5)
            return int(torch.rand((), generator=self.gen).item() < p1)

        res = traverse(self.g, ex.qvec, decide, k=self.s.k, start_nodes=self.s.start_nodes, max_len=self.s.max_len)
        return res, [[self.g.instruction(i) for i in p] for p in res.paths]

    def pick(self, ml_params: Params | None, ex: QueryExample, paths: list[list[Instruction]]) -> int:
        if not paths:
            return -1
        if ml_params is None:
            return 0
        with torch.no_grad():
            q = _enc(ml_params, torch.as_tensor(ex.qvec).reshape(1, -1), "question")
            pv = _enc(ml_params, self.path_vectors(paths), "path")
            return int(torch.argmax(pv @ q[0]))

    def pg_loss(self, params: Params, examples: list[QueryExample], ml_params: Params | None) -> tuple[torch.Tensor, float]:
        terms, rewards = [], []
        for ex in examples:
            res, paths = self.walk(params, ex, ml_params)
            i = self.pick(ml_params, ex, paths)
            r = self.reward(ex, paths[i]) if i >= 0 else 0.0
            rewards.append(r)
            if not res.states:
                continue
            adv = r - self.baseline
            self.baseline = 0.9 * self.baseline + 0.1 * r
            t = len(res.actions)
            returns = torch.tensor([adv * self.s.gamma ** (t - 1 - j) for j in range(t)], dtype=torch.float32)
            logp = torch.log_softmax(_policy_logits(params, torch.as_tensor(np.stack(res.states))), -1)
            chosen = logp.gather(1, torch.as_tensor(res.actions).reshape(-1, 1)).squeeze(1)
            terms.append(-(returns * chosen).mean())
        loss = torch.stack(terms).mean() if terms else torch.zeros(())
        return loss, float(np.mean(rewards)) if rewards else 0.0

    # -- ML-Agent losses
    def pt_loss(self, params: Params, path_ids: list[int]) -> torch.Tensor:
        if len(path_ids) < 2:
            return torch.zeros(())
        q = _enc(params, torch.as_tensor(self.g.qvectors[[self.g.paths[i]["question"] for i in path_ids]]), "question")
        texts = [self.g.path_instructions(i) for i in path_ids]
        p = _enc(params, self.path_vectors(texts), "path")
        keys = [" → ".join(x.text for x in t) for t in texts]
        same = torch.tensor([[a == b for b in keys] for a in keys])
        qpa = qpa_loss(q, p, self.s.tau, same)
        shift = torch.roll(torch.arange(len(path_ids)), 1)
        qq = torch.cat([q, q])
        pp = torch.cat([p, p[shift]])
        labels = torch.cat([torch.ones(len(path_ids)), same[torch.arange(len(path_ids)), shift].float()])
        qpm = F.binary_cross_entropy_with_logits(_match(params, qq, pp), labels)
        return qpa + qpm

    def ft_loss(self, params: Params, examples: list[QueryExample], rl_params: Params) -> torch.Tensor:
        qs, pools, best = [], [], []
        for ex in examples:
            _, cands = self.walk(rl_params, ex, None, greedy=True)
            others = [self.g.path_instructions(i) for i in self.rng.sample(range(len(self.g.paths)), min(len(self.g.paths), self.s.pool_extra))]
            pool = [c for c in cands + others if c]
            keys = list(dict.fromkeys(" → ".join(i.text for i in c) for c in pool))
            pool = [next(c for c in pool if " → ".join(i.text for i in c) == k) for k in keys]
            if len(pool) < 2:
                continue
            rewards = [self.reward(ex, c) for c in pool]
            if max(rewards) == min(rewards):
                continue  # no signal: every path scores the same
            qs.append(ex.qvec)
            pools.append(pool)
            best.append(int(np.argmax(rewards)))
        if not qs:
            return torch.zeros(())
        q = _enc(params, torch.as_tensor(np.stack(qs)), "question")
        return ft_loss(q, [_enc(params, self.path_vectors(pool), "path") for pool in pools], best, self.s.tau)


def _save_agents(rl: RLAgent, ml: MLAgent, out: Path) -> None:
    rl.save(out)
    ml.save(out)


def _plot_curves(curves: dict[str, list[float]], out: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception:  # no plotting backend: the numbers are in agents.json
        return
    keys = [k for k, v in curves.items() if v]
    fig, axes = plt.subplots(1, len(keys), figsize=(3.2 * max(1, len(keys)), 2.8), squeeze=False)
    for ax, k in zip(axes[0], keys):
        ax.plot(range(1, len(curves[k]) + 1), curves[k], marker="o", ms=3)
        ax.set_title(k)
        ax.set_xlabel("epoch")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def meta_train(graph: InstructionGraph, query: list[InstructionPath], embedder: Any, reward: PathReward,
               settings: MetaSettings | None = None, out_dir: str | Path | None = None, *,
               progress: bool = False) -> tuple[RLAgent, MLAgent, MetaReport]:
    """Algorithm 2 (see the module docstring); saves the agents to ``out_dir`` when given."""
    s = settings or MetaSettings()
    random.seed(s.seed)
    np.random.seed(s.seed)
    torch.manual_seed(s.seed)
    dim = int(graph.vectors.shape[1])
    rl = RLAgent(PolicyNet(), k=s.k, max_len=s.max_len, start_nodes=s.start_nodes)
    ml = MLAgent(MLHeads(dim), tau=s.tau, dim=dim)
    tr = _Trainer(graph, embedder, reward, s, rl, ml)
    support = tr.support_by_task()
    qexs = query_examples(query, embedder)
    qby: dict[str, list[QueryExample]] = {}
    for ex in qexs:
        qby.setdefault(ex.task, []).append(ex)
    tasks = sorted(t for t in support if t in qby) or sorted(support)
    opt_rl = torch.optim.Adam(rl.net.parameters(), lr=s.outer_lr)
    opt_ml = torch.optim.Adam(ml.heads.parameters(), lr=s.outer_lr)
    report = MetaReport(curves={k: [] for k in ("ws", "pg", "pt", "ft", "reward")}, support=len(graph.paths),
                        query=len(qexs), tasks=tasks, reward=getattr(reward, "name", type(reward).__name__))
    t0 = time.perf_counter()
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=s.epochs, desc="meta-training", unit="epoch")
    for _ in range(s.epochs):
        order = tasks[:]
        tr.rng.shuffle(order)
        sums: dict[str, list[float]] = {k: [] for k in report.curves}
        for b in range(0, len(order), max(1, s.tasks_per_batch)):
            batch = order[b:b + s.tasks_per_batch]
            opt_rl.zero_grad()
            opt_ml.zero_grad()
            total_rl: list[torch.Tensor] = []
            total_ml: list[torch.Tensor] = []
            for task in batch:
                sup = tr.rng.sample(support[task], min(len(support[task]), s.questions_per_task))
                qry = tr.rng.sample(qby.get(task, []), min(len(qby.get(task, [])), s.questions_per_task))
                theta: Params = {k: v for k, v in rl.net.named_parameters()}
                eta: Params = {k: v for k, v in ml.heads.named_parameters()}
                l_ws = tr.ws_loss(theta, sup) if s.ws else torch.zeros(())
                l_pt = tr.pt_loss(eta, sup) if s.pt else torch.zeros(())
                theta_i = _step(theta, l_ws, s.inner_lr, not s.first_order) if (s.ws and s.pg) else theta
                eta_i = _step(eta, l_pt, s.inner_lr, not s.first_order) if (s.pt and s.ft) else eta
                if s.pg and qry:
                    l_pg, mean_r = tr.pg_loss(theta_i, qry, {k: v.detach() for k, v in eta_i.items()})
                    total_rl.append(l_pg)
                    sums["pg"].append(float(l_pg.detach()))
                    sums["reward"].append(mean_r)
                elif s.ws:
                    total_rl.append(l_ws)
                if s.ft and qry:
                    l_ft = tr.ft_loss(eta_i, qry, {k: v.detach() for k, v in theta_i.items()})
                    total_ml.append(l_ft)
                    sums["ft"].append(float(l_ft.detach()))
                elif s.pt:
                    total_ml.append(l_pt)
                sums["ws"].append(float(l_ws.detach()))
                sums["pt"].append(float(l_pt.detach()))
            for opt, terms in ((opt_rl, total_rl), (opt_ml, total_ml)):
                live = [t for t in terms if t.requires_grad]
                if live:
                    torch.stack(live).sum().backward()
                    opt.step()
        for k, v in sums.items():
            report.curves[k].append(round(float(np.mean(v)), 5) if v else float("nan"))
        if bar is not None:
            bar.set_postfix(reward=f"{report.curves['reward'][-1]:.3f}")
            bar.update(1)
    if bar is not None:
        bar.close()
    report.curves = {k: v for k, v in report.curves.items() if any(x == x for x in v)}
    report.seconds = round(time.perf_counter() - t0, 3)
    report.reward_failures, report.reward_error = int(getattr(reward, "failures", 0)), str(getattr(reward, "last_error", ""))
    rl.net.eval()
    ml.heads.eval()
    if out_dir is not None:
        out = Path(out_dir)
        _save_agents(rl, ml, out)
        report.out_dir = str(out)
        (out / AGENTS_FILE).write_text(json.dumps({"format": "ragplan-instructrag-agents-1", "settings": asdict(s),
                                                   "report": report.to_dict(), "graph_stats": graph.stats().to_dict(),
                                                   "model_fingerprint": graph.model_fingerprint}, indent=2))
        _plot_curves(report.curves, out / "curves.png")
    return rl, ml, report


def adapt_agents(graph: InstructionGraph, agents_dir: str | Path, support: list[InstructionPath], embedder: Any,
                 reward: PathReward, settings: MetaSettings | None = None, out_dir: str | Path | None = None, *,
                 shots: int = 0, progress: bool = False) -> AdaptReport:
    """Algorithm 3: insert ``support`` into the graph, adapt both agents per task; save under ``out_dir``."""
    s = settings or MetaSettings()
    torch.manual_seed(s.seed)
    by_task: dict[str, list[InstructionPath]] = {}
    for p in support:
        by_task.setdefault(p.task, []).append(p)
    rng = random.Random(s.seed)
    if shots > 0:
        by_task = {t: rng.sample(v, min(len(v), shots)) for t, v in sorted(by_task.items())}
    report = AdaptReport()
    t0 = time.perf_counter()
    graph.insert([p for t in sorted(by_task) for p in by_task[t]], embedder)
    report.insert_seconds = round(time.perf_counter() - t0, 3)
    base_rl, base_ml = load_agents(agents_dir)
    out = Path(out_dir) if out_dir is not None else None
    if out is not None:
        graph.save(out / "graph")
        _save_agents(base_rl, base_ml, out)
    tasks = sorted(by_task)
    iterator: Any = tasks
    if progress:
        from tqdm import tqdm

        iterator = tqdm(tasks, desc="few-shot adaptation", unit="task")
    for task in iterator:
        t1 = time.perf_counter()
        rl, ml = RLAgent.load(agents_dir), MLAgent.load(agents_dir)
        tr = _Trainer(graph, embedder, reward, s, rl, ml)
        paths = by_task[task]
        path_ids = [i for i, p in enumerate(graph.paths) if p["task"] == task and p["id"] in {x.id for x in paths}]
        exs = query_examples(paths, embedder)
        theta: Params = {k: v.detach().clone().requires_grad_(True) for k, v in rl.net.named_parameters()}
        eta: Params = {k: v.detach().clone().requires_grad_(True) for k, v in ml.heads.named_parameters()}
        logs = {"ws": 0.0, "pg": 0.0, "pt": 0.0, "ft": 0.0}
        # β-terms are Adam steps (the paper's optimiser and rate for the policy, as in training); α-terms plain steps
        opt_theta = torch.optim.Adam(list(theta.values()), lr=s.outer_lr)
        opt_eta = torch.optim.Adam(list(eta.values()), lr=s.outer_lr)
        for _ in range(max(1, s.adapt_steps)):
            # every gradient is taken at the current θ / η, the parameters its loss was computed on (Algorithm 3)
            l_ws = tr.ws_loss(theta, path_ids) if s.ws else torch.zeros(())
            l_pg = tr.pg_loss(theta, exs, {k: v.detach() for k, v in eta.items()})[0] if s.pg else torch.zeros(())
            l_pt = tr.pt_loss(eta, path_ids) if s.pt else torch.zeros(())
            l_ft = tr.ft_loss(eta, exs, {k: v.detach() for k, v in theta.items()}) if s.ft else torch.zeros(())
            _apply(theta, _grads(l_ws, theta), _grads(l_pg, theta), s.inner_lr, opt_theta)
            _apply(eta, _grads(l_pt, eta), _grads(l_ft, eta, unused=FT_UNUSED), s.inner_lr, opt_eta)
            logs = {"ws": float(l_ws.detach()), "pg": float(l_pg.detach()), "pt": float(l_pt.detach()), "ft": float(l_ft.detach())}
        with torch.no_grad():
            for k, v in rl.net.named_parameters():
                v.copy_(theta[k])
            for k, v in ml.heads.named_parameters():
                v.copy_(eta[k])
        if out is not None:
            _save_agents(rl, ml, out / "tasks" / task_slug(task))
        report.tasks[task] = {"shots": len(paths), "seconds": round(time.perf_counter() - t1, 3),
                              **{k: round(v, 5) for k, v in logs.items()}}
    report.seconds = round(time.perf_counter() - t0, 3)
    if out is not None:
        report.out_dir = str(out)
        (out / "adapt.json").write_text(json.dumps(asdict(report), indent=2))
        meta_src = Path(agents_dir) / AGENTS_FILE
        if meta_src.is_file():
            (out / AGENTS_FILE).write_text(meta_src.read_text())
    return report
