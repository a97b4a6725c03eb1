"""The instruction graph (InstructRAG §4.2, Algorithm 1): nodes are sets of similar instructions (ψ ≥ δ over FAISS),
edges task sets; paths hang off a virtual :data:`START` node; noise (Table 4) only from failed paths of the support
questions. Saved as a folder (``graph.json``, ``instructions.npy``, ``questions.npy``, ``failed.jsonl``)."""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Collection, Iterable

import numpy as np

from ragplan.methods.instructrag.paths import Instruction, InstructionPath, read_paths_jsonl, write_paths_jsonl
from ragplan.jsonl import atomic_write, read_json, saved_bytes
from ragplan.tools.embeddings import get_embedder

__all__ = ["START", "GRAPH_FILE", "InstructionGraph", "StateBuilder", "GraphStats", "build_instruction_graph",
           "embedder_for_graph", "graph_embedder", "noise_pool"]

Edge = tuple[int, int]
START = -1
"""The virtual start node every path's first instruction hangs off."""
GRAPH_FILE = "graph.json"
_HNSW_ABOVE = 50_000
CALIBRATION_PERCENTILE = 50
"""The threshold walk includes a node whose mean state feature reaches this percentile of the graph's own."""


@dataclass
class GraphStats:
    """Size and build time of an instruction graph (the paper's Table 6 columns)."""

    nodes: int
    edges: int
    """Edges between instruction nodes (edges from the start node not counted)."""
    start_edges: int
    instructions: int
    tasks: int
    questions: int
    paths: int
    failed_kept: int
    noisy_paths: int
    """Stored paths that are failed paths inserted as noise (``--noise-rate``)."""
    junction_nodes: int
    """Nodes holding instructions of two or more paths (where new paths can be combined)."""
    max_node_size: int
    delta: float
    threshold: float
    """The threshold walk's calibrated inclusion threshold."""
    build_seconds: float


def _unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    n = np.linalg.norm(x, axis=-1, keepdims=True)
    return x / np.where(n > 0, n, 1.0)


@dataclass
class InstructionGraph:
    """Nodes (instruction sets), edges (task sets with questions), the stored paths and their embeddings."""

    delta: float = 0.4
    model_path: str = ""
    """The Sentence-BERT model the embeddings were made with ('' = the packaged default)."""
    model_fingerprint: str = ""
    instructions: list[dict[str, Any]] = field(default_factory=list)
    """``{id, action, argument, text, node, path}`` per inserted instruction."""
    nodes: list[list[int]] = field(default_factory=list)
    """Instruction ids of each node."""
    edges: dict[tuple[int, int], dict[str, list[int]]] = field(default_factory=dict)
    """(from node, to node) -> task -> question ids; from node -1 is the start node."""
    questions: list[dict[str, Any]] = field(default_factory=list)
    """``{id, text, task, answer, path}`` per stored path's question."""
    paths: list[dict[str, Any]] = field(default_factory=list)
    """``{id, question, task, answer, success, nodes, instructions, supporting_titles}`` per inserted path."""
    failed: list[InstructionPath] = field(default_factory=list)
    """Failed paths kept aside (not in the graph unless inserted as noise)."""
    vectors: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.float32))
    """Unit embeddings of the instructions (row = instruction id)."""
    qvectors: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.float32))
    """Unit embeddings of the questions (row = question id)."""
    build_seconds: float = 0.0
    threshold: float = 0.0
    """The threshold walk's calibrated inclusion threshold (:meth:`calibrate`)."""
    _index: Any = field(default=None, repr=False)

    def _faiss(self) -> Any:
        if self._index is None:
            import faiss

            dim = int(self.vectors.shape[1]) if self.vectors.ndim == 2 else 0
            big = len(self.vectors) > _HNSW_ABOVE
            self._index = faiss.IndexHNSWFlat(dim, 32, faiss.METRIC_INNER_PRODUCT) if big else faiss.IndexFlatIP(dim)
            if len(self.vectors):
                self._index.add(self.vectors)
        return self._index

    def nearest_instructions(self, vector: np.ndarray, k: int,
                             exclude: Collection[int] = ()) -> list[tuple[int, float]]:
        """The ``k`` instructions most similar to ``vector`` (id, cosine), skipping ids in ``exclude``."""
        if not self.instructions or k <= 0:
            return []
        want = min(len(self.instructions), k + len(exclude))
        scores, ids = self._faiss().search(_unit(vector).reshape(1, -1), want)
        return [(int(i), float(s)) for i, s in zip(ids[0], scores[0]) if i >= 0 and int(i) not in exclude][:k]

    @cached_property
    def _adjacency(self) -> tuple[dict[int, list[int]], dict[int, list[Edge]]]:
        """Out-neighbours (sorted) and in-edges of every node, made on first use after an insert."""
        out: dict[int, list[int]] = {}
        into: dict[int, list[Edge]] = {}
        for a, b in sorted(self.edges):
            out.setdefault(a, []).append(b)
        for e in self.edges:
            into.setdefault(e[1], []).append(e)
        return out, into

    @cached_property
    def majority_questions(self) -> np.ndarray:
        """Per question: whether its stored path has the store's commonest action sequence (counted once)."""
        acts = [tuple(self.instructions[i]["action"] for i in p["instructions"]) for p in self.paths]
        top = Counter(acts).most_common(1)[0][0] if acts else ()
        return np.array([acts[int(q["path"])] == top for q in self.questions], dtype=bool)

    def out_neighbours(self, node: int) -> list[int]:
        """The nodes an edge leads to from ``node`` (``START`` for the path starts)."""
        return self._adjacency[0].get(node, [])

    def in_edges(self, node: int) -> list[tuple[int, int]]:
        """Every edge into ``node``."""
        return self._adjacency[1].get(node, [])

    def insert(self, paths: Iterable[InstructionPath], embedder: Any, *, progress: bool = False) -> int:
        """Insert every instruction of ``paths`` by Algorithm 1 (in order); returns the instructions inserted."""
        paths = [p for p in paths if p.instructions]
        if not paths:
            return 0
        t0 = time.perf_counter()
        texts = [i.text for p in paths for i in p.instructions]
        ivecs = _unit(embedder.encode(texts))
        qvecs = _unit(embedder.encode([p.question for p in paths]))
        if self.vectors.size == 0:  # the first insert sets the size (vstack makes each a new array)
            self.vectors = self.qvectors = np.zeros((0, ivecs.shape[1]), dtype=np.float32)
        self.qvectors = np.vstack([self.qvectors, qvecs]).astype(np.float32)
        index = self._faiss()
        from tqdm import tqdm

        bar = tqdm(total=len(texts), desc="instruction graph", unit="instr", disable=not progress)
        vecs = iter(ivecs)
        for p in paths:
            qid, pid = len(self.questions), len(self.paths)
            self.questions.append({"id": qid, "text": p.question, "task": p.task, "answer": p.answer, "path": pid})
            prev, first = START, len(self.instructions)  # the path's instruction ids: first, first + 1, …
            for ins in p.instructions:
                vec = next(vecs)
                hit = self.nearest_instructions(vec, 1, set(self.nodes[prev]) if prev != START else ())
                iid = len(self.instructions)
                node = int(self.instructions[hit[0][0]]["node"]) if hit and hit[0][1] >= self.delta else len(self.nodes)
                if node == len(self.nodes):  # no instruction close enough: a new node
                    self.nodes.append([])
                self.nodes[node].append(iid)
                self.instructions.append({"id": iid, "action": ins.action, "argument": ins.argument, "text": ins.text,
                                          "node": node, "path": pid})
                index.add(vec.reshape(1, -1))
                qs = self.edges.setdefault((prev, node), {}).setdefault(p.task, [])
                if qid not in qs:
                    qs.append(qid)
                prev = node
                bar.update(1)
            ids = list(range(first, len(self.instructions)))
            self.paths.append({"id": p.id, "question": qid, "task": p.task, "answer": p.answer, "success": p.success,
                               "nodes": [self.instructions[i]["node"] for i in ids], "instructions": ids,
                               "supporting_titles": list(p.supporting_titles), "source": p.source})
        bar.close()
        self.vectors = np.vstack([self.vectors, ivecs])
        for counted in ("_adjacency", "majority_questions", "instruction_vectors"):
            self.__dict__.pop(counted, None)
        self.calibrate()
        self.build_seconds += time.perf_counter() - t0
        return len(texts)

    @cached_property
    def instruction_vectors(self) -> dict[str, np.ndarray]:
        """Instruction text -> its stored unit vector (the first occurrence); made once per insert."""
        return {r["text"]: self.vectors[r["id"]] for r in reversed(self.instructions)}

    def calibrate(self, probes: int = 40) -> float:
        """Set :attr:`threshold` to :data:`CALIBRATION_PERCENTILE` of the mean state features of every node for up to
        ``probes`` stored questions (evenly spread): the graph's own similarity distribution."""
        qs = np.linspace(0, len(self.questions) - 1, min(probes, len(self.questions))).astype(int)
        vals = [float(StateBuilder(self, self.qvectors[q]).state(n, None).mean())
                for q in qs for n in range(len(self.nodes))]
        self.threshold = round(float(np.percentile(vals, CALIBRATION_PERCENTILE)), 4) if vals else 0.0
        return self.threshold

    def instruction(self, iid: int) -> Instruction:
        """The instruction with id ``iid``."""
        r = self.instructions[iid]
        return Instruction(r["action"], r["argument"])

    def path_instructions(self, path_index: int) -> list[Instruction]:
        """The instructions of stored path ``path_index``."""
        return [self.instruction(i) for i in self.paths[path_index]["instructions"]]

    def stats(self) -> GraphStats:
        """Nodes, edges, instructions, tasks, questions, paths, junctions and build time."""
        tasks = {t for v in self.edges.values() for t in v}
        junction = sum(1 for ids in self.nodes if len({self.instructions[i]["path"] for i in ids}) > 1)
        starts = sum(1 for e in self.edges if e[0] == START)
        return GraphStats(nodes=len(self.nodes), edges=len(self.edges) - starts, start_edges=starts,
                          instructions=len(self.instructions), tasks=len(tasks), questions=len(self.questions),
                          paths=len(self.paths), failed_kept=len(self.failed),
                          noisy_paths=sum(1 for p in self.paths if not p.get("success", True)), junction_nodes=junction,
                          max_node_size=max((len(n) for n in self.nodes), default=0), delta=self.delta,
                          threshold=self.threshold, build_seconds=round(self.build_seconds, 3))

    def save(self, out_dir: str | Path) -> Path:
        """Write the graph folder (see the module docstring); returns its path."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        for name, vectors in (("instructions.npy", self.vectors), ("questions.npy", self.qvectors)):  # each whole
            atomic_write(out / name, saved_bytes(lambda f: np.save(f, vectors.astype(np.float32))))
        write_paths_jsonl(self.failed, out / "failed.jsonl")
        data = {"format": "ragplan-instruction-graph-1", "delta": self.delta, "model_path": self.model_path,
                "model_fingerprint": self.model_fingerprint, "build_seconds": self.build_seconds,
                "threshold": self.threshold, "instructions": self.instructions, "nodes": self.nodes,
                "edges": [{"from": a, "to": b, "tasks": t} for (a, b), t in self.edges.items()],
                "questions": self.questions, "paths": self.paths, "stats": asdict(self.stats())}
        atomic_write(out / GRAPH_FILE, json.dumps(data, ensure_ascii=False))
        return out

    @classmethod
    def load(cls, graph_dir: str | Path) -> "InstructionGraph":
        """Read a graph folder written by :meth:`save` (ValueError naming what is missing)."""
        root = Path(graph_dir)
        meta = root / GRAPH_FILE
        if not meta.is_file():
            raise ValueError(f"no instruction graph at {root} (no {GRAPH_FILE}); build one with "
                             f"`ragplan instructrag build-graph --paths FILE… --out {root}`")
        data = read_json(meta, ValueError)
        if not isinstance(data, dict) or data.get("format") != "ragplan-instruction-graph-1":
            raise ValueError(f"{meta} is not an instruction graph written by ragplan")
        try:
            g = cls(delta=float(data["delta"]), model_path=data.get("model_path", ""),
                    model_fingerprint=data.get("model_fingerprint", ""), instructions=data["instructions"],
                    nodes=data["nodes"], edges={(int(e["from"]), int(e["to"])): e["tasks"] for e in data["edges"]},
                    questions=data["questions"], paths=data["paths"], build_seconds=float(data.get("build_seconds", 0.0)),
                    vectors=np.load(root / "instructions.npy"), qvectors=np.load(root / "questions.npy"))
        except KeyError as exc:
            raise ValueError(f"{meta}: no {exc} (an instruction graph written by another version?)") from exc
        except (OSError, TypeError, ValueError) as exc:  # a vectors file missing or cut off, a field of the wrong type
            raise ValueError(f"the instruction graph at {root} cannot be read: {type(exc).__name__}: {exc}") from exc
        g.threshold = float(data["threshold"]) if "threshold" in data else g.calibrate()
        if (root / "failed.jsonl").is_file():
            g.failed = read_paths_jsonl(root / "failed.jsonl").failed
        return g


class StateBuilder:
    """Eq. 1's three cosine features for one question over one graph (cached per node and edge)."""

    def __init__(self, graph: InstructionGraph, qvec: np.ndarray) -> None:
        """``qvec`` is the question's unit embedding (the graph's model)."""
        self.graph, self.q = graph, np.asarray(qvec, dtype=np.float32).reshape(-1)
        self.isim = graph.vectors @ self.q if len(graph.vectors) else np.zeros(0, dtype=np.float32)
        self.qsim = graph.qvectors @ self.q if len(graph.qvectors) else np.zeros(0, dtype=np.float32)
        self._cache: dict[tuple[int, Edge | None], np.ndarray] = {}

    def state(self, node: int, edge: Edge | None) -> np.ndarray:
        """``[max cos(Q̂, I ∈ 𝕀), max cos(Q̂, T ∈ 𝕋), max cos(Q̂, Q ∈ T_c)]``."""
        if (node, edge) not in self._cache:
            g = self.graph
            tasks: dict[str, list[int]] = {}
            for e in [edge] if edge is not None and edge in g.edges else g.in_edges(node):
                for t, qs in g.edges[e].items():
                    tasks.setdefault(t, []).extend(qs)
            ids = g.nodes[node]
            s1 = float(max(self.isim[i] for i in ids)) if ids else 0.0
            s2 = s3 = 0.0
            best = -2.0
            for qs in filter(None, tasks.values()):
                v = g.qvectors[qs].mean(axis=0)
                nv = float(np.linalg.norm(v))
                sim = float(v @ self.q / nv) if nv > 0 else 0.0
                if sim > best:
                    best, s2, s3 = sim, sim, float(max(self.qsim[q] for q in qs))
            self._cache[(node, edge)] = np.array([s1, s2, s3], dtype=np.float32)
        return self._cache[(node, edge)].copy()


embedder_for_graph = get_embedder
"""The process-wide Sentence-BERT embedder for a model path ('' = the packaged all-MiniLM-L6-v2)."""


def graph_embedder(graph: InstructionGraph, model_path: str = "", *, where: str = "") -> Any:
    """The embedder of ``graph``'s vectors: ``model_path`` when given, else the folder it was built with (the
    packaged default when that is gone); ValueError when its fingerprint is not the one the graph recorded."""
    own = graph.model_path if graph.model_path and Path(graph.model_path).is_dir() else ""
    emb = embedder_for_graph(model_path or own)
    fp = str(getattr(emb, "fingerprint", "") or "")
    if graph.model_fingerprint and fp and fp != graph.model_fingerprint:
        raise ValueError(f"the instruction graph{' at ' + where if where else ''} was built with another embedding model "
                         f"({graph.model_path or 'the packaged default'}) than {getattr(emb, 'model_path', model_path)}; "
                         "use the build model or rebuild the graph")
    return emb


def noise_pool(successful: list[InstructionPath], failed: list[InstructionPath]) -> list[InstructionPath]:
    """The failed paths that may be inserted as noise: those of the support (``successful``) questions."""
    support = {p.question for p in successful}
    return [p for p in failed if p.question in support]


def build_instruction_graph(successful: list[InstructionPath], *, delta: float = 0.4,
                            failed: list[InstructionPath] | None = None, noise_rate: float = 0.0, seed: int = 0,
                            embedder: Any = None, model_path: str = "", progress: bool = False) -> InstructionGraph:
    """Algorithm 1 over ``successful`` paths, task by task, ``noise_rate`` of them failed paths of support questions."""
    embedder = embedder if embedder is not None else embedder_for_graph(model_path)
    g = InstructionGraph(delta=float(delta), model_path=getattr(embedder, "model_path", model_path) or model_path,
                         model_fingerprint=str(getattr(embedder, "fingerprint", "") or ""))
    pool = noise_pool(successful, list(failed or []))
    noisy: list[InstructionPath] = []
    mixed = list(successful)
    if noise_rate > 0 and pool:
        rng = random.Random(seed)
        want = int(round(noise_rate * len(successful) / max(1e-9, 1 - noise_rate))) if noise_rate < 1 else len(pool)
        noisy = rng.sample(pool, min(len(pool), want))
        mixed += noisy
        rng.shuffle(mixed)  # noise among the experiences: no store order that favours the successful copy
    order = sorted(mixed, key=lambda p: p.task)  # Algorithm 1 walks task by task
    g.insert(order, embedder, progress=progress)
    g.failed = [p for p in pool if p not in noisy]
    return g
